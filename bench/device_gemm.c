/*
 * device_gemm.c: the rate of the device's own GEMM (cuBLAS on --target
 * cuda, CLBlast on opencl, OpenBLAS on cpu) for the MLP's three nn.dense
 * shapes at a batch, each a one-operator program called through the VM
 * with its operands and result kept on the device, so the time is the
 * GEMM's plus one launch's overhead. Prints one JSON line per shape (median
 * microseconds per call over five rounds of N queued calls, GFLOP/s) and a last line with the step's
 * GEMM-bound time: 3 x the forward GEMMs (the backward pass runs two
 * GEMMs of each forward one's flops), to set beside train_step's median.
 *   device_gemm [--target T] [--batch B] [--calls N]
 * Not a test: nothing here asserts a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "relayc/relayc.h"

#define MAX_CALLS 4096
#define ROUNDS 5

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* median microseconds of nn.dense(x (B, K), w (N, K)) on t */
static ry_status time_dense(const ry_target *t, int64_t B, int64_t K, int64_t N, int calls, double *us,
                            ry_error *err) {
    char text[512];
    snprintf(text, sizeof text,
             "#[version = \"0.0.5\"]\ndef @main(%%x: Tensor[(%lld, %lld), float32], %%w: Tensor[(%lld, %lld), float32]) {\n"
             "  nn.dense(%%x, %%w)\n}\n",
             (long long)B, (long long)K, (long long)N, (long long)K);
    ry_module *m = NULL;
    ry_vm_program *p = NULL;
    ry_tensor *hx = ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){B, K});
    ry_tensor *hw = ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){N, K}), *dx = NULL, *dw = NULL;
    ry_value *args[2] = {NULL, NULL};
    ry_status st = RY_ERR;
    double s[ROUNDS];
    if (!hx || !hw) goto out;
    for (int64_t i = 0; i < hx->size; i++) ry_tensor_set(hx, i, (double)(i % 7) * 0.1);
    for (int64_t i = 0; i < hw->size; i++) ry_tensor_set(hw, i, (double)(i % 5) * 0.1);
    if (ry_module_parse("dense.relay", text, strlen(text), &m, err) || ry_module_typecheck(m, err) ||
        ry_vm_compile(m, t, &p, err) || ry_tensor_to(t, hx, &dx, err) || ry_tensor_to(t, hw, &dw, err))
        goto out;
    args[0] = ry_value_tensor(dx), args[1] = ry_value_tensor(dw); /* they take dx, dw */
    dx = dw = NULL;
    ry_vm_opts o = {0};
    o.keep_on_device = true;
    /* ROUNDS rounds of `calls` calls queued back to back, each ended by
     * reading the last result back (which waits for the queue); the
     * median round's time per call. The first round builds the kernels. */
    for (int round = -1; round < ROUNDS; round++) {
        double t0 = bench_now();
        ry_value *r = NULL;
        for (int i = 0; i < calls; i++) {
            ry_value_release(r);
            r = NULL;
            if (ry_vm_call(p, "main", 2, args, &o, &r, err)) goto out;
        }
        ry_tensor *h = NULL;
        ry_status back = ry_tensor_to(ry_target_cpu(), r->tensor, &h, err);
        ry_tensor_release(h);
        ry_value_release(r);
        if (back) goto out;
        if (round >= 0) s[round] = (bench_now() - t0) * 1e6 / calls;
    }
    qsort(s, ROUNDS, sizeof *s, cmp);
    *us = s[ROUNDS / 2];
    st = RY_OK;
out:
    ry_value_release(args[0]);
    ry_value_release(args[1]);
    ry_tensor_release(dx);
    ry_tensor_release(dw);
    ry_tensor_release(hx);
    ry_tensor_release(hw);
    ry_vm_free(p);
    ry_module_free(m);
    return st;
}

int main(int argc, char **argv) {
    const char *target = "cpu";
    int64_t batch = 64;
    int calls = 200;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = bench_opt(argc, argv, &i, "--target"))) target = v;
        else if ((v = bench_opt(argc, argv, &i, "--batch"))) batch = atoll(v);
        else if ((v = bench_opt(argc, argv, &i, "--calls"))) calls = atoi(v);
        else {
            fprintf(stderr, "usage: device_gemm [--target T] [--batch B] [--calls N]\n");
            return 2;
        }
    }
    if (batch < 1 || calls < 1 || calls > MAX_CALLS) {
        fprintf(stderr, "device_gemm: --batch >= 1, --calls 1..%d\n", MAX_CALLS);
        return 2;
    }
    const ry_target *t;
    ry_error err = {0};
    if (ry_target_find(target, &t, &err)) {
        fprintf(stderr, "device_gemm: %s\n", err.msg);
        return 1;
    }
    static const int64_t shapes[3][2] = {{784, 256}, {256, 128}, {128, 10}}; /* K, N */
    double fwd_us = 0;
    for (int k = 0; k < 3; k++) {
        double us;
        if (time_dense(t, batch, shapes[k][0], shapes[k][1], calls, &us, &err)) {
            ry_error_print(stderr, &err);
            return 1;
        }
        double flops = 2.0 * (double)batch * (double)shapes[k][0] * (double)shapes[k][1];
        printf("{\"bench\": \"device_gemm\", \"target\": \"%s\", \"m\": %lld, \"k\": %lld, \"n\": %lld, "
               "\"us_median\": %.2f, \"gflops\": %.2f}\n",
               target, (long long)batch, (long long)shapes[k][0], (long long)shapes[k][1], us,
               flops / (us * 1e3));
        fwd_us += us;
    }
    printf("{\"bench\": \"device_gemm\", \"target\": \"%s\", \"model\": \"mlp\", \"batch\": %lld, "
           "\"step_gemm_bound_ms\": %.4f}\n",
           target, (long long)batch, 3 * fwd_us / 1e3);
    return 0;
}
