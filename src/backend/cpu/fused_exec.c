/*
 * fused_exec.c: runs a compiled fused program (src/op/fused_prog.h) over a
 * result tensor. The iteration space is cut into tiles of TILE elements;
 * for each tile every instruction is one tight loop over tile buffers that
 * the compiler vectorizes, so intermediates never leave L1 and the cost of
 * interpretation (one indirect call per instruction) is paid per tile, not
 * per element. Inputs are read in place when they have the result's shape,
 * filled once when they are scalars, copied in runs when they broadcast
 * along leading or trailing dimensions (a bias row, a column), and through
 * an odometer otherwise. Large results are split over the thread pool.
 * The loops (fused_loops.h) are built for SSE2, AVX2 and AVX-512 and run
 * at the widest level the CPU has (simd.h: the same bits at each).
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math", \
                     "fp-contract=off")
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/fused_kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/vmath.h"

RY_SIMD_NO_CONTRACT

#define TILE 256
#define STACK_BUFS 16
#define NVALS (RY_FZ_MAX_IN + RY_FZ_MAX_CONST + RY_FZ_MAX_INS)

/* ---- the per-instruction loops (fused_loops.h, one build per SIMD level) ---- */
typedef void (*fz_fn)(int64_t n, void *restrict o, const void *restrict a,
                      const void *restrict b, const void *restrict c, const double *prm);

static float fz_powf(float x, float y) { return powf(x, y); }
static double fz_pow(double x, double y) { return pow(x, y); }

/* exp, log, tanh, sigmoid: vmath.c's array forms (they pick the level) */
#define VM(OP)                                                                               \
    static void fz_##OP##_f32(int64_t n, void *restrict o, const void *restrict a,           \
                              const void *restrict b, const void *restrict c,                \
                              const double *prm) {                                           \
        (void)b, (void)c, (void)prm;                                                         \
        ry_v##OP##_f32(a, o, n);                                                             \
    }                                                                                        \
    static void fz_##OP##_f64(int64_t n, void *restrict o, const void *restrict a,           \
                              const void *restrict b, const void *restrict c,                \
                              const double *prm) {                                           \
        (void)b, (void)c, (void)prm;                                                         \
        ry_v##OP##_f64(a, o, n);                                                             \
    }
VM(exp)
VM(log)
VM(tanh)
VM(sigmoid)

#define FZ_SFX base
#define FZ_ATTR
#include "backend/cpu/fused_loops.h"
#undef FZ_SFX
#undef FZ_ATTR
#define FZ_SFX avx2
#define FZ_ATTR RY_TARGET_AVX2
#include "backend/cpu/fused_loops.h"
#undef FZ_SFX
#undef FZ_ATTR
#define FZ_SFX avx512
#define FZ_ATTR RY_TARGET_AVX512
#include "backend/cpu/fused_loops.h"
#undef FZ_SFX
#undef FZ_ATTR

static int dt_index(ry_dtype d) { return d == RY_FLOAT32 ? 0 : d == RY_FLOAT64 ? 1 : 2; }

/* The builds of the level the kernels run at now. */
typedef struct fz_tables {
    const fz_fn (*ops)[3];
    const fz_fn (*casts)[3];
    const fz_fn *wheres;
} fz_tables;

static fz_tables tables(void) {
    switch (ry_simd_level()) {
    case RY_SIMD_AVX512: return (fz_tables){table_avx512, casts_avx512, wheres_avx512};
    case RY_SIMD_AVX2: return (fz_tables){table_avx2, casts_avx2, wheres_avx2};
    default: return (fz_tables){table_base, casts_base, wheres_base};
    }
}

static fz_fn cast_fn(const fz_tables *t, ry_dtype from, ry_dtype to) {
    return t->casts[dt_index(from)][dt_index(to)];
}

static fz_fn where_fn(const fz_tables *t, ry_dtype d) {
    size_t s = ry_dtype_size(d);
    return t->wheres[s == 1 ? 0 : s == 4 ? 1 : 2];
}

/* ---- the plan of one call ---- */

typedef enum { IN_DIRECT, IN_RUNS, IN_GENERAL } in_mode;

/* How an input slot is read: in place (DIRECT), element (i / Q) % P of
 * the flat result index i (RUNS: P = 1 is a scalar, Q = 1 a trailing
 * broadcast like a bias row), or through per-dimension strides. */
typedef struct fz_in {
    in_mode mode;
    const char *data;
    size_t es;
    int64_t Q, P;
    int64_t st[RY_MAX_RANK];
} fz_in;

typedef struct plan {
    const ry_fz_prog *p;
    int ndim;
    int64_t shape[RY_MAX_RANK];
    int64_t n;
    fz_in in[RY_FZ_MAX_IN];
    int nvals;
    int buf[NVALS];     /* tile buffer of each value; -1: none */
    bool fixed[NVALS];  /* the same in every tile: filled once */
    int nbufs;
    int nout;
    char *out[RY_FZ_MAX_OUT]; /* the results' data */
    size_t oes[RY_FZ_MAX_OUT];
    int outk[NVALS];    /* the result a value is (-1: none) */
    bool to_out;        /* results are written straight into out (no input shares it) */
    const char *pre;    /* instruction 0's result, already computed (or NULL) */
    fz_fn fn[RY_FZ_MAX_INS];
} plan;

static ry_dtype val_dt(const ry_fz_prog *p, int v) {
    if (v < p->nin) return p->in_dt[v];
    if (v < p->nin + p->nconst) return p->cdt[v - p->nin];
    return p->ins[v - p->nin - p->nconst].odt;
}

static ry_status plan_input(ry_kernel_ctx *c, plan *pl, int k, const ry_tensor *t) {
    fz_in *f = &pl->in[k];
    int nd = pl->ndim, off = nd - t->ndim;
    int64_t dims[RY_MAX_RANK], s = 1;
    f->data = t->data;
    f->es = ry_dtype_size(t->dtype);
    if (off < 0)
        return ry_error_at(c->err, c->span, "%s: input %d has more dimensions than the result",
                           c->op->name, k + 1);
    int j0 = -1, j1 = -1;
    for (int j = 0; j < nd; j++) {
        dims[j] = j < off ? 1 : t->shape[j - off];
        if (dims[j] != 1 && dims[j] != pl->shape[j])
            return ry_error_at(c->err, c->span, "%s: input %d does not broadcast to the result",
                               c->op->name, k + 1);
        if (dims[j] != 1) j1 = j, j0 = j0 < 0 ? j : j0;
    }
    for (int j = nd - 1; j >= 0; j--) {
        f->st[j] = dims[j] == 1 ? 0 : s;
        s *= dims[j];
    }
    f->mode = IN_RUNS;
    f->Q = 1;
    f->P = 1;
    if (j0 < 0) return RY_OK; /* a scalar */
    /* one block of the result's dims [j0, j1], broadcast elsewhere? */
    for (int j = j0; j <= j1; j++)
        if (dims[j] == 1 && pl->shape[j] != 1) {
            f->mode = IN_GENERAL;
            return RY_OK;
        }
    for (int j = j1 + 1; j < nd; j++) f->Q *= pl->shape[j];
    f->P = t->size;
    if (f->Q == 1 && f->P == pl->n) f->mode = IN_DIRECT;
    return RY_OK;
}

/* Assigns tile buffers: inputs read in place need none; scalars, literals
 * and zeros_like/ones_like results are filled once; instruction results
 * take a free buffer and give their operands' back after their last use. */
static void plan_buffers(plan *pl) {
    const ry_fz_prog *p = pl->p;
    int nv = p->nin + p->nconst + p->nins;
    int free_list[NVALS], nfree = 0;
    pl->nvals = nv;
    pl->nbufs = 0;
    for (int v = 0; v < nv; v++) pl->buf[v] = -1, pl->fixed[v] = false;
    for (int k = 0; k < p->nin; k++) {
        if (pl->in[k].mode != IN_DIRECT) pl->buf[k] = pl->nbufs++;
        pl->fixed[k] = pl->in[k].mode == IN_RUNS && pl->in[k].P == 1;
    }
    for (int v = p->nin; v < p->nin + p->nconst; v++) pl->buf[v] = pl->nbufs++, pl->fixed[v] = true;
    for (int i = 0; i < p->nins; i++) {
        const ry_fz_ins *in = &p->ins[i];
        int v = p->nin + p->nconst + i;
        if (i == 0 && pl->pre) {
            /* read in place, like an input of the result's shape */
        } else if (in->op == RY_FZ_ZEROS || in->op == RY_FZ_ONES) {
            pl->buf[v] = pl->nbufs++;
            pl->fixed[v] = true;
        } else if (!(pl->outk[v] >= 0 && pl->to_out)) {
            pl->buf[v] = nfree ? free_list[--nfree] : pl->nbufs++;
        }
        for (int k = 0; k < in->nargs; k++) {
            int a = in->a[k];
            bool dup = false;
            for (int q = 0; q < k; q++) dup |= in->a[q] == a;
            if (!dup && a >= p->nin + p->nconst && p->last_use[a] == i && !pl->fixed[a] &&
                pl->buf[a] >= 0)
                free_list[nfree++] = pl->buf[a];
        }
        if (p->last_use[v] < 0 && !pl->fixed[v] && pl->buf[v] >= 0) free_list[nfree++] = pl->buf[v];
    }
}

/* ---- running tiles ---- */

/* n copies of one element (of es bytes) at dst: typed loops, so that a
 * column's runs of repeated values cost no call per element. */
static void fill(char *dst, const void *elem, size_t es, int64_t n) {
    if (es == 4) {
        uint32_t v, *d = (uint32_t *)(void *)dst;
        memcpy(&v, elem, 4);
        for (int64_t i = 0; i < n; i++) d[i] = v;
    } else if (es == 8) {
        uint64_t v, *d = (uint64_t *)(void *)dst;
        memcpy(&v, elem, 8);
        for (int64_t i = 0; i < n; i++) d[i] = v;
    } else {
        memset(dst, *(const unsigned char *)elem, (size_t)n);
    }
}

/* dst[i] = src[off], off stepping through an odometer over the result's
 * dims with the input's strides st (0 where it broadcasts). */
#define GATHER(T)                                                                                for (int64_t i = 0; i < len; i++) {                                                              memcpy((T *)(void *)dst + i, (const T *)(const void *)f->data + off, sizeof(T));             for (int j = nd - 1; j >= 0; j--) {                                                              off += f->st[j];                                                                             if (++idx[j] < pl->shape[j]) break;                                                          off -= f->st[j] * pl->shape[j];                                                              idx[j] = 0;                                                                              }                                                                                        }

/* Input f for result elements [lo, lo + len) into dst. */
static void load(const plan *pl, const fz_in *f, int64_t lo, int64_t len, char *dst) {
    size_t es = f->es;
    if (f->mode == IN_RUNS && f->Q == 1) { /* trailing broadcast: runs of the input */
        int64_t j = lo % f->P, done = 0;
        while (done < len) {
            int64_t k = f->P - j < len - done ? f->P - j : len - done;
            memcpy(dst + (size_t)done * es, f->data + (size_t)j * es, (size_t)k * es);
            done += k;
            j = 0;
        }
        return;
    }
    if (f->mode == IN_RUNS) { /* leading broadcast: each element repeated Q times */
        int64_t q = lo / f->Q, r = lo % f->Q, done = 0;
        while (done < len) {
            int64_t k = f->Q - r < len - done ? f->Q - r : len - done;
            fill(dst + (size_t)done * es, f->data + (size_t)(q % f->P) * es, es, k);
            done += k;
            r = 0;
            q++;
        }
        return;
    }
    int nd = pl->ndim;
    int64_t idx[RY_MAX_RANK], off = 0, rem = lo;
    for (int j = nd - 1; j >= 0; j--) {
        idx[j] = rem % pl->shape[j];
        rem /= pl->shape[j];
        off += idx[j] * f->st[j];
    }
    if (es == 4) GATHER(uint32_t)
    else if (es == 8) GATHER(uint64_t)
    else GATHER(uint8_t)
}

/* The values that are the same in every tile, into their buffers. */
static void fill_fixed(const plan *pl, char **bufs) {
    const ry_fz_prog *p = pl->p;
    for (int v = 0; v < pl->nvals; v++) {
        if (!pl->fixed[v]) continue;
        char *dst = bufs[pl->buf[v]];
        ry_dtype dt = val_dt(p, v);
        size_t es = ry_dtype_size(dt);
        _Alignas(8) char elem[8];
        if (v < p->nin) {
            memcpy(elem, pl->in[v].data, es);
        } else {
            double d = v < p->nin + p->nconst
                           ? p->cval[v - p->nin]
                           : (p->ins[v - p->nin - p->nconst].op == RY_FZ_ONES ? 1.0 : 0.0);
            if (dt == RY_FLOAT32) {
                float f = (float)d;
                memcpy(elem, &f, 4);
            } else if (dt == RY_FLOAT64) {
                memcpy(elem, &d, 8);
            } else {
                elem[0] = d != 0;
            }
        }
        fill(dst, elem, es, TILE);
    }
}

static void run_tiles(const plan *pl, char *mem, int64_t t0, int64_t t1) {
    const ry_fz_prog *p = pl->p;
    char *bufs[NVALS];
    const char *ptr[NVALS];
    for (int b = 0; b < pl->nbufs; b++) bufs[b] = mem + (size_t)b * TILE * 8;
    fill_fixed(pl, bufs);
    for (int v = 0; v < pl->nvals; v++) ptr[v] = pl->buf[v] >= 0 ? bufs[pl->buf[v]] : NULL;
    int base = p->nin + p->nconst;
    for (int64_t t = t0; t < t1; t++) {
        int64_t lo = t * TILE, len = pl->n - lo < TILE ? pl->n - lo : TILE;
        for (int k = 0; k < p->nin; k++) {
            const fz_in *f = &pl->in[k];
            if (f->mode == IN_DIRECT) ptr[k] = f->data + (size_t)lo * f->es;
            else if (!pl->fixed[k]) load(pl, f, lo, len, bufs[pl->buf[k]]);
        }
        if (pl->pre) ptr[base] = pl->pre + (size_t)lo * ry_dtype_size(p->ins[0].odt);
        for (int i = pl->pre ? 1 : 0; i < p->nins; i++) {
            const ry_fz_ins *in = &p->ins[i];
            int v = base + i;
            if (pl->fixed[v]) continue;
            int k = pl->outk[v];
            char *dst = pl->buf[v] >= 0 ? bufs[pl->buf[v]] : pl->out[k] + (size_t)lo * pl->oes[k];
            ptr[v] = dst;
            pl->fn[i](len, dst, ptr[in->a[0]], in->nargs > 1 ? ptr[in->a[1]] : NULL,
                      in->nargs > 2 ? ptr[in->a[2]] : NULL, in->p);
        }
        for (int k = 0; k < pl->nout; k++) { /* results computed in buffers */
            char *dst = pl->out[k] + (size_t)lo * pl->oes[k];
            if (ptr[p->outs[k]] != dst) memcpy(dst, ptr[p->outs[k]], (size_t)len * pl->oes[k]);
        }
    }
}

static void run_chunk(void *ctx, int64_t t0, int64_t t1) {
    _Alignas(64) char mem[STACK_BUFS * TILE * 8];
    run_tiles(ctx, mem, t0, t1);
}

static fz_fn ins_fn(const fz_tables *t, const ry_fz_ins *in) {
    switch (in->op) {
    case RY_FZ_CAST: return in->dt == in->odt ? NULL : cast_fn(t, in->dt, in->odt);
    case RY_FZ_WHERE: return where_fn(t, in->dt);
    case RY_FZ_COPY: case RY_FZ_ZEROS: case RY_FZ_ONES: return NULL;
    default: return t->ops[in->op][dt_index(in->dt)];
    }
}

/* copy and same-dtype casts: the operand's bytes */
static void copy1(int64_t n, void *restrict o, const void *restrict a, const void *restrict b,
                  const void *restrict c, const double *prm) {
    (void)b, (void)c, (void)prm;
    memcpy(o, a, (size_t)n);
}
static void copy4(int64_t n, void *restrict o, const void *restrict a, const void *restrict b,
                  const void *restrict c, const double *prm) {
    (void)b, (void)c, (void)prm;
    memcpy(o, a, (size_t)n * 4);
}
static void copy8(int64_t n, void *restrict o, const void *restrict a, const void *restrict b,
                  const void *restrict c, const double *prm) {
    (void)b, (void)c, (void)prm;
    memcpy(o, a, (size_t)n * 8);
}

/* Tiles per chunk of the thread split: RY_PAR_GRAIN_EW elements of one
 * add, divided by what the program does per element (an instruction each,
 * transcendentals more, and the copies of inputs that broadcast). */
static int64_t grain_tiles(const plan *pl) {
    const ry_fz_prog *p = pl->p;
    int64_t cost = 1;
    for (int i = pl->pre ? 1 : 0; i < p->nins; i++) {
        switch (p->ins[i].op) {
        case RY_FZ_EXP: case RY_FZ_LOG: case RY_FZ_TANH: case RY_FZ_SIGMOID: case RY_FZ_POW:
            cost += RY_PAR_MATH_COST;
            break;
        case RY_FZ_DIV: case RY_FZ_SQRT: case RY_FZ_RSQRT: cost += 2; break;
        default: cost += 1; break;
        }
    }
    for (int k = 0; k < p->nin; k++) cost += !pl->fixed[k] && pl->in[k].mode != IN_DIRECT;
    int64_t g = RY_PAR_GRAIN_EW / cost / TILE;
    return g > 0 ? g : 1;
}

ry_status ry_fz_exec_n(const ry_fz_prog *p, int nout, ry_tensor *const *outs, int nin,
                       ry_tensor *const *in, const ry_tensor *pre, ry_kernel_ctx *c) {
    plan plan_, *pl = &plan_;
    ry_status st = RY_ERR;
    const ry_tensor *out = outs[0];
    pl->p = p;
    pl->ndim = out->ndim;
    memcpy(pl->shape, out->shape, sizeof pl->shape);
    pl->n = out->size;
    pl->to_out = true;
    pl->pre = NULL;
    if (nout != p->nout)
        return ry_error_at(c->err, c->span, "%s: %d results for a program of %d", c->op->name,
                           nout, p->nout);
    for (int v = 0; v < NVALS; v++) pl->outk[v] = -1;
    pl->nout = nout;
    for (int k = 0; k < nout; k++) {
        const ry_tensor *o = outs[k];
        if (o->dtype != p->out_dts[k])
            return ry_error_at(c->err, c->span, "%s: result %d has dtype %s, the program gives %s",
                               c->op->name, k + 1, ry_dtype_name(o->dtype),
                               ry_dtype_name(p->out_dts[k]));
        if (!ry_tensor_same_shape(o, out))
            return ry_error_at(c->err, c->span, "%s: the results differ in shape", c->op->name);
        for (int j = 0; j < k; j++)
            if (ry_tensor_overlap(o, outs[j]))
                return ry_error_at(c->err, c->span, "%s: results %d and %d share memory",
                                   c->op->name, j + 1, k + 1);
        pl->out[k] = o->data;
        pl->oes[k] = ry_dtype_size(o->dtype);
        pl->outk[p->outs[k]] = k;
    }
    if (pre) {
        if (pre->dtype != p->ins[0].odt || pre->size != out->size)
            return ry_error_at(c->err, c->span, "%s: the first result does not fit", c->op->name);
        pl->pre = pre->data;
        if (ry_tensor_overlap(pre, out)) pl->to_out = false;
        if (p->nins == 1) { /* nothing left to run */
            if (pre->data != out->data) memmove(out->data, pre->data, ry_tensor_nbytes(out));
            return RY_OK;
        }
    }
    if (nin != p->nin) {
        ry_error_at(c->err, c->span, "%s: %d inputs for a program of %d", c->op->name, nin, p->nin);
        goto done;
    }
    for (int k = 0; k < nin; k++) {
        if (in[k]->dtype != p->in_dt[k]) {
            ry_error_at(c->err, c->span, "%s: input %d has dtype %s, the program expects %s",
                        c->op->name, k + 1, ry_dtype_name(in[k]->dtype), ry_dtype_name(p->in_dt[k]));
            goto done;
        }
        if (plan_input(c, pl, k, in[k])) goto done;
        for (int j = 0; j < nout; j++) /* written in place: via a buffer */
            if (ry_tensor_overlap(in[k], outs[j])) pl->to_out = false;
    }
    fz_tables tb = tables();
    for (int i = 0; i < p->nins; i++) {
        const ry_fz_ins *x = &p->ins[i];
        pl->fn[i] = ins_fn(&tb, x);
        if (!pl->fn[i] && (x->op == RY_FZ_COPY || x->op == RY_FZ_CAST)) {
            size_t es = ry_dtype_size(x->dt);
            pl->fn[i] = es == 1 ? copy1 : es == 4 ? copy4 : copy8;
        }
    }
    plan_buffers(pl);
    st = RY_OK;
    if (pl->n == 0) goto done;
    int64_t ntiles = (pl->n + TILE - 1) / TILE;
    if (pl->nbufs <= STACK_BUFS) {
        ry_parallel_for(ntiles, grain_tiles(pl), run_chunk, pl);
    } else { /* a large program: its buffers on the heap, one thread */
        char *mem = aligned_alloc(64, (size_t)pl->nbufs * TILE * 8);
        if (!mem) {
            st = ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
            goto done;
        }
        run_tiles(pl, mem, 0, ntiles);
        free(mem);
    }
done:
    return st;
}

ry_status ry_fz_exec(const ry_fz_prog *p, ry_tensor *out, int nin, ry_tensor *const *in,
                     const ry_tensor *pre, ry_kernel_ctx *c) {
    return ry_fz_exec_n(p, 1, &out, nin, in, pre, c);
}
