/*
 * test_target.c: targets as values (src/backend/target.h). The CPU target
 * answers a kernel, with its facts, for every operator of the registry;
 * targets are found by name with clear errors; a target without a kernel
 * for an operator makes compiling a program that calls it fail at the
 * call's location (never a silent fallback); and the compiled engine, the
 * trainer and the optimizer reach memory and the training kernels only
 * through the target they were handed: a target that wraps the CPU's
 * functions and counts the calls sees every one of them, and gives the
 * CPU's parameters bit for bit.
 */
#include <stdlib.h>
#include <string.h>

#include "relayc/train.h"
#include "test_util.h"

/* ---- the CPU's kernel table ---- */

static void test_cpu_has_every_operator(void **s) {
    const ry_target *cpu = ry_target_cpu();
    assert_string_equal(ry_target_name(cpu), "cpu");
    for (int i = 0; i < ry_op_count(); i++) {
        const ry_op *op = ry_op_at(i);
        assert_int_equal(ry_op_index(op), i);
        const ry_kernel *k = ry_target_kernel(cpu, op);
        if (!k || !k->fn) fail_msg("%s has no CPU kernel", op->name);
        assert_string_equal(k->op, op->name);
    }
    ry_op stray = *ry_op_find("add"); /* a copy is not a registry entry */
    assert_int_equal(ry_op_index(&stray), -1);
    assert_null(ry_target_kernel(cpu, &stray));
}

static unsigned flags_of(const char *name) {
    return ry_target_kernel(ry_target_cpu(), ry_op_find(name))->flags;
}

static void test_kernel_facts(void **s) {
    assert_int_equal(flags_of("add"), RY_KERNEL_INPLACE | RY_KERNEL_ROWS);
    assert_int_equal(flags_of("sigmoid"), RY_KERNEL_INPLACE);
    assert_int_equal(flags_of("zeros_like"), RY_KERNEL_INPLACE | RY_KERNEL_ROWS);
    assert_int_equal(flags_of("reshape"), RY_KERNEL_ROWS);
    assert_int_equal(flags_of("scatter_nd"), RY_KERNEL_ROWS);
    assert_int_equal(flags_of("fused.elemwise3"), RY_KERNEL_INPLACE);
    assert_int_equal(flags_of("fused.matmul4"), RY_KERNEL_INPLACE_EPILOGUE);
    /* GEMMs, reductions, softmax and layout changes read after writing */
    const char *never[] = {"nn.dense", "sum", "nn.softmax", "transpose", "nn.conv2d"};
    for (size_t i = 0; i < sizeof never / sizeof *never; i++)
        assert_int_equal(flags_of(never[i]), 0);
}

/* Target-independent facts live in the registry. */
static void test_registry_facts(void **s) {
    assert_true(ry_op_find("nn.dropout")->random);
    assert_false(ry_op_find("add")->random);
    assert_true(ry_op_find("zeros_like")->zeros);
    assert_true(ry_op_find("zeros")->zeros);
    assert_false(ry_op_find("ones_like")->zeros);
    const char *movable[] = {"nn.dense", "nn.matmul", "nn.batch_matmul", "nn.bias_add",
                             "transpose", "add", "subtract", "multiply", "negative",
                             "sigmoid", "tanh", "exp"};
    int n = 0;
    for (int i = 0; i < ry_op_count(); i++) n += ry_op_at(i)->movable;
    assert_int_equal(n, (int)(sizeof movable / sizeof *movable));
    for (size_t i = 0; i < sizeof movable / sizeof *movable; i++)
        assert_true(ry_op_find(movable[i])->movable);
}

static void test_find(void **s) {
    const ry_target *t = NULL;
    ry_error err;
    assert_int_equal(ry_target_find("cpu", &t, &err), RY_OK);
    assert_ptr_equal(t, ry_target_cpu());
#ifdef RY_HAVE_CUDA
    /* built in: a device, or the clean error that says why there is none */
    if (ry_target_find("cuda", &t, &err) == RY_ERR) {
        assert_null(t);
        assert_true(strncmp(err.msg, "no CUDA device", 14) == 0);
    }
#else
    assert_int_equal(ry_target_find("cuda", &t, &err), RY_ERR);
    assert_null(t);
    assert_string_equal(err.msg, "target cuda is not built into this relayc");
#endif
    assert_int_equal(ry_target_find("tpu", &t, &err), RY_ERR);
    assert_string_equal(err.msg, "unknown target 'tpu' (known: cpu, opencl, cuda)");
}

/* ---- a target without a kernel ---- */

static const ry_kernel *no_dense(const ry_op *op) {
    return strcmp(op->name, "nn.dense") == 0 ? NULL : ry_target_kernel(ry_target_cpu(), op);
}

static const char *DENSE =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(4, 3), float32]) {\n"
    "  %0 = nn.dense(%x, %w, units=4);\n"
    "  nn.relu(%0)\n"
    "}\n";

static void test_missing_kernel_is_a_compile_error(void **s) {
    ry_target partial = *ry_target_cpu();
    partial.name = "partial";
    partial.kernel = no_dense;
    ry_module *m = test_parse(DENSE, true);
    ry_vm_program *p = NULL;
    ry_error err;
    assert_int_equal(ry_vm_compile(m, &partial, &p, &err), RY_ERR);
    assert_null(p);
    assert_string_equal(err.msg, "vm: operator nn.dense has no kernel on target partial");
    assert_int_equal(err.line, 3);
    assert_int_equal(err.col, 8);
    /* the host path says the same */
    ry_arena *a = ry_arena_new();
    int64_t sx[2] = {2, 3}, sw[2] = {4, 3};
    ry_tensor *in[2] = {ry_tensor_new(RY_FLOAT32, 2, sx), ry_tensor_new(RY_FLOAT32, 2, sw)};
    ry_type *types[2] = {ry_type_of_tensor(a, in[0]), ry_type_of_tensor(a, in[1])};
    ry_kernel_ctx kc = {.err = &err};
    ry_type *ot;
    int nout;
    ry_tensor **out;
    assert_int_equal(ry_op_run(&partial, ry_op_find("nn.dense"), NULL, a, 2, types, 2, in, &kc,
                               &ot, &nout, &out),
                     RY_ERR);
    assert_string_equal(err.msg, "nn.dense has no kernel on target partial");
    ry_tensor_release(in[0]);
    ry_tensor_release(in[1]);
    ry_arena_free(a);
    ry_module_free(m);
}

/* ---- everything goes through the target ---- */

static struct {
    long kernel, allocator, pool_new, pool_allocator, update, scan, add, clip, zero;
} calls;

static const ry_target *cpu(void) { return ry_target_cpu(); }
static const ry_kernel *c_kernel(const ry_op *op) { calls.kernel++; return cpu()->kernel(op); }
static ry_allocator *c_allocator(void) { calls.allocator++; return cpu()->allocator(); }
static ry_pool *c_pool_new(void) { calls.pool_new++; return cpu()->pool_new(); }
static ry_allocator *c_pool_allocator(ry_pool *p) {
    calls.pool_allocator++;
    return cpu()->pool_allocator(p);
}
static void c_update(const ry_optim_config *c, const ry_update_args *a) {
    calls.update++;
    cpu()->update(c, a);
}
static int64_t c_scan(const ry_tensor *t, const int64_t *rows, int64_t nrows, double *norm) {
    calls.scan++;
    return cpu()->grad_scan(t, rows, nrows, norm);
}
static bool c_add(ry_tensor *d, const ry_tensor *x, int64_t lo_d, int64_t lo_x, int64_t n,
                  bool first) {
    calls.add++;
    return cpu()->grad_add(d, x, lo_d, lo_x, n, first);
}
static void c_clip(ry_tensor *t, int64_t lo, int64_t n, double c) {
    calls.clip++;
    cpu()->grad_clip(t, lo, n, c);
}
static void c_zero(ry_tensor *t, int64_t lo, int64_t n) {
    calls.zero++;
    cpu()->grad_zero(t, lo, n);
}

static ry_target counting(void) {
    ry_target t = *ry_target_cpu();
    t.name = "counting";
    t.kernel = c_kernel;
    t.allocator = c_allocator;
    t.pool_new = c_pool_new;
    t.pool_allocator = c_pool_allocator;
    t.update = c_update;
    t.grad_scan = c_scan;
    t.grad_add = c_add;
    t.grad_clip = c_clip;
    t.grad_zero = c_zero;
    return t;
}

static const char *MLP =
    "#[version = \"0.0.5\"]\n"
    "// data: x y\n"
    "// init: w1=kaiming_uniform b1=zeros w2=xavier_uniform b2=zeros\n"
    "def @loss(%x: Tensor[(4, 4), float32], %y: Tensor[(4), int32], %w1: Tensor[(8, 4), "
    "float32], %b1: Tensor[(8), float32], %w2: Tensor[(3, 8), float32], %b2: Tensor[(3), "
    "float32]) -> float32 {\n"
    "  %0 = nn.relu(nn.bias_add(nn.dense(%x, %w1, units=8), %b1));\n"
    "  %1 = nn.log_softmax(nn.bias_add(nn.dense(%0, %w2, units=3), %b2), axis=-1);\n"
    "  %2 = one_hot(%y, 1f, 0f, depth=3, axis=-1, dtype=\"float32\");\n"
    "  negative(mean(sum(multiply(%1, %2), axis=[1])))\n"
    "}\n";

/* An embedding: its gradient is row-sparse, summed and zeroed by rows. */
static const char *EMBED =
    "#[version = \"0.0.5\"]\n"
    "// data: x y\n"
    "// init: e=normal(1)\n"
    "def @loss(%x: Tensor[(4), int32], %y: Tensor[(4), int32], %e: Tensor[(10, 3), float32]) "
    "-> float32 {\n"
    "  %0 = nn.log_softmax(take(%e, %x, axis=0), axis=-1);\n"
    "  %1 = one_hot(%y, 1f, 0f, depth=3, axis=-1, dtype=\"float32\");\n"
    "  negative(mean(sum(multiply(%0, %1), axis=[1])))\n"
    "}\n";

/* Three steps of a model on target t (NULL: the CPU), two calls each
 * (gradients summed in the slab), clipped by value and by norm; returns
 * the trainer. x is (4, 4) float32 for the MLP, (4) int32 for EMBED. */
static ry_trainer *train_on(const char *text, const ry_target *t) {
    ry_train_opts o = ry_train_defaults();
    o.target = t;
    o.optim = ry_optim_defaults(RY_OPTIM_ADAM);
    o.clip_value = 0.5;
    o.clip_norm = 1.0;
    ry_trainer *tr = NULL;
    ry_error err;
    if (ry_trainer_new("model.relay", text, strlen(text), &o, &tr, &err)) fail_msg("%s", err.msg);
    bool embed = text == EMBED;
    int64_t sx[2] = {4, 4}, sy[1] = {4};
    ry_tensor *x = embed ? ry_tensor_new(RY_INT32, 1, sy) : ry_tensor_new(RY_FLOAT32, 2, sx);
    ry_tensor *y = ry_tensor_new(RY_INT32, 1, sy);
    for (int step = 0; step < 3; step++) {
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < x->size; i++) {
                int v = (i * 7 + step + k) % 5;
                if (embed) ((int32_t *)x->data)[i] = v + k;
                else ((float *)x->data)[i] = (float)v - 2;
            }
            for (int i = 0; i < 4; i++) ((int32_t *)y->data)[i] = (i + step + k) % 3;
            ry_value *args[2] = {ry_value_tensor(ry_tensor_retain(x)),
                                 ry_value_tensor(ry_tensor_retain(y))};
            double loss;
            if (ry_trainer_accumulate(tr, 2, args, &loss, &err)) fail_msg("%s", err.msg);
            ry_value_release(args[0]);
            ry_value_release(args[1]);
        }
        if (ry_trainer_apply(tr, &err)) fail_msg("%s", err.msg);
    }
    ry_tensor_release(x);
    ry_tensor_release(y);
    return tr;
}

static void same_params(ry_trainer *a, ry_trainer *b) {
    ry_param_set *p = ry_trainer_params(a), *q = ry_trainer_params(b);
    assert_memory_equal(p->slab->data, q->slab->data, ry_tensor_nbytes(p->slab));
}

static void test_trainer_runs_through_its_target(void **s) {
    ry_target t = counting();
    memset(&calls, 0, sizeof calls);
    ry_trainer *on_t = train_on(MLP, &t);
    ry_trainer *on_cpu = train_on(MLP, NULL);
    assert_true(calls.kernel > 0);    /* the program's kernels were the target's */
    assert_true(calls.pool_new >= 1); /* and its result buffers */
    assert_true(calls.pool_allocator + calls.allocator > 0);
    assert_true(calls.update >= 3 * 4); /* every parameter, every step */
    assert_true(calls.scan >= 3 * 4);   /* clip by norm scans each gradient */
    assert_true(calls.add >= 3 * 4);    /* the second call adds into the slab */
    assert_true(calls.clip >= 3 * 4);
    same_params(on_t, on_cpu);
    ry_trainer_free(on_t);
    ry_trainer_free(on_cpu);
    /* row-sparse gradients: rows added, clipped, and zeroed for the next step */
    memset(&calls, 0, sizeof calls);
    on_t = train_on(EMBED, &t);
    on_cpu = train_on(EMBED, NULL);
    assert_true(calls.add > 0 && calls.clip > 0 && calls.update > 0 && calls.scan > 0);
    assert_true(calls.zero > 0);
    same_params(on_t, on_cpu);
    ry_trainer_free(on_t);
    ry_trainer_free(on_cpu);
}

static void test_interpreter_is_cpu_only(void **s) {
    ry_target t = counting();
    ry_train_opts o = ry_train_defaults();
    o.target = &t;
    o.engine = RY_ENGINE_INTERP;
    ry_trainer *tr = NULL;
    ry_error err;
    assert_int_equal(ry_trainer_new("mlp.relay", MLP, strlen(MLP), &o, &tr, &err), RY_ERR);
    assert_null(tr);
    assert_string_equal(err.msg, "the interpreter runs on the CPU target only, not counting");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_has_every_operator),
        cmocka_unit_test(test_kernel_facts),
        cmocka_unit_test(test_registry_facts),
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_missing_kernel_is_a_compile_error),
        cmocka_unit_test(test_trainer_runs_through_its_target),
        cmocka_unit_test(test_interpreter_is_cpu_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
