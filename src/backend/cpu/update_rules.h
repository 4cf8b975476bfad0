/*
 * update_rules.h: the CPU's optimizer rules, one file each
 * (update_sgd.c, update_adam.c, update_adagrad.c, update_rmsprop.c), each
 * PyTorch's per-parameter step over one run of the slabs (target.h's
 * ry_update_args). train_kernels.c picks the rule and splits the run over
 * the thread pool.
 */
#ifndef RELAYC_BACKEND_CPU_UPDATE_RULES_H
#define RELAYC_BACKEND_CPU_UPDATE_RULES_H

#include "backend/target.h"

/* GCC vectorizes loops only from -O3 (or, at -O2, with a cost model that
 * rejects loops of unknown length); the update loops are what vectorizing
 * is for (those calling sqrt too: the Makefile builds these files with
 * -fno-math-errno; Adam's scalar update of the char-LSTM's 380,000
 * parameters was 2% of its step). Clang vectorizes at -O2 already.
 * Vectorizing keeps each element's arithmetic as written (no
 * reassociation, no contraction), so results do not change. */
#if defined(__GNUC__) && !defined(__clang__)
#define RY_OPTIM_VECTORIZE _Pragma("GCC optimize(\"tree-vectorize\", \"vect-cost-model=dynamic\")")
#else
#define RY_OPTIM_VECTORIZE
#endif

void ry_optim_sgd_update(const ry_optim_config *c, const ry_update_args *a);
void ry_optim_adam_update(const ry_optim_config *c, const ry_update_args *a);
void ry_optim_adagrad_update(const ry_optim_config *c, const ry_update_args *a);
void ry_optim_rmsprop_update(const ry_optim_config *c, const ry_update_args *a);

#endif
