/*
 * optimize.c: the pipeline. One function lists the passes in order; in
 * debug builds (-DRY_DEBUG) the verifier runs after each, so a pass that
 * breaks well-formedness is named at once. The module is type-checked again
 * at the end (the passes copy types, and inlined polymorphic code is
 * re-instantiated there).
 */
#include <stdlib.h>
#include <string.h>

#include "pass/pass_impl.h"
#include "tensor/oom.h"

typedef ry_status (*pass_fn)(ry_module *m, ry_error *err);

static ry_status step(ry_module *m, pass_fn pass, const char *name, ry_error *err) {
    if (pass(m, err) != RY_OK) {
        ry_error_prefix(err, "in pass %s", name);
        return RY_ERR;
    }
#ifdef RY_DEBUG
    if (ry_ir_verify(m, false, err) != RY_OK) {
        ry_error_prefix(err, "after pass %s", name);
        return RY_ERR;
    }
#endif
    return RY_OK;
}

/* RELAYC_FUSE=0 in the environment leaves fusion out, to measure it. */
static bool fusion_on(void) {
    const char *v = getenv("RELAYC_FUSE");
    return !v || strcmp(v, "0") != 0;
}

#define STEP(pass) if (step(m, pass, #pass, err) != RY_OK) return RY_ERR

static ry_status pipeline(ry_module *m, int level, bool fuse, ry_error *err) {
    if (level <= 0) return RY_OK;
    if (level >= 2) {
        STEP(ry_partial_eval); /* inlines, resolves refs, closures, tuples, branches */
        STEP(ry_dce);          /* drops what partial evaluation left unused */
    }
    STEP(ry_fold_constants);
    STEP(ry_simplify);         /* transposes into GEMM flags */
    STEP(ry_cse);
    STEP(ry_dce);
    if (fuse && fusion_on()) STEP(ry_fuse); /* last: fused calls have no gradient */
    if (ry_module_typecheck(m, err) != RY_OK) {
        ry_error_prefix(err, "type check after optimization");
        return RY_ERR;
    }
    return RY_OK;
}

/* Under a recovery point (oom.h): out of memory, the passes' scratch
 * arenas go with it and the module is left part-rewritten, to be
 * optimized again or freed. */
typedef struct optimizing {
    ry_module *m;
    int level;
    bool fuse;
} optimizing;

static ry_status optimize(void *ctx, ry_error *err) {
    optimizing *o = ctx;
    return pipeline(o->m, o->level, o->fuse, err);
}

typedef struct passing {
    pass_fn pass;
    ry_module *m;
} passing;

static ry_status run_pass(void *ctx, ry_error *err) {
    passing *p = ctx;
    return p->pass(p->m, err);
}

ry_status pass_guarded(const char *name, pass_fn pass, ry_module *m, ry_error *err) {
    return ry_oom_guard(name, run_pass, NULL, &(passing){pass, m}, err);
}

ry_status ry_optimize(ry_module *m, int level, ry_error *err) {
    return ry_oom_guard("optimization", optimize, NULL, &(optimizing){m, level, true}, err);
}

ry_status ry_optimize_unfused(ry_module *m, int level, ry_error *err) {
    return ry_oom_guard("optimization", optimize, NULL, &(optimizing){m, level, false}, err);
}
