/*
 * test_opencl.c: the OpenCL target against the CPU (PoCL runs it on this
 * machine's cores). The device layer: copies both ways, the caching
 * allocator (a repeated call allocates nothing from the driver: counted),
 * a device out-of-memory as an error, the kernel cache (a second build of
 * a kernel builds nothing; a fresh process loads it from the disk cache),
 * a host tensor handed to a device kernel as an error. Then programs:
 * each compiled for the CPU and for OpenCL from the same optimized module
 * and run on the same random inputs, every result compared (float32 rtol
 * 1e-5, float64 1e-12): elementwise operators with broadcasting, GEMMs
 * and their fused epilogues, reductions, softmax, layout; control flow
 * (if on a device tensor, recursion, ADT values, closures, refs); and
 * gradient programs of the AD transform. An operator the target has no
 * kernel for is a compile-time error at the call. Without an OpenCL
 * device every test skips with a message.
 */
#include <stdlib.h>
#include <unistd.h>

#include "test_opencl_util.h"

/* ---- the device layer ---- */

static void test_copies_round_trip(void **s) {
    NEED_DEVICE();
    ry_tensor *h = ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){3, 5});
    for (int64_t i = 0; i < h->size; i++) ry_tensor_set(h, i, uniform());
    ry_device_counters c0, c1;
    ry_target_counters(cl, &c0);
    ry_tensor *d, *back;
    ry_error err = {0};
    assert_int_equal(ry_tensor_to(cl, h, &d, &err), RY_OK);
    assert_int_equal(d->device.kind, ry_target_device(cl).kind);
    assert_true(d->device.kind != RY_DEVICE_CPU);
    assert_true(isnan(ry_tensor_get(d, 0))); /* the host never reads device memory */
    /* a view into the device buffer (as a parameter slab is carved) */
    ry_tensor *v = ry_tensor_view(d, 5 * sizeof(float), RY_FLOAT32, 1, (int64_t[]){5});
    assert_int_equal(ry_tensor_to(ry_target_cpu(), v, &back, &err), RY_OK);
    for (int i = 0; i < 5; i++) assert_true(ry_tensor_get(back, i) == ry_tensor_get(h, 5 + i));
    ry_target_counters(cl, &c1);
    assert_int_equal(c1.bytes_to_device - c0.bytes_to_device, 60);
    assert_int_equal(c1.bytes_to_host - c0.bytes_to_host, 20);
    char name[32];
    snprintf(name, sizeof name, "%s:0", test_device_target());
    assert_string_equal(ry_device_name(d->device), name);
    ry_tensor_release(back);
    ry_tensor_release(v);
    ry_tensor_release(d);
    ry_tensor_release(h);
}

static void test_allocator_reuses_buffers(void **s) {
    NEED_DEVICE();
    ry_allocator *a = cl->allocator();
    ry_tensor *t = ry_tensor_new_on(a, RY_FLOAT32, 1, (int64_t[]){1000});
    assert_non_null(t);
    ry_tensor_release(t);
    ry_device_counters c0, c1;
    ry_target_counters(cl, &c0);
    for (int i = 0; i < 50; i++) {
        /* 990..1000 floats share a size class */
        t = ry_tensor_new_on(a, RY_FLOAT32, 1, (int64_t[]){990 + i % 10});
        assert_non_null(t);
        assert_true(cl->capacity(t) >= 4000);
        ry_tensor_release(t);
    }
    ry_target_counters(cl, &c1);
    assert_int_equal(c1.driver_allocs, c0.driver_allocs);
}

static void test_device_out_of_memory_is_an_error(void **s) {
    NEED_DEVICE();
    /* over RELAYC_DEVICE_MEMORY_LIMIT (256M): NULL, never a crash */
    assert_null(ry_tensor_new_on(cl->allocator(), RY_FLOAT32, 1, (int64_t[]){100 << 20}));
    /* and a program whose result does not fit says so at the call */
    ry_module *m = test_parse("#[version = \"0.0.5\"]\n"
                              "def @main(%x: Tensor[(1), float32]) {\n"
                              "  broadcast_to(%x, shape=[100, 1024, 1024])\n}\n", true);
    ry_vm_program *p;
    ry_error err = {0};
    assert_int_equal(ry_vm_compile(m, cl, &p, &err), RY_OK);
    ry_value *x = ry_value_tensor(ry_tensor_zeros(RY_FLOAT32, 1, (int64_t[]){1})), *out;
    assert_int_equal(ry_vm_call(p, "main", 1, &x, NULL, &out, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "out of memory"));
    assert_int_equal(err.line, 3);
    ry_value_release(x);
    ry_vm_free(p);
    ry_module_free(m);
}

static void test_host_tensor_into_a_device_kernel_is_an_error(void **s) {
    NEED_DEVICE();
    ry_tensor *h = ry_tensor_zeros(RY_FLOAT32, 1, (int64_t[]){4});
    ry_tensor *in[2] = {h, h};
    ry_type *types[2];
    ry_arena *a = ry_arena_new();
    types[0] = types[1] = ry_type_of_tensor(a, h);
    ry_kernel_ctx kc = {0};
    ry_error err = {0};
    kc.err = &err;
    ry_type *rt;
    int nout;
    ry_tensor **res;
    ry_attrs attrs = {0};
    assert_int_equal(ry_op_run(cl, ry_op_find("add"), &attrs, a, 2, types, 2, in, &kc, &rt, &nout, &res),
                     RY_ERR);
    assert_non_null(strstr(err.msg, "argument 1 is on cpu"));
    ry_arena_free(a);
    ry_tensor_release(h);
}

static void test_kernel_cache(void **s) {
    NEED_DEVICE();
    if (ry_target_device(cl).kind != RY_DEVICE_OPENCL) {
        fprintf(stderr, "test_kernel_cache: OpenCL's cache; test_cuda checks CUDA's\n");
        skip();
    }
#ifdef RY_HAVE_OPENCL
    const char *src = "__kernel void k(__global float *o) { o[get_global_id(0)] = 7; }\n";
    ry_error err = {0};
    ry_device_counters c0, c1;
    ry_target_counters(cl, &c0);
    extern void *ry_cl_kernel(const char *, const char *, ry_span, ry_error *);
    assert_non_null(ry_cl_kernel(src, "k", RY_NO_SPAN, &err));
    assert_non_null(ry_cl_kernel(src, "k", RY_NO_SPAN, &err));
    ry_target_counters(cl, &c1);
    /* built (or loaded from the disk cache) once, then found in memory */
    assert_int_equal((c1.kernels_built + c1.kernels_loaded) - (c0.kernels_built + c0.kernels_loaded), 1);
    /* on disk: a file in RELAYC_CACHE_DIR */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s/opencl-*.bin >/dev/null 2>&1", getenv("RELAYC_CACHE_DIR"));
    assert_int_equal(system(cmd), 0);
    /* a kernel that does not build: the build log in a located error */
    assert_null(ry_cl_kernel("__kernel void k(void) { nonsense; }", "k", RY_NO_SPAN, &err));
    assert_non_null(strstr(err.msg, "does not build"));
#endif
}

#define V "#[version = \"0.0.5\"]\n"

static void test_elementwise_and_broadcast(void **s) {
    NEED_DEVICE();
    same_as_cpu(V "def @main(%a: Tensor[(3, 4, 5), float32], %b: Tensor[(4, 1), float32], %c: Tensor[(5), float32],\n"
                "          %k: Tensor[(3, 1, 5), bool], %e: Tensor[(0, 5), float32]) {\n"
                "  %0 = add(%a, %b); %1 = multiply(%0, %c); %2 = subtract(%1, 1f);\n"
                "  %3 = where(%k, %2, negative(%a));\n"
                "  (%3, exp(%b), log(abs(%a)), sqrt(abs(%c)), rsqrt(abs(%c)), tanh(%a), sigmoid(%a),\n"
                "   nn.relu(%a), nn.leaky_relu(%a, alpha=0.2f), clip(%a, a_min=-0.5f, a_max=0.5f),\n"
                "   maximum(%a, %b), minimum(%a, %c), divide(%a, %c), power(abs(%a), %b),\n"
                "   greater(%a, %b), logical_not(%k), cast(%a, dtype=\"float64\"), cast(%k, dtype=\"int32\"),\n"
                "   zeros_like(%a), ones_like(%b), add(%e, %c), copy(%b), broadcast_to(%b, shape=[2, 4, 7]))\n"
                "}\n", false);
}

static void test_float64(void **s) {
    NEED_DEVICE();
    same_as_cpu(V "def @main(%a: Tensor[(6, 7), float64], %w: Tensor[(3, 7), float64]) {\n"
                "  %0 = nn.dense(%a, %w); (sigmoid(%0), sum(%0, axis=[0]), nn.log_softmax(%0))\n}\n", false);
}

static void test_gemms_and_epilogues(void **s) {
    NEED_DEVICE();
    same_as_cpu(V "def @main(%x: Tensor[(7, 33), float32], %w: Tensor[(17, 33), float32], %b: Tensor[(17), float32],\n"
                "          %y: Tensor[(2, 33, 5), float32], %m: Tensor[(33, 9), float32], %z: Tensor[(2, 4, 5), float32]) {\n"
                "  %0 = nn.dense(%x, %w); %1 = nn.bias_add(%0, %b); %2 = nn.relu(%1);\n"
                "  %3 = nn.matmul(%x, %m); %4 = nn.matmul(%m, %x, transpose_a=True, transpose_b=True);\n"
                "  %5 = nn.batch_matmul(%z, %y, transpose_b=True);\n"
                "  %6 = nn.dense(%x, zeros(shape=[17, 33], dtype=\"float32\"));\n"
                "  (%2, %3, %4, %5, sigmoid(%1), %6)\n}\n", false);
}

static void test_reductions_softmax_layout(void **s) {
    NEED_DEVICE();
    same_as_cpu(V "def @main(%a: Tensor[(3, 4, 5), float32], %i: Tensor[(3, 4, 5), int32]) {\n"
                "  (sum(%a), sum(%a, axis=[1]), sum(%a, axis=[0, 2], keepdims=True), mean(%a, axis=[-1]),\n"
                "   max(%a, axis=[1, 2]), min(%a, axis=[0]), argmax(%a, axis=[2]), argmin(%a, axis=[0]),\n"
                "   sum(%i, axis=[1]), max(%i), nn.softmax(%a), nn.softmax(%a, axis=1), nn.log_softmax(%a),\n"
                "   transpose(%a), transpose(%a, axes=[1, 0, 2]), reshape(%a, newshape=[12, 5]),\n"
                "   expand_dims(%a, axis=1), squeeze(sum(%a, axis=[1], keepdims=True)),\n"
                "   collapse_sum_like(%a, sum(%a, axis=[0, 2], keepdims=True)),\n"
                "   nn.batch_flatten(%a))\n}\n", false);
}

static void test_control_flow(void **s) {
    NEED_DEVICE();
    /* if on a device tensor, recursion, closures, refs and an ADT list */
    same_as_cpu(V "type List[A] { Cons(A, List[A]), Nil }\n"
                "def @sum_list(%l: List[Tensor[(4), float32]], %acc: Tensor[(4), float32]) -> Tensor[(4), float32] {\n"
                "  match (%l) { Cons(%h, %t) => @sum_list(%t, add(%acc, %h)), Nil => %acc }\n}\n"
                "def @count(%x: Tensor[(4), float32], %n: Tensor[(), float32]) -> Tensor[(4), float32] {\n"
                "  if (less(%n, 0.5f)) { %x } else { @count(tanh(%x), subtract(%n, 1f)) }\n}\n"
                "def @main(%x: Tensor[(4), float32], %y: Tensor[(4), float32]) {\n"
                "  let %r = ref(%x);\n"
                "  let %f = fn (%z: Tensor[(4), float32]) { multiply(%z, %y) };\n"
                "  let %u = ref_write(%r, %f(ref_read(%r)));\n"
                "  let %l = Cons(%x, Cons(%y, Cons(ref_read(%r), Nil)));\n"
                "  (@sum_list(%l, zeros_like(%x)), @count(%x, 3f), if (greater(sum(%x), 0f)) { %x } else { %y })\n}\n",
                false);
}

static void test_gradient_programs(void **s) {
    NEED_DEVICE();
    /* an MLP's loss: the gradient program of the AD transform, optimized */
    same_as_cpu(V "def @main(%x: Tensor[(8, 20), float32], %w1: Tensor[(16, 20), float32], %b1: Tensor[(16), float32],\n"
                "          %w2: Tensor[(10, 16), float32], %b2: Tensor[(10), float32]) -> Tensor[(), float32] {\n"
                "  %0 = nn.relu(nn.bias_add(nn.dense(%x, %w1), %b1));\n"
                "  %1 = nn.log_softmax(nn.bias_add(nn.dense(%0, %w2), %b2));\n"
                "  negative(mean(%1))\n}\n", true);
    /* through control flow: a recursion's backpropagators are closures */
    same_as_cpu(V "def @f(%x: Tensor[(3), float32], %n: Tensor[(), float32]) -> Tensor[(3), float32] {\n"
                "  if (less(%n, 0.5f)) { %x } else { @f(multiply(sigmoid(%x), %x), subtract(%n, 1f)) }\n}\n"
                "def @main(%x: Tensor[(3), float32], %w: Tensor[(3), float32]) -> Tensor[(), float32] {\n"
                "  sum(multiply(@f(%x, 3f), %w))\n}\n", true);
}

/* ---- the corpora: every program and gradient that the target's kernels
 * cover, against the CPU; those that need an operator it lacks are
 * listed with the operator (the compile error), never passed silently ---- */

typedef enum { AGREE, NEEDS_KERNEL, NOT_RUNNABLE } outcome;

static outcome compare(ry_module *m, const char *entry, int n, ry_value **args, const char *path,
                       char *missing, size_t nmissing) {
    /* a program with float32 parameters may cast float32 results to
     * float64 (the convolutions sum in another order than OpenBLAS's) */
    double f64tol = 1e-12;
    for (int i = 0; i < n; i++)
        if (args[i]->kind == RY_VAL_TENSOR && args[i]->tensor->dtype == RY_FLOAT32) f64tol = 1e-5;
    ry_vm_program *pc, *pd;
    ry_error err = {0};
    if (ry_vm_compile(m, NULL, &pc, &err)) return NOT_RUNNABLE;
    if (ry_vm_compile(m, cl, &pd, &err)) {
        ry_vm_free(pc);
        if (!strstr(err.msg, "has no kernel on target opencl")) fail_msg("%s: %s", path, err.msg);
        const char *op = strstr(err.msg, "operator ");
        snprintf(missing, nmissing, "%.*s", op ? (int)strcspn(op + 9, " ") : 1, op ? op + 9 : "?");
        return NEEDS_KERNEL;
    }
    ry_value *rc = NULL, *rd = NULL;
    outcome o = AGREE;
    if (ry_vm_call(pc, entry, n, args, NULL, &rc, &err)) o = NOT_RUNNABLE;
    else if (ry_vm_call(pd, entry, n, args, NULL, &rd, &err)) {
        /* a dtype the device's kernels lack (float16) is known at run time */
        char on[40];
        snprintf(on, sizeof on, "has no kernel on %s", test_device_target());
        if (!strstr(err.msg, on))
            fail_msg("%s @%s on %s: %d:%d: %s", path, entry, test_device_target(), err.line, err.col, err.msg);
        snprintf(missing, nmissing, "%.*s", (int)strcspn(err.msg, " "), err.msg);
        o = NEEDS_KERNEL;
    }
    else {
        fprintf(stderr, "  %s @%s\n", path, entry); /* names the program if the next line fails */
        values_close_to(rd, rc, f64tol);
    }
    ry_value_release(rc);
    ry_value_release(rd);
    ry_vm_free(pc);
    ry_vm_free(pd);
    return o;
}

static void corpus_dir(const char *dir, int *agree, int *needs, char *list, size_t nlist) {
    char names[64][128];
    int n = test_relay_files(dir, names, 64);
    uint64_t state = 0x2545f4914f6cdd1dull;
    for (int k = 0; k < n; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.relay", dir, names[k]);
        ry_module *m = NULL;
        ry_error err = {0};
        if (ry_module_parse_file(path, &m, &err) || ry_module_typecheck(m, &err)) fail_msg("%s: %s", path, err.msg);
        ry_value *args[32];
        int na = test_main_args(m, &state, args, 32);
        bool ok = na >= 0;
        if (!ok) na = 0;
        const char *gname = NULL;
        if (ok && ry_grad(m, "main", NULL, NULL, &gname, &err) != RY_OK) gname = NULL;
        if (ok && ry_optimize(m, 2, &err) == RY_OK) {
            const char *entries[2] = {"main", gname};
            for (int e = 0; e < 2 && entries[e]; e++) {
                char missing[64];
                outcome o = compare(m, entries[e], na, args, path, missing, sizeof missing);
                if (o == AGREE) (*agree)++;
                if (o == NEEDS_KERNEL) {
                    (*needs)++;
                    size_t len = strlen(list);
                    snprintf(list + len, nlist - len, " %s%s(%s)", names[k], e ? "'" : "", missing);
                }
            }
        }
        for (int i = 0; i < na; i++) ry_value_release(args[i]);
        ry_module_free(m);
    }
}

static void test_corpora_agree_with_the_cpu(void **s) {
    NEED_DEVICE();
    int agree = 0, needs = 0;
    char list[4096] = "";
    corpus_dir("tests/corpus", &agree, &needs, list, sizeof list);
    corpus_dir("tests/run", &agree, &needs, list, sizeof list);
    fprintf(stderr, "%s corpora: %d programs and gradients agree with the CPU; %d need an "
                    "operator the target lacks (' marks a gradient):%s\n", test_device_target(), agree, needs, list);
    assert_true(agree >= 20);
}

/* OpenCL now has every operator's kernel: a copy of the target whose
 * table lacks nn.conv2d stands for a device without one */
static const ry_kernel *kernel_but_conv2d(const ry_op *op) {
    return strcmp(op->name, "nn.conv2d") == 0 ? NULL : cl->kernel(op);
}

/* ry_gradcheck with the gradient program on the device (second order too)
 * against the interpreter's finite differences, through a recursion */
/* Every operator of the registry has a kernel on OpenCL (as on the CPU),
 * and the run-time-size operators of the gradient rules agree */
static void test_every_operator_has_a_kernel(void **s) {
    NEED_DEVICE();
    for (int i = 0; i < ry_op_count(); i++)
        if (!ry_target_kernel(cl, ry_op_at(i))) fail_msg("%s has no OpenCL kernel", ry_op_at(i)->name);
    same_as_cpu(V "def @main(%a: Tensor[(3, 4, 5), float32], %i: Tensor[(6), int32]) {\n"
                "  (cumsum(%a, axis=1), cumsum(%a, axis=-1, exclusive=True), cumsum(%a),\n"
                "   cumsum(%i, dtype=\"int64\"), cumsum(multiply(%i, 100), dtype=\"int8\"), shape_of(%a),\n"
                "   shape_of(%i, dtype=\"int64\"))\n}\n", false);
}

static void test_gradcheck_on_the_device(void **s) {
    NEED_DEVICE();
    ry_module *m = test_parse(V "def @f(%x: Tensor[(3), float64], %n: Tensor[(), float64]) -> Tensor[(3), float64] {\n"
                              "  if (less(%n, 0.5f64)) { %x } else { @f(multiply(tanh(%x), %x), subtract(%n, 1f64)) }\n}\n"
                              "def @main(%x: Tensor[(3), float64], %w: Tensor[(2, 3), float64]) {\n"
                              "  nn.dense(expand_dims(@f(%x, 2f64), axis=0), %w)\n}\n", true);
    ry_value *args[2];
    args[0] = random_value(ry_module_find_global(m, "main")->func->func.params[0]->type);
    args[1] = random_value(ry_module_find_global(m, "main")->func->func.params[1]->type);
    ry_gradcheck_opts o = {.rtol = 1e-6, .atol = 1e-8, .second_order = true, .target = cl};
    ry_gradcheck_report rep;
    ry_error err = {0};
    if (ry_gradcheck(m, "main", 2, args, &o, &rep, &err)) fail_msg("gradcheck: %s", err.msg);
    assert_true(rep.ok);
    assert_true(rep.params[0].checked && rep.params[1].checked);
    ry_value_release(args[0]);
    ry_value_release(args[1]);
    ry_module_free(m);
}

static void test_missing_kernel_is_a_located_compile_error(void **s) {
    NEED_DEVICE();
    ry_target partial = *cl;
    partial.kernel = kernel_but_conv2d;
    ry_module *m = test_parse(V "def @main(%x: Tensor[(1, 1, 4, 4), float32], %w: Tensor[(2, 1, 3, 3), float32]) {\n"
                              "  nn.conv2d(%x, %w)\n}\n", true);
    ry_vm_program *p;
    ry_error err = {0};
    assert_int_equal(ry_vm_compile(m, &partial, &p, &err), RY_ERR);
    assert_null(p);
    char want[64];
    snprintf(want, sizeof want, "nn.conv2d has no kernel on target %s", test_device_target());
    assert_non_null(strstr(err.msg, want));
    assert_int_equal(err.line, 3);
    ry_module_free(m);
}

static void test_unknown_index_is_an_error(void **s) {
    const ry_target *t;
    ry_error err = {0};
    char name[32];
    snprintf(name, sizeof name, "%s:99", test_device_target());
    assert_int_equal(ry_target_find(name, &t, &err), RY_ERR);
    snprintf(name, sizeof name, "%s:x", test_device_target());
    assert_int_equal(ry_target_find(name, &t, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "must be a number"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copies_round_trip),
        cmocka_unit_test(test_allocator_reuses_buffers),
        cmocka_unit_test(test_device_out_of_memory_is_an_error),
        cmocka_unit_test(test_host_tensor_into_a_device_kernel_is_an_error),
        cmocka_unit_test(test_kernel_cache),
        cmocka_unit_test(test_elementwise_and_broadcast),
        cmocka_unit_test(test_float64),
        cmocka_unit_test(test_gemms_and_epilogues),
        cmocka_unit_test(test_reductions_softmax_layout),
        cmocka_unit_test(test_control_flow),
        cmocka_unit_test(test_gradient_programs),
        cmocka_unit_test(test_corpora_agree_with_the_cpu),
        cmocka_unit_test(test_every_operator_has_a_kernel),
        cmocka_unit_test(test_gradcheck_on_the_device),
        cmocka_unit_test(test_missing_kernel_is_a_located_compile_error),
        cmocka_unit_test(test_unknown_index_is_an_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
