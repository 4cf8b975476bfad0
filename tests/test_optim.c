/*
 * test_optim.c: optimizers, learning-rate schedules and gradient clipping.
 * A few steps of each rule worked by hand; then PyTorch's own updates on
 * the same numbers for 20 steps per optimizer setting, in float32 and
 * float64, with schedules and clipping checked against torch's
 * (tests/optim/, written by tools/gen_optim_tests.py); then state round
 * trips, bad input and out-of-memory paths.
 */
#include "test_util.h"

#include "relayc/optim.h"

/* ---- helpers ----------------------------------------------------------- */

/* One parameter "x" of n float64 elements holding v[0..n). */
static ry_param_set *vec_set(const char *name, int n, const double *v) {
    const char *names[1] = {name};
    int ndims[1] = {1};
    int64_t shape[1] = {n};
    const int64_t *shapes[1] = {shape};
    ry_param_set *p = ry_params_new(RY_FLOAT64, 1, names, ndims, shapes);
    assert_non_null(p);
    for (int i = 0; i < n; i++) ry_tensor_set(p->views[0], i, v[i]);
    return p;
}

static ry_optimizer *new_opt(const ry_optim_config *c, const ry_param_set *p) {
    ry_optimizer *o = NULL;
    ry_error err;
    if (ry_optim_new(c, p, &o, &err) != RY_OK) fail_msg("ry_optim_new: %s", err.msg);
    return o;
}

/* Steps the optimizer on p with gradient values g (one parameter). */
static void step_with(ry_optimizer *o, ry_param_set *p, const double *g) {
    ry_param_set *grad = ry_params_like(p);
    assert_non_null(grad);
    for (int64_t i = 0; i < grad->views[0]->size; i++) ry_tensor_set(grad->views[0], i, g[i]);
    ry_error err;
    if (ry_optim_step(o, p, grad, &err) != RY_OK) fail_msg("ry_optim_step: %s", err.msg);
    ry_params_free(grad);
}

static double x0(const ry_param_set *p) { return ry_tensor_get(p->views[0], 0); }

static void done(ry_optimizer *o, ry_param_set *p) {
    ry_optim_free(o);
    ry_params_free(p);
}

/* torch's defaults for kind, with learning rate lr. */
static ry_optim_config with_lr(ry_optim_kind kind, double lr) {
    ry_optim_config c = ry_optim_defaults(kind);
    c.lr = lr;
    return c;
}

#define NEAR(got, want) assert_true(fabs((got) - (want)) <= 1e-12 * fabs(want) + 1e-15)

/* ---- hand-computed steps (float64, one element) ------------------------ */

/* SGD lr 0.1, momentum 0.9, p = 1, grads 1, 2, -1:
 *   b = 1                    p = 1 - 0.1 * 1     = 0.9
 *   b = 0.9 * 1 + 2 = 2.9    p = 0.9 - 0.29      = 0.61
 *   b = 0.9 * 2.9 - 1 = 1.61 p = 0.61 - 0.161    = 0.449 */
static void test_sgd_momentum_by_hand(void **state) {
    (void)state;
    ry_param_set *p = vec_set("x", 1, (double[]){1});
    ry_optim_config c = with_lr(RY_OPTIM_SGD, 0.1);
    c.momentum = 0.9;
    ry_optimizer *o = new_opt(&c, p);
    step_with(o, p, (double[]){1});
    NEAR(x0(p), 0.9);
    NEAR(ry_tensor_get(ry_optim_slot_find(o, "momentum_buffer")->views[0], 0), 1.0);
    step_with(o, p, (double[]){2});
    NEAR(x0(p), 0.61);
    step_with(o, p, (double[]){-1});
    NEAR(x0(p), 0.449);
    NEAR(ry_tensor_get(ry_optim_slot_find(o, "momentum_buffer")->views[0], 0), 1.61);
    assert_int_equal(ry_optim_step_count(o), 3);
    done(o, p);
}

/* SGD lr 0.1, momentum 0.9, Nesterov, p = 1, grads 1, 2:
 *   b = 1,   d = 1 + 0.9 * 1 = 1.9,    p = 1 - 0.19    = 0.81
 *   b = 2.9, d = 2 + 0.9 * 2.9 = 4.61, p = 0.81 - 0.461 = 0.349
 * Dampening 0.5 instead (no Nesterov): the first step takes the gradient
 * undamped, b = 1, p = 0.9; then b = 0.9 + 0.5 * 2 = 1.9, p = 0.71.
 * Weight decay 0.5, no momentum, p = 2, grads 1, 1:
 *   d = 1 + 0.5 * 2 = 2, p = 1.8;  d = 1 + 0.9 = 1.9, p = 1.61 */
static void test_sgd_variants_by_hand(void **state) {
    (void)state;
    ry_optim_config c = with_lr(RY_OPTIM_SGD, 0.1);
    c.momentum = 0.9;
    c.nesterov = true;
    ry_param_set *p = vec_set("x", 1, (double[]){1});
    ry_optimizer *o = new_opt(&c, p);
    step_with(o, p, (double[]){1});
    NEAR(x0(p), 0.81);
    step_with(o, p, (double[]){2});
    NEAR(x0(p), 0.349);
    done(o, p);

    c.nesterov = false;
    c.dampening = 0.5;
    p = vec_set("x", 1, (double[]){1});
    o = new_opt(&c, p);
    step_with(o, p, (double[]){1});
    NEAR(x0(p), 0.9);
    step_with(o, p, (double[]){2});
    NEAR(x0(p), 0.71);
    done(o, p);

    c = with_lr(RY_OPTIM_SGD, 0.1);
    c.weight_decay = 0.5;
    p = vec_set("x", 1, (double[]){2});
    o = new_opt(&c, p);
    assert_int_equal(ry_optim_slot_count(o), 0); /* no momentum, no buffer */
    step_with(o, p, (double[]){1});
    NEAR(x0(p), 1.8);
    step_with(o, p, (double[]){1});
    NEAR(x0(p), 1.61);
    done(o, p);
}

/* Adam lr 0.1, betas (0.9, 0.999), eps 1e-8, p = 1, grads 2, -1:
 * step 1: m = 0.1 * 2 = 0.2, v = 0.001 * 4 = 0.004,
 *         p = 1 - (0.1 / (1 - 0.9)) * 0.2 / (sqrt(0.004) / sqrt(0.001) + 1e-8)
 *           = 1 - 0.2 / (2 + 1e-8) = 0.9000000005
 * step 2: m = 0.9 * 0.2 + 0.1 * -1 = 0.08, v = 0.999 * 0.004 + 0.001 = 0.004996,
 *         p = 0.9000000005 - (0.1 / 0.19) * 0.08 / (sqrt(0.004996 / 0.001999) + 1e-8)
 *           = 0.9000000005 - 0.5263158 * 0.08 / 1.5809017 = 0.8733662967024315
 * AdamW, weight decay 0.5: p = 1 * (1 - 0.1 * 0.5) = 0.95 first, then the
 * same step: 0.95 - 0.2 / (2 + 1e-8) = 0.8500000005 */
static void test_adam_by_hand(void **state) {
    (void)state;
    ry_optim_config c = with_lr(RY_OPTIM_ADAM, 0.1);
    ry_param_set *p = vec_set("x", 1, (double[]){1});
    ry_optimizer *o = new_opt(&c, p);
    step_with(o, p, (double[]){2});
    NEAR(x0(p), 0.9000000005);
    step_with(o, p, (double[]){-1});
    NEAR(x0(p), 0.8733662967024315);
    NEAR(ry_tensor_get(ry_optim_slot_find(o, "exp_avg")->views[0], 0), 0.08);
    NEAR(ry_tensor_get(ry_optim_slot_find(o, "exp_avg_sq")->views[0], 0), 0.004996);
    assert_int_equal(ry_optim_param_steps(o, 0), 2);
    done(o, p);

    c = with_lr(RY_OPTIM_ADAMW, 0.1);
    c.weight_decay = 0.5;
    p = vec_set("x", 1, (double[]){1});
    o = new_opt(&c, p);
    step_with(o, p, (double[]){2});
    NEAR(x0(p), 0.8500000005);
    done(o, p);
}

/* AMSGrad keeps the largest v: lr 0.1, betas (0, 0.5), eps 0, p = 0, grads
 * 2, 0: step 1 v = 0.5 * 4 = 2 = vmax, m = 2, p = -0.1 * 2 / (sqrt(2) /
 * sqrt(0.5)) = -0.1; step 2 v = 1 but vmax stays 2, m = 0, p stays -0.1. */
static void test_amsgrad_by_hand(void **state) {
    (void)state;
    ry_optim_config c = with_lr(RY_OPTIM_ADAM, 0.1);
    c.beta1 = 0;
    c.beta2 = 0.5;
    c.eps = 0;
    c.amsgrad = true;
    ry_param_set *p = vec_set("x", 1, (double[]){0});
    ry_optimizer *o = new_opt(&c, p);
    assert_int_equal(ry_optim_slot_count(o), 3);
    assert_string_equal(ry_optim_slot_name(o, 2), "max_exp_avg_sq");
    step_with(o, p, (double[]){2});
    NEAR(x0(p), -0.1);
    step_with(o, p, (double[]){0});
    NEAR(x0(p), -0.1);
    NEAR(ry_tensor_get(ry_optim_slot_find(o, "exp_avg_sq")->views[0], 0), 1.0);
    NEAR(ry_tensor_get(ry_optim_slot_find(o, "max_exp_avg_sq")->views[0], 0), 2.0);
    done(o, p);
}

/* Adagrad lr 0.1, eps 1e-10, p = 1, grads 3, 4:
 *   s = 9,  p = 1 - 0.1 * 3 / (3 + 1e-10) = 0.9000000000033334
 *   s = 25, p = that - 0.1 * 4 / (5 + 1e-10) = 0.8200000000049333
 * lr_decay 1: step 2 uses 0.1 / (1 + 1 * 1) = 0.05: p = 0.9 - 0.05 * 0.8 = 0.86.
 * initial_accumulator_value 16: s = 16 + 9 = 25, p = 1 - 0.1 * 3 / 5 = 0.94. */
static void test_adagrad_by_hand(void **state) {
    (void)state;
    ry_optim_config c = with_lr(RY_OPTIM_ADAGRAD, 0.1);
    ry_param_set *p = vec_set("x", 1, (double[]){1});
    ry_optimizer *o = new_opt(&c, p);
    step_with(o, p, (double[]){3});
    NEAR(x0(p), 0.9000000000033334);
    step_with(o, p, (double[]){4});
    NEAR(x0(p), 0.8200000000049333);
    NEAR(ry_tensor_get(ry_optim_slot_find(o, "sum")->views[0], 0), 25.0);
    done(o, p);

    c.lr_decay = 1;
    c.eps = 0;
    p = vec_set("x", 1, (double[]){1});
    o = new_opt(&c, p);
    step_with(o, p, (double[]){3});
    step_with(o, p, (double[]){4});
    NEAR(x0(p), 0.86);
    done(o, p);

    c.lr_decay = 0;
    c.initial_accumulator_value = 16;
    p = vec_set("x", 1, (double[]){1});
    o = new_opt(&c, p);
    NEAR(ry_tensor_get(ry_optim_slot_find(o, "sum")->views[0], 0), 16.0);
    step_with(o, p, (double[]){3});
    NEAR(x0(p), 0.94);
    done(o, p);
}

/* RMSprop lr 0.01, alpha 0.99, eps 1e-8, p = 1, grads 2, 2:
 *   sq = 0.01 * 4 = 0.04,          p = 1 - 0.01 * 2 / (0.2 + 1e-8) = 0.900000005
 *   sq = 0.99 * 0.04 + 0.04 = 0.0796, p = that - 0.02 / (sqrt(0.0796) + 1e-8)
 *                                      = 0.8291118870117289
 * centered, one step: ga = 0.02, avg = sqrt(0.04 - 0.0004) + 1e-8,
 *   p = 1 - 0.02 / 0.19899749 = 0.8994962235245836
 * momentum 0.5: buf = 2 / 0.2 = 10, p = 0.9; buf = 5 + 2 / 0.2821347 = 12.0888,
 *   p = 0.9 - 0.120888 = 0.7791118895117288 (eps kept in each) */
static void test_rmsprop_by_hand(void **state) {
    (void)state;
    ry_optim_config c = with_lr(RY_OPTIM_RMSPROP, 0.01);
    ry_param_set *p = vec_set("x", 1, (double[]){1});
    ry_optimizer *o = new_opt(&c, p);
    step_with(o, p, (double[]){2});
    NEAR(x0(p), 0.9000000049999998);
    step_with(o, p, (double[]){2});
    NEAR(x0(p), 0.8291118870117289);
    NEAR(ry_tensor_get(ry_optim_slot_find(o, "square_avg")->views[0], 0), 0.0796);
    done(o, p);

    c.centered = true;
    p = vec_set("x", 1, (double[]){1});
    o = new_opt(&c, p);
    step_with(o, p, (double[]){2});
    NEAR(x0(p), 0.8994962235245836);
    NEAR(ry_tensor_get(ry_optim_slot_find(o, "grad_avg")->views[0], 0), 0.02);
    done(o, p);

    c.centered = false;
    c.momentum = 0.5;
    p = vec_set("x", 1, (double[]){1});
    o = new_opt(&c, p);
    step_with(o, p, (double[]){2});
    NEAR(x0(p), 0.9000000049999998);
    step_with(o, p, (double[]){2});
    NEAR(x0(p), 0.7791118895117288);
    done(o, p);
}

/* ---- against PyTorch: 20 steps per setting ------------------------------
 * Two parameters w (3, 4) and b (5,), flattened to 17 values, w first. */

enum { FLAT = 17, STEPS = 20 };

static ry_param_set *wb_set(ry_dtype dt) {
    const char *names[2] = {"w", "b"};
    int ndims[2] = {2, 1};
    int64_t sw[2] = {3, 4}, sb[1] = {5};
    const int64_t *shapes[2] = {sw, sb};
    ry_param_set *p = ry_params_new(dt, 2, names, ndims, shapes);
    assert_non_null(p);
    return p;
}

/* p := row `row` of src (rows of FLAT values), scaled. */
static void load_row(ry_param_set *p, const ry_tensor *src, int64_t row, double scale) {
    int64_t k = row * FLAT;
    for (int i = 0; i < p->n; i++)
        for (int64_t j = 0; j < p->views[i]->size; j++)
            ry_tensor_set(p->views[i], j, scale * ry_tensor_get(src, k++));
}

static void assert_row(const ry_param_set *p, const ry_tensor *want, int64_t row, double rtol,
                       double atol, const char *what, int step) {
    int64_t k = row * FLAT;
    for (int i = 0; i < p->n; i++)
        for (int64_t j = 0; j < p->views[i]->size; j++, k++) {
            double got = ry_tensor_get(p->views[i], j), exp = ry_tensor_get(want, k);
            if (!(fabs(got - exp) <= atol + rtol * fabs(exp)))
                fail_msg("%s step %d: %s[%lld] = %.17g, torch %.17g", what, step, p->names[i],
                         (long long)j, got, exp);
        }
}

/* A fixture case: fields at 0 take torch's default (no case sets them to
 * 0); b exempt from decay when no_decay_b; b frozen for steps [lo, hi). */
typedef struct torch_case {
    const char *name;
    ry_optim_kind kind;
    double lr, weight_decay, momentum, dampening;
    bool nesterov;
    double beta1, beta2, eps;
    bool amsgrad;
    double lr_decay, initial_accumulator_value, alpha;
    bool centered;
    const char *slots[3];
    bool no_decay_b;
    int frozen_lo, frozen_hi;
} torch_case;

/* Mirrors CASES in tools/gen_optim_tests.py. */
static const torch_case CASES[] = {
    {.name = "sgd_plain", .kind = RY_OPTIM_SGD, .lr = 0.1},
    {.name = "sgd_momentum", .kind = RY_OPTIM_SGD, .lr = 0.05, .momentum = 0.9,
     .slots = {"momentum_buffer"}},
    {.name = "sgd_dampening", .kind = RY_OPTIM_SGD, .lr = 0.05, .momentum = 0.9, .dampening = 0.3,
     .weight_decay = 0.01, .slots = {"momentum_buffer"}},
    {.name = "sgd_nesterov", .kind = RY_OPTIM_SGD, .lr = 0.05, .momentum = 0.9, .nesterov = true,
     .weight_decay = 0.1, .slots = {"momentum_buffer"}},
    {.name = "sgd_frozen", .kind = RY_OPTIM_SGD, .lr = 0.05, .momentum = 0.9,
     .slots = {"momentum_buffer"}, .frozen_lo = 0, .frozen_hi = 3},
    {.name = "adam", .kind = RY_OPTIM_ADAM, .lr = 0.01, .slots = {"exp_avg", "exp_avg_sq"}},
    {.name = "adam_wd_amsgrad", .kind = RY_OPTIM_ADAM, .lr = 0.01, .beta1 = 0.8, .beta2 = 0.99,
     .eps = 1e-6, .weight_decay = 0.1, .amsgrad = true,
     .slots = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}},
    {.name = "adam_frozen", .kind = RY_OPTIM_ADAM, .lr = 0.01, .slots = {"exp_avg", "exp_avg_sq"},
     .frozen_lo = 5, .frozen_hi = 10},
    {.name = "adamw", .kind = RY_OPTIM_ADAMW, .lr = 0.01, .weight_decay = 0.1,
     .slots = {"exp_avg", "exp_avg_sq"}},
    {.name = "adamw_amsgrad_mask", .kind = RY_OPTIM_ADAMW, .lr = 0.02, .weight_decay = 0.5,
     .amsgrad = true, .slots = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}, .no_decay_b = true},
    {.name = "adagrad", .kind = RY_OPTIM_ADAGRAD, .lr = 0.1, .slots = {"sum"}},
    {.name = "adagrad_full", .kind = RY_OPTIM_ADAGRAD, .lr = 0.1, .lr_decay = 0.01,
     .weight_decay = 0.05, .initial_accumulator_value = 0.1, .eps = 1e-6, .slots = {"sum"}},
    {.name = "adagrad_mask", .kind = RY_OPTIM_ADAGRAD, .lr = 0.1, .weight_decay = 0.2,
     .slots = {"sum"}, .no_decay_b = true},
    {.name = "rmsprop", .kind = RY_OPTIM_RMSPROP, .lr = 0.01, .slots = {"square_avg"}},
    {.name = "rmsprop_momentum", .kind = RY_OPTIM_RMSPROP, .lr = 0.01, .momentum = 0.9,
     .weight_decay = 0.01, .slots = {"square_avg", "momentum_buffer"}},
    {.name = "rmsprop_centered", .kind = RY_OPTIM_RMSPROP, .lr = 0.01, .alpha = 0.9, .eps = 1e-6,
     .centered = true, .slots = {"square_avg", "grad_avg"}},
    {.name = "rmsprop_centered_momentum", .kind = RY_OPTIM_RMSPROP, .lr = 0.01, .alpha = 0.95,
     .momentum = 0.5, .centered = true, .weight_decay = 0.02,
     .slots = {"square_avg", "momentum_buffer", "grad_avg"}, .frozen_lo = 2, .frozen_hi = 6},
};

static ry_optim_config case_config(const torch_case *tc) {
    ry_optim_config c = ry_optim_defaults(tc->kind);
    c.lr = tc->lr;
    c.weight_decay = tc->weight_decay;
    c.momentum = tc->momentum;
    c.dampening = tc->dampening;
    c.nesterov = tc->nesterov;
    c.amsgrad = tc->amsgrad;
    c.lr_decay = tc->lr_decay;
    c.initial_accumulator_value = tc->initial_accumulator_value;
    c.centered = tc->centered;
    if (tc->beta1) c.beta1 = tc->beta1;
    if (tc->beta2) c.beta2 = tc->beta2;
    if (tc->eps) c.eps = tc->eps;
    if (tc->alpha) c.alpha = tc->alpha;
    return c;
}

static void run_torch_case(const torch_case *tc, ry_dtype dt) {
    const char *dname = dt == RY_FLOAT32 ? "f32" : "f64";
    double rtol = dt == RY_FLOAT32 ? 2e-5 : 1e-11, atol = dt == RY_FLOAT32 ? 2e-6 : 1e-13;
    char path[256], what[96];
    snprintf(what, sizeof what, "%s %s", tc->name, dname);
    ry_tensor *p0 = test_npy("tests/optim/inputs.npy"), *g = test_npy("tests/optim/grads.npy");
    snprintf(path, sizeof path, "tests/optim/%s_%s.npy", tc->name, dname);
    ry_tensor *traj = test_npy(path);
    ry_param_set *p = wb_set(dt), *grad = wb_set(dt);
    load_row(p, p0, 0, 1);
    ry_optim_config c = case_config(tc);
    ry_optimizer *o = new_opt(&c, p);
    ry_error err;
    if (tc->no_decay_b) assert_int_equal(ry_optim_set_decay(o, "b", false, &err), RY_OK);
    for (int t = 0; t < STEPS; t++) {
        bool frozen = t >= tc->frozen_lo && t < tc->frozen_hi;
        assert_int_equal(ry_optim_set_frozen(o, "b", frozen, &err), RY_OK);
        load_row(grad, g, t, 1);
        assert_int_equal(ry_optim_step(o, p, grad, &err), RY_OK);
        assert_row(p, traj, t, rtol, atol, what, t + 1);
    }
    assert_int_equal(ry_optim_param_steps(o, 0), STEPS);
    assert_int_equal(ry_optim_param_steps(o, 1), STEPS - (tc->frozen_hi - tc->frozen_lo));
    int n_slots = 0;
    while (n_slots < 3 && tc->slots[n_slots]) n_slots++;
    assert_int_equal(ry_optim_slot_count(o), n_slots);
    if (n_slots) {
        snprintf(path, sizeof path, "tests/optim/%s_%s_slots.npy", tc->name, dname);
        ry_tensor *slots = test_npy(path);
        for (int s = 0; s < n_slots; s++) {
            ry_param_set *set = ry_optim_slot_find(o, tc->slots[s]);
            if (!set) fail_msg("%s: no slot %s", what, tc->slots[s]);
            assert_string_equal(ry_optim_slot_name(o, s), tc->slots[s]);
            assert_ptr_equal(ry_optim_slot(o, s), set);
            snprintf(path, sizeof path, "%s slot %s", what, tc->slots[s]);
            assert_row(set, slots, s, rtol, atol, path, STEPS);
        }
        ry_tensor_release(slots);
    }
    done(o, p);
    ry_params_free(grad);
    ry_tensor_release(p0);
    ry_tensor_release(g);
    ry_tensor_release(traj);
}

static void test_torch_trajectories(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        run_torch_case(&CASES[i], RY_FLOAT64);
        run_torch_case(&CASES[i], RY_FLOAT32);
    }
}

/* ---- schedules against torch.optim.lr_scheduler ------------------------ */

typedef struct sched_case {
    const char *name;
    ry_schedule s;
} sched_case;

/* Mirrors SCHEDULES in tools/gen_optim_tests.py (base lr 0.1, 40 steps). */
static const sched_case SCHEDS[] = {
    {"step", {.kind = RY_SCHED_STEP, .step_size = 7, .gamma = 0.5}},
    {"multistep",
     {.kind = RY_SCHED_MULTISTEP, .n_milestones = 4, .milestones = {3, 10, 10, 25}, .gamma = 0.3}},
    {"exponential", {.kind = RY_SCHED_EXPONENTIAL, .gamma = 0.93}},
    {"cosine", {.kind = RY_SCHED_COSINE, .t_max = 15, .eta_min = 0.001}},
    {"cosine_zero", {.kind = RY_SCHED_COSINE, .t_max = 40}},
    {"linear", {.kind = RY_SCHED_LINEAR, .start_factor = 0.25, .end_factor = 0.75, .total_iters = 12}},
    {"warmup_cosine",
     {.kind = RY_SCHED_COSINE, .t_max = 30, .warmup_steps = 5, .warmup_start_factor = 0.1}},
    {"warmup_step",
     {.kind = RY_SCHED_STEP, .step_size = 4, .gamma = 0.7, .warmup_steps = 8,
      .warmup_start_factor = 0.5}},
};

static void test_schedules_match_torch(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof SCHEDS / sizeof SCHEDS[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "tests/optim/sched_%s.npy", SCHEDS[i].name);
        ry_tensor *want = test_npy(path);
        ry_error err;
        if (ry_schedule_check(&SCHEDS[i].s, &err) != RY_OK) fail_msg("%s: %s", path, err.msg);
        for (int64_t t = 0; t < want->size; t++) {
            double got = ry_schedule_lr(&SCHEDS[i].s, 0.1, t), exp = ry_tensor_get(want, t);
            if (!(fabs(got - exp) <= 1e-12 * fabs(exp) + 1e-15))
                fail_msg("%s step %lld: %.17g, torch %.17g", SCHEDS[i].name, (long long)t, got, exp);
        }
        ry_tensor_release(want);
    }
}

/* Closed forms by hand: step_size 2, gamma 0.1 from 1: 1, 1, 0.1, 0.1, 0.01;
 * cosine T_max 4 from 1 to 0: 1, (1 + cos(pi/4))/2 = 0.8535534, 0.5, ..., 0
 * at 4, and back up at 8 (periodic, as torch's recursion); constant 1. */
static void test_schedules_by_hand(void **state) {
    (void)state;
    ry_schedule s = {.kind = RY_SCHED_STEP, .step_size = 2, .gamma = 0.1};
    double want[5] = {1, 1, 0.1, 0.1, 0.01};
    for (int t = 0; t < 5; t++) NEAR(ry_schedule_lr(&s, 1.0, t), want[t]);
    ry_schedule cos4 = {.kind = RY_SCHED_COSINE, .t_max = 4};
    NEAR(ry_schedule_lr(&cos4, 1.0, 1), (1 + cos(M_PI / 4)) / 2);
    NEAR(ry_schedule_lr(&cos4, 1.0, 2), 0.5);
    assert_true(fabs(ry_schedule_lr(&cos4, 1.0, 4)) < 1e-15);
    NEAR(ry_schedule_lr(&cos4, 1.0, 8), 1.0);
    ry_schedule k = {.kind = RY_SCHED_CONSTANT};
    NEAR(ry_schedule_lr(&k, 0.3, 1000), 0.3);
}

/* An optimizer follows a schedule through ry_optim_set_lr: SGD lr from a
 * step schedule, p = 0, gradient 1 each step: lrs 1, 1, 0.5, 0.5 -> p = -3. */
static void test_schedule_drives_optimizer(void **state) {
    (void)state;
    ry_schedule s = {.kind = RY_SCHED_STEP, .step_size = 2, .gamma = 0.5};
    ry_optim_config c = ry_optim_defaults(RY_OPTIM_SGD);
    ry_param_set *p = vec_set("x", 1, (double[]){0});
    ry_optimizer *o = new_opt(&c, p);
    for (int t = 0; t < 4; t++) {
        ry_optim_set_lr(o, ry_schedule_lr(&s, 1.0, ry_optim_step_count(o)));
        step_with(o, p, (double[]){1});
    }
    NEAR(x0(p), -3.0);
    NEAR(ry_optim_lr(o), 0.5);
    NEAR(ry_optim_get_config(o)->lr, 0.5);
    done(o, p);
}

static void test_schedule_errors(void **state) {
    (void)state;
    ry_error err;
    ry_schedule bad[] = {
        {.kind = RY_SCHED_STEP, .step_size = 0, .gamma = 0.5},
        {.kind = RY_SCHED_MULTISTEP, .n_milestones = 2, .milestones = {5, 3}, .gamma = 0.5},
        {.kind = RY_SCHED_MULTISTEP, .n_milestones = RY_SCHED_MAX_MILESTONES + 1, .gamma = 0.5},
        {.kind = RY_SCHED_EXPONENTIAL, .gamma = NAN},
        {.kind = RY_SCHED_COSINE, .t_max = 0},
        {.kind = RY_SCHED_LINEAR, .start_factor = 0, .end_factor = 1, .total_iters = 5},
        {.kind = RY_SCHED_LINEAR, .start_factor = 0.5, .end_factor = 1.5, .total_iters = 5},
        {.kind = RY_SCHED_LINEAR, .start_factor = 0.5, .end_factor = 1, .total_iters = 0},
        {.kind = RY_SCHED_CONSTANT, .warmup_steps = -1},
        {.kind = RY_SCHED_CONSTANT, .warmup_steps = 3, .warmup_start_factor = 0},
        {.kind = (ry_sched_kind)99},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = '\0';
        if (ry_schedule_check(&bad[i], &err) != RY_ERR) fail_msg("bad schedule %zu accepted", i);
        assert_non_null(strstr(err.msg, "schedule: "));
    }
    assert_non_null(strstr((ry_schedule_check(&bad[0], &err), err.msg), "step_size"));
}

/* ---- clipping against torch.nn.utils ------------------------------------ */

typedef struct clip_case {
    const char *name;
    bool by_value;
    double max, norm_type;
} clip_case;

/* Mirrors CLIPS in tools/gen_optim_tests.py: gradients are 3 * grads[12]. */
static const clip_case CLIPS[] = {
    {"norm2", false, 1.5, 2}, {"norm2_noclip", false, 1e3, 2}, {"norm1", false, 2.0, 1},
    {"norm3", false, 2.0, 3}, {"norminf", false, 0.5, INFINITY}, {"value", true, 1.0, 0},
};

static void test_clip_matches_torch(void **state) {
    (void)state;
    ry_tensor *g = test_npy("tests/optim/grads.npy");
    for (size_t i = 0; i < sizeof CLIPS / sizeof CLIPS[0]; i++)
        for (int d = 0; d < 2; d++) {
            ry_dtype dt = d ? RY_FLOAT32 : RY_FLOAT64;
            char path[128];
            snprintf(path, sizeof path, "tests/optim/clip_%s_%s.npy", CLIPS[i].name, d ? "f32" : "f64");
            ry_tensor *want = test_npy(path);
            ry_param_set *grad = wb_set(dt);
            load_row(grad, g, 12, 3);
            ry_error err;
            double total = 0, rtol = d ? 1e-6 : 1e-13;
            if (CLIPS[i].by_value)
                assert_int_equal(ry_clip_grad_value(grad, CLIPS[i].max, &err), RY_OK);
            else
                assert_int_equal(ry_clip_grad_norm(grad, CLIPS[i].max, CLIPS[i].norm_type, &total, &err),
                                 RY_OK);
            assert_row(grad, want, 0, rtol, 1e-12, path, 1);
            double exp = ry_tensor_get(want, FLAT);
            if (!CLIPS[i].by_value && !(fabs(total - exp) <= rtol * exp))
                fail_msg("%s: total norm %.17g, torch %.17g", path, total, exp);
            ry_params_free(grad);
            ry_tensor_release(want);
        }
    ry_tensor_release(g);
}

/* By hand: gradients (3, 4) have norm 5; max 1 scales by 1 / (5 + 1e-6);
 * max 10 leaves them. By value 3.5: (3, 4) -> (3, 3.5); -inf -> -3.5; NaN stays. */
static void test_clip_by_hand(void **state) {
    (void)state;
    ry_param_set *g = vec_set("g", 2, (double[]){3, 4});
    double total = 0;
    ry_error err;
    assert_int_equal(ry_clip_grad_norm(g, 10, 2, &total, &err), RY_OK);
    NEAR(total, 5.0);
    NEAR(ry_tensor_get(g->views[0], 1), 4.0);
    assert_int_equal(ry_clip_grad_norm(g, 1, 2, &total, &err), RY_OK);
    NEAR(ry_tensor_get(g->views[0], 0), 3 / (5 + 1e-6));
    NEAR(ry_tensor_get(g->views[0], 1), 4 / (5 + 1e-6));
    ry_params_free(g);

    g = vec_set("g", 4, (double[]){3, 4, -INFINITY, NAN});
    assert_int_equal(ry_clip_grad_value(g, 3.5, &err), RY_OK);
    NEAR(ry_tensor_get(g->views[0], 0), 3.0);
    NEAR(ry_tensor_get(g->views[0], 1), 3.5);
    NEAR(ry_tensor_get(g->views[0], 2), -3.5);
    assert_true(isnan(ry_tensor_get(g->views[0], 3)));
    /* A NaN norm poisons every gradient, as torch's does (no error_if_nonfinite). */
    assert_int_equal(ry_clip_grad_norm(g, 1, 2, &total, &err), RY_OK);
    assert_true(isnan(total));
    assert_true(isnan(ry_tensor_get(g->views[0], 0)));

    assert_int_equal(ry_clip_grad_norm(g, -1, 2, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "max_norm"));
    assert_int_equal(ry_clip_grad_norm(g, 1, 0, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "norm_type"));
    assert_int_equal(ry_clip_grad_value(g, -1, &err), RY_ERR);
    assert_int_equal(ry_clip_grad_value(g, NAN, &err), RY_ERR);
    ry_params_free(g);
}

/* The first parameter holding a NaN or Inf, and where, in both dtypes. */
static void test_find_nonfinite(void **state) {
    (void)state;
    for (int d = 0; d < 2; d++) {
        ry_param_set *g = wb_set(d ? RY_FLOAT32 : RY_FLOAT64);
        int64_t elem = -7;
        assert_int_equal(ry_params_find_nonfinite(g, &elem), -1);
        assert_int_equal(elem, -7);
        ry_tensor_set(g->views[1], 3, NAN);
        assert_int_equal(ry_params_find_nonfinite(g, &elem), 1);
        assert_int_equal(elem, 3);
        ry_tensor_set(g->views[0], 5, -INFINITY);
        assert_int_equal(ry_params_find_nonfinite(g, &elem), 0);
        assert_int_equal(elem, 5);
        assert_int_equal(ry_params_find_nonfinite(g, NULL), 0);
        ry_params_free(g);
    }
}

/* Clip, step, schedule, as a training loop does: Adam lr 0.05 with a 4-step
 * warm-up from 0.2 then cosine over 16, gradients clipped at norm 1 (loop
 * in tools/gen_optim_tests.py). */
static void test_training_loop_matches_torch(void **state) {
    (void)state;
    ry_schedule s = {.kind = RY_SCHED_COSINE, .t_max = 16, .warmup_steps = 4,
                     .warmup_start_factor = 0.2};
    ry_tensor *p0 = test_npy("tests/optim/inputs.npy"), *g = test_npy("tests/optim/grads.npy");
    for (int d = 0; d < 2; d++) {
        ry_dtype dt = d ? RY_FLOAT32 : RY_FLOAT64;
        ry_tensor *want = test_npy(d ? "tests/optim/loop_f32.npy" : "tests/optim/loop_f64.npy");
        ry_param_set *p = wb_set(dt), *grad = wb_set(dt);
        load_row(p, p0, 0, 1);
        ry_optim_config c = ry_optim_defaults(RY_OPTIM_ADAM);
        ry_optimizer *o = new_opt(&c, p);
        ry_error err;
        for (int t = 0; t < STEPS; t++) {
            load_row(grad, g, t, 1);
            assert_int_equal(ry_clip_grad_norm(grad, 1.0, 2, NULL, &err), RY_OK);
            ry_optim_set_lr(o, ry_schedule_lr(&s, 0.05, ry_optim_step_count(o)));
            assert_int_equal(ry_optim_step(o, p, grad, &err), RY_OK);
            assert_row(p, want, t, d ? 2e-5 : 1e-11, d ? 2e-6 : 1e-13, "loop", t + 1);
        }
        ry_optim_free(o);
        ry_params_free(p);
        ry_params_free(grad);
        ry_tensor_release(want);
    }
    ry_tensor_release(p0);
    ry_tensor_release(g);
}

/* ---- state: frozen, decay mask, checkpoint round trip ------------------- */

/* A frozen parameter keeps its value, slots and step count. */
static void test_frozen_and_mask(void **state) {
    (void)state;
    ry_param_set *p = wb_set(RY_FLOAT64), *g = wb_set(RY_FLOAT64);
    ry_params_fill(p, 1);
    ry_params_fill(g, 0);
    ry_optim_config c = with_lr(RY_OPTIM_SGD, 0.1);
    c.weight_decay = 1; /* with zero gradients only the decay moves p: p -= 0.1 p */
    ry_optimizer *o = new_opt(&c, p);
    ry_error err;
    assert_int_equal(ry_optim_set_decay(o, "b", false, &err), RY_OK);
    assert_int_equal(ry_optim_step(o, p, g, &err), RY_OK);
    NEAR(ry_tensor_get(p->views[0], 11), 0.9);
    NEAR(ry_tensor_get(p->views[1], 4), 1.0);
    assert_int_equal(ry_optim_set_frozen(o, "w", true, &err), RY_OK);
    assert_int_equal(ry_optim_set_decay(o, "b", true, &err), RY_OK);
    assert_int_equal(ry_optim_step(o, p, g, &err), RY_OK);
    NEAR(ry_tensor_get(p->views[0], 0), 0.9);
    NEAR(ry_tensor_get(p->views[1], 0), 0.9);
    assert_int_equal(ry_optim_param_steps(o, 0), 1);
    assert_int_equal(ry_optim_param_steps(o, 1), 2);
    assert_int_equal(ry_optim_param_steps(o, 2), -1);
    assert_int_equal(ry_optim_step_count(o), 2);
    assert_int_equal(ry_optim_set_frozen(o, "nope", true, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "'nope'"));
    assert_int_equal(ry_optim_set_decay(o, "nope", true, &err), RY_ERR);
    done(o, p);
    ry_params_free(g);
}

/* N + M steps in one run equal N steps, a copy of the state into a new
 * optimizer, then M steps, bit for bit (what a checkpoint must give). */
static void run_steps(ry_optimizer *o, ry_param_set *p, ry_param_set *grad, const ry_tensor *g,
                      int from, int to) {
    ry_error err;
    for (int t = from; t < to; t++) {
        assert_int_equal(ry_optim_set_frozen(o, "b", t >= 8 && t < 12, &err), RY_OK);
        load_row(grad, g, t, 1);
        assert_int_equal(ry_optim_step(o, p, grad, &err), RY_OK);
    }
}

static void test_resume_is_exact(void **state) {
    (void)state;
    ry_optim_kind kinds[] = {RY_OPTIM_SGD, RY_OPTIM_ADAM, RY_OPTIM_ADAGRAD, RY_OPTIM_RMSPROP};
    ry_tensor *p0 = test_npy("tests/optim/inputs.npy"), *g = test_npy("tests/optim/grads.npy");
    for (int k = 0; k < 4; k++) {
        ry_optim_config c = ry_optim_defaults(kinds[k]);
        c.momentum = 0.9;
        c.amsgrad = true;
        c.centered = true;
        ry_param_set *pa = wb_set(RY_FLOAT32), *pb = wb_set(RY_FLOAT32), *grad = wb_set(RY_FLOAT32);
        load_row(pa, p0, 0, 1);
        load_row(pb, p0, 0, 1);
        ry_optimizer *a = new_opt(&c, pa), *b = new_opt(&c, pb);
        run_steps(a, pa, grad, g, 0, STEPS);
        run_steps(b, pb, grad, g, 0, 10);
        /* "save": copy every slot and the counts out; "load" into a fresh one */
        ry_optimizer *r = new_opt(&c, pb);
        ry_error err;
        for (int s = 0; s < ry_optim_slot_count(b); s++)
            assert_int_equal(ry_optim_load_slot(r, ry_optim_slot_name(b, s), ry_optim_slot(b, s), &err),
                             RY_OK);
        ry_param_set *steps = ry_optim_steps(r);
        assert_true(ry_params_same_layout(steps, ry_optim_steps(b)));
        assert_int_equal(steps->dtype, RY_FLOAT64);
        assert_int_equal(steps->views[1]->ndim, 0);
        ry_params_copy(steps, ry_optim_steps(b));
        assert_int_equal(ry_optim_param_steps(r, 1), 8); /* b frozen at steps 8, 9 */
        ry_optim_set_step_count(r, ry_optim_step_count(b));
        ry_optim_free(b);
        run_steps(r, pb, grad, g, 10, STEPS);
        assert_memory_equal(pa->slab->data, pb->slab->data, ry_tensor_nbytes(pa->slab));
        assert_int_equal(ry_optim_step_count(r), STEPS);
        ry_optim_free(a);
        ry_optim_free(r);
        ry_params_free(pa);
        ry_params_free(pb);
        ry_params_free(grad);
    }
    ry_tensor_release(p0);
    ry_tensor_release(g);
}

/* ---- bad input ---------------------------------------------------------- */

static void test_config_errors(void **state) {
    (void)state;
    struct {
        ry_optim_kind kind;
        const char *field;
        double value;
        const char *needle;
    } bad[] = {
        {RY_OPTIM_SGD, "lr", -0.1, "learning rate"},
        {RY_OPTIM_SGD, "lr", NAN, "learning rate"},
        {RY_OPTIM_SGD, "momentum", -1, "momentum"},
        {RY_OPTIM_SGD, "weight_decay", -1, "weight_decay"},
        {RY_OPTIM_SGD, "nesterov", 1, "Nesterov"},
        {RY_OPTIM_ADAM, "beta1", 1, "beta1"},
        {RY_OPTIM_ADAMW, "beta2", -0.5, "beta2"},
        {RY_OPTIM_ADAM, "eps", -1, "eps"},
        {RY_OPTIM_ADAGRAD, "lr_decay", -1, "lr_decay"},
        {RY_OPTIM_ADAGRAD, "initial_accumulator_value", -1, "initial_accumulator_value"},
        {RY_OPTIM_RMSPROP, "alpha", -1, "alpha"},
        {RY_OPTIM_RMSPROP, "momentum", INFINITY, "momentum"},
        {(ry_optim_kind)42, "kind", 0, "unknown kind"},
    };
    ry_param_set *p = vec_set("x", 1, (double[]){1});
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ry_optim_config c = ry_optim_defaults(bad[i].kind);
        const char *f = bad[i].field;
        double v = bad[i].value;
        if (!strcmp(f, "lr")) c.lr = v;
        if (!strcmp(f, "momentum")) c.momentum = v;
        if (!strcmp(f, "weight_decay")) c.weight_decay = v;
        if (!strcmp(f, "nesterov")) c.nesterov = true; /* without momentum */
        if (!strcmp(f, "beta1")) c.beta1 = v;
        if (!strcmp(f, "beta2")) c.beta2 = v;
        if (!strcmp(f, "eps")) c.eps = v;
        if (!strcmp(f, "lr_decay")) c.lr_decay = v;
        if (!strcmp(f, "initial_accumulator_value")) c.initial_accumulator_value = v;
        if (!strcmp(f, "alpha")) c.alpha = v;
        ry_optimizer *o = (ry_optimizer *)1;
        ry_error err;
        assert_int_equal(ry_optim_new(&c, p, &o, &err), RY_ERR);
        assert_null(o);
        if (!strstr(err.msg, bad[i].needle)) fail_msg("case %zu: message '%s'", i, err.msg);
    }
    ry_params_free(p);
}

/* A set laid out differently is refused and nothing changes. */
static void test_layout_errors(void **state) {
    (void)state;
    ry_param_set *p = wb_set(RY_FLOAT64), *g32 = wb_set(RY_FLOAT32);
    ry_param_set *other = vec_set("w", 12, (double[12]){0});
    const char *names[2] = {"b", "w"};
    int ndims[2] = {1, 2};
    int64_t sw[2] = {3, 4}, sb[1] = {5};
    const int64_t *shapes[2] = {sb, sw};
    ry_param_set *swapped = ry_params_new(RY_FLOAT64, 2, names, ndims, shapes);
    const char *names2[2] = {"w", "b"};
    int64_t sw2[2] = {4, 3};
    const int64_t *shapes2[2] = {sw2, sb};
    int ndims2[2] = {2, 1};
    ry_param_set *reshaped = ry_params_new(RY_FLOAT64, 2, names2, ndims2, shapes2);
    ry_params_fill(p, 2);
    ry_optimizer *o = new_opt(&(ry_optim_config){.kind = RY_OPTIM_ADAM, .lr = 1, .beta1 = 0.9,
                                                 .beta2 = 0.999, .eps = 1e-8},
                              p);
    ry_error err;
    assert_int_equal(ry_optim_step(o, p, g32, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "float32"));
    assert_int_equal(ry_optim_step(o, p, other, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "hold 1 tensors, expected 2"));
    assert_int_equal(ry_optim_step(o, p, swapped, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "'b', expected 'w'"));
    assert_int_equal(ry_optim_step(o, p, reshaped, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "float64[4, 3]"));
    assert_int_equal(ry_optim_step(o, other, p, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "parameters"));
    NEAR(ry_tensor_get(p->views[0], 0), 2.0);
    assert_int_equal(ry_optim_step_count(o), 0);
    assert_int_equal(ry_optim_param_steps(o, 0), 0);

    assert_int_equal(ry_optim_load_slot(o, "momentum_buffer", p, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "no slot 'momentum_buffer'"));
    assert_int_equal(ry_optim_load_slot(o, "exp_avg", reshaped, &err), RY_ERR);
    assert_int_equal(ry_optim_load_slot(o, "exp_avg", p, &err), RY_OK);
    NEAR(ry_tensor_get(ry_optim_slot_find(o, "exp_avg")->views[1], 2), 2.0);
    assert_null(ry_optim_slot_find(o, "sum"));
    assert_null(ry_optim_slot(o, 2));
    assert_null(ry_optim_slot_name(o, -1));
    assert_int_equal(ry_optim_set_param_steps(o, 2, 1, &err), RY_ERR);
    assert_int_equal(ry_optim_set_param_steps(o, 0, -1, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "out of range"));
    /* A count that is no whole number (a bad file) stops the step before any change. */
    assert_int_equal(ry_optim_set_param_steps(o, 0, 4, &err), RY_OK);
    assert_int_equal(ry_optim_param_steps(o, 0), 4);
    ry_tensor_set(ry_optim_steps(o)->views[1], 0, 1.5);
    ry_params_fill(g32, 1);
    ry_param_set *g64 = ry_params_like(p);
    assert_int_equal(ry_optim_step(o, p, g64, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "'b' has step count 1.5"));
    NEAR(ry_tensor_get(p->views[0], 0), 2.0);
    assert_int_equal(ry_optim_param_steps(o, 0), 4);
    ry_tensor_set(ry_optim_steps(o)->views[1], 0, 0);
    assert_int_equal(ry_optim_step(o, p, g64, &err), RY_OK);
    assert_int_equal(ry_optim_param_steps(o, 0), 5);
    assert_int_equal(ry_optim_param_steps(o, 1), 1);
    ry_params_free(g64);
    ry_optim_free(o);
    ry_optim_free(NULL);
    ry_params_free(p);
    ry_params_free(g32);
    ry_params_free(other);
    ry_params_free(swapped);
    ry_params_free(reshaped);
}

static void test_kind_names(void **state) {
    (void)state;
    for (int k = 0; k < RY_OPTIM_KIND_COUNT; k++) {
        ry_optim_kind back;
        assert_true(ry_optim_kind_parse(ry_optim_kind_name((ry_optim_kind)k), &back));
        assert_int_equal(back, k);
    }
    ry_optim_kind back = RY_OPTIM_SGD;
    assert_false(ry_optim_kind_parse("lbfgs", &back));
    assert_string_equal(ry_optim_kind_name(RY_OPTIM_ADAMW), "adamw");
    assert_string_equal(ry_optim_kind_name((ry_optim_kind)77), "?");
    /* torch's defaults */
    ry_optim_config c = ry_optim_defaults(RY_OPTIM_ADAMW);
    NEAR(c.weight_decay, 1e-2);
    NEAR(c.beta2, 0.999);
    c = ry_optim_defaults(RY_OPTIM_ADAGRAD);
    NEAR(c.eps, 1e-10);
    NEAR(c.lr, 1e-2);
    c = ry_optim_defaults(RY_OPTIM_RMSPROP);
    NEAR(c.alpha, 0.99);
}

/* Every allocation of ry_optim_new failing in turn: an error, no leak. */
static void test_out_of_memory(void **state) {
    (void)state;
    ry_param_set *p = wb_set(RY_FLOAT32);
    ry_optim_config c = ry_optim_defaults(RY_OPTIM_RMSPROP);
    c.momentum = 0.5;
    c.centered = true;
    int failures = 0;
    for (long n = 0; n < 200; n++) {
        ry_optimizer *o = NULL;
        ry_error err;
        ry_alloc_fail_after(n);
        ry_status st = ry_optim_new(&c, p, &o, &err);
        ry_alloc_fail_after(-1);
        if (st == RY_OK) {
            assert_int_equal(ry_optim_slot_count(o), 3);
            ry_optim_free(o);
            break;
        }
        assert_null(o);
        assert_non_null(strstr(err.msg, "out of memory"));
        failures++;
    }
    assert_true(failures > 5);
    ry_params_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_momentum_by_hand),
        cmocka_unit_test(test_sgd_variants_by_hand),
        cmocka_unit_test(test_adam_by_hand),
        cmocka_unit_test(test_amsgrad_by_hand),
        cmocka_unit_test(test_adagrad_by_hand),
        cmocka_unit_test(test_rmsprop_by_hand),
        cmocka_unit_test(test_torch_trajectories),
        cmocka_unit_test(test_schedules_match_torch),
        cmocka_unit_test(test_schedules_by_hand),
        cmocka_unit_test(test_schedule_drives_optimizer),
        cmocka_unit_test(test_schedule_errors),
        cmocka_unit_test(test_clip_matches_torch),
        cmocka_unit_test(test_clip_by_hand),
        cmocka_unit_test(test_find_nonfinite),
        cmocka_unit_test(test_training_loop_matches_torch),
        cmocka_unit_test(test_frozen_and_mask),
        cmocka_unit_test(test_resume_is_exact),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_layout_errors),
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
