/*
 * nn.c (cpu): the small nn kernels (bias_add, batch_flatten, pad,
 * mirror_pad, dropout, prelu) and what every nn kernel shares: float16
 * widening and the split of a shape around an axis. GEMM-based kernels are
 * in gemm.c, softmax and cross-entropy in softmax.c, normalizations in
 * norm.c. Shapes were checked by the type relations in src/op/nn.c.
 */
/* the bias and copy loops are what vectorization is for (clang: at -O2) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

#include <string.h>

#include "backend/cpu/nn_kernels.h"

/* ---- shared helpers ---- */

void ry_cpu_nn_split(const ry_tensor *t, int axis, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= t->shape[i];
    *n = t->shape[axis];
    for (int i = axis + 1; i < t->ndim; i++) *inner *= t->shape[i];
}

int ry_cpu_nn_axis(ry_kernel_ctx *c, const char *name, int ndim) {
    int64_t a = ry_attr_int(c->op, c->attrs, name);
    return (int)(a < 0 ? a + ndim : a);
}

bool ry_cpu_nn_any_f16(int n, ry_tensor *const *t) {
    for (int i = 0; i < n; i++)
        if (t[i]->dtype == RY_FLOAT16) return true;
    return false;
}

#define MAX_IO 8

static ry_tensor *widen(const ry_tensor *t) {
    ry_tensor *w = ry_tensor_new(RY_FLOAT32, t->ndim, t->shape);
    if (!w) return NULL;
    const uint16_t *h = t->data;
    float *f = w->data;
    for (int64_t i = 0; i < t->size; i++) f[i] = ry_f16_to_f32(h[i]);
    return w;
}

ry_status ry_cpu_nn_via_f32(ry_kernel_fn f, ry_kernel_ctx *c, int nin, ry_tensor *const *in,
                            int nout, ry_tensor *const *out) {
    ry_tensor *win[MAX_IO] = {0}, *wout[MAX_IO] = {0};
    if (nin > MAX_IO || nout > MAX_IO)
        return ry_error_at(c->err, c->span, "%s: too many float16 operands", c->op->name);
    ry_status st = RY_OK;
    for (int i = 0; i < nin && st == RY_OK; i++) {
        win[i] = in[i]->dtype == RY_FLOAT16 ? widen(in[i]) : ry_tensor_retain(in[i]);
        if (!win[i]) st = RY_ERR;
    }
    for (int i = 0; i < nout && st == RY_OK; i++) {
        wout[i] = out[i]->dtype == RY_FLOAT16
                      ? ry_tensor_new(RY_FLOAT32, out[i]->ndim, out[i]->shape)
                      : ry_tensor_retain(out[i]);
        if (!wout[i]) st = RY_ERR;
    }
    if (st != RY_OK)
        ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    else
        st = f(c, nin, win, nout, wout);
    for (int i = 0; st == RY_OK && i < nout; i++) {
        if (out[i]->dtype != RY_FLOAT16) continue;
        uint16_t *h = out[i]->data;
        const float *x = wout[i]->data;
        for (int64_t k = 0; k < out[i]->size; k++) h[k] = ry_f32_to_f16(x[k]);
    }
    for (int i = 0; i < MAX_IO; i++) {
        ry_tensor_release(win[i]);
        ry_tensor_release(wout[i]);
    }
    return st;
}

/* ---- bias_add ----
 * out[o, ch, i] = data[o, ch, i] + bias[ch]
 * O = prod(shape[:axis]), C = shape[axis], I = prod(shape[axis+1:]).
 * Integers add in unsigned arithmetic so overflow wraps instead of being UB. */
#define BIAS_ADD(T, U)                                                                             \
    do {                                                                                           \
        const T *x = in[0]->data, *b = in[1]->data;                                                \
        T *y = out[0]->data;                                                                       \
        if (I == 1) { /* bias along the last axis (dense layers): rows of C */                     \
            for (int64_t o = 0; o < O; o++)                                                        \
                for (int64_t ch = 0; ch < C; ch++)                                                 \
                    y[o * C + ch] = (T)((U)x[o * C + ch] + (U)b[ch]);                              \
            break;                                                                                 \
        }                                                                                          \
        for (int64_t o = 0; o < O; o++)                                                            \
            for (int64_t ch = 0; ch < C; ch++) {                                                   \
                const T *xs = x + (o * C + ch) * I;                                                \
                T *ys = y + (o * C + ch) * I;                                                      \
                U bv = (U)b[ch];                                                                   \
                for (int64_t i = 0; i < I; i++) ys[i] = (T)((U)xs[i] + bv);                        \
            }                                                                                      \
    } while (0)

RY_NN_KERNEL(ry_cpu_bias_add) {
    if (ry_cpu_nn_any_f16(nin, in))
        return ry_cpu_nn_via_f32(ry_cpu_bias_add, c, nin, in, nout, out);
    int64_t O, C, I;
    ry_cpu_nn_split(in[0], ry_cpu_nn_axis(c, "axis", in[0]->ndim), &O, &C, &I);
    switch (in[0]->dtype) {
    case RY_FLOAT32:
        BIAS_ADD(float, float);
        break;
    case RY_FLOAT64:
        BIAS_ADD(double, double);
        break;
    case RY_INT8:
        BIAS_ADD(int8_t, uint64_t);
        break;
    case RY_INT32:
        BIAS_ADD(int32_t, uint64_t);
        break;
    case RY_INT64:
        BIAS_ADD(int64_t, uint64_t);
        break;
    case RY_UINT8:
        BIAS_ADD(uint8_t, uint64_t);
        break;
    case RY_INT16:
        BIAS_ADD(int16_t, uint64_t);
        break;
    case RY_UINT16:
        BIAS_ADD(uint16_t, uint64_t);
        break;
    default:
        return ry_error_at(c->err, c->span, "%s: dtype %s not supported", c->op->name,
                           ry_dtype_name(in[0]->dtype));
    }
    return RY_OK;
}

/* ---- batch_flatten: (d0, d1, ..., dn) -> (d0, d1 * ... * dn), a copy in C order ---- */
RY_NN_KERNEL(ry_cpu_batch_flatten) {
    memcpy(out[0]->data, in[0]->data, ry_tensor_nbytes(in[0]));
    return RY_OK;
}

/* ---- pad ----
 * out[o_0, ..., o_n] = data[s_0, ..., s_n], s_i = o_i - before_i, where
 *   constant: the pad value when some s_i falls outside [0, d_i);
 *   edge:     s_i clamped to [0, d_i - 1];
 *   reflect:  s_i mirrored about 0 and d_i - 1 without repeating the edge;
 *   symmetric (nn.mirror_pad's mode="SYMMETRIC"): mirrored repeating it.
 * Each axis gets a map o_i -> s_i (or -1 for "pad value") computed once; the
 * last axis is walked in an inner loop. Works on bytes, so on every dtype. */
static int64_t pad_src(int64_t o, int64_t before, int64_t n, int mode) {
    int64_t j = o - before;
    if (j >= 0 && j < n) return j;
    if (mode == 0) return -1;
    if (mode == 1) return j < 0 ? 0 : n - 1;
    if (mode == 2) return j < 0 ? -j : 2 * (n - 1) - j;
    return j < 0 ? -j - 1 : 2 * n - 1 - j;
}

RY_NN_KERNEL(ry_cpu_pad) {
    const ry_tensor *x = in[0];
    ry_tensor *y = out[0];
    size_t esz = ry_dtype_size(x->dtype);
    int nd = x->ndim;
    /* the pad value in data's dtype (nn.mirror_pad has none) */
    unsigned char padv[8] = {0};
    if (nin == 2 && in[1]->dtype == x->dtype)
        memcpy(padv, in[1]->data, esz);
    else if (nin == 2) {
        ry_tensor *s = ry_tensor_scalar(x->dtype, ry_tensor_get(in[1], 0));
        if (!s) return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
        memcpy(padv, s->data, esz);
        ry_tensor_release(s);
    }
    if (nd == 0) {
        memcpy(y->data, x->data, esz);
        return RY_OK;
    }
    if (y->size == 0) return RY_OK;
    const char *mname = ry_attr_str(c->op, c->attrs, nin == 1 ? "mode" : "pad_mode");
    int mode = strcmp(mname, "edge") == 0                                       ? 1
               : strcmp(mname, "reflect") == 0 || strcmp(mname, "REFLECT") == 0 ? 2
               : strcmp(mname, "SYMMETRIC") == 0                                ? 3
                                                                                : 0;
    int64_t before[RY_MAX_RANK], total = 0;
    {
        const ry_attr_value *pw = ry_attr_get(c->op, c->attrs, "pad_width");
        for (int d = 0; d < nd; d++) before[d] = pw->list.items[d].list.items[0].i;
    }
    for (int d = 0; d < nd; d++) total += y->shape[d];
    int64_t *maps = ry_malloc(sizeof(int64_t) * (size_t)total);
    if (!maps) return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    int64_t *map[RY_MAX_RANK], istride[RY_MAX_RANK];
    int64_t *p = maps;
    for (int d = 0; d < nd; d++) {
        map[d] = p;
        for (int64_t o = 0; o < y->shape[d]; o++) p[o] = pad_src(o, before[d], x->shape[d], mode);
        p += y->shape[d];
    }
    istride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) istride[d] = istride[d + 1] * x->shape[d + 1];
    int64_t last = y->shape[nd - 1], rows = y->size / last, idx[RY_MAX_RANK] = {0};
    const char *src = x->data;
    char *dst = y->data;
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = 0;
        bool padrow = false;
        for (int d = 0; d < nd - 1; d++) {
            int64_t s = map[d][idx[d]];
            if (s < 0)
                padrow = true;
            else
                base += s * istride[d];
        }
        for (int64_t j = 0; j < last; j++, dst += esz) {
            int64_t s = map[nd - 1][j];
            if (padrow || s < 0)
                memcpy(dst, padv, esz);
            else
                memcpy(dst, src + (size_t)(base + s) * esz, esz);
        }
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < y->shape[d]) break;
            idx[d] = 0;
        }
    }
    ry_free(maps);
    return RY_OK;
}

/* ---- dropout ----
 * Returns (out, mask) with TVM's meaning of the mask: 1 where an element is
 * kept, 0 where it is dropped. At inference out = data and the mask is all
 * ones. In training each element is kept with probability 1 - rate and
 * out = data * mask / (1 - rate) (all zeros when rate is 1); the gradient
 * is then grad * mask / (1 - rate). Random numbers come from splitmix64
 * advancing *ctx->rng, one draw per element in index order, kept when
 * u = draw / 2^64 (53 bits) >= rate: the same seed gives the same mask. */
static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#define DROPOUT(T)                                                                                 \
    do {                                                                                           \
        const T *x = in[0]->data;                                                                  \
        T *y = out[0]->data, *m = out[1]->data;                                                    \
        for (int64_t i = 0; i < n; i++) {                                                          \
            if (c->training) {                                                                     \
                double u = (double)(splitmix64(c->rng) >> 11) * 0x1.0p-53;                         \
                m[i] = u >= rate ? 1 : 0;                                                          \
                y[i] = u >= rate ? (T)(x[i] * (T)scale) : 0;                                       \
            } else {                                                                               \
                m[i] = 1;                                                                          \
                y[i] = x[i];                                                                       \
            }                                                                                      \
        }                                                                                          \
    } while (0)

RY_NN_KERNEL(ry_cpu_dropout) {
    if (ry_cpu_nn_any_f16(nin, in)) return ry_cpu_nn_via_f32(ry_cpu_dropout, c, nin, in, nout, out);
    double rate = ry_attr_float(c->op, c->attrs, "rate");
    double scale = rate < 1 ? 1.0 / (1.0 - rate) : 0;
    int64_t n = in[0]->size;
    if (c->training && !c->rng)
        return ry_error_at(c->err, c->span, "%s in training mode needs a random state",
                           c->op->name);
    switch (in[0]->dtype) {
    case RY_FLOAT32:
        DROPOUT(float);
        break;
    case RY_FLOAT64:
        DROPOUT(double);
        break;
    default:
        return ry_error_at(c->err, c->span, "%s: dtype %s not supported", c->op->name,
                           ry_dtype_name(in[0]->dtype));
    }
    return RY_OK;
}

/* ---- prelu ----
 * out[o, ch, i] = x < 0 ? alpha[ch] * x : x, with x = data[o, ch, i] and
 * (O, C, I) the split of data's shape around axis. */
#define PRELU(T)                                                                                   \
    do {                                                                                           \
        const T *x = in[0]->data, *al = in[1]->data;                                               \
        T *y = out[0]->data;                                                                       \
        for (int64_t o = 0; o < O; o++)                                                            \
            for (int64_t ch = 0; ch < C; ch++) {                                                   \
                const T *xs = x + (o * C + ch) * I;                                                \
                T *ys = y + (o * C + ch) * I, a = al[ch];                                          \
                for (int64_t i = 0; i < I; i++) ys[i] = xs[i] < 0 ? a * xs[i] : xs[i];             \
            }                                                                                      \
    } while (0)

RY_NN_KERNEL(ry_cpu_prelu) {
    if (ry_cpu_nn_any_f16(nin, in)) return ry_cpu_nn_via_f32(ry_cpu_prelu, c, nin, in, nout, out);
    int64_t O, C, I;
    ry_cpu_nn_split(in[0], ry_cpu_nn_axis(c, "axis", in[0]->ndim), &O, &C, &I);
    switch (in[0]->dtype) {
    case RY_FLOAT32:
        PRELU(float);
        break;
    case RY_FLOAT64:
        PRELU(double);
        break;
    default:
        return ry_error_at(c->err, c->span, "%s: dtype %s not supported", c->op->name,
                           ry_dtype_name(in[0]->dtype));
    }
    return RY_OK;
}
