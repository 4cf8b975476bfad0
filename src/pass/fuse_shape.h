/*
 * fuse_shape.h: which let-bound tensors of a function provably have the
 * same run-time shape, for the fusion pass (fuse.c), including dimensions
 * the types leave unknown (`?`). A fused kernel computes every member of
 * its group once per element of the result, so a member may join only
 * when it is exactly as large as the result; fuse_shape.c says when.
 */
#ifndef RELAYC_PASS_FUSE_SHAPE_H
#define RELAYC_PASS_FUSE_SHAPE_H

#include "relayc/ir.h"

typedef struct fz_shapes fz_shapes;

/* An empty analysis for vars with ids below nids, living in arena a. */
fz_shapes *fz_shapes_new(ry_arena *a, int nids);
/* Records the binding `let v = value` (value in A-normal form); call in
 * program order, each operand's binding before its uses. */
void fz_shapes_bind(fz_shapes *s, const ry_var *v, const ry_expr *value);
/* True when a and b, tensors of types ta and tb (their bound values'),
 * have the same shape whenever the program runs without a shape error;
 * false when that cannot be shown. */
bool fz_shapes_same(fz_shapes *s, const ry_var *a, const ry_type *ta, const ry_var *b,
                    const ry_type *tb);

#endif
