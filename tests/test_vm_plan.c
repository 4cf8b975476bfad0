/*
 * test_vm_plan.c: the VM's memory plan and in-place updates (vm_plan.c,
 * vm_ops.c), and separate VMs on one module in two threads. With the plan
 * on, every tests/run and tests/corpus program and its gradient (before
 * and after ry_optimize) gives bitwise what it gives with the plan off,
 * call after call; a steady-state MLP training step allocates nothing; an
 * in-place update never changes a value something else still holds (a
 * later use, a tuple, a ref, a closure, the caller).
 */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>

#include "test_programs.h"
#include "test_util.h"
#include "relayc/ad.h"
#include "relayc/pass.h"
#include "relayc/vm.h"

/* ---- helpers ---- */

static void assert_same(const ry_value *a, const ry_value *b) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->kind, b->kind);
    switch (a->kind) {
    case RY_VAL_TENSOR:
        assert_int_equal(a->tensor->dtype, b->tensor->dtype);
        assert_true(ry_tensor_same_shape(a->tensor, b->tensor));
        if (memcmp(a->tensor->data, b->tensor->data, ry_tensor_nbytes(a->tensor)) != 0)
            fail_msg("tensors differ");
        return;
    case RY_VAL_TUPLE:
        assert_int_equal(a->tuple.n, b->tuple.n);
        for (int i = 0; i < a->tuple.n; i++) assert_same(a->tuple.fields[i], b->tuple.fields[i]);
        return;
    case RY_VAL_ADT:
        assert_ptr_equal(a->adt.ctor, b->adt.ctor);
        for (int i = 0; i < a->adt.n; i++) assert_same(a->adt.fields[i], b->adt.fields[i]);
        return;
    case RY_VAL_REF: assert_same(a->ref.value, b->ref.value); return;
    default: return;
    }
}

/* A deep copy of v's tensors (tuples and ADTs rebuilt), so that later
 * calls cannot change what is compared. */
static ry_value *snapshot(const ry_value *v) {
    switch (v->kind) {
    case RY_VAL_TENSOR: return ry_value_tensor(ry_tensor_copy(v->tensor));
    case RY_VAL_TUPLE: {
        ry_value *f[64];
        assert_true(v->tuple.n <= 64);
        for (int i = 0; i < v->tuple.n; i++) f[i] = snapshot(v->tuple.fields[i]);
        return ry_value_tuple(v->tuple.n, f);
    }
    case RY_VAL_ADT: {
        ry_value *f[64];
        assert_true(v->adt.n <= 64);
        for (int i = 0; i < v->adt.n; i++) f[i] = snapshot(v->adt.fields[i]);
        return ry_value_adt(v->adt.ctor, v->adt.n, f);
    }
    case RY_VAL_REF: return ry_value_ref(snapshot(v->ref.value));
    default: return ry_value_retain((ry_value *)v);
    }
}

static ry_module *load(const char *path) {
    ry_module *m = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_module_parse_file(path, &m, &err) || ry_module_typecheck(m, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("cannot load %s: %s", path, err.msg);
    }
    return m;
}

static ry_vm_program *compile_ok(ry_module *m) {
    ry_vm_program *p = NULL;
    ry_error err;
    if (ry_vm_compile(m, NULL, &p, &err) != RY_OK) fail_msg("vm compile: %s", err.msg);
    return p;
}

static ry_value *call_ok(ry_vm_program *p, const char *entry, int n, ry_value **args,
                         const ry_vm_opts *o) {
    ry_value *v = NULL;
    ry_error err;
    if (ry_vm_call(p, entry, n, args, o, &v, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("vm call @%s: %s", entry, err.msg);
    }
    return v;
}

/* entry with the plan off, then three times with it on (the second and
 * third find the first's buffers in their slots): all bitwise equal.
 * Results of earlier calls are held while later calls run, then compared
 * again, so a reused buffer that was still held would show. */
static void plan_matches(ry_module *m, const char *entry, int n, ry_value **args) {
    ry_vm_program *p = compile_ok(m);
    ry_vm_opts off = {.no_plan = true};
    ry_value *want = call_ok(p, entry, n, args, &off), *keep = snapshot(want);
    ry_value *got[3];
    for (int i = 0; i < 3; i++) {
        got[i] = call_ok(p, entry, n, args, NULL);
        assert_same(got[i], keep);
    }
    ry_value_release(got[0]);
    ry_value *again = call_ok(p, entry, n, args, NULL);
    assert_same(again, keep);
    for (int i = 1; i < 3; i++) assert_same(got[i], keep);
    assert_same(want, keep);
    for (int i = 1; i < 3; i++) ry_value_release(got[i]);
    ry_value_release(again);
    ry_value_release(want);
    ry_value_release(keep);
    ry_vm_free(p);
}

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static double rnd(void) { return test_rnd(&rng_state); }

/* @main of m with random arguments (their count in *n), or false. */
static bool random_args(ry_module *m, ry_value **args, int *n) {
    const ry_global *g = ry_module_find_global(m, "main");
    *n = 0;
    if (!g || g->func->func.nparams > 32) return false;
    for (int i = 0; i < g->func->func.nparams; i++) {
        const ry_var *p = g->func->func.params[i];
        if (!(args[*n] = test_random_value(p->annot ? p->annot : p->type, &rng_state))) return false;
        (*n)++;
    }
    return true;
}

/* ---- every program, plan on and off ---- */

static void programs_same_with_and_without_plan(void **state) {
    (void)state;
    const char *dirs[2] = {"tests/run", "tests/corpus"};
    int ran = 0, grads = 0;
    for (int d = 0; d < 2; d++) {
        char names[64][128];
        int n = test_relay_files(dirs[d], names, 64);
        for (int k = 0; k < n; k++) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s.relay", dirs[d], names[k]);
            ry_module *m = load(path);
            ry_value *args[32];
            int na = 0;
            ry_value *probe = NULL;
            ry_error err;
            if (random_args(m, args, &na) &&
                ry_interp_call(m, "main", na, args, NULL, &probe, &err) == RY_OK) {
                ry_value_release(probe);
                plan_matches(m, "main", na, args);
                ran++;
                const char *gname = NULL;
                if (ry_grad(m, "main", NULL, NULL, &gname, &err) == RY_OK) {
                    plan_matches(m, gname, na, args);
                    if (ry_optimize(m, 2, &err) != RY_OK) fail_msg("optimize %s: %s", path, err.msg);
                    plan_matches(m, gname, na, args);
                    grads++;
                }
            }
            for (int i = 0; i < na; i++) ry_value_release(args[i]);
            ry_module_free(m);
        }
    }
    print_message("plan on = plan off on %d programs and %d gradient programs\n", ran, grads);
    assert_true(ran >= 25);
    assert_true(grads >= 15);
}

/* ---- a training step of the MLP allocates nothing once warm ---- */

typedef struct mlp {
    ry_module *m;
    const char *gname;
    int n;
    ry_value *args[8];
} mlp;

static void mlp_setup(mlp *s, int level, int batch) {
    ry_error err;
    s->m = load("models/mlp.relay");
    s->gname = NULL;
    if (ry_grad(s->m, "loss", NULL, NULL, &s->gname, &err) != RY_OK) fail_msg("grad: %s", err.msg);
    if (level && ry_optimize(s->m, level, &err) != RY_OK) fail_msg("optimize: %s", err.msg);
    const ry_global *g = ry_module_find_global(s->m, s->gname);
    assert_non_null(g);
    s->n = g->func->func.nparams;
    assert_int_equal(s->n, 8);
    for (int i = 0; i < s->n; i++) {
        const ry_type *t = g->func->func.params[i]->annot;
        int64_t shape[RY_MAX_RANK];
        for (int d = 0; d < t->tensor.ndim; d++)
            shape[d] = t->tensor.dims[d].kind == RY_DIM_CONST ? t->tensor.dims[d].value : batch;
        ry_tensor *x = ry_tensor_new(t->tensor.dtype, t->tensor.ndim, shape);
        for (int64_t j = 0; j < x->size; j++)
            ry_tensor_set(x, j, x->dtype == RY_INT32 ? (double)(j % 10) : 0.1 * (2 * rnd() - 1));
        s->args[i] = ry_value_tensor(x);
    }
}

static void mlp_free(mlp *s) {
    for (int i = 0; i < s->n; i++) ry_value_release(s->args[i]);
    ry_module_free(s->m);
}

/* How many allocations a call makes: the least n for which it succeeds
 * when allocation n and later ones fail (a failed call leaves the program
 * fit for the next). */
static long allocs_of_call(ry_vm_program *p, mlp *s, const ry_vm_opts *o, bool kernel_only,
                           ry_value **out) {
    for (long n = 0;; n++) {
        ry_error err;
        *out = NULL;
        ry_alloc_fail_after(n);
        ry_status rc = ry_vm_call(p, s->gname, s->n, s->args, o, out, &err);
        ry_alloc_fail_after(-1);
        if (rc == RY_OK) return n;
        assert_null(*out);
        if (kernel_only && (strstr(err.msg, "vm") || strstr(err.msg, "result") ||
                            strcmp(err.msg, "out of memory") == 0))
            fail_msg("allocation %ld of a warm step is the vm's: %s", n, err.msg);
    }
}

/* A warm step allocates nothing for the VM: every operator result, value,
 * tuple, frame and register comes from the plan. What it still allocates
 * are the kernels' own scratch buffers (log_softmax's and the reductions'
 * accumulators), each failure of which names its kernel. */
static void mlp_step_allocates_nothing(void **state) {
    (void)state;
    mlp s;
    mlp_setup(&s, 2, 64);
    ry_vm_program *p = compile_ok(s.m);
    ry_vm_opts off = {.no_plan = true};
    ry_value *want = call_ok(p, s.gname, s.n, s.args, &off);
    for (int i = 0; i < 2; i++) ry_value_release(call_ok(p, s.gname, s.n, s.args, NULL));
    ry_vm_stats st0, st1;
    ry_vm_get_stats(p, &st0);
    ry_value *v = call_ok(p, s.gname, s.n, s.args, NULL);
    ry_vm_get_stats(p, &st1);
    assert_same(v, want);
    ry_value_release(v);
    assert_int_equal(st1.ran_fresh, st0.ran_fresh);
    assert_true(st1.ran_reused - st0.ran_reused >= 20);
    assert_true(st1.ran_inplace > st0.ran_inplace); /* adds of adjoints, where's zeros */
    long warm = allocs_of_call(p, &s, NULL, true, &v);
    assert_same(v, want);
    ry_value_release(v);
    long cold = allocs_of_call(p, &s, &off, false, &v);
    assert_same(v, want);
    ry_value_release(v);
    print_message("mlp step: %d slots, %ld results in kept buffers, %ld in place; allocations "
                  "%ld with the plan (kernel scratch), %ld without\n", st1.nslots,
                  st1.ran_reused - st0.ran_reused, st1.ran_inplace - st0.ran_inplace, warm, cold);
    assert_true(cold >= warm + 2 * (st1.ran_reused - st0.ran_reused));
    ry_value_release(want);
    ry_vm_free(p);
    mlp_free(&s);
}

/* ---- in place never changes a value that is still held ---- */

static const char *alias_src =
    "#[version = \"0.0.5\"]\n"
    /* the argument of negative is used again afterwards */
    "def @later(%x: Tensor[(4), float32]) {\n"
    "  let %a = exp(%x);\n"
    "  let %b = negative(%a);\n"
    "  (%b, add(%a, 1f))\n"
    "}\n"
    /* a tuple holds it */
    "def @tuple(%x: Tensor[(4), float32]) {\n"
    "  let %a = exp(%x);\n"
    "  let %t = (%a, %x);\n"
    "  let %b = negative(%a);\n"
    "  (%t, %b)\n"
    "}\n"
    /* a ref holds it; the next write goes to another ref */
    "def @ref(%x: Tensor[(4), float32]) {\n"
    "  let %a = exp(%x);\n"
    "  let %r = ref(%a);\n"
    "  let %s = ref(%x);\n"
    "  let %b = negative(ref_read(%r));\n"
    "  let %u = ref_write(%s, %b);\n"
    "  (ref_read(%r), ref_read(%s))\n"
    "}\n"
    /* a closure captures it */
    "def @closure(%x: Tensor[(4), float32]) {\n"
    "  let %a = exp(%x);\n"
    "  let %f = fn () { %a };\n"
    "  let %b = negative(%a);\n"
    "  (%f(), %b)\n"
    "}\n"
    /* the caller's argument (dies inside, but the caller holds it) */
    "def @param(%x: Tensor[(4), float32]) { negative(%x) }\n"
    /* accumulation into a ref, with the old value still held */
    "def @acc(%x: Tensor[(4), float32]) {\n"
    "  let %r = ref(zeros_like(%x));\n"
    "  let %u1 = ref_write(%r, add(ref_read(%r), %x));\n"
    "  let %old = ref_read(%r);\n"
    "  let %u2 = ref_write(%r, add(ref_read(%r), %x));\n"
    "  let %u3 = ref_write(%r, add(ref_read(%r), %x));\n"
    "  (%old, ref_read(%r))\n"
    "}\n"
    /* accumulation with nothing else holding the old value: in place */
    "def @acc_alone(%x: Tensor[(4), float32]) {\n"
    "  let %r = ref(exp(%x));\n"
    "  let %u1 = ref_write(%r, add(ref_read(%r), %x));\n"
    "  let %u2 = ref_write(%r, multiply(ref_read(%r), %x));\n"
    "  ref_read(%r)\n"
    "}\n"
    /* a chain that dies link by link: in place */
    "def @chain(%x: Tensor[(4), float32]) {\n"
    "  let %a = exp(%x);\n"
    "  let %b = negative(%a);\n"
    "  let %c = add(%b, %x);\n"
    "  sigmoid(%c)\n"
    "}\n"
    /* a branch: the value dies on one side only */
    "def @branch(%x: Tensor[(4), float32], %c: bool) {\n"
    "  let %a = exp(%x);\n"
    "  let %b = if (%c) { negative(%a) } else { add(%a, %a) };\n"
    "  (%b, sum(%a))\n"
    "}\n";

static void inplace_never_clobbers(void **state) {
    (void)state;
    ry_module *m = test_parse(alias_src, true);
    int64_t four = 4;
    ry_tensor *xt = ry_tensor_new(RY_FLOAT32, 1, &four);
    for (int i = 0; i < 4; i++) ry_tensor_set(xt, i, 0.25 * i - 0.3);
    ry_value *x = ry_value_tensor(xt), *keep = snapshot(x);
    const char *one[] = {"later", "tuple", "ref", "closure", "param", "acc", "acc_alone", "chain"};
    ry_vm_program *p = compile_ok(m);
    for (size_t k = 0; k < sizeof one / sizeof one[0]; k++) {
        ry_value *iv = NULL;
        ry_error err;
        if (ry_interp_call(m, one[k], 1, &x, NULL, &iv, &err) != RY_OK) fail_msg("%s", err.msg);
        for (int rep = 0; rep < 3; rep++) {
            ry_value *v = call_ok(p, one[k], 1, &x, NULL);
            assert_same(v, iv);
            ry_value_release(v);
        }
        assert_same(x, keep); /* the caller's argument is untouched */
        ry_value_release(iv);
    }
    for (int c = 0; c < 2; c++) {
        ry_value *args[2] = {x, ry_value_tensor(ry_tensor_scalar(RY_BOOL, c))}, *iv = NULL;
        ry_error err;
        if (ry_interp_call(m, "branch", 2, args, NULL, &iv, &err) != RY_OK) fail_msg("%s", err.msg);
        for (int rep = 0; rep < 3; rep++) {
            ry_value *v = call_ok(p, "branch", 2, args, NULL);
            assert_same(v, iv);
            ry_value_release(v);
        }
        ry_value_release(iv);
        ry_value_release(args[1]);
    }
    /* the updates that could be in place were */
    ry_vm_stats st0, st1;
    ry_vm_get_stats(p, &st0);
    ry_value_release(call_ok(p, "chain", 1, &x, NULL));
    ry_vm_get_stats(p, &st1);
    assert_int_equal(st1.ran_inplace - st0.ran_inplace, 3); /* negative, add, sigmoid */
    ry_value_release(call_ok(p, "acc_alone", 1, &x, NULL));
    ry_vm_get_stats(p, &st0);
    assert_int_equal(st0.ran_inplace - st1.ran_inplace, 2); /* add, multiply into the ref */
    ry_vm_free(p);
    ry_value_release(x);
    ry_value_release(keep);
    ry_module_free(m);
}

/* A result the caller still holds is not overwritten by the next call. */
static void held_results_survive(void **state) {
    (void)state;
    ry_module *m = test_parse(alias_src, true);
    ry_vm_program *p = compile_ok(m);
    int64_t four = 4;
    ry_value *xs[3];
    ry_value *vs[3];
    for (int k = 0; k < 3; k++) {
        ry_tensor *t = ry_tensor_new(RY_FLOAT32, 1, &four);
        for (int i = 0; i < 4; i++) ry_tensor_set(t, i, k + 0.1 * i);
        xs[k] = ry_value_tensor(t);
        vs[k] = call_ok(p, "chain", 1, &xs[k], NULL);
    }
    for (int k = 0; k < 3; k++) {
        ry_value *iv = NULL;
        ry_error err;
        assert_int_equal(ry_interp_call(m, "chain", 1, &xs[k], NULL, &iv, &err), RY_OK);
        assert_same(vs[k], iv);
        ry_value_release(iv);
        ry_value_release(vs[k]);
        ry_value_release(xs[k]);
    }
    ry_vm_free(p);
    ry_module_free(m);
}

/* The plan can be read: slots, and the in-place decisions. */
static void plan_prints(void **state) {
    (void)state;
    ry_module *m = test_parse(alias_src, true);
    ry_vm_program *p = compile_ok(m);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ry_vm_print_plan(p, f);
    fclose(f);
    /* a chain whose links die one by one shares one slot, in place */
    assert_non_null(strstr(buf, "@chain: 5 instructions, 1 slots"));
    assert_non_null(strstr(buf, "sigmoid -> slot"));
    assert_non_null(strstr(buf, "in place over argument 0"));
    assert_non_null(strstr(buf, "(accumulates into a ref)"));
    free(buf);
    ry_vm_stats st;
    ry_vm_get_stats(p, &st);
    assert_true(st.nslots > 0 && st.nplanned >= st.nslots / 2 && st.ninplace > 0);
    ry_vm_free(p);
    ry_module_free(m);
}

/* ---- two threads, two VMs, one module ---- */

typedef struct worker {
    mlp *s;
    ry_vm_program *p;
    ry_value *last;
    int steps;
    bool ok;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    ry_error err;
    w->ok = ry_vm_compile(w->s->m, NULL, &w->p, &err) == RY_OK;
    for (int i = 0; w->ok && i < w->steps; i++) {
        /* each thread its own argument values (value counts are not atomic) */
        ry_value *args[8];
        for (int k = 0; k < w->s->n; k++) args[k] = ry_value_tensor(ry_tensor_retain(w->s->args[k]->tensor));
        ry_value *v = NULL;
        w->ok = ry_vm_call(w->p, w->s->gname, w->s->n, args, NULL, &v, &err) == RY_OK;
        for (int k = 0; k < w->s->n; k++) ry_value_release(args[k]);
        ry_value_release(w->last);
        w->last = v;
    }
    return NULL;
}

static void two_threads_two_vms(void **state) {
    (void)state;
    for (int level = 1; level <= 2; level++) {
        mlp s;
        mlp_setup(&s, level, 16);
        ry_vm_program *p = compile_ok(s.m);
        ry_value *want = call_ok(p, s.gname, s.n, s.args, NULL);
        worker w[2] = {{.s = &s, .steps = 20}, {.s = &s, .steps = 20}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < 2; i++) {
            assert_true(w[i].ok);
            assert_same(w[i].last, want);
            ry_value_release(w[i].last);
            ry_vm_free(w[i].p);
        }
        ry_value_release(want);
        ry_vm_free(p);
        mlp_free(&s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(programs_same_with_and_without_plan),
        cmocka_unit_test(mlp_step_allocates_nothing),
        cmocka_unit_test(inplace_never_clobbers),
        cmocka_unit_test(held_results_survive),
        cmocka_unit_test(plan_prints),
        cmocka_unit_test(two_threads_two_vms),
    };
    /* VM_PLAN_ONLY=two_threads_two_vms runs one case (under helgrind, say) */
    if (getenv("VM_PLAN_ONLY")) cmocka_set_test_filter(getenv("VM_PLAN_ONLY"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
