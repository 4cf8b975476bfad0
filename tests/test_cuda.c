/*
 * test_cuda.c: the CUDA target. Without a GPU (this suite's part of `make
 * test`):
 *  - no driver, or no device: `--target cuda` and ry_target_find("cuda")
 *    are the clean error "no CUDA device: ...", and the CPU still runs;
 *  - the toolkit's stub driver (a libcuda.so.1 whose every call fails)
 *    gives that error too, from the relayc command, naming cuInit;
 *  - the device layer's host code (src/backend/device/) on a stand-in
 *    CUDA device: every templated kernel it writes (take, concatenate,
 *    cumsum, the four optimizers' updates, the gradient slab's sums,
 *    clamps, scales and scan) and a generated one of each family built by
 *    NVRTC to PTX for sm_90, with the arguments the launch would get
 *    counted against the kernel's parameters; its copies and fills on
 *    the stand-in's (host) memory give the right bytes.
 * With a GPU (tests/gpu/run.sh): the kernel cache (a second build of a
 * kernel builds nothing; the PTX is on disk; a source that does not
 * compile is a located error). The corpora, the nn family and training
 * against the CPU are test_opencl*, run with RELAYC_TEST_TARGET=cuda.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_programs.h"

#ifdef RY_HAVE_CUDA
#include "backend/cuda/cu_nvrtc.h"
#include "backend/device/dk_ops.h"

static const ry_target *cuda;

static int setup(void **s) {
    ry_error err = {0};
    if (ry_target_find("cuda", &cuda, &err) != RY_OK) {
        fprintf(stderr, "test_cuda: no GPU here (%s): the tests that need one skip\n", err.msg);
        cuda = NULL;
    }
    return 0;
}

/* ---- without a device ---- */

static void test_no_device_is_a_clean_error(void **s) {
    if (cuda) {
        fprintf(stderr, "test_no_device_is_a_clean_error: a CUDA device is present\n");
        skip();
    }
    const ry_target *t = (const ry_target *)1;
    ry_error err = {0};
    assert_int_equal(ry_target_find("cuda", &t, &err), RY_ERR);
    assert_null(t);
    assert_true(strncmp(err.msg, "no CUDA device: ", 16) == 0);
    /* everything else works: a program on the CPU */
    ry_module *m = test_parse("#[version = \"0.0.5\"]\n"
                              "def @main(%x: Tensor[(3), float32]) { add(%x, %x) }\n", true);
    ry_vm_program *p;
    assert_int_equal(ry_vm_compile(m, ry_target_cpu(), &p, &err), RY_OK);
    ry_tensor *x = ry_tensor_new(RY_FLOAT32, 1, (int64_t[]){3});
    for (int i = 0; i < 3; i++) ry_tensor_set(x, i, i + 0.5);
    ry_value *arg = ry_value_tensor(x), *r = NULL; /* takes x */
    assert_int_equal(ry_vm_call(p, "main", 1, &arg, NULL, &r, &err), RY_OK);
    for (int i = 0; i < 3; i++) assert_true(ry_tensor_get(r->tensor, i) == 2 * (i + 0.5));
    ry_value_release(r);
    ry_value_release(arg);
    ry_vm_free(p);
    ry_module_free(m);
}

static void test_stub_driver_is_a_clean_error(void **s) {
    const char *home = getenv("CUDA_HOME");
    char stub[512], dir[] = "/tmp/relayc-cudastub-XXXXXX", link[600], cmd[2048];
    snprintf(stub, sizeof stub, "%s/lib64/stubs/libcuda.so", home && *home ? home : "/usr/local/cuda");
    if (access(stub, R_OK) != 0) {
        fprintf(stderr, "test_stub_driver_is_a_clean_error: no stub driver at %s\n", stub);
        skip();
    }
    assert_non_null(mkdtemp(dir));
    snprintf(link, sizeof link, "%s/libcuda.so.1", dir);
    assert_int_equal(symlink(stub, link), 0);
    const char *relayc = getenv("RELAYC");
    snprintf(cmd, sizeof cmd,
             "LD_LIBRARY_PATH=%s %s run tests/run/mlp.relay --target cuda >%s/out 2>%s/err; echo $? >%s/rc",
             dir, relayc ? relayc : "build/relayc", dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    char path[700], buf[1024] = "";
    snprintf(path, sizeof path, "%s/rc", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_int_equal(atoi(buf), 1);
    snprintf(path, sizeof path, "%s/err", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    if (!strstr(buf, "no CUDA device: cuInit failed: CUDA_ERROR_STUB_LIBRARY (34)"))
        fail_msg("unexpected: %s", buf);
    rm_dir(dir);
}

/* ---- the device layer's host code on a stand-in CUDA device ---- */

static ry_device_heap heap;
static int built, launched, args_bad;
static int last_nargs;

static void *host_alloc(size_t n) { return calloc(1, n); }

/* the kernel's parameter count, from its source's signature */
static int params_of(const char *src) {
    const char *p = strstr(src, " k(");
    if (!p) return -1;
    int n = 1, depth = 0;
    for (p += 3; *p && !(*p == ')' && depth == 0); p++) {
        if (*p == '(') depth++;
        if (*p == ')') depth--;
        if (*p == ',' && depth == 0) n++;
    }
    return n;
}

static int want_args = -1;

static ry_dk_kernel *nvrtc_build(const char *source, const char *name, ry_span span, ry_error *err) {
    char *ptx = NULL;
    size_t len = 0;
    if (ry_nvrtc_ptx(source, 90, &ptx, &len, err)) {
        fprintf(stderr, "%s\n--- source:\n%s", err->msg, source);
        return NULL;
    }
    free(ptx);
    built++;
    want_args = params_of(source);
    return (ry_dk_kernel *)(uintptr_t)1;
}

static ry_status no_launch(ry_dk_kernel *k, size_t global, int nargs, const ry_karg *args, ry_span span,
                           ry_error *err) {
    launched++;
    last_nargs = nargs;
    if (nargs != want_args) args_bad++;
    return RY_OK;
}

static char *mem(const ry_tensor *t) { return (char *)ry_devbuf_handle(t) + t->offset; }
static ry_status up(ry_tensor *t, const void *src, size_t n, ry_error *err) {
    memcpy(mem(t), src, n);
    return RY_OK;
}
static ry_status down(void *dst, const ry_tensor *t, size_t n, ry_error *err) {
    memcpy(dst, mem(t), n);
    return RY_OK;
}
static ry_status dcopy(ry_tensor *d, const ry_tensor *s, size_t n, ry_error *err) {
    memcpy(mem(d), mem(s), n);
    return RY_OK;
}
static ry_status dzero(ry_tensor *t, size_t at, size_t n, ry_error *err) {
    memset(mem(t) + at, 0, n);
    return RY_OK;
}
static ry_status no_gemm(ry_kernel_ctx *c, const ry_dk_gemm *g) { return RY_OK; }
static ry_status done(ry_error *err) { return RY_OK; }
static ry_device stand_in(void) { return (ry_device){RY_DEVICE_CUDA, 0}; }
static bool yes(void) { return true; }
static ry_allocator *stand_in_alloc(void) { return &heap.alloc; }

static const ry_dk_device fake = {
    .kind = RY_DEVICE_CUDA, .dialect = &ry_cuda_dialect, .dev = stand_in, .fp64 = yes,
    .build = nvrtc_build, .launch = no_launch, .upload = up, .download = down, .copy = dcopy,
    .zero = dzero, .allocator = stand_in_alloc, .gemm = no_gemm, .finish = done,
};

static ry_tensor *dev_tensor(ry_dtype dt, int nd, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new_on(&heap.alloc, dt, nd, shape);
    assert_non_null(t);
    memset(mem(t), 0, ry_tensor_nbytes(t));
    return t;
}

/* op's device kernel over in into out (default attributes) */
static void call(const char *name, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out) {
    const ry_op *op = ry_op_find(name);
    assert_non_null(op);
    const ry_kernel *k = ry_dk_kernel_of(op);
    assert_non_null(k);
    ry_error err = {0};
    ry_kernel_ctx c = {op, NULL, RY_NO_SPAN, &err, false, NULL};
    int b = built;
    if (k->fn(&c, nin, in, nout, out)) fail_msg("%s on the stand-in: %s", name, err.msg);
    assert_true(built > b);
}

static void test_device_layer_in_cuda(void **s) {
    char *ptx = NULL;
    size_t len;
    ry_error err = {0};
    if (ry_nvrtc_ptx("extern \"C\" __global__ void k() {}", 90, &ptx, &len, &err)) {
        fprintf(stderr, "test_device_layer_in_cuda: %s\n", err.msg);
        skip();
    }
    free(ptx);
    if (cuda) {
        fprintf(stderr, "test_device_layer_in_cuda: a real CUDA device is registered; the stand-in is for machines without one\n");
        skip();
    }
    ry_device_heap_init(&heap, stand_in(), host_alloc, free);
    ry_dk_register(&fake);
    ry_tensor *x = dev_tensor(RY_FLOAT32, 2, (int64_t[]){4, 3}), *y = dev_tensor(RY_FLOAT32, 2, (int64_t[]){4, 3});
    ry_tensor *ind = dev_tensor(RY_INT64, 1, (int64_t[]){5}), *t5 = dev_tensor(RY_FLOAT32, 1, (int64_t[]){5});
    ry_tensor *cat = dev_tensor(RY_FLOAT32, 2, (int64_t[]){8, 3}), *flat = dev_tensor(RY_FLOAT32, 1, (int64_t[]){12});
    ry_tensor *sum = dev_tensor(RY_FLOAT32, 0, NULL), *shp = dev_tensor(RY_INT64, 1, (int64_t[]){2});
    /* templated kernels */
    call("take", 2, (ry_tensor *[]){x, ind}, 1, &t5);
    call("concatenate", 2, (ry_tensor *[]){x, y}, 1, &cat);
    call("cumsum", 1, &x, 1, &flat);
    /* generated: elementwise, reduction, softmax, transpose */
    call("add", 2, (ry_tensor *[]){x, y}, 1, &y);
    call("sum", 1, &x, 1, &sum);
    call("nn.softmax", 1, &x, 1, &y);
    /* shape_of copies the host's shape in */
    const ry_op *op = ry_op_find("shape_of");
    ry_kernel_ctx c = {op, NULL, RY_NO_SPAN, &err, false, NULL};
    assert_int_equal(ry_dk_kernel_of(op)->fn(&c, 1, &x, 1, &shp), RY_OK);
    assert_true(((int64_t *)mem(shp))[0] == 4 && ((int64_t *)mem(shp))[1] == 3);
    /* the training kernels: each optimizer, over slab views */
    ry_tensor *slab[5];
    for (int i = 0; i < 5; i++) slab[i] = dev_tensor(RY_FLOAT32, 1, (int64_t[]){64});
    ry_optim_kind kinds[] = {RY_OPTIM_SGD, RY_OPTIM_ADAM, RY_OPTIM_ADAGRAD, RY_OPTIM_RMSPROP};
    for (int k = 0; k < 4; k++) {
        ry_optim_config oc = ry_optim_defaults(kinds[k]);
        oc.momentum = 0.9;
        ry_update_args a = {.dtype = RY_FLOAT32, .n = 16, .tparam = slab[0], .tgrad = slab[1],
                            .tslot = {slab[2], slab[3], slab[4]}, .off = 8, .goff = 4, .lr = 0.1,
                            .scale = 1, .step = 2};
        int b = built;
        ry_dk_update(&oc, &a);
        assert_true(built > b);
    }
    int b = built;
    ry_dk_grad_add(slab[1], slab[0], 0, 8, 16, false);
    ry_dk_grad_clip(slab[1], 0, 16, 1.0);
    ry_dk_grad_scale(slab[1], 0, 16, 0.5);
    /* nothing ran, so the chunks' results read back are the fresh
     * buffers' zeros: first bad index 0 (a real run writes -1), norm 0 */
    double norm = -1;
    assert_int_equal(ry_dk_grad_scan(slab[1], NULL, 0, &norm), 0);
    assert_true(norm == 0);
    assert_int_equal(built - b, 4);
    /* the slab's zero fill is the device's */
    ((float *)mem(slab[1]))[3] = 7;
    ry_dk_grad_zero(slab[1], 2, 4);
    assert_true(((float *)mem(slab[1]))[3] == 0);
    assert_int_equal(ry_dk_sync(&fake, &err), RY_OK);
    fprintf(stderr, "test_device_layer_in_cuda: %d kernels built with NVRTC, %d launches planned\n", built,
            launched);
    assert_int_equal(args_bad, 0);
    ry_tensor *all[] = {x, y, ind, t5, cat, flat, sum, shp};
    for (int i = 0; i < 8; i++) ry_tensor_release(all[i]);
    for (int i = 0; i < 5; i++) ry_tensor_release(slab[i]);
}

/* ---- with a GPU ---- */

static void test_kernel_cache_on_the_gpu(void **s) {
    if (!cuda) {
        fprintf(stderr, "test_kernel_cache_on_the_gpu: needs a GPU\n");
        skip();
    }
    char dir[] = "/tmp/relayc-cucache-XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("RELAYC_CACHE_DIR", dir, 1);
    const char *src = "extern \"C\" __global__ void k(float *o) { o[threadIdx.x] = 7; }\n";
    const ry_dk_device *d = ry_dk_for(RY_DEVICE_CUDA);
    assert_non_null(d);
    ry_device_counters c0, c1;
    ry_target_counters(cuda, &c0);
    ry_error err = {0};
    assert_non_null(d->build(src, "k", RY_NO_SPAN, &err));
    assert_non_null(d->build(src, "k", RY_NO_SPAN, &err));
    ry_target_counters(cuda, &c1);
    assert_int_equal(c1.kernels_built - c0.kernels_built, 1);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s/cuda-*.bin >/dev/null 2>&1", dir);
    assert_int_equal(system(cmd), 0);
    assert_null(d->build("extern \"C\" __global__ void k() { nonsense; }", "k", RY_NO_SPAN, &err));
    assert_non_null(strstr(err.msg, "does not compile"));
    rm_dir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_device_is_a_clean_error),
        cmocka_unit_test(test_stub_driver_is_a_clean_error),
        cmocka_unit_test(test_device_layer_in_cuda),
        cmocka_unit_test(test_kernel_cache_on_the_gpu),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
#else
static void test_not_built(void **s) {
    fprintf(stderr, "test_cuda: this relayc is built without CUDA (CUDA=0 or no toolkit)\n");
    skip();
}
int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_not_built)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
