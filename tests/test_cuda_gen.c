/*
 * test_cuda_gen.c: the kernel generator's CUDA C dialect, without a GPU:
 * NVRTC (which needs no driver) builds PTX for sm_90 from
 *  - every operator a fused program can hold, in each dtype it takes,
 *    read directly, as a scalar and through broadcast strides, and every
 *    reduction and softmax;
 *  - every kernel of the nn family (kernel_gen_nn.h: convolutions, pools,
 *    normalizations, the small nn kernels) in each compute type it takes;
 *  - every kernel the OpenCL target's runs of the corpora (tests/corpus,
 *    tests/run: each program and its gradient) asked the generator for,
 *    written again in the CUDA dialect.
 * So the generator's second dialect is a table of spellings that compiles,
 * which the CUDA target's kernels are made from. Without the CUDA toolkit
 * (or, for the corpora, without an OpenCL device to run them) the tests
 * skip with a message.
 */
#include <stdlib.h>

#include "backend/kernel_gen.h"
#include "backend/kernel_gen_nn.h"
#include "test_programs.h"

#ifdef RY_HAVE_CUDA
#include "backend/cuda/cu_nvrtc.h"

static int nbuilt;

static void build(const char *src, const char *what) {
    char *ptx = NULL;
    size_t len = 0;
    ry_error err = {0};
    if (ry_nvrtc_ptx(src, 90, &ptx, &len, &err)) {
        fprintf(stderr, "%s\n--- source:\n%s", err.msg, src);
        fail_msg("%s does not build with NVRTC", what);
    }
    assert_non_null(strstr(ptx, ".entry"));
    free(ptx);
    nbuilt++;
}

static bool nvrtc_present(void) {
    char *ptx = NULL;
    size_t len;
    ry_error err = {0};
    if (ry_nvrtc_ptx("extern \"C\" __global__ void k(float *o) { o[0] = 1; }", 90, &ptx, &len, &err)) {
        fprintf(stderr, "test_cuda_gen: skipping: %s\n", err.msg);
        return false;
    }
    free(ptx);
    return true;
}
#endif

static void test_every_operator_in_cuda(void **s) {
#ifndef RY_HAVE_CUDA
    fprintf(stderr, "test_cuda_gen: skipping: this build has no CUDA toolkit (CUDA=0)\n");
    skip();
#else
    if (!nvrtc_present()) skip();
    nbuilt = 0;
    const ry_dialect *d = &ry_cuda_dialect;
    static const ry_dtype floats[] = {RY_FLOAT32, RY_FLOAT64};
    for (int op = 0; op < RY_FZ_NOPS; op++) {
        bool logic = op == RY_FZ_AND || op == RY_FZ_OR || op == RY_FZ_NOT;
        bool binary = op <= RY_FZ_OR, where = op == RY_FZ_WHERE;
        bool cmp = op >= RY_FZ_EQ && op <= RY_FZ_OR;
        int nargs = where ? 3 : binary ? 2 : op == RY_FZ_ZEROS || op == RY_FZ_ONES ? 0 : 1;
        for (int f = 0; f < (logic ? 1 : 2); f++) {
            ry_dtype dt = logic ? RY_BOOL : floats[f];
            ry_dtype dts[3] = {where ? RY_BOOL : dt, dt, dt};
            ry_dtype odt = cmp ? RY_BOOL : op == RY_FZ_CAST ? (dt == RY_FLOAT32 ? RY_FLOAT64 : RY_BOOL) : dt;
            double prm[2] = {-0.5, 0.5};
            ry_fz_prog p;
            ry_gen_single(&p, (ry_fz_opcode)op, nargs, dts, odt, prm);
            static const ry_gen_access kinds[3][3] = {{RY_GEN_DIRECT, RY_GEN_DIRECT, RY_GEN_DIRECT},
                                                      {RY_GEN_SCALAR, RY_GEN_STRIDED, RY_GEN_DIRECT},
                                                      {RY_GEN_STRIDED, RY_GEN_SCALAR, RY_GEN_STRIDED}};
            for (int k = 0; k < 3; k++) {
                char *src = ry_gen_elemwise(d, &p, kinds[k], 1 + k, "k");
                assert_non_null(src);
                build(src, ry_fz_op_name((ry_fz_opcode)op));
                free(src);
            }
        }
    }
    for (int kind = RY_GEN_SUM; kind <= RY_GEN_ARGMIN; kind++)
        for (int f = 0; f < 2; f++) {
            bool arg = kind == RY_GEN_ARGMAX || kind == RY_GEN_ARGMIN;
            char *src = ry_gen_reduce(d, (ry_gen_red)kind, floats[f], arg ? RY_INT32 : floats[f], true,
                                      1 + f, 2 - f, f == 1, "k");
            build(src, "a reduction");
            free(src);
        }
    char *src = ry_gen_reduce(d, RY_GEN_MAX, RY_INT64, RY_INT64, false, 2, 1, false, "k");
    build(src, "an integer reduction");
    free(src);
    for (int f = 0; f < 2; f++)
        for (int log = 0; log < 2; log++) {
            src = ry_gen_softmax(d, floats[f], log, "k");
            build(src, "softmax");
            free(src);
        }
    fprintf(stderr, "test_cuda_gen: %d kernels built with NVRTC for sm_90\n", nbuilt);
#endif
}

#ifdef RY_HAVE_CUDA
/* the distinct requests the OpenCL runs made */
typedef struct seen {
    ry_gen_request *r;
    int n, cap;
} seen;

static void record(const ry_gen_request *r, void *ctx) {
    seen *s = ctx;
    for (int i = 0; i < s->n; i++)
        if (memcmp(&s->r[i], r, sizeof *r) == 0) return;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->r = realloc(s->r, sizeof *s->r * (size_t)s->cap);
        assert_non_null(s->r);
    }
    s->r[s->n++] = *r;
}

static void run_dir(const ry_target *cl, const char *dir, uint64_t *state) {
    char names[64][128];
    int n = test_relay_files(dir, names, 64);
    for (int k = 0; k < n; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.relay", dir, names[k]);
        ry_module *m = NULL;
        ry_error err = {0};
        if (ry_module_parse_file(path, &m, &err) || ry_module_typecheck(m, &err)) fail_msg("%s: %s", path, err.msg);
        ry_value *args[32];
        int na = test_main_args(m, state, args, 32);
        bool ok = na >= 0;
        if (!ok) na = 0;
        const char *gname = NULL;
        if (ok && ry_grad(m, "main", NULL, NULL, &gname, &err) != RY_OK) gname = NULL;
        ry_vm_program *p = NULL;
        if (ok && ry_optimize(m, 2, &err) == RY_OK && ry_vm_compile(m, cl, &p, &err) == RY_OK) {
            const char *entries[2] = {"main", gname};
            for (int e = 0; e < 2 && entries[e]; e++) {
                ry_value *out = NULL;
                if (ry_vm_call(p, entries[e], na, args, NULL, &out, &err) == RY_OK) ry_value_release(out);
            }
        }
        ry_vm_free(p);
        for (int i = 0; i < na; i++) ry_value_release(args[i]);
        ry_module_free(m);
    }
}
#endif

static void test_corpus_kernels_in_cuda(void **s) {
#ifndef RY_HAVE_CUDA
    skip();
#else
    if (!nvrtc_present()) skip();
    const ry_target *cl;
    ry_error err = {0};
    if (ry_target_find("opencl", &cl, &err)) {
        fprintf(stderr, "test_cuda_gen: skipping the corpora: %s\n", err.msg);
        skip();
    }
    seen rec = {0};
    ry_gen_set_observer(record, &rec);
    uint64_t state = 0x853c49e6748fea9bull;
    run_dir(cl, "tests/corpus", &state);
    run_dir(cl, "tests/run", &state);
    ry_gen_set_observer(NULL, NULL);
    nbuilt = 0;
    for (int i = 0; i < rec.n; i++) {
        char *src = ry_gen_request_source(&rec.r[i], &ry_cuda_dialect, "k");
        assert_non_null(src);
        build(src, "a corpus kernel");
        free(src);
    }
    fprintf(stderr, "test_cuda_gen: the corpora's %d distinct generated kernels build with NVRTC for sm_90\n",
            nbuilt);
    assert_true(nbuilt >= 50);
    free(rec.r);
#endif
}


/* the nn family's templates (kernel_gen_nn.h), spelled in CUDA C */
static void test_nn_kernels_in_cuda(void **s) {
#ifndef RY_HAVE_CUDA
    skip();
#else
    if (!nvrtc_present()) skip();
    nbuilt = 0;
    const ry_dialect *d = &ry_cuda_dialect;
    /* element, compute, operand/index types as the OpenCL launchers pick them */
    const ry_gen_types f = {"float", "double", "float"}, g = {"double", "double", "double"};
    const ry_gen_types i = {"int", "long long", "int"}, c8 = {"int", "long long", "signed char"};
    const ry_gen_types *conv_types[] = {&f, &g, &i, &c8};
    char *src;
    for (int k = RY_GEN_CONV_FWD; k <= RY_GEN_CONV_DW; k++)
        for (int t = 0; t < 4; t++) {
            build(src = ry_gen_conv2d(d, (ry_gen_conv)k, conv_types[t]), "a convolution");
            free(src);
        }
    /* the GEMM path's copies (kernel_gen_im2col.c), float32 and float64 */
    const ry_gen_types cf = {"float", NULL, NULL}, cd = {"double", NULL, NULL};
    for (int k = RY_GEN_IM2COL; k <= RY_GEN_SWAP01; k++)
        for (int t = 0; t < 2; t++) {
            build(src = ry_gen_conv_copy(d, (ry_gen_conv_copy_kind)k, t ? &cd : &cf), "a convolution's copy");
            free(src);
        }
    const ry_gen_types pf = {"float", "float", NULL}, pi = {"signed char", "long long", NULL};
    for (int k = RY_GEN_POOL_MAX; k <= RY_GEN_POOL_ADAPTIVE_AVG; k++)
        for (int integer = 0; integer < 2; integer++) {
            build(src = ry_gen_pool2d(d, (ry_gen_pool)k, integer, integer ? &pi : &pf), "a pool");
            free(src);
        }
    build(src = ry_gen_norm_stats(d, &f), "the statistics");
    free(src);
    for (int k = RY_GEN_BN_FINISH; k <= RY_GEN_GN_APPLY; k++) {
        build(src = ry_gen_norm_apply(d, (ry_gen_norm)k, &f), "a normalization");
        free(src);
    }
    const ry_gen_types n = {"float", "double", "long long"}, mv = {"unsigned short", "unsigned short", "int"};
    for (int k = RY_GEN_PAD; k <= RY_GEN_SCATTER_ND; k++)
        for (int r = 0; r < 2; r++) {
            /* the kernels that move float16's bits, and ranks 0 and 3 */
            bool moves = k == RY_GEN_PAD || k == RY_GEN_ONE_HOT || k == RY_GEN_GATHER_ND || k == RY_GEN_SCATTER_ND;
            build(src = ry_gen_nn(d, (ry_gen_misc)k, 3 * r, r && moves ? &mv : &n), "a small nn kernel");
            free(src);
        }
    build(src = ry_gen_reduce(d, RY_GEN_SUMSQ, RY_FLOAT16, RY_FLOAT64, true, 1, 2, false, "k"), "a sum of squares");
    free(src);
    fprintf(stderr, "test_cuda_gen: the nn family's %d kernels built with NVRTC for sm_90\n", nbuilt);
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_operator_in_cuda),
        cmocka_unit_test(test_nn_kernels_in_cuda),
        cmocka_unit_test(test_corpus_kernels_in_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
