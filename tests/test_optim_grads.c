/*
 * test_optim_grads.c: the optimizer's entry for the trainer's hot path.
 * ry_optim_step_grads (gradients anywhere, the clip scale applied as they
 * are read, or only some rows) against ry_optim_step on a scaled gradient
 * set, bit for bit, for every rule in float32 and float64; which rules may
 * skip zero rows; its errors; and ry_grad_scan / ry_clip_coef against
 * ry_params_find_nonfinite and ry_clip_grad_norm. Updates and scans of
 * large parameters split over threads: the same bits at 1 and 3 threads.
 */
#include "test_util.h"

#include "relayc/optim.h"
#include "relayc/threads.h"

static const char *NAMES[3] = {"emb", "w", "b"};
static const int NDIMS[3] = {2, 2, 1};
static const int64_t S0[2] = {6, 3}, S1[2] = {2, 5}, S2[1] = {4};
static const int64_t *const SHAPES[3] = {S0, S1, S2};

static ry_param_set *new_set(ry_dtype dt) {
    ry_param_set *p = ry_params_new(dt, 3, NAMES, NDIMS, SHAPES);
    assert_non_null(p);
    return p;
}

/* Every element of p's views normal(scale), from seed (the slab's
 * alignment padding stays zero). */
static void fill(ry_param_set *p, uint64_t seed, double scale) {
    ry_rng r;
    ry_rng_seed(&r, seed);
    for (int i = 0; i < p->n; i++)
        for (int64_t k = 0; k < p->views[i]->size; k++)
            ry_tensor_set(p->views[i], k, scale * ry_rng_normal(&r));
}

static void same_bits(const ry_param_set *a, const ry_param_set *b) {
    assert_int_equal(a->slab->size, b->slab->size);
    assert_memory_equal(a->slab->data, b->slab->data, ry_tensor_nbytes(a->slab));
}

static ry_optimizer *new_opt(const ry_optim_config *c, const ry_param_set *p) {
    ry_optimizer *o = NULL;
    ry_error err;
    if (ry_optim_new(c, p, &o, &err)) fail_msg("%s", err.msg);
    return o;
}

static ry_optim_config config(int i) {
    ry_optim_config c;
    switch (i) {
    case 0:
        c = ry_optim_defaults(RY_OPTIM_SGD);
        c.lr = 0.1;
        break;
    case 1:
        c = ry_optim_defaults(RY_OPTIM_SGD);
        c.lr = 0.1;
        c.momentum = 0.9;
        c.dampening = 0.1;
        break;
    case 2:
        c = ry_optim_defaults(RY_OPTIM_SGD);
        c.momentum = 0.9;
        c.nesterov = true;
        c.weight_decay = 0.05;
        break;
    case 3:
        c = ry_optim_defaults(RY_OPTIM_ADAM);
        c.weight_decay = 0.01;
        break;
    case 4:
        c = ry_optim_defaults(RY_OPTIM_ADAM);
        c.lr = 0.01;
        break;
    case 5:
        c = ry_optim_defaults(RY_OPTIM_ADAMW);
        c.amsgrad = true;
        break;
    case 6:
        c = ry_optim_defaults(RY_OPTIM_ADAGRAD);
        c.lr_decay = 0.1;
        c.initial_accumulator_value = 0.1;
        break;
    case 7:
        c = ry_optim_defaults(RY_OPTIM_ADAGRAD);
        c.weight_decay = 0.1;
        break;
    default:
        c = ry_optim_defaults(RY_OPTIM_RMSPROP);
        c.momentum = 0.5;
        c.centered = true;
        c.weight_decay = 0.01;
        break;
    }
    return c;
}

/* Copies of g's views as tensors of their own (as a program's outputs). */
static void loose_copies(const ry_param_set *g, ry_tensor **out, ry_optim_grad *og) {
    for (int i = 0; i < g->n; i++) {
        out[i] = ry_tensor_copy(g->views[i]);
        assert_non_null(out[i]);
        og[i] = (ry_optim_grad){.t = out[i]};
    }
}

/* g *= c as clip_grad_norm scales (c rounded to the dtype). */
static void scale_set(ry_param_set *g, double c) {
    for (int i = 0; i < g->n; i++)
        for (int64_t k = 0; k < g->views[i]->size; k++) {
            double v = ry_tensor_get(g->views[i], k);
            if (g->dtype == RY_FLOAT32) ry_tensor_set(g->views[i], k, (double)((float)v * (float)c));
            else ry_tensor_set(g->views[i], k, v * c);
        }
}

static void test_step_grads_matches_step(void **state) {
    ry_error err;
    for (int k = 0; k < 9; k++)
        for (int d = 0; d < 2; d++)
            for (int sc = 0; sc < 2; sc++) {
                ry_dtype dt = d ? RY_FLOAT64 : RY_FLOAT32;
                double scale = sc ? 0.37 : 1.0;
                ry_optim_config c = config(k);
                ry_param_set *p1 = new_set(dt), *p2 = new_set(dt), *g = new_set(dt);
                fill(p1, 1, 1.0);
                ry_params_copy(p2, p1);
                ry_optimizer *o1 = new_opt(&c, p1), *o2 = new_opt(&c, p2);
                assert_int_equal(ry_optim_set_decay(o1, "b", false, &err), RY_OK);
                assert_int_equal(ry_optim_set_decay(o2, "b", false, &err), RY_OK);
                for (int step = 0; step < 4; step++) {
                    fill(g, 10 + (uint64_t)step, 0.5);
                    ry_tensor *loose[3];
                    ry_optim_grad og[3];
                    loose_copies(g, loose, og);
                    scale_set(g, scale);
                    assert_int_equal(ry_optim_step(o1, p1, g, &err), RY_OK);
                    assert_int_equal(ry_optim_step_grads(o2, p2, og, scale, &err), RY_OK);
                    for (int i = 0; i < 3; i++) ry_tensor_release(loose[i]);
                    same_bits(p1, p2);
                    for (int s = 0; s < ry_optim_slot_count(o1); s++)
                        same_bits(ry_optim_slot(o1, s), ry_optim_slot(o2, s));
                }
                assert_int_equal(ry_optim_step_count(o2), 4);
                assert_int_equal(ry_optim_param_steps(o2, 2), 4);
                ry_optim_free(o1);
                ry_optim_free(o2);
                ry_params_free(p1);
                ry_params_free(p2);
                ry_params_free(g);
            }
}

/* Only rows 1 and 4 of "emb" have a gradient: updating just them equals
 * the dense update wherever the zero-gradient update is the identity. */
static void test_rows_update(void **state) {
    ry_error err;
    for (int k = 0; k < 9; k++)
        for (int d = 0; d < 2; d++) {
            ry_dtype dt = d ? RY_FLOAT64 : RY_FLOAT32;
            ry_optim_config c = config(k);
            ry_param_set *p1 = new_set(dt), *p2 = new_set(dt), *g = new_set(dt);
            fill(p1, 2, 1.0);
            ry_params_copy(p2, p1);
            ry_optimizer *o1 = new_opt(&c, p1), *o2 = new_opt(&c, p2);
            bool exact = ry_optim_zero_grad_is_identity(o2, 0);
            for (int step = 0; step < 3; step++) {
                fill(g, 20 + (uint64_t)step, 0.5);
                ry_tensor *e = g->views[0];
                for (int64_t r = 0; r < 6; r++)
                    if (r != 1 && r != 4)
                        for (int j = 0; j < 3; j++) ry_tensor_set(e, r * 3 + j, 0);
                ry_tensor *loose[3];
                ry_optim_grad og[3];
                loose_copies(g, loose, og);
                static const int64_t rows[2] = {1, 4};
                og[0].rows = rows;
                og[0].nrows = 2;
                assert_int_equal(ry_optim_step(o1, p1, g, &err), RY_OK);
                ry_status st = ry_optim_step_grads(o2, p2, og, 1.0, &err);
                for (int i = 0; i < 3; i++) ry_tensor_release(loose[i]);
                if (!exact) { /* refused, nothing changed */
                    assert_int_equal(st, RY_ERR);
                    assert_non_null(strstr(err.msg, "update it densely"));
                    assert_int_equal(ry_optim_step_count(o2), 0);
                    break;
                }
                assert_int_equal(st, RY_OK);
                same_bits(p1, p2);
                for (int s = 0; s < ry_optim_slot_count(o1); s++)
                    same_bits(ry_optim_slot(o1, s), ry_optim_slot(o2, s));
            }
            ry_optim_free(o1);
            ry_optim_free(o2);
            ry_params_free(p1);
            ry_params_free(p2);
            ry_params_free(g);
        }
}

static void test_zero_grad_identity(void **state) {
    ry_param_set *p = new_set(RY_FLOAT32);
    ry_error err;
    struct {
        int config;
        bool want;
    } cases[] = {{0, true}, {1, false}, {2, false}, {3, false}, {4, false},
                 {5, false}, {6, true},  {7, false}, {8, false}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ry_optim_config c = config(cases[i].config);
        ry_optimizer *o = new_opt(&c, p);
        assert_int_equal(ry_optim_zero_grad_is_identity(o, 0), cases[i].want);
        assert_false(ry_optim_zero_grad_is_identity(o, 3));
        assert_false(ry_optim_zero_grad_is_identity(o, -1));
        /* a frozen parameter is never touched */
        assert_int_equal(ry_optim_set_frozen(o, "w", true, &err), RY_OK);
        assert_true(ry_optim_zero_grad_is_identity(o, 1));
        ry_optim_free(o);
    }
    /* decay switched off for a parameter: Adagrad's and SGD's rows again */
    ry_optim_config c = config(7);
    ry_optimizer *o = new_opt(&c, p);
    assert_int_equal(ry_optim_set_decay(o, "emb", false, &err), RY_OK);
    assert_true(ry_optim_zero_grad_is_identity(o, 0));
    assert_false(ry_optim_zero_grad_is_identity(o, 1));
    ry_optim_free(o);
    /* eps 0: 0 / (sqrt(0) + 0) is NaN, not 0 */
    c = config(6);
    c.eps = 0;
    o = new_opt(&c, p);
    assert_false(ry_optim_zero_grad_is_identity(o, 0));
    ry_optim_free(o);
    ry_params_free(p);
}

static void test_step_grads_errors(void **state) {
    ry_error err;
    ry_param_set *p = new_set(RY_FLOAT32), *g = new_set(RY_FLOAT32), *g64 = new_set(RY_FLOAT64);
    fill(p, 3, 1.0);
    ry_optim_config c = config(0);
    ry_optimizer *o = new_opt(&c, p);
    ry_param_set *before = ry_params_like(p);
    ry_params_copy(before, p);
    ry_optim_grad og[3] = {{.t = g->views[0]}, {.t = g->views[1]}, {.t = g->views[2]}};
    /* a gradient inside the parameters */
    og[1].t = p->views[1];
    assert_int_equal(ry_optim_step_grads(o, p, og, 1, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "shares memory"));
    /* another shape, another dtype, none */
    og[1].t = g->views[0];
    assert_int_equal(ry_optim_step_grads(o, p, og, 1, &err), RY_ERR);
    og[1].t = g64->views[1];
    assert_int_equal(ry_optim_step_grads(o, p, og, 1, &err), RY_ERR);
    og[1].t = NULL;
    assert_int_equal(ry_optim_step_grads(o, p, og, 1, &err), RY_ERR);
    og[1].t = g->views[1];
    /* rows out of order, repeated, out of range */
    int64_t bad[3][2] = {{3, 1}, {2, 2}, {0, 6}};
    for (int i = 0; i < 3; i++) {
        og[0].rows = bad[i];
        og[0].nrows = 2;
        assert_int_equal(ry_optim_step_grads(o, p, og, 1, &err), RY_ERR);
        assert_non_null(strstr(err.msg, "increasing"));
    }
    same_bits(before, p);
    assert_int_equal(ry_optim_step_count(o), 0);
    /* the gradient set being the parameters */
    assert_int_equal(ry_optim_step(o, p, p, &err), RY_ERR);
    og[0].rows = NULL;
    assert_int_equal(ry_optim_step_grads(o, p, og, 1, &err), RY_OK);
    ry_optim_free(o);
    ry_params_free(p);
    ry_params_free(g);
    ry_params_free(g64);
    ry_params_free(before);
}

/* ry_grad_scan's norms and ry_clip_coef give clip_grad_norm's total and
 * scaling; its first bad element is ry_params_find_nonfinite's. */
static void test_scan_and_coef(void **state) {
    ry_error err;
    for (int d = 0; d < 2; d++) {
        ry_dtype dt = d ? RY_FLOAT64 : RY_FLOAT32;
        ry_param_set *g = new_set(dt), *clipped = new_set(dt);
        fill(g, 5, 2.0);
        ry_params_copy(clipped, g);
        double total = 0, total2 = 0, norms[3];
        assert_int_equal(ry_clip_grad_norm(clipped, 1.5, 2.0, &total, &err), RY_OK);
        for (int i = 0; i < 3; i++) assert_int_equal(ry_grad_scan(g->views[i], NULL, 0, &norms[i]), -1);
        double coef = ry_clip_coef(dt, norms, 3, 1.5, &total2);
        assert_memory_equal(&total, &total2, sizeof total);
        scale_set(g, coef);
        same_bits(g, clipped);
        /* rows: the norm over the listed rows when the rest are zero */
        ry_tensor *e = g->views[0];
        for (int64_t r = 0; r < 6; r++)
            if (r != 2 && r != 5)
                for (int j = 0; j < 3; j++) ry_tensor_set(e, r * 3 + j, 0);
        static const int64_t rows[2] = {2, 5};
        double dense, sparse;
        assert_int_equal(ry_grad_scan(e, NULL, 0, &dense), -1);
        assert_int_equal(ry_grad_scan(e, rows, 2, &sparse), -1);
        assert_memory_equal(&dense, &sparse, sizeof dense);
        /* the first NaN/Inf, with and without a norm */
        ry_tensor_set(e, 16, INFINITY);
        ry_tensor_set(e, 17, NAN);
        ry_tensor_set(g->views[1], 3, NAN);
        int64_t elem = -1;
        assert_int_equal(ry_params_find_nonfinite(g, &elem), 0);
        assert_int_equal(elem, 16);
        double nrm;
        assert_int_equal(ry_grad_scan(e, NULL, 0, NULL), 16);
        assert_int_equal(ry_grad_scan(e, NULL, 0, &nrm), 16);
        assert_int_equal(ry_grad_scan(e, rows, 2, &nrm), 16);
        assert_int_equal(ry_grad_scan(e, rows, 1, NULL), -1); /* row 5 not read */
        assert_int_equal(ry_grad_scan(g->views[1], NULL, 0, NULL), 3);
        ry_params_free(g);
        ry_params_free(clipped);
    }
    /* float64 squares that overflow: finite elements, an infinite norm */
    int64_t two = 2;
    ry_tensor *big = ry_tensor_new(RY_FLOAT64, 1, &two);
    ry_tensor_set(big, 0, 1e200);
    ry_tensor_set(big, 1, -1e200);
    double nrm = 0;
    assert_int_equal(ry_grad_scan(big, NULL, 0, &nrm), -1);
    assert_true(isinf(nrm));
    ry_tensor_release(big);
}

/* A set large enough that the update and the scan split over the pool
 * (an odd size, so chunks end mid-vector), and a small parameter that
 * does not split. */
static const char *BIG_NAMES[2] = {"w", "b"};
static const int BIG_NDIMS[2] = {2, 1};
static const int64_t B0[2] = {301, 233}, B1[1] = {7};
static const int64_t *const BIG_SHAPES[2] = {B0, B1};

/* Three steps of rule k on the big set at `threads` threads; p and the
 * optimizer's slots are left for comparing. */
static ry_optimizer *big_steps(int k, ry_dtype dt, int threads, ry_param_set *p) {
    ry_error err;
    ry_optim_config c = config(k);
    ry_param_set *g = ry_params_new(dt, 2, BIG_NAMES, BIG_NDIMS, BIG_SHAPES);
    assert_non_null(g);
    fill(p, 1, 1.0);
    ry_optimizer *o = new_opt(&c, p);
    ry_set_num_threads(threads);
    for (int step = 0; step < 3; step++) {
        fill(g, 20 + (uint64_t)step, 0.5);
        ry_optim_grad og[2] = {{.t = g->views[0]}, {.t = g->views[1]}};
        assert_int_equal(ry_optim_step_grads(o, p, og, step == 1 ? 0.37 : 1.0, &err), RY_OK);
    }
    ry_set_num_threads(1);
    ry_params_free(g);
    return o;
}

static void test_threads_same_bits(void **state) {
    for (int k = 0; k < 9; k++)
        for (int d = 0; d < 2; d++) {
            ry_dtype dt = d ? RY_FLOAT64 : RY_FLOAT32;
            ry_param_set *p1 = ry_params_new(dt, 2, BIG_NAMES, BIG_NDIMS, BIG_SHAPES);
            ry_param_set *p3 = ry_params_new(dt, 2, BIG_NAMES, BIG_NDIMS, BIG_SHAPES);
            assert_non_null(p1);
            assert_non_null(p3);
            ry_optimizer *o1 = big_steps(k, dt, 1, p1), *o3 = big_steps(k, dt, 3, p3);
            same_bits(p1, p3);
            for (int s = 0; s < ry_optim_slot_count(o1); s++)
                same_bits(ry_optim_slot(o1, s), ry_optim_slot(o3, s));
            /* the update did move the parameters */
            ry_param_set *p0 = ry_params_new(dt, 2, BIG_NAMES, BIG_NDIMS, BIG_SHAPES);
            assert_non_null(p0);
            fill(p0, 1, 1.0);
            assert_true(ry_tensor_get(p0->views[0], 70000) != ry_tensor_get(p1->views[0], 70000));
            ry_params_free(p0);
            ry_optim_free(o1);
            ry_optim_free(o3);
            ry_params_free(p1);
            ry_params_free(p3);
        }
    /* the split scan finds the first bad element wherever it lies */
    int64_t n = 200003;
    for (int threads = 1; threads <= 3; threads += 2) {
        ry_set_num_threads(threads);
        ry_tensor *t = ry_tensor_new(RY_FLOAT32, 1, &n);
        assert_non_null(t);
        memset(t->data, 0, ry_tensor_nbytes(t));
        assert_int_equal(ry_grad_scan(t, NULL, 0, NULL), -1);
        ry_tensor_set(t, 150001, NAN);
        ry_tensor_set(t, 199999, INFINITY);
        assert_int_equal(ry_grad_scan(t, NULL, 0, NULL), 150001);
        ry_tensor_set(t, 150001, 0);
        assert_int_equal(ry_grad_scan(t, NULL, 0, NULL), 199999);
        ry_tensor_set(t, 3, -INFINITY);
        assert_int_equal(ry_grad_scan(t, NULL, 0, NULL), 3);
        ry_tensor_release(t);
    }
    ry_set_num_threads(1);
}

/* ---- sharded state (ZeRO-1) ---- */

/* dst[lo, hi) := src[lo, hi) of two slabs alike. */
static void copy_range(ry_tensor *dst, const ry_tensor *src, int64_t lo, int64_t hi) {
    size_t es = ry_dtype_size(dst->dtype);
    memcpy((char *)dst->data + (size_t)lo * es, (const char *)src->data + (size_t)lo * es,
           (size_t)(hi - lo) * es);
}

/* Three optimizers, each sharded over an uneven slice of the slab (cut
 * inside "emb" and inside "b"'s padding), stepping copies of the
 * parameters that are merged after each step (the all-gather), give the
 * unsharded optimizer's parameters, state and step counts bit for bit,
 * for every rule in both dtypes, clipped or not. */
static void test_shard_same_bits(void **state) {
    ry_error err;
    for (int k = 0; k < 9; k++)
        for (int d = 0; d < 2; d++) {
            ry_dtype dt = d ? RY_FLOAT64 : RY_FLOAT32;
            ry_optim_config c = config(k);
            ry_param_set *p = new_set(dt), *g = new_set(dt), *q[3];
            fill(p, 1, 1.0);
            int64_t len = p->slab->size, cut[4] = {0, 13, len - 5, len};
            ry_optimizer *o = new_opt(&c, p), *os[3];
            assert_int_equal(ry_optim_set_decay(o, "b", false, &err), RY_OK);
            for (int r = 0; r < 3; r++) {
                q[r] = new_set(dt);
                ry_params_copy(q[r], p);
                os[r] = new_opt(&c, q[r]);
                assert_int_equal(ry_optim_set_decay(os[r], "b", false, &err), RY_OK);
                assert_int_equal(ry_optim_shard(os[r], q[r], cut[r], cut[r + 1], &err), RY_OK);
                /* again with the same range: a no-op; another: refused */
                assert_int_equal(ry_optim_shard(os[r], q[r], cut[r], cut[r + 1], &err), RY_OK);
                assert_int_equal(ry_optim_shard(os[r], q[r], 0, len, &err), RY_ERR);
                for (int s = 0; s < ry_optim_slot_count(os[r]); s++) {
                    assert_null(ry_optim_slot(os[r], s));
                    assert_int_equal(ry_optim_slot_shard(os[r], s)->size, cut[r + 1] - cut[r]);
                }
            }
            for (int step = 0; step < 3; step++) {
                fill(g, 10 + (uint64_t)step, 0.5);
                ry_optim_grad og[3];
                for (int i = 0; i < 3; i++) og[i] = (ry_optim_grad){.t = g->views[i]};
                double scale = step == 1 ? 0.37 : 1.0;
                assert_int_equal(ry_optim_step_grads(o, p, og, scale, &err), RY_OK);
                for (int r = 0; r < 3; r++)
                    assert_int_equal(ry_optim_step_grads(os[r], q[r], og, scale, &err), RY_OK);
                for (int r = 0; r < 3; r++)
                    for (int t = 0; t < 3; t++) copy_range(q[r]->slab, q[t]->slab, cut[t], cut[t + 1]);
                same_bits(q[0], p);
            }
            for (int r = 0; r < 3; r++) {
                assert_int_equal(ry_optim_unshard(os[r], q[r], &err), RY_OK);
                same_bits(ry_optim_steps(os[r]), ry_optim_steps(o));
            }
            for (int s = 0; s < ry_optim_slot_count(o); s++) {
                ry_param_set *m = ry_optim_slot(os[0], s);
                for (int r = 1; r < 3; r++)
                    copy_range(m->slab, ry_optim_slot(os[r], s)->slab, cut[r], cut[r + 1]);
                same_bits(m, ry_optim_slot(o, s));
            }
            for (int r = 0; r < 3; r++) {
                ry_optim_free(os[r]);
                ry_params_free(q[r]);
            }
            ry_optim_free(o);
            ry_params_free(p);
            ry_params_free(g);
        }
}

/* A sharded optimizer loads a whole slot and keeps its slice; sets of
 * another slab size are refused. */
static void test_shard_load_slot(void **state) {
    ry_error err;
    ry_optim_config c = config(3);
    ry_param_set *p = new_set(RY_FLOAT32), *full = new_set(RY_FLOAT32);
    fill(full, 5, 1.0);
    ry_optimizer *o = new_opt(&c, p);
    assert_int_equal(ry_optim_shard(o, p, 7, 30, &err), RY_OK);
    int64_t lo = 0, hi = 0;
    assert_true(ry_optim_shard_range(o, &lo, &hi));
    assert_int_equal(lo, 7);
    assert_int_equal(hi, 30);
    assert_int_equal(ry_optim_load_slot(o, "exp_avg", full, &err), RY_OK);
    const ry_tensor *sh = ry_optim_slot_shard(o, 0);
    assert_memory_equal(sh->data, (const float *)full->slab->data + 7, 23 * sizeof(float));
    assert_int_equal(ry_optim_shard(o, p, 0, p->slab->size + 1, &err), RY_ERR);
    ry_optimizer *o2 = new_opt(&c, p);
    assert_int_equal(ry_optim_shard(o2, p, 0, p->slab->size + 1, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "outside"));
    assert_int_equal(ry_optim_unshard(o, p, &err), RY_OK);
    const ry_tensor *w = ry_optim_slot_find(o, "exp_avg")->slab;
    assert_memory_equal((const float *)w->data + 7, (const float *)full->slab->data + 7,
                        23 * sizeof(float));
    assert_true(ry_tensor_get(w, 0) == 0 && ry_tensor_get(w, 30) == 0);
    assert_false(ry_optim_shard_range(o, &lo, &hi));
    ry_optim_free(o);
    ry_optim_free(o2);
    ry_params_free(p);
    ry_params_free(full);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_grads_matches_step),
        cmocka_unit_test(test_rows_update),
        cmocka_unit_test(test_zero_grad_identity),
        cmocka_unit_test(test_step_grads_errors),
        cmocka_unit_test(test_scan_and_coef),
        cmocka_unit_test(test_threads_same_bits),
        cmocka_unit_test(test_shard_same_bits),
        cmocka_unit_test(test_shard_load_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
