/*
 * device_conv.c: a device convolution's two paths side by side, the
 * direct kernel and im2col + the device GEMM (src/backend/device/
 * dk_conv_gemm.c), for nn.conv2d, its data gradient (nn.conv2d_transpose)
 * and weight gradient (nn.conv2d_backward_weight) on a set of shapes:
 * LeNet's two, a 3x3 and 1x1 of a ResNet-like net, strided, dilated,
 * grouped, depthwise and tiny ones. Each is a one-operator program called
 * through the VM with its operands and result kept on the device; each
 * round times `calls` queued calls of the direct path, then of the GEMM
 * path (ry_dk_conv_force), so both see the same machine load. Prints one
 * JSON line per shape and operator: the median microseconds per call of
 * each path, their ratio, and the path the rule (ry_dk_conv_gemm_pays)
 * picks. This is what the rule was set from.
 *   device_conv [--target T] [--calls N] [--only NAME]
 * Not a test: nothing here asserts a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/device/dk_ops.h"
#include "bench_util.h"
#include "relayc/relayc.h"

#define ROUNDS 5

typedef struct shape {
    const char *name;
    int64_t N, C, H, W, O, K, s, p, d, G;
} shape;

static const shape shapes[] = {
    {"lenet_conv1", 64, 1, 28, 28, 6, 5, 1, 2, 1, 1},
    {"lenet_conv2", 64, 6, 14, 14, 16, 5, 1, 0, 1, 1},
    {"3x3", 8, 32, 16, 16, 32, 3, 1, 1, 1, 1},
    {"1x1", 8, 64, 8, 8, 64, 1, 1, 0, 1, 1},
    {"3x3_stride2", 8, 16, 16, 16, 32, 3, 2, 1, 1, 1},
    {"3x3_dilated", 4, 8, 12, 12, 8, 3, 1, 2, 2, 1},
    {"grouped_g4", 8, 32, 16, 16, 32, 3, 1, 1, 1, 4},
    {"depthwise", 8, 32, 16, 16, 32, 3, 1, 1, 1, 32},
    {"tiny", 1, 2, 6, 6, 2, 3, 1, 0, 1, 1},
};

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the one-operator program of op (0 forward, 1 data, 2 weight gradient) */
static void program(const shape *s, int op, char *text, size_t n) {
    int64_t OH = (s->H + 2 * s->p - s->d * (s->K - 1) - 1) / s->s + 1, OW = OH;
    int64_t opad = (s->H + 2 * s->p - s->d * (s->K - 1) - 1) % s->s;
    char geo[256];
    snprintf(geo, sizeof geo, "strides=[%lld, %lld], padding=[%lld, %lld, %lld, %lld], dilation=[%lld, %lld], groups=%lld",
             (long long)s->s, (long long)s->s, (long long)s->p, (long long)s->p, (long long)s->p,
             (long long)s->p, (long long)s->d, (long long)s->d, (long long)s->G);
    char x[96], w[96], y[96];
    snprintf(x, sizeof x, "Tensor[(%lld, %lld, %lld, %lld), float32]", (long long)s->N, (long long)s->C,
             (long long)s->H, (long long)s->W);
    snprintf(w, sizeof w, "Tensor[(%lld, %lld, %lld, %lld), float32]", (long long)s->O,
             (long long)(s->C / s->G), (long long)s->K, (long long)s->K);
    snprintf(y, sizeof y, "Tensor[(%lld, %lld, %lld, %lld), float32]", (long long)s->N, (long long)s->O,
             (long long)OH, (long long)OW);
    const char *v = "#[version = \"0.0.5\"]\n";
    if (op == 0)
        snprintf(text, n, "%sdef @main(%%a: %s, %%b: %s) {\n  nn.conv2d(%%a, %%b, %s)\n}\n", v, x, w, geo);
    else if (op == 1)
        snprintf(text, n,
                 "%sdef @main(%%a: %s, %%b: %s) {\n  nn.conv2d_transpose(%%a, %%b, channels=%lld, "
                 "kernel_size=[%lld, %lld], output_padding=[%lld, %lld], %s)\n}\n",
                 v, y, w, (long long)s->C, (long long)s->K, (long long)s->K, (long long)opad,
                 (long long)opad, geo);
    else
        snprintf(text, n,
                 "%sdef @main(%%a: %s, %%b: %s) {\n  nn.conv2d_backward_weight(%%a, %%b, channels=%lld, "
                 "kernel_size=[%lld, %lld], %s)\n}\n",
                 v, y, x, (long long)s->O, (long long)s->K, (long long)s->K, geo);
}

/* `calls` queued calls on path, ended by reading the result back: us per call */
static ry_status time_path(ry_vm_program *p, ry_value **args, ry_dk_conv_path path, int calls,
                           double *us, ry_error *err) {
    ry_dk_conv_force = path;
    ry_vm_opts o = {0};
    o.keep_on_device = true;
    double t0 = bench_now();
    ry_value *r = NULL;
    for (int i = 0; i < calls; i++) {
        ry_value_release(r);
        r = NULL;
        if (ry_vm_call(p, "main", 2, args, &o, &r, err)) return RY_ERR;
    }
    ry_tensor *h = NULL;
    ry_status back = ry_tensor_to(ry_target_cpu(), r->tensor, &h, err);
    ry_tensor_release(h);
    ry_value_release(r);
    *us = (bench_now() - t0) * 1e6 / calls;
    return back;
}

/* an operand of shape (a, b, c, e), filled, on t */
static ry_value *operand(const ry_target *t, int64_t a, int64_t b, int64_t c, int64_t e, ry_error *err) {
    ry_tensor *h = ry_tensor_new(RY_FLOAT32, 4, (int64_t[]){a, b, c, e}), *d = NULL;
    if (!h) return NULL;
    for (int64_t k = 0; k < h->size; k++) ry_tensor_set(h, k, (double)((k * 7919) % 13) * 0.1 - 0.6);
    ry_status st = ry_tensor_to(t, h, &d, err);
    ry_tensor_release(h);
    return st ? NULL : ry_value_tensor(d);
}

static ry_status run(const ry_target *t, const char *tname, const shape *s, int op, int calls, ry_error *err) {
    static const char *const ops[] = {"nn.conv2d", "nn.conv2d_transpose", "nn.conv2d_backward_weight"};
    char text[1024];
    program(s, op, text, sizeof text);
    ry_module *m = NULL;
    ry_vm_program *p = NULL;
    ry_value *args[2] = {NULL, NULL};
    ry_status st = RY_ERR;
    double sd[ROUNDS], sg[ROUNDS];
    int64_t OH = (s->H + 2 * s->p - s->d * (s->K - 1) - 1) / s->s + 1;
    int64_t x[4] = {s->N, s->C, s->H, s->W}, w[4] = {s->O, s->C / s->G, s->K, s->K},
            y[4] = {s->N, s->O, OH, OH};
    const int64_t *a = op == 0 ? x : y, *b = op == 2 ? x : w;
    if (ry_module_parse("conv.relay", text, strlen(text), &m, err) || ry_module_typecheck(m, err) ||
        ry_vm_compile(m, t, &p, err) || !(args[0] = operand(t, a[0], a[1], a[2], a[3], err)) ||
        !(args[1] = operand(t, b[0], b[1], b[2], b[3], err)))
        goto out;
    for (int round = -1; round < ROUNDS; round++) { /* round -1 builds the kernels */
        double a, b;
        if (time_path(p, args, RY_DK_CONV_DIRECT, calls, &a, err) ||
            time_path(p, args, RY_DK_CONV_GEMM, calls, &b, err))
            goto out;
        if (round >= 0) sd[round] = a, sg[round] = b;
    }
    qsort(sd, ROUNDS, sizeof *sd, cmp);
    qsort(sg, ROUNDS, sizeof *sg, cmp);
    ry_dk_conv_force = RY_DK_CONV_AUTO;
    ry_gen_conv kind = op == 0 ? RY_GEN_CONV_FWD : op == 1 ? RY_GEN_CONV_DX : RY_GEN_CONV_DW;
    /* the geometry as dk_conv.c passes it (the transpose's C H W are its input's) */
    int64_t g[16] = {s->C, s->H, s->W, s->O, OH, OH, s->K, s->K, s->C / s->G, s->O / s->G,
                     s->s, s->s, s->d, s->d, s->p, s->p};
    if (op == 1) {
        int64_t v[10] = {s->O, OH, OH, s->C, s->H, s->W, s->K, s->K, s->O / s->G, s->C / s->G};
        memcpy(g, v, sizeof v);
    }
    bool gemm = ry_dk_conv_gemm_pays(kind, g, s->N);
    printf("{\"bench\": \"device_conv\", \"target\": \"%s\", \"shape\": \"%s\", \"op\": \"%s\", "
           "\"direct_us\": %.1f, \"gemm_us\": %.1f, \"gemm_over_direct\": %.3f, \"rule\": \"%s\"}\n",
           tname, s->name, ops[op], sd[ROUNDS / 2], sg[ROUNDS / 2], sg[ROUNDS / 2] / sd[ROUNDS / 2],
           gemm ? "gemm" : "direct");
    fflush(stdout);
    st = RY_OK;
out:
    ry_dk_conv_force = RY_DK_CONV_AUTO;
    ry_value_release(args[0]);
    ry_value_release(args[1]);
    ry_vm_free(p);
    ry_module_free(m);
    return st;
}

int main(int argc, char **argv) {
    const char *target = "opencl", *only = NULL;
    int calls = 10;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = bench_opt(argc, argv, &i, "--target"))) target = v;
        else if ((v = bench_opt(argc, argv, &i, "--calls"))) calls = atoi(v);
        else if ((v = bench_opt(argc, argv, &i, "--only"))) only = v;
        else {
            fprintf(stderr, "usage: device_conv [--target T] [--calls N] [--only NAME]\n");
            return 2;
        }
    }
    if (calls < 1) {
        fprintf(stderr, "device_conv: --calls >= 1\n");
        return 2;
    }
    const ry_target *t;
    ry_error err = {0};
    if (ry_target_find(target, &t, &err)) {
        fprintf(stderr, "device_conv: %s\n", err.msg);
        return 1;
    }
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        if (only && strcmp(only, shapes[k].name) != 0) continue;
        for (int op = 0; op < 3; op++)
            if (run(t, target, &shapes[k], op, calls, &err)) {
                ry_error_print(stderr, &err);
                return 1;
            }
    }
    return 0;
}
