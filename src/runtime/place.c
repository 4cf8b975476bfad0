/*
 * place.c: moving values between devices. A value is copied structure and
 * all where it holds a tensor that is not on the target's device (tuples,
 * ADT cells, refs and closures stay host objects that hold device
 * tensors); a value already in place is returned as it is (one more
 * reference), so a training step's parameters, already on the device,
 * cost nothing.
 */
#include "backend/target.h"
#include "relayc/value.h"

static bool same_device(ry_device a, ry_device b) { return a.kind == b.kind && a.id == b.id; }

/* Whether v holds a tensor away from d. */
static bool needs_move(const ry_value *v, ry_device d) {
    switch (v->kind) {
    case RY_VAL_TENSOR: return !same_device(v->tensor->device, d);
    case RY_VAL_TUPLE:
        for (int i = 0; i < v->tuple.n; i++)
            if (needs_move(v->tuple.fields[i], d)) return true;
        return false;
    case RY_VAL_ADT:
        for (int i = 0; i < v->adt.n; i++)
            if (needs_move(v->adt.fields[i], d)) return true;
        return false;
    case RY_VAL_REF: return needs_move(v->ref.value, d);
    case RY_VAL_CLOSURE:
        for (int i = 0; i < v->closure.ncaptured; i++)
            if (v->closure.captured[i] && needs_move(v->closure.captured[i], d)) return true;
        return false;
    case RY_VAL_ROWS: return true;
    }
    return false;
}

static ry_status move_fields(const ry_target *t, int n, ry_value *const *in, ry_value ***out,
                             ry_error *err) {
    ry_value **f = ry_calloc((size_t)(n ? n : 1), sizeof *f);
    if (!f) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    for (int i = 0; i < n; i++) {
        if (!in[i]) continue;
        if (ry_value_to(t, in[i], &f[i], err)) {
            for (int k = 0; k < i; k++) ry_value_release(f[k]);
            ry_free(f);
            return RY_ERR;
        }
    }
    *out = f;
    return RY_OK;
}

ry_status ry_value_to(const ry_target *t, ry_value *v, ry_value **out, ry_error *err) {
    *out = NULL;
    ry_device d = ry_target_device(t);
    if (!needs_move(v, d)) {
        *out = ry_value_retain(v);
        return RY_OK;
    }
    ry_value **f = NULL;
    ry_value *r = NULL;
    switch (v->kind) {
    case RY_VAL_TENSOR: {
        ry_tensor *x;
        if (ry_tensor_to(t, v->tensor, &x, err)) return RY_ERR;
        r = ry_value_tensor(x);
        break;
    }
    case RY_VAL_TUPLE:
        if (move_fields(t, v->tuple.n, v->tuple.fields, &f, err)) return RY_ERR;
        r = ry_value_tuple(v->tuple.n, f); /* takes the references, copies the array */
        break;
    case RY_VAL_ADT:
        if (move_fields(t, v->adt.n, v->adt.fields, &f, err)) return RY_ERR;
        r = ry_value_adt(v->adt.ctor, v->adt.n, f);
        break;
    case RY_VAL_REF: {
        ry_value *x;
        if (ry_value_to(t, v->ref.value, &x, err)) return RY_ERR;
        r = ry_value_ref(x);
        break;
    }
    case RY_VAL_CLOSURE:
        if (move_fields(t, v->closure.ncaptured, v->closure.captured, &f, err)) return RY_ERR;
        r = v->closure.func ? ry_value_closure(v->closure.func, v->closure.ncaptured,
                                               v->closure.captured_vars, f)
                            : ry_value_retain(v);
        break;
    case RY_VAL_ROWS:
        return ry_error_at(err, RY_NO_SPAN, "a row-sparse value cannot move to %s: densify it first",
                           ry_device_name(d));
    }
    ry_free(f);
    if (!r) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    *out = r;
    return RY_OK;
}
