/*
 * optim_impl.h: what the optimizer files share and nobody else sees: the
 * optimizer's state. optimizer.c owns it and walks the parameters; the
 * update of one parameter's contiguous run of the slabs is a kernel of the
 * optimizer's target (src/backend/target.h: ry_update_args; the CPU's rules
 * are src/backend/cpu/update_*.c).
 */
#ifndef RELAYC_OPTIM_IMPL_H
#define RELAYC_OPTIM_IMPL_H

#include "backend/target.h"
#include "relayc/optim.h"

struct ry_optimizer {
    ry_optim_config cfg;     /* cfg.lr is the current learning rate */
    ry_dtype dtype;          /* the layout of the parameters, kept to check */
    int n_params;            /* every set handed to a step against it */
    char **names;
    int *ndims;
    int64_t (*shapes)[RY_MAX_RANK];
    int n_slots;
    const char *slot_names[RY_OPTIM_MAX_SLOTS];
    ry_param_set *slots[RY_OPTIM_MAX_SLOTS];
    ry_param_set *step_set;  /* per parameter, PyTorch's state["step"]: float64 scalars */
    bool *decay;             /* per parameter: weight decay applies */
    bool *frozen;            /* per parameter: skipped by steps */
    int64_t steps;           /* ry_optim_step calls */
    const ry_target *target; /* where the slabs live and the update runs */
    /* ry_optim_shard: the slots hold only elements [lo, hi) of the flat
     * slab, each as one tensor of hi - lo elements (shard[s]; slots[s]
     * NULL); sharded false: the whole sets */
    bool sharded;
    int64_t lo, hi;
    int64_t slab_len;        /* the parameter slab's elements it was sharded for */
    ry_tensor *shard[RY_OPTIM_MAX_SLOTS];
};

#endif
