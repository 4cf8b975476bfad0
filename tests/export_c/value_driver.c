/*
 * value_driver.c: the header API of tests/export/value_results.relay's
 * export from a C program (tests/test_export_programs.c builds it against
 * the artifact): @main's list and tree results walked with the accessors
 * (kinds, constructor tags, fields, tensors' dtype, shape and data), the
 * same through _run's arrays, values that outlive the next call until
 * value_results_values_clear, and misuse (a NULL value, a field out of
 * range, a tensor asked of an ADT value) answered, not crashed on. Exit 0
 * when all hold.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "value_results.h"

#define CHECK(cond)                                                    \
    do {                                                               \
        if (!(cond)) {                                                 \
            fprintf(stderr, "value_driver:%d: %s\n", __LINE__, #cond); \
            return 1;                                                  \
        }                                                              \
    } while (0)

/* The list's length; each element a float32 [3, 4] tensor, the i-th tanh
 * applied i times to x. */
static int list_ok(const value_results_value *l, int k, const float *x) {
    float want[12];
    memcpy(want, x, sizeof want);
    for (int i = 0; i < k; i++) {
        CHECK(value_results_value_kind(l) == VALUE_RESULTS_KIND_ADT);
        CHECK(value_results_value_tag(l) == VALUE_RESULTS_TAG_Cons);
        CHECK(value_results_value_nfields(l) == 2);
        value_results_array t;
        CHECK(value_results_value_tensor(value_results_value_field(l, 0), &t) == VALUE_RESULTS_OK);
        CHECK(t.dtype == VALUE_RESULTS_FLOAT32 && t.ndim == 2 && t.shape[0] == 3 && t.shape[1] == 4);
        for (int j = 0; j < 12; j++) CHECK(fabsf(((const float *)t.data)[j] - want[j]) < 1e-6f);
        for (int j = 0; j < 12; j++) want[j] = tanhf(want[j]);
        l = value_results_value_field(l, 1);
    }
    CHECK(value_results_value_tag(l) == VALUE_RESULTS_TAG_Nil);
    CHECK(value_results_value_nfields(l) == 0);
    CHECK(value_results_value_field(l, 0) == NULL);
    return 0;
}

/* Node(Leaf(y), Node(Leaf(exp y), Leaf(-y), k + 1), k) */
static int tree_ok(const value_results_value *t, int32_t k, const float *y) {
    CHECK(value_results_value_tag(t) == VALUE_RESULTS_TAG_Node && value_results_value_nfields(t) == 3);
    value_results_array a;
    CHECK(value_results_value_tensor(value_results_value_field(t, 2), &a) == VALUE_RESULTS_OK);
    CHECK(a.dtype == VALUE_RESULTS_INT32 && a.ndim == 0 && *(const int32_t *)a.data == k);
    const value_results_value *leaf = value_results_value_field(t, 0), *inner = value_results_value_field(t, 1);
    CHECK(value_results_value_tag(leaf) == VALUE_RESULTS_TAG_Leaf);
    CHECK(value_results_value_tensor(value_results_value_field(leaf, 0), &a) == VALUE_RESULTS_OK);
    CHECK(a.ndim == 1 && a.shape[0] == 2 && ((const float *)a.data)[1] == y[1]);
    CHECK(value_results_value_tag(inner) == VALUE_RESULTS_TAG_Node);
    CHECK(value_results_value_tensor(value_results_value_field(inner, 2), &a) == VALUE_RESULTS_OK);
    CHECK(*(const int32_t *)a.data == k + 1);
    CHECK(value_results_value_tensor(value_results_value_field(value_results_value_field(inner, 1), 0), &a) ==
          VALUE_RESULTS_OK);
    CHECK(((const float *)a.data)[0] == -y[0]);
    /* an ADT value is not a tensor; out-of-range fields are NULL */
    CHECK(value_results_value_tensor(t, &a) == VALUE_RESULTS_ERR_ARG);
    CHECK(value_results_value_field(t, 3) == NULL && value_results_value_field(t, -1) == NULL);
    return 0;
}

int main(int argc, char **argv) {
    char msg[512];
    value_results_ctx *ctx = NULL;
    CHECK(argc == 2);
    CHECK(value_results_open(&ctx, argv[1], msg, sizeof msg) == VALUE_RESULTS_OK);
    float x[12], y[2] = {0.5f, -2.0f}, sig[12];
    for (int j = 0; j < 12; j++) x[j] = -1.0f + 2.0f * (float)j / 11.0f;
    value_results_value *l = NULL, *t = NULL, *l0 = NULL;
    for (int32_t k = 0; k <= 3; k++) {
        CHECK(value_results_main(ctx, &k, x, y, &l, &t, sig) == VALUE_RESULTS_OK);
        CHECK(list_ok(l, k, x) == 0);
        CHECK(tree_ok(t, k, y) == 0);
        for (int j = 0; j < 12; j++) CHECK(fabsf(sig[j] - 1.0f / (1.0f + expf(-x[j]))) < 1e-6f);
        if (k == 0) l0 = l;
    }
    /* a result stays until values_clear: the first call's empty list */
    CHECK(list_ok(l0, 0, x) == 0);
    /* through _run: the values come back as VALUE arrays */
    int32_t k = 2;
    value_results_array in[3] = {{VALUE_RESULTS_INT32, 0, {0}, &k},
                                 {VALUE_RESULTS_FLOAT32, 2, {3, 4}, x},
                                 {VALUE_RESULTS_FLOAT32, 1, {2}, y}};
    value_results_array out[3];
    CHECK(value_results_main_run(ctx, in, out) == VALUE_RESULTS_OK);
    CHECK(out[0].dtype == VALUE_RESULTS_VALUE && out[1].dtype == VALUE_RESULTS_VALUE);
    CHECK(list_ok(out[0].data, 2, x) == 0 && tree_ok(out[1].data, 2, y) == 0);
    CHECK(out[2].dtype == VALUE_RESULTS_FLOAT32 && out[2].ndim == 2);
    free(out[2].data);
    /* a wrong dtype: an error, and no output left to free */
    in[1].dtype = VALUE_RESULTS_FLOAT64;
    CHECK(value_results_main_run(ctx, in, out) == VALUE_RESULTS_ERR_ARG);
    CHECK(strstr(value_results_error(ctx), "x") != NULL);
    /* NULLs answered */
    CHECK(value_results_value_kind(NULL) == -1 && value_results_value_tag(NULL) == -1);
    CHECK(value_results_value_nfields(NULL) == 0 && value_results_value_field(NULL, 0) == NULL);
    CHECK(value_results_main(ctx, &k, x, y, NULL, &t, sig) == VALUE_RESULTS_ERR_ARG);
    value_results_values_clear(ctx);
    value_results_close(ctx);
    return 0;
}
