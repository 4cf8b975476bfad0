/*
 * families.h: the operator families' tables, one per src/op/<family>.c,
 * gathered into one registry by registry.c. Private to src/op/.
 */
#ifndef RELAYC_OP_FAMILIES_H
#define RELAYC_OP_FAMILIES_H

#include "relayc/op.h"

extern const ry_op ry_ops_elemwise[];
extern const int ry_ops_elemwise_count;
extern const ry_op ry_ops_nn[];
extern const int ry_ops_nn_count;
extern const ry_op ry_ops_conv[];
extern const int ry_ops_conv_count;
extern const ry_op ry_ops_reduce[];
extern const int ry_ops_reduce_count;
extern const ry_op ry_ops_transform[];
extern const int ry_ops_transform_count;
extern const ry_op ry_ops_scatter[];
extern const int ry_ops_scatter_count;
extern const ry_op ry_ops_fused[]; /* written by the fusion pass */
extern const int ry_ops_fused_count;

#endif
