/*
 * rows_ops.h: the compiled engine's row-sparse operators (private to
 * src/runtime). With ry_vm_opts.sparse_rows, zeros_like of a float tensor
 * is a known zero (a tensor whose buffer nobody writes or needs to fill),
 * a scatter_nd(..., mode="add") into a known zero or into rows along axis
 * 0 gives RY_VAL_ROWS, add of a known zero is the other operand, add keeps
 * rows sparse or scatter-adds them into the dense operand, reshape keeps a
 * known zero and rows that keep axis 0; every other operator gets dense
 * tensors. The VM calls ry_rows_op where every operator
 * call's arguments pass (vm_ops.c).
 */
#ifndef RELAYC_RUNTIME_ROWS_OPS_H
#define RELAYC_RUNTIME_ROWS_OPS_H

#include "relayc/op.h"
#include "relayc/value.h"

/* Called with an operator call's arguments before its kernel runs (op:
 * the call's operator; call: the call, for attributes and errors). When
 * sparse is set and a row-sparse rule applies, runs the call itself and
 * returns true with *st set (and *out, a new reference, on RY_OK).
 * Otherwise turns every RY_VAL_ROWS argument into its dense tensor in place
 * (every holder of the value sees the tensor from then on) and returns
 * false, or true with *st = RY_ERR on out-of-memory. regs[i] is argument
 * i's register and kill[0..nkill) the registers that die at this call: an
 * argument that dies there and that nothing else holds may be updated in
 * place; acc, when not NULL, is the value of the ref the result is written
 * into next (AD's accumulation), which may hold that argument too.
 * scratch: an arena the rules may reset and use for types (NULL: their
 * own). */
bool ry_rows_op(bool sparse, const ry_op *op, const ry_expr *call, int nargs,
                ry_value *const *args, const int *regs, int nkill, const int *kill,
                const ry_value *acc, ry_value **out, ry_status *st, ry_error *err,
                ry_arena *scratch);

/* A known zero of float dtype and shape (rank >= 1): a view of the zero
 * block *cache, which grows (is replaced) when too small; the caller keeps
 * *cache and releases it when done. NULL on out-of-memory. */
ry_value *ry_rows_zero_view(ry_tensor **cache, ry_dtype dt, int ndim, const int64_t *shape);

#endif
