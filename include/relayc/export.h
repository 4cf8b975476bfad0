/*
 * export.h: ahead-of-time compilation of a trained model to standalone C.
 * ry_export_c optimizes the module (the pipeline of pass.h, as relayc run
 * does), walks the entry's optimized A-normal form once and writes a
 * directory a C11 compiler builds with nothing but libm:
 *
 *   DIR/NAME.c        the entry as one C function; fused kernels as loops
 *   DIR/NAME.h        the API: open/close a context, the entry with plain
 *                     arrays (symbolic dims as arguments), error codes
 *   DIR/NAME.weights  the parameters (checked by size, manifest and CRC-32
 *                     on open), unless embed_weights puts them in NAME.c
 *   DIR/Makefile, DIR/example.c (.npy in, .npy out), DIR/README
 *
 * The entry's parameters found in `weights` (by name; NULL: none) become
 * the model's weights; the others are the entry's arguments. What can be
 * exported so far: let chains of operator calls over float32 tensors
 * (README.md lists the operators), tuples of them, if over a bool scalar,
 * constant and symbolic dimensions; anything else (match, calls the
 * optimizer leaves, closures, ADTs, refs, `?` dims) is an error located at
 * the construct that cannot be exported.
 */
#ifndef RELAYC_EXPORT_H
#define RELAYC_EXPORT_H

#include "relayc/ir.h"
#include "relayc/params.h"

RY_BEGIN_API

typedef struct ry_export_opts {
    const char *name;     /* the C prefix and file names; NULL: "model" */
    const char *source;   /* shown in the generated files' comments (the model's path) */
    bool embed_weights;   /* the weights as C arrays in NAME.c, no NAME.weights */
    bool blas;            /* GEMMs through CBLAS (cblas_sgemm) instead of the exported loops */
} ry_export_opts;

/* Exports global @entry of the type-checked module m (which it optimizes in
 * place) into the directory dir (created if missing; each file is written
 * whole, through a temporary renamed over it, and none is written when the
 * entry cannot be exported). weights is borrowed (NULL: every parameter an
 * argument). */
ry_status ry_export_c(ry_module *m, const char *entry, const ry_param_set *weights, const char *dir,
                      const ry_export_opts *opts, ry_error *err);

RY_END_API

#endif
