/*
 * test_vm_pool.c: the VM's run-time reuse of memory and dispatch work, each
 * against the interpreter or the plain path bit for bit. A recursion whose
 * backward closures hold its forward values (fresh buffers each step) takes
 * them from the program's pool: after a warm-up a step makes no new
 * allocation and the pool stops growing; its buffers outlive the program
 * and may be freed on another thread. Learned signatures: a call whose
 * shapes change with the data takes the general path once per shape, for
 * as many shapes as VM_SIGS holds, and keeps learning beyond; an operator
 * with a tuple argument (concatenate) takes the fast path. zeros_like with
 * row-sparse values on hands out one known zero per call site. The block
 * cache gives blocks back on any thread and respects the failure hook.
 */
#include <pthread.h>

#include "test_util.h"

#include "relayc/ad.h"
#include "relayc/pass.h"
#include "relayc/vm.h"
#include "runtime/vm_impl.h"
#include "tensor/blockcache.h"

/* ---- helpers ---- */

static ry_value *call_ok(ry_vm_program *p, const char *entry, int n, ry_value **args,
                         const ry_vm_opts *o) {
    ry_value *out = NULL;
    ry_error err = {0};
    if (ry_vm_call(p, entry, n, args, o, &out, &err) != RY_OK) fail_msg("%s", err.msg);
    return out;
}

/* a and b hold the same tensors (in tuples and ADT values), bit for bit. */
static void assert_same(const ry_value *a, const ry_value *b) {
    assert_int_equal(a->kind, b->kind);
    if (a->kind == RY_VAL_TUPLE) {
        assert_int_equal(a->tuple.n, b->tuple.n);
        for (int i = 0; i < a->tuple.n; i++) assert_same(a->tuple.fields[i], b->tuple.fields[i]);
        return;
    }
    if (a->kind == RY_VAL_ADT) { /* the gradient of a List argument */
        assert_ptr_equal(a->adt.ctor, b->adt.ctor);
        for (int i = 0; i < a->adt.n; i++) assert_same(a->adt.fields[i], b->adt.fields[i]);
        return;
    }
    assert_int_equal(a->kind, RY_VAL_TENSOR);
    assert_true(ry_tensor_same_shape(a->tensor, b->tensor));
    assert_int_equal(a->tensor->dtype, b->tensor->dtype);
    assert_memory_equal(a->tensor->data, b->tensor->data, ry_tensor_nbytes(a->tensor));
}

static ry_tensor *ramp(int ndim, const int64_t *shape, double scale) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, ndim, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, scale * sin(0.7 * (double)i + 0.3));
    return t;
}

/* ---- a recursion whose closures hold its forward values ---- */

static const char *rnn_src =
    "#[version = \"0.0.5\"]\n"
    "type List { Cons(Tensor[(1, 8), float32], List), Nil }\n"
    "def @run(%l: List, %h: Tensor[(1, 8), float32], %w: Tensor[(8, 8), float32]) "
    "-> Tensor[(1, 8), float32] {\n"
    "  match (%l) {\n"
    "    Cons(%x, %t) => @run(%t, tanh(add(nn.dense(%h, %w, units=None), %x)), %w),\n"
    "    Nil => %h,\n"
    "  }\n"
    "}\n"
    "def @loss(%l: List, %h: Tensor[(1, 8), float32], %w: Tensor[(8, 8), float32]) -> float32 {\n"
    "  sum(@run(%l, %h, %w))\n"
    "}\n";

typedef struct rnn {
    ry_module *m;
    const char *g;
    ry_value *args[3];
} rnn;

static void rnn_setup(rnn *s, int len) {
    s->m = test_parse(rnn_src, true);
    ry_error err = {0};
    if (ry_grad(s->m, "loss", NULL, NULL, &s->g, &err) || ry_optimize(s->m, 2, &err))
        fail_msg("%s", err.msg);
    const ry_ctor *cons = ry_module_find_ctor(s->m, "Cons"), *nil = ry_module_find_ctor(s->m, "Nil");
    ry_value *l = ry_value_adt(nil, 0, NULL);
    for (int i = 0; i < len; i++) {
        ry_value *f[2] = {ry_value_tensor(ramp(2, (int64_t[]){1, 8}, 0.5 + 0.01 * i)), l};
        l = ry_value_adt(cons, 2, f);
    }
    s->args[0] = l;
    s->args[1] = ry_value_tensor(ramp(2, (int64_t[]){1, 8}, 0.1));
    s->args[2] = ry_value_tensor(ramp(2, (int64_t[]){8, 8}, 0.3));
}

static void rnn_free(rnn *s) {
    for (int i = 0; i < 3; i++) ry_value_release(s->args[i]);
    ry_module_free(s->m);
}

/* After a warm-up, a step allocates nothing of the VM's: its planned
 * results, the buffers its closures keep, the values and tensor headers
 * all come back from the pool and the block cache (only the kernels' own
 * scratch is allocated); the pool holds what one step needs. */
static void pool_keeps_steps_flat(void **state) {
    (void)state;
    rnn s;
    rnn_setup(&s, 30);
    ry_vm_program *p = NULL;
    ry_error err = {0};
    assert_int_equal(ry_vm_compile(s.m, NULL, &p, &err), RY_OK);
    ry_value *want = NULL;
    assert_int_equal(ry_interp_call(s.m, s.g, 3, s.args, NULL, &want, &err), RY_OK);
    ry_vm_opts off = {.no_plan = true};
    ry_value *plain = call_ok(p, s.g, 3, s.args, &off);
    assert_same(plain, want);
    ry_value_release(plain);
    long counts[6];
    long kept[6];
    for (int k = 0; k < 6; k++) {
        long before = ry_alloc_count();
        ry_value *v = call_ok(p, s.g, 3, s.args, NULL);
        counts[k] = ry_alloc_count() - before;
        assert_same(v, want);
        ry_value_release(v);
        kept[k] = p->target->pool_kept(p->pool);
    }
    print_message("allocations per step: %ld (first) %ld %ld %ld %ld %ld; pool keeps %ld buffers\n",
                  counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], kept[5]);
    assert_true(counts[0] > 30);           /* a fresh buffer per step of the recursion */
    for (int k = 3; k < 6; k++) {
        /* flat: what is left are the reductions' own scratch buffers */
        assert_int_equal(counts[k], counts[2]);
        assert_true(counts[k] <= 4);
        assert_int_equal(kept[k], kept[2]);
    }
    assert_true(kept[5] >= 30);
    ry_value_release(want);
    ry_vm_free(p);
    rnn_free(&s);
}

/* A result whose buffer came from a program's pool outlives the program
 * and is freed on another thread (the pool goes with its last buffer). */
static void *release_on_thread(void *arg) {
    ry_value_release(arg);
    return NULL;
}

static void pool_outlives_program(void **state) {
    (void)state;
    rnn s;
    rnn_setup(&s, 5);
    ry_vm_program *p = NULL;
    ry_error err = {0};
    assert_int_equal(ry_vm_compile(s.m, NULL, &p, &err), RY_OK);
    ry_value *a = call_ok(p, s.g, 3, s.args, NULL);
    ry_value *b = call_ok(p, s.g, 3, s.args, NULL);
    assert_same(a, b);
    ry_vm_free(p);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, release_on_thread, a), 0);
    pthread_join(th, NULL);
    ry_value_release(b);
    rnn_free(&s);
}

/* ---- learned signatures ---- */

static const char *poly_src =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(?, 3), float32], %y: Tensor[(2, 3), float32]) {\n"
    "  %0 = (%x, %y);\n"
    "  %1 = concatenate(%0, axis=0);\n"
    "  sigmoid(%1)\n"
    "}\n"
    "def @fixed(%x: Tensor[(4, 3), float32], %y: Tensor[(2, 3), float32]) {\n"
    "  concatenate((%x, %y), axis=0)\n"
    "}\n";

static long general_calls(ry_vm_program *p) {
    ry_vm_stats st;
    ry_vm_get_stats(p, &st);
    return st.ran_general;
}

/* runs @main on x of n rows against the interpreter */
static void poly_call(ry_vm_program *p, ry_module *m, ry_value *y, int64_t n) {
    ry_value *args[2] = {ry_value_tensor(ramp(2, (int64_t[]){n, 3}, 1.0 + 0.01 * (double)n)), y};
    ry_value *got = call_ok(p, "main", 2, args, NULL), *want = NULL;
    ry_error err = {0};
    assert_int_equal(ry_interp_call(m, "main", 2, args, NULL, &want, &err), RY_OK);
    assert_same(got, want);
    ry_value_release(got);
    ry_value_release(want);
    ry_value_release(args[0]);
}

static void signatures_learned_per_shape(void **state) {
    (void)state;
    ry_module *m = test_parse(poly_src, true);
    ry_vm_program *p = NULL;
    ry_error err = {0};
    assert_int_equal(ry_vm_compile(m, NULL, &p, &err), RY_OK);
    ry_value *y = ry_value_tensor(ramp(2, (int64_t[]){2, 3}, -0.5));
    /* a tuple argument of static tensors: the fast path from the start */
    ry_value *fx[2] = {ry_value_tensor(ramp(2, (int64_t[]){4, 3}, 2.0)), y};
    long g0 = general_calls(p);
    ry_value *got = call_ok(p, "fixed", 2, fx, NULL), *want = NULL;
    assert_int_equal(ry_interp_call(m, "fixed", 2, fx, NULL, &want, &err), RY_OK);
    assert_same(got, want);
    assert_int_equal(general_calls(p), g0);
    ry_value_release(got);
    ry_value_release(want);
    ry_value_release(fx[0]);
    /* 40 lengths: each op learns each once, then every call is fast */
    g0 = general_calls(p);
    for (int64_t n = 1; n <= 40; n++) poly_call(p, m, y, n);
    assert_int_equal(general_calls(p) - g0, 2 * 40); /* concatenate and sigmoid */
    g0 = general_calls(p);
    for (int64_t n = 40; n >= 1; n--) poly_call(p, m, y, n);
    assert_int_equal(general_calls(p), g0);
    /* more lengths than VM_SIGS holds: learning goes on (the oldest give
     * way), the recent ones stay fast, results stay right */
    for (int64_t n = 41; n <= 41 + VM_SIGS; n++) poly_call(p, m, y, n);
    g0 = general_calls(p);
    poly_call(p, m, y, 41 + VM_SIGS);
    poly_call(p, m, y, 40 + VM_SIGS);
    assert_int_equal(general_calls(p), g0);
    ry_value_release(y);
    ry_vm_free(p);
    ry_module_free(m);
}

/* ---- known zeros ---- */

static const char *zeros_src =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(?, 4), float32]) {\n"
    "  %0 = zeros_like(%x);\n"
    "  (%0, add(%0, %x))\n"
    "}\n";

static void zeros_like_shared(void **state) {
    (void)state;
    ry_module *m = test_parse(zeros_src, true);
    ry_vm_program *p = NULL;
    ry_error err = {0};
    assert_int_equal(ry_vm_compile(m, NULL, &p, &err), RY_OK);
    ry_vm_opts o = {.sparse_rows = true};
    ry_value *x3 = ry_value_tensor(ramp(2, (int64_t[]){3, 4}, 1.0));
    ry_value *x5 = ry_value_tensor(ramp(2, (int64_t[]){5, 4}, 1.0));
    ry_value *a = call_ok(p, "main", 1, &x3, &o), *b = call_ok(p, "main", 1, &x3, &o);
    ry_value *c = call_ok(p, "main", 1, &x5, &o);
    /* one known zero per call site while the shape repeats */
    assert_ptr_equal(a->tuple.fields[0], b->tuple.fields[0]);
    assert_ptr_not_equal(a->tuple.fields[0], c->tuple.fields[0]);
    ry_value *r[3] = {a, b, c}, *xs[3] = {x3, x3, x5};
    for (int k = 0; k < 3; k++) {
        const ry_tensor *z = r[k]->tuple.fields[0]->tensor;
        assert_int_equal(z->shape[0], xs[k]->tensor->shape[0]);
        for (int64_t i = 0; i < z->size; i++) assert_true(ry_tensor_get(z, i) == 0);
        ry_value *want = NULL;
        assert_int_equal(ry_interp_call(m, "main", 1, &xs[k], NULL, &want, &err), RY_OK);
        assert_same(r[k], want);
        ry_value_release(want);
    }
    ry_vm_free(p); /* the results keep their zeros */
    for (int64_t i = 0; i < 20; i++) assert_true(ry_tensor_get(c->tuple.fields[0]->tensor, i) == 0);
    for (int k = 0; k < 3; k++) ry_value_release(r[k]);
    ry_value_release(x3);
    ry_value_release(x5);
    ry_module_free(m);
}

/* ---- the block cache ---- */

static void *blocks_on_thread(void *arg) {
    void **blocks = arg;
    for (int i = 0; i < 64; i++) ry_block_put(blocks[i], 40 + (size_t)i);
    for (int i = 0; i < 64; i++) blocks[i] = ry_block_get(40 + (size_t)i);
    for (int i = 0; i < 64; i++) ry_block_put(blocks[i], 40 + (size_t)i);
    return NULL; /* its cache is freed as it exits */
}

static void block_cache(void **state) {
    (void)state;
    void *blocks[64];
    for (int i = 0; i < 64; i++) {
        blocks[i] = ry_block_get(40 + (size_t)i);
        assert_non_null(blocks[i]);
        memset(blocks[i], 0xab, 40 + (size_t)i);
    }
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, blocks_on_thread, blocks), 0);
    pthread_join(th, NULL);
    /* a freed block comes back for the next request of its size */
    void *a = ry_block_get(100);
    ry_block_put(a, 100);
    long before = ry_alloc_count();
    void *b = ry_block_get(100);
    assert_ptr_equal(a, b);
    assert_int_equal(ry_alloc_count(), before);
    ry_block_put(b, 100);
    /* an armed failure hook makes the next get fail, cached or not */
    ry_alloc_fail_after(0);
    assert_null(ry_block_get(100));
    ry_alloc_fail_after(-1);
    /* too large for a class: plain allocations */
    void *big = ry_block_get(4096);
    assert_non_null(big);
    ry_block_put(big, 4096);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pool_keeps_steps_flat),
        cmocka_unit_test(pool_outlives_program),
        cmocka_unit_test(signatures_learned_per_shape),
        cmocka_unit_test(zeros_like_shared),
        cmocka_unit_test(block_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
