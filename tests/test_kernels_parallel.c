/*
 * test_kernels_parallel.c: the CPU kernels' thread pool (parallel.h) and
 * the thread knob (threads.h): every index is visited once, chunks are
 * contiguous and no shorter than the grain, nested calls and calls inside
 * ry_threads_serial_begin/end run inline, concurrent callers both finish,
 * waits that end in a sleep (idle workers, a long chunk) are woken,
 * the parallel kernels (conv2d and its gradients, pooling, large
 * elementwise maps, sums, dense) give the same results at 1 and 2 threads,
 * and ry_cpu_gemm (blas.h) splits only what it should, into blocks that
 * give the unsplit GEMM's bits; ry_parallel_copy copies every byte, and
 * split, concatenate and take put every element in place; float
 * sums keep their serial order on every path.
 */
#include "test_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cpu/blas.h"
#include "backend/cpu/parallel.h"

typedef struct visit {
    int64_t n;
    atomic_int *count;
    atomic_int chunks;
    int64_t shortest;
    pthread_mutex_t mu;
    bool saw_serial_inside;
    int inner_chunks;
} visit;

static void mark(void *ctx, int64_t lo, int64_t hi) {
    visit *v = ctx;
    for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&v->count[i], 1);
    atomic_fetch_add(&v->chunks, 1);
    pthread_mutex_lock(&v->mu);
    if (hi - lo < v->shortest) v->shortest = hi - lo;
    pthread_mutex_unlock(&v->mu);
}

static void check_cover(int64_t n, int64_t grain, int threads, int max_chunks) {
    ry_set_num_threads(threads);
    visit v = {.n = n, .shortest = INT64_MAX, .mu = PTHREAD_MUTEX_INITIALIZER};
    v.count = calloc((size_t)(n ? n : 1), sizeof *v.count);
    assert_non_null(v.count);
    ry_parallel_for(n, grain, mark, &v);
    for (int64_t i = 0; i < n; i++) assert_int_equal(atomic_load(&v.count[i]), 1);
    int chunks = atomic_load(&v.chunks);
    assert_true(chunks <= max_chunks);
    if (n == 0) assert_int_equal(chunks, 0);
    if (chunks > 1) assert_true(v.shortest >= grain);
    free(v.count);
    pthread_mutex_destroy(&v.mu);
}

static void covers_once(void **state) {
    (void)state;
    /* at most 4 chunks per thread, each at least grain long */
    check_cover(0, 1, 2, 0);
    check_cover(1, 1, 2, 1);
    check_cover(1000, 10, 2, 8);
    check_cover(1001, 500, 2, 2);
    check_cover(999, 500, 2, 1); /* below 2 * grain: inline */
    check_cover(100000, 1, 1, 1); /* one thread: inline */
    check_cover(100000, 7, 4, 16);
    check_cover(5, 1, 8, 5);
    ry_set_num_threads(1);
}

static void knob(void **state) {
    (void)state;
    ry_set_num_threads(0);
    assert_int_equal(ry_get_num_threads(), 1);
    ry_set_num_threads(-5);
    assert_int_equal(ry_get_num_threads(), 1);
    ry_set_num_threads(1000);
    assert_int_equal(ry_get_num_threads(), 64);
    ry_set_num_threads(2);
    assert_int_equal(ry_get_num_threads(), 2);
    ry_set_num_threads(1);
}

/* The inner loop of a nested call must run inline: one chunk, serial. */
static void inner(void *ctx, int64_t lo, int64_t hi) {
    visit *v = ctx;
    (void)lo;
    (void)hi;
    atomic_fetch_add(&v->chunks, 1);
}

static void outer(void *ctx, int64_t lo, int64_t hi) {
    visit *v = ctx;
    for (int64_t i = lo; i < hi; i++) {
        visit w = {.n = 1000};
        assert_true(ry_parallel_serial());
        ry_parallel_for(1000, 1, inner, &w);
        atomic_fetch_add(&v->count[i], atomic_load(&w.chunks));
    }
}

static void nested_runs_inline(void **state) {
    (void)state;
    ry_set_num_threads(2);
    visit v = {.n = 64};
    v.count = calloc(64, sizeof *v.count);
    assert_non_null(v.count);
    assert_false(ry_parallel_serial());
    ry_parallel_for(64, 1, outer, &v);
    for (int i = 0; i < 64; i++) assert_int_equal(atomic_load(&v.count[i]), 1);
    assert_false(ry_parallel_serial());
    free(v.count);
    ry_set_num_threads(1);
}

static void serial_bracket(void **state) {
    (void)state;
    ry_set_num_threads(2);
    visit v = {.n = 1000};
    ry_threads_serial_begin();
    ry_threads_serial_begin();
    assert_true(ry_parallel_serial());
    ry_parallel_for(1000, 1, inner, &v);
    ry_threads_serial_end();
    assert_true(ry_parallel_serial());
    ry_parallel_for(1000, 1, inner, &v);
    ry_threads_serial_end();
    ry_threads_serial_end(); /* unbalanced end: ignored */
    assert_false(ry_parallel_serial());
    assert_int_equal(atomic_load(&v.chunks), 2);
    ry_parallel_for(1000, 1, inner, &v); /* split again: 2 threads, up to 8 chunks */
    assert_true(atomic_load(&v.chunks) >= 4 && atomic_load(&v.chunks) <= 10);
    ry_set_num_threads(1);
}

/* Two threads of the caller's own use the pool at once: one gets it, the
 * other runs inline; both results are complete. */
static void *caller(void *arg) {
    visit *v = arg;
    for (int r = 0; r < 200; r++) ry_parallel_for(v->n, 16, mark, v);
    return NULL;
}

static void concurrent_callers(void **state) {
    (void)state;
    ry_set_num_threads(2);
    visit a = {.n = 4096, .shortest = INT64_MAX, .mu = PTHREAD_MUTEX_INITIALIZER};
    visit b = {.n = 4096, .shortest = INT64_MAX, .mu = PTHREAD_MUTEX_INITIALIZER};
    a.count = calloc(4096, sizeof *a.count);
    b.count = calloc(4096, sizeof *b.count);
    assert_non_null(a.count);
    assert_non_null(b.count);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, caller, &b), 0);
    caller(&a);
    pthread_join(t, NULL);
    for (int i = 0; i < 4096; i++) {
        assert_int_equal(atomic_load(&a.count[i]), 200);
        assert_int_equal(atomic_load(&b.count[i]), 200);
    }
    free(a.count);
    free(b.count);
    pthread_mutex_destroy(&a.mu);
    pthread_mutex_destroy(&b.mu);
    ry_set_num_threads(1);
}

/* The waits that end in a sleep: workers idle long enough to block on
 * their condition variable are woken by the next loop, and a caller
 * whose worker runs a long chunk blocks until that worker signals. */
typedef struct slow {
    atomic_int started; /* chunk 1 began (on a worker: the caller runs 0 first) */
    atomic_int done[2];
} slow;

static void slow_chunk(void *ctx, int64_t lo, int64_t hi) {
    slow *s = ctx;
    for (int64_t i = lo; i < hi; i++) {
        if (i == 0) { /* wait (up to 2 s) until another thread holds chunk 1 */
            for (int k = 0; k < 2000 && !atomic_load(&s->started); k++) {
                struct timespec ms = {0, 1000000};
                nanosleep(&ms, NULL);
            }
        } else {
            atomic_store(&s->started, 1);
            struct timespec t = {0, 30000000}; /* 30 ms: past every poll phase */
            nanosleep(&t, NULL);
        }
        atomic_fetch_add(&s->done[i], 1);
    }
}

static void sleeping_waits(void **state) {
    (void)state;
    ry_set_num_threads(2);
    for (int round = 0; round < 3; round++) {
        /* idle: the workers poll, then yield, then block */
        struct timespec idle = {0, 40000000};
        nanosleep(&idle, NULL);
        slow s = {0};
        ry_parallel_for(2, 1, slow_chunk, &s);
        assert_int_equal(atomic_load(&s.done[0]), 1);
        assert_int_equal(atomic_load(&s.done[1]), 1);
        check_cover(5000, 100, 2, 8); /* and the pool still splits */
    }
    ry_set_num_threads(1);
}

/* ---- ry_cpu_gemm: the split of one GEMM over the pool ---- */

/* Whether a split GEMM is checked to rounding rather than bitwise
 * (test_gemm_split_exact: only the AVX-512 kernels split exactly). */
static bool split_inexact(void) { return !test_gemm_split_exact(); }

static void fill(float *p, int64_t n, uint64_t seed) {
    for (int64_t j = 0; j < n; j++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[j] = (float)((double)(seed >> 40) / (double)(1ull << 24)) - 0.5f;
    }
}

/* C = op(A) op(B) + beta C at 1 and at `threads` threads (split into
 * `parts` blocks): the same bits, and within rounding of a float64 sum. */
static void gemm_split_case(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double beta,
                            int threads, int parts) {
    float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
    float *C1 = malloc(sizeof(float) * (size_t)(M * N)), *C2 = malloc(sizeof(float) * (size_t)(M * N));
    assert_true(A && B && C1 && C2);
    fill(A, M * K, (uint64_t)(M * 31 + K));
    fill(B, K * N, (uint64_t)(N * 17 + K));
    fill(C1, M * N, 7);
    memcpy(C2, C1, sizeof(float) * (size_t)(M * N));
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    ry_set_num_threads(1);
    assert_int_equal(ry_cpu_gemm_parts(false, ta, tb, M, N, K), 1);
    ry_cpu_gemm(false, ta, tb, M, N, K, 1.0, A, lda, B, ldb, beta, C1, N);
    ry_set_num_threads(threads);
    assert_int_equal(ry_cpu_gemm_parts(false, ta, tb, M, N, K), parts);
    float *C0 = malloc(sizeof(float) * (size_t)(M * N));
    assert_non_null(C0);
    memcpy(C0, C2, sizeof(float) * (size_t)(M * N));
    ry_cpu_gemm(false, ta, tb, M, N, K, 1.0, A, lda, B, ldb, beta, C2, N);
    ry_set_num_threads(1);
    if (split_inexact()) {
        for (int64_t i = 0; i < M * N; i++) assert_float_equal(C1[i], C2[i], 1e-4);
    } else {
        assert_memory_equal(C1, C2, sizeof(float) * (size_t)(M * N));
    }
    /* and it is the product: spot rows and columns across the blocks */
    for (int64_t i = 0; i < M; i += M / 7 + 1)
        for (int64_t j = 0; j < N; j += N / 5 + 1) {
            double s = beta * C0[i * N + j];
            for (int64_t p = 0; p < K; p++)
                s += (double)(ta ? A[p * lda + i] : A[i * lda + p]) *
                     (tb ? B[j * ldb + p] : B[p * ldb + j]);
            assert_float_equal(C2[i * N + j], s, 1e-4 * (1 + fabs(s)));
        }
    free(A);
    free(B);
    free(C0);
    free(C1);
    free(C2);
}

static void gemm_split_same_bits(void **state) {
    (void)state;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        gemm_split_case(ta, tb, 64, 256, 784, 0.0, 2, 2);  /* MLP layer 1: by columns */
        gemm_split_case(ta, tb, 256, 784, 64, 1.0, 2, 2);  /* its weight gradient */
        gemm_split_case(ta, tb, 32, 1024, 256, 0.0, 2, 2); /* char-LSTM gates */
        /* small kernels throughout (the whole at most 100^3 multiply-adds),
         * except A B^T, which stays whole */
        int small = tb && !ta ? 1 : 2;
        gemm_split_case(ta, tb, 32, 65, 256, 0.0, 2, small); /* its decoder */
        gemm_split_case(ta, tb, 65, 256, 32, 1.0, 2, small); /* the decoder's weight gradient */
        gemm_split_case(ta, tb, 32, 256, 65, 1.0, 2, small); /* and input gradient */
        gemm_split_case(ta, tb, 37, 70, 190, 0.0, 2, small); /* odd sizes */
        gemm_split_case(ta, tb, 333, 211, 97, 1.0, 2, 2);  /* odd: by rows, unaligned tails */
        gemm_split_case(ta, tb, 91, 517, 263, 0.0, 3, 3);
        gemm_split_case(ta, tb, 200, 300, 180, 0.0, 4, 4);
    }
}

static void gemm_parts_rules(void **state) {
    (void)state;
    ry_set_num_threads(2);
    assert_int_equal(ry_cpu_gemm_parts(false, false, false, 64, 256, 784), 2);
    assert_int_equal(ry_cpu_gemm_parts(true, false, false, 64, 256, 784), 1); /* float64: never */
    assert_int_equal(ry_cpu_gemm_parts(false, false, false, 50, 50, 100), 1); /* blocks under 200K */
    assert_int_equal(ry_cpu_gemm_parts(false, false, false, 32, 65, 256), 2); /* small kernels throughout */
    assert_int_equal(ry_cpu_gemm_parts(false, false, true, 32, 65, 256), 1);  /* but not A B^T */
    assert_int_equal(ry_cpu_gemm_parts(false, false, false, 100, 100, 100), 2);
    /* a whole above 100^3 splits only into blocks above it (blocked
     * kernels throughout): 2 x 1e6 is not enough */
    assert_int_equal(ry_cpu_gemm_parts(false, false, false, 100, 200, 100), 1);
    assert_int_equal(ry_cpu_gemm_parts(false, false, false, 100, 224, 100), 2);
    assert_int_equal(ry_cpu_gemm_parts(false, false, false, 16, 16, 100000), 1); /* blocks under 16 wide */
    assert_int_equal(ry_cpu_gemm_parts(false, false, false, 0, 256, 784), 1);
    ry_threads_serial_begin();
    assert_int_equal(ry_cpu_gemm_parts(false, false, false, 64, 256, 784), 1);
    ry_threads_serial_end();
    ry_set_num_threads(8);
    assert_int_equal(ry_cpu_gemm_parts(false, false, false, 64, 256, 784), 8);
    /* 64 rows: 2 blocks of 32; 4 of 16 would be too small */
    assert_int_equal(ry_cpu_gemm_parts(false, false, false, 64, 40, 784), 2);
    ry_set_num_threads(1);
    assert_int_equal(ry_cpu_gemm_parts(false, false, false, 64, 256, 784), 1);
}

/* K = 0: an empty sum, C = beta C (beta 0 overwrites, even NaN). */
static void gemm_empty_k(void **state) {
    (void)state;
    float c[6] = {NAN, 1, 2, 3, 4, 5};
    ry_cpu_gemm(false, false, false, 2, 3, 0, 1.0, c, 1, c, 3, 0.0, c, 3);
    for (int i = 0; i < 6; i++) assert_true(c[i] == 0.0f);
    double d[4] = {1, 2, 3, 4};
    ry_cpu_gemm(true, false, false, 2, 2, 0, 1.0, d, 1, d, 2, 1.0, d, 2);
    assert_true(d[0] == 1 && d[3] == 4);
    ry_cpu_gemm(true, false, false, 2, 2, 0, 1.0, d, 1, d, 2, 0.5, d, 2);
    assert_true(d[0] == 0.5 && d[3] == 2);
    /* ldc larger than N: the gap is left alone */
    float e[8] = {1, 1, 9, 9, 1, 1, 9, 9};
    ry_cpu_gemm(false, false, false, 2, 2, 0, 1.0, e, 1, e, 2, 0.0, e, 4);
    assert_true(e[0] == 0 && e[1] == 0 && e[2] == 9 && e[3] == 9 && e[4] == 0 && e[7] == 9);
}

/* ---- kernels at 1 and 2 threads ---- */

typedef struct kcall {
    const char *op;
    int nin;
    int64_t in_shape[3][4];
    int in_rank[3];
    int64_t out_shape[4];
    int out_rank;
    const char *attr[2];
    int64_t attr_val[2][4];
    int attr_len[2];
} kcall;

static ry_tensor *run_kernel(const kcall *k, ry_tensor *const *in) {
    const ry_op *op = ry_op_find(k->op);
    assert_non_null(op);
    ry_attr attrs[2];
    ry_attr_value items[2][4];
    int na = 0;
    for (int i = 0; i < 2 && k->attr[i]; i++, na++) {
        for (int j = 0; j < k->attr_len[i]; j++)
            items[i][j] = (ry_attr_value){.kind = RY_AV_INT, .i = k->attr_val[i][j]};
        attrs[i] = (ry_attr){.name = k->attr[i]};
        attrs[i].value = (ry_attr_value){.kind = RY_AV_LIST, .list = {k->attr_len[i], items[i]}};
    }
    ry_attrs as = {na, attrs};
    ry_tensor *out = ry_tensor_new(RY_FLOAT32, k->out_rank, k->out_shape);
    assert_non_null(out);
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_kernel_ctx c = {.op = op, .attrs = &as, .err = &err};
    if (cpu_kernel(op)(&c, k->nin, in, 1, &out)) fail_msg("%s: %s", k->op, err.msg);
    return out;
}

static void same_at_two_threads(const kcall *k, double rtol) {
    ry_tensor *in[3] = {NULL, NULL, NULL};
    uint64_t seed = 12345;
    for (int i = 0; i < k->nin; i++) {
        in[i] = ry_tensor_new(RY_FLOAT32, k->in_rank[i], k->in_shape[i]);
        assert_non_null(in[i]);
        float *p = in[i]->data;
        for (int64_t j = 0; j < in[i]->size; j++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            p[j] = (float)((double)(seed >> 40) / (double)(1ull << 24)) - 0.5f;
        }
    }
    ry_set_num_threads(1);
    ry_tensor *one = run_kernel(k, in);
    ry_set_num_threads(2);
    ry_tensor *two = run_kernel(k, in);
    ry_set_num_threads(1);
    if (rtol == 0) {
        assert_memory_equal(one->data, two->data, ry_tensor_nbytes(one));
    } else {
        test_assert_close(two, one, rtol, rtol); /* sums of up to 6400 terms of +-0.5 */
    }
    ry_tensor_release(one);
    ry_tensor_release(two);
    for (int i = 0; i < k->nin; i++) ry_tensor_release(in[i]);
}

static void kernels_match(void **state) {
    (void)state;
    const kcall calls[] = {
        {"nn.conv2d", 2, {{16, 3, 20, 20}, {8, 3, 3, 3}}, {4, 4}, {16, 8, 20, 20}, 4,
         {"padding", "kernel_size"}, {{1, 1, 1, 1}, {3, 3}}, {4, 2}},
        {"nn.conv2d_transpose", 2, {{16, 8, 20, 20}, {8, 3, 3, 3}}, {4, 4}, {16, 3, 20, 20}, 4,
         {"padding", "kernel_size"}, {{1, 1, 1, 1}, {3, 3}}, {4, 2}},
        {"nn.conv2d_backward_weight", 2, {{16, 8, 20, 20}, {16, 3, 20, 20}}, {4, 4}, {8, 3, 3, 3},
         4, {"padding", "kernel_size"}, {{1, 1, 1, 1}, {3, 3}}, {4, 2}},
        {"nn.max_pool2d", 1, {{16, 8, 20, 20}}, {4}, {16, 8, 10, 10}, 4,
         {"pool_size", "strides"}, {{2, 2}, {2, 2}}, {2, 2}},
        {"nn.max_pool2d_grad", 2, {{16, 8, 10, 10}, {16, 8, 20, 20}}, {4, 4}, {16, 8, 20, 20}, 4,
         {"pool_size", "strides"}, {{2, 2}, {2, 2}}, {2, 2}},
        {"nn.avg_pool2d", 1, {{16, 8, 20, 20}}, {4}, {16, 8, 6, 6}, 4,
         {"pool_size", "strides"}, {{3, 3}, {3, 3}}, {2, 2}},
        {"add", 2, {{256, 512}, {512}}, {2, 1}, {256, 512}, 2, {NULL, NULL}, {{0}}, {0}},
        {"multiply", 2, {{256, 1}, {256, 512}}, {2, 2}, {256, 512}, 2, {NULL, NULL}, {{0}}, {0}},
        {"tanh", 1, {{256, 512}}, {2}, {256, 512}, 2, {NULL, NULL}, {{0}}, {0}},
        {"sigmoid", 1, {{3, 256, 300}}, {3}, {3, 256, 300}, 3, {NULL, NULL}, {{0}}, {0}},
        /* sums: over the batch (split over columns), over rows (split over rows) */
        {"sum", 1, {{512, 300}}, {2}, {300}, 1, {"axis", NULL}, {{0}}, {1}},
        {"sum", 1, {{300, 512}}, {2}, {300}, 1, {"axis", NULL}, {{-1}}, {1}},
        {"mean", 1, {{4, 128, 300}}, {3}, {4, 128}, 2, {"axis", NULL}, {{2}}, {1}},
        {"sum", 1, {{4, 128, 300}}, {3}, {300}, 1, {"axis", NULL}, {{0, 1}}, {2}},
        /* a conv bias gradient: rows interleaved over the outputs (split over outputs) */
        {"sum", 1, {{16, 8, 20, 20}}, {4}, {8}, 1, {"axis", NULL}, {{0, 2, 3}}, {3}},
        {"mean", 1, {{64, 6, 28, 28}}, {4}, {6}, 1, {"axis", NULL}, {{0, 2, 3}}, {3}},
        {"sum", 1, {{16, 8, 20, 300}}, {4}, {16, 20}, 2, {"axis", NULL}, {{1, 3}}, {2}},
        /* GEMMs that ry_cpu_gemm splits: columns (N > M), then rows */
        {"nn.dense", 2, {{64, 784}, {256, 784}}, {2, 2}, {64, 256}, 2, {NULL, NULL}, {{0}}, {0}},
        {"nn.dense", 2, {{300, 200}, {40, 200}}, {2, 2}, {300, 40}, 2, {NULL, NULL}, {{0}}, {0}},
        {"nn.batch_matmul", 2, {{2, 96, 300}, {2, 300, 80}}, {3, 3}, {2, 96, 80}, 3,
         {NULL, NULL}, {{0}}, {0}},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        /* GEMM results may round differently when OpenBLAS splits them
         * (with kernels other than the AVX-512 ones, as under valgrind) */
        bool gemm = strncmp(calls[i].op, "nn.conv2d", 9) == 0 || split_inexact();
        same_at_two_threads(&calls[i], gemm ? 1e-4 : 0);
    }
}

/* ry_parallel_copy: every byte, at sizes around its blocks, at 1 and 2
 * threads, from and to unaligned addresses. */
static void parallel_copy(void **state) {
    (void)state;
    const size_t sizes[] = {0, 1, 16383, 16384, 16385, 262144, 262144 * 2 + 7, (1u << 20) + 3};
    size_t most = (1u << 20) + 3;
    unsigned char *src = malloc(most + 8), *dst = malloc(most + 8);
    assert_true(src && dst);
    for (size_t i = 0; i < most + 8; i++) src[i] = (unsigned char)(i * 131 + (i >> 9));
    for (int threads = 1; threads <= 2; threads++) {
        ry_set_num_threads(threads);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            memset(dst, 0xA5, most + 8);
            ry_parallel_copy(dst + 3, src + 1, sizes[k]);
            if (sizes[k]) assert_memory_equal(dst + 3, src + 1, sizes[k]);
            for (size_t i = 0; i < 3; i++) assert_int_equal(dst[i], 0xA5);
            assert_int_equal(dst[3 + sizes[k]], 0xA5); /* nothing past the end */
        }
    }
    ry_set_num_threads(1);
    free(src);
    free(dst);
}

/* Calls op's CPU kernel with attribute attr = *v and, when given, mode. */
static void call_kernel(const char *name, int nin, ry_tensor *const *in, int nout,
                        ry_tensor *const *out, const char *attr, const ry_attr_value *v,
                        const char *mode) {
    const ry_op *op = ry_op_find(name);
    assert_non_null(op);
    ry_attr a[2];
    int na = 0;
    a[na++] = (ry_attr){.name = attr, .value = *v};
    if (mode) a[na++] = (ry_attr){.name = "mode", .value = {.kind = RY_AV_STR, .s = mode}};
    ry_attrs as = {na, a};
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_kernel_ctx c = {.op = op, .attrs = &as, .err = &err};
    if (cpu_kernel(op)(&c, nin, in, nout, out)) fail_msg("%s: %s", name, err.msg);
}

/* split, concatenate and take of rows: large copies split over the pool
 * (transform.c), every element where it belongs at 1 and 2 threads; an
 * LSTM step's 32 x 1024 gates, and a take with clip and wrap indices. */
static void copies_split_over_threads(void **state) {
    (void)state;
    const int64_t R = 40, C = 1024, P = 4, W = C / P, V = 70, K = 37;
    const ry_attr_value axis0 = {.kind = RY_AV_INT, .i = 0}, axis1 = {.kind = RY_AV_INT, .i = 1};
    for (int threads = 1; threads <= 2; threads++) {
        ry_set_num_threads(threads);
        ry_tensor *x = ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){R, C});
        float *xd = x->data;
        for (int64_t i = 0; i < R * C; i++) xd[i] = (float)i;
        ry_tensor *parts[4];
        for (int k = 0; k < P; k++) parts[k] = ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){R, W});
        call_kernel("split", 1, &x, (int)P, parts, "axis", &axis1, NULL);
        for (int k = 0; k < P; k++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t j = 0; j < W; j++)
                    assert_true(((float *)parts[k]->data)[r * W + j] == xd[r * C + k * W + j]);
        ry_tensor *y = ry_tensor_zeros(RY_FLOAT32, 2, (int64_t[]){R, C});
        call_kernel("concatenate", (int)P, parts, 1, &y, "axis", &axis1, NULL);
        assert_memory_equal(y->data, x->data, ry_tensor_nbytes(x));
        /* take rows of a (V, C) table at K indices, some out of range */
        ry_tensor *table = ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){V, C});
        for (int64_t i = 0; i < V * C; i++) ((float *)table->data)[i] = (float)(i * 3 % 1009);
        ry_tensor *idx = ry_tensor_new(RY_INT32, 1, (int64_t[]){K});
        for (int64_t k = 0; k < K; k++) ((int32_t *)idx->data)[k] = (int32_t)(k * 7 % 90) - 10;
        const char *modes[2] = {"clip", "wrap"};
        for (int m = 0; m < 2; m++) {
            ry_tensor *in[2] = {table, idx}, *g = ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){K, C});
            call_kernel("take", 2, in, 1, &g, "axis", &axis0, modes[m]);
            for (int64_t k = 0; k < K; k++) {
                int64_t j = ((int32_t *)idx->data)[k];
                j = m == 0 ? (j < 0 ? 0 : j >= V ? V - 1 : j) : ((j % V) + V) % V;
                assert_memory_equal((float *)g->data + k * C, (float *)table->data + j * C,
                                    sizeof(float) * (size_t)C);
            }
            ry_tensor_release(g);
        }
        ry_tensor_release(table);
        ry_tensor_release(idx);
        ry_tensor_release(y);
        for (int k = 0; k < P; k++) ry_tensor_release(parts[k]);
        ry_tensor_release(x);
    }
    ry_set_num_threads(1);
}

/* A row's sum as the serial loop forms it: four interleaved lanes in
 * double, combined (a0 + a1) + (a2 + a3). */
static double lane_sum(const float *row, int64_t len) {
    double a[4] = {0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 4 <= len; j += 4)
        for (int l = 0; l < 4; l++) a[l] += row[j + l];
    for (; j < len; j++) a[0] += row[j];
    return (a[0] + a[1]) + (a[2] + a[3]);
}

/* Float sums keep their serial order on every path: a bias gradient
 * (sum over the batch, last axis kept) and a row sum, small (one thread)
 * and large (split), against the loop each output is defined by. */
static void sums_keep_order(void **state) {
    (void)state;
    const int64_t shapes[][2] = {{32, 1024}, {3, 7}, {512, 300}, {1, 5000}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int axis = 0; axis < 2; axis++)
            for (int threads = 1; threads <= 2; threads++) {
                int64_t rows = shapes[k][0], len = shapes[k][1];
                ry_tensor *x = ry_tensor_new(RY_FLOAT32, 2, shapes[k]);
                int64_t n_out = axis == 0 ? len : rows;
                ry_tensor *y = ry_tensor_new(RY_FLOAT32, 1, &n_out);
                assert_true(x && y);
                float *xd = x->data;
                fill(xd, x->size, (uint64_t)(k * 7 + 1));
                ry_attr_value ax = {.kind = RY_AV_INT, .i = axis};
                ry_set_num_threads(threads);
                call_kernel("sum", 1, &x, 1, &y, "axis",
                            &(ry_attr_value){.kind = RY_AV_LIST, .list = {1, &ax}}, NULL);
                ry_set_num_threads(1);
                const float *yd = y->data;
                for (int64_t o = 0; o < n_out; o++) {
                    double want;
                    if (axis == 0) { /* rows in order, in double */
                        want = 0;
                        for (int64_t q = 0; q < rows; q++) want += xd[q * len + o];
                    } else {
                        want = lane_sum(xd + o * len, len);
                    }
                    assert_true(yd[o] == (float)want);
                }
                ry_tensor_release(x);
                ry_tensor_release(y);
            }
}

/* A conv bias gradient, (N, C, H, W) summed over N, H and W: rows that
 * feed their outputs interleaved, split over the outputs at 2 threads.
 * Each output takes its rows in order, each row four interleaved lanes, as
 * the serial loop does, small (one thread) and large (split). */
static void bias_sums_keep_order(void **state) {
    (void)state;
    const int64_t shapes[][4] = {{64, 6, 28, 28}, {2, 3, 1, 5}, {64, 16, 10, 10}, {1, 40, 1, 3}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int threads = 1; threads <= 2; threads++) {
            const int64_t *sh = shapes[k];
            int64_t nc = sh[1], len = sh[3], rows_per = sh[2];
            ry_tensor *x = ry_tensor_new(RY_FLOAT32, 4, sh);
            ry_tensor *y = ry_tensor_new(RY_FLOAT32, 1, &nc);
            assert_true(x && y);
            float *xd = x->data;
            fill(xd, x->size, (uint64_t)(k * 13 + 5));
            ry_attr_value ax[3] = {{.kind = RY_AV_INT, .i = 0},
                                   {.kind = RY_AV_INT, .i = 2},
                                   {.kind = RY_AV_INT, .i = 3}};
            ry_set_num_threads(threads);
            call_kernel("sum", 1, &x, 1, &y, "axis",
                        &(ry_attr_value){.kind = RY_AV_LIST, .list = {3, ax}}, NULL);
            ry_set_num_threads(1);
            const float *yd = y->data;
            for (int64_t o = 0; o < nc; o++) {
                double want = 0;
                for (int64_t n = 0; n < sh[0]; n++)
                    for (int64_t h = 0; h < rows_per; h++)
                        want += lane_sum(xd + ((n * nc + o) * rows_per + h) * len, len);
                assert_true(yd[o] == (float)want);
            }
            ry_tensor_release(x);
            ry_tensor_release(y);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(covers_once),        cmocka_unit_test(knob),
        cmocka_unit_test(nested_runs_inline), cmocka_unit_test(serial_bracket),
        cmocka_unit_test(concurrent_callers), cmocka_unit_test(sleeping_waits),
        cmocka_unit_test(kernels_match),
        cmocka_unit_test(gemm_split_same_bits), cmocka_unit_test(gemm_parts_rules),
        cmocka_unit_test(gemm_empty_k),       cmocka_unit_test(parallel_copy),
        cmocka_unit_test(copies_split_over_threads),
        cmocka_unit_test(sums_keep_order),    cmocka_unit_test(bias_sums_keep_order),
    };
    /* e.g. RY_TEST_FILTER='*' minus OpenBLAS: helgrind runs "c*" "n*" "s*" */
    const char *filter = getenv("RY_TEST_FILTER");
    if (filter) cmocka_set_test_filter(filter);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
