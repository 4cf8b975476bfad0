/*
 * test_dtype16.c: the 16-bit integer dtypes int16 and uint16 end to end:
 * names, sizes and element access (saturating sets); .npy files ("<i2",
 * "<u2") written and read back; the text format (types, the `i16` literal
 * with its range, which TVM prints and reads too, constants through
 * #[metadata] as TVM writes them); the kernels on both
 * engines: arithmetic wrapping modulo 2^16, casts that wrap (integer to
 * integer) and saturate (float to integer), comparisons, reductions,
 * take with 16-bit indices, one_hot, where and bias_add.
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_util.h"

#include "relayc/vm.h"

static ry_tensor *vec(ry_dtype dt, int n, const double *v) {
    ry_tensor *t = ry_tensor_new(dt, 1, (int64_t[]){n});
    assert_non_null(t);
    for (int i = 0; i < n; i++) ry_tensor_set(t, i, v[i]);
    return t;
}

static void assert_values(const ry_tensor *t, ry_dtype dt, int n, const double *want) {
    assert_int_equal(t->dtype, dt);
    assert_int_equal(t->size, n);
    for (int i = 0; i < n; i++)
        if (ry_tensor_get(t, i) != want[i])
            fail_msg("%s element %d is %g, not %g", ry_dtype_name(dt), i, ry_tensor_get(t, i), want[i]);
}

static void test_names_and_elements(void **state) {
    (void)state;
    ry_dtype d;
    assert_true(ry_dtype_parse("int16", 5, &d) && d == RY_INT16);
    assert_true(ry_dtype_parse("uint16", 6, &d) && d == RY_UINT16);
    assert_string_equal(ry_dtype_name(RY_INT16), "int16");
    assert_int_equal(ry_dtype_size(RY_INT16), 2);
    assert_int_equal(ry_dtype_size(RY_UINT16), 2);
    assert_true(ry_dtype_is_int(RY_INT16) && ry_dtype_is_int(RY_UINT16));
    assert_false(ry_dtype_is_float(RY_UINT16));
    /* the dtypes that came before keep their numbers */
    assert_int_equal(RY_BOOL, 7);
    assert_int_equal(RY_INT16, 8);
    const double in[5] = {40000, -40000, -1, 65535.9, 7};
    ry_tensor *a = vec(RY_INT16, 5, in), *b = vec(RY_UINT16, 5, in);
    assert_values(a, RY_INT16, 5, (double[]){32767, -32768, -1, 32767, 7});
    assert_values(b, RY_UINT16, 5, (double[]){40000, 0, 0, 65535, 7});
    ry_tensor_release(a);
    ry_tensor_release(b);
}

static void test_npy_round_trip(void **state) {
    (void)state;
    char path[] = "/tmp/relayc_dtype16_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    const ry_dtype dts[2] = {RY_INT16, RY_UINT16};
    const char *descr[2] = {"'<i2'", "'<u2'"};
    for (int k = 0; k < 2; k++) {
        ry_tensor *t = vec(dts[k], 4, (double[]){-300, 12345, 0, 65535});
        ry_error err;
        assert_int_equal(ry_npy_write(path, t, &err), RY_OK);
        FILE *f = fopen(path, "rb");
        char head[128] = {0};
        assert_non_null(f);
        assert_true(fread(head, 1, sizeof head - 1, f) > 10);
        fclose(f);
        assert_non_null(strstr(head + 10, descr[k]));
        ry_tensor *back = test_npy(path);
        assert_int_equal(back->dtype, dts[k]);
        test_assert_close(back, t, 0, 0);
        ry_tensor_release(back);
        ry_tensor_release(t);
    }
    unlink(path);
}

/* Types, the i16 literal, casts in text; printed and parsed back the same. */
static void test_text(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%a: Tensor[(2), int16], %b: Tensor[(2), uint16]) -> (Tensor[(2), int16], Tensor[(2), uint16]) {\n"
                       "  (add(%a, -7i16), add(%b, cast(300i16, dtype=\"uint16\")))\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    char *s = ry_module_print(m);
    assert_non_null(strstr(s, "-7i16"));
    assert_non_null(strstr(s, "Tensor[(2), uint16]"));
    ry_module *m2 = test_parse(s, true);
    char *s2 = ry_module_print(m2);
    assert_string_equal(s, s2);
    /* for TVM too: TVM 0.19 prints and reads `-7i16` (not `3i8`) */
    char *t = ry_module_print_ex(m, &(ry_print_opts){.tvm = true});
    assert_non_null(strstr(t, "-7i16"));
    assert_non_null(strstr(t, "300i16"));
    ry_module *m3 = test_parse(t, true);
    ry_expr *body = ry_module_find_global(m3, "main")->func->func.body;
    const ry_tensor *c = body->tuple.fields[0]->call.args[1]->constant.value;
    assert_int_equal(c->dtype, RY_INT16);
    assert_true(ry_tensor_get(c, 0) == -7);
    ry_free(s);
    ry_free(s2);
    ry_free(t);
    ry_module_free(m);
    ry_module_free(m2);
    ry_module_free(m3);
    ry_error err;
    ry_module *bad = NULL;
    const char *big = "#[version = \"0.0.5\"]\ndef @main() { 40000i16 }\n";
    assert_int_equal(ry_module_parse("big", big, strlen(big), &bad, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "out of range for int16"));
    assert_int_equal(err.line, 2);
}

/* A metadata section as TVM 0.19 writes it: an int16 (2, 2) constant and a
 * uint16 scalar, NDArrays base64-encoded (DLPack codes 0 and 1, 16 bits). */
static void test_tvm_metadata(void **state) {
    (void)state;
    /* written by hand in TVM's layout: magic, reserved, device, ndim,
     * dtype (code, bits, lanes), shape, nbytes, data (little-endian) */
    unsigned char nd1[4 * 8 + 4 + 4 + 4 + 4 + 2 * 8 + 8 + 8], nd2[4 * 8 + 4 + 4 + 4 + 4 + 8 + 2];
    size_t n1 = 0, n2 = 0;
#define PUT(buf, n, v, k)                                                 \
    do {                                                                  \
        uint64_t x_ = (uint64_t)(v);                                      \
        for (int i_ = 0; i_ < (k); i_++) (buf)[(n)++] = (unsigned char)(x_ >> (8 * i_)); \
    } while (0)
    PUT(nd1, n1, 0xDD5E40F096B4A13FULL, 8);
    PUT(nd1, n1, 0, 8);
    PUT(nd1, n1, 1, 4); /* kDLCPU */
    PUT(nd1, n1, 0, 4);
    PUT(nd1, n1, 2, 4); /* ndim */
    PUT(nd1, n1, 0, 1); /* kDLInt */
    PUT(nd1, n1, 16, 1);
    PUT(nd1, n1, 1, 2);
    PUT(nd1, n1, 2, 8);
    PUT(nd1, n1, 2, 8);
    PUT(nd1, n1, 8, 8);
    const int16_t v1[4] = {-32768, -1, 2, 32767};
    for (int i = 0; i < 4; i++) PUT(nd1, n1, (uint16_t)v1[i], 2);
    PUT(nd2, n2, 0xDD5E40F096B4A13FULL, 8);
    PUT(nd2, n2, 0, 8);
    PUT(nd2, n2, 1, 4);
    PUT(nd2, n2, 0, 4);
    PUT(nd2, n2, 0, 4);
    PUT(nd2, n2, 1, 1); /* kDLUInt */
    PUT(nd2, n2, 16, 1);
    PUT(nd2, n2, 1, 2);
    PUT(nd2, n2, 2, 8);
    PUT(nd2, n2, 60000, 2);
#undef PUT
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char e1[256], e2[256];
    const unsigned char *src[2] = {nd1, nd2};
    size_t lens[2] = {n1, n2};
    char *dst[2] = {e1, e2};
    for (int k = 0; k < 2; k++) {
        size_t o = 0;
        for (size_t i = 0; i < lens[k]; i += 3) {
            uint32_t w = (uint32_t)src[k][i] << 16 | (i + 1 < lens[k] ? (uint32_t)src[k][i + 1] << 8 : 0) |
                         (i + 2 < lens[k] ? src[k][i + 2] : 0);
            dst[k][o++] = b64[w >> 18 & 63];
            dst[k][o++] = b64[w >> 12 & 63];
            dst[k][o++] = i + 1 < lens[k] ? b64[w >> 6 & 63] : '=';
            dst[k][o++] = i + 2 < lens[k] ? b64[w & 63] : '=';
        }
        dst[k][o] = 0;
    }
    char text[2048];
    snprintf(text, sizeof text,
             "#[version = \"0.0.5\"]\n"
             "def @main(%%x: Tensor[(2, 2), int16]) -> (Tensor[(2, 2), int16], uint16) {\n"
             "  (add(%%x, meta[relay.Constant][0] /* ty=Tensor[(2, 2), int16] */), meta[relay.Constant][1])\n"
             "}\n\n"
             "#[metadata]\n"
             "{\n  \"root\": 1, \n  \"nodes\": [\n    {\n      \"type_key\": \"\"\n    }, \n"
             "    {\n      \"type_key\": \"Map\", \n      \"keys\": [\n        \"relay.Constant\"\n      ], \n"
             "      \"data\": [2]\n    }, \n    {\n      \"type_key\": \"Array\", \n      \"data\": [3, 4]\n    }, \n"
             "    {\n      \"type_key\": \"relay.Constant\", \n      \"attrs\": {\n        \"_checked_type_\": \"0\", \n"
             "        \"data\": \"0\", \n        \"span\": \"0\", \n        \"virtual_device_\": \"0\"\n      }\n    }, \n"
             "    {\n      \"type_key\": \"relay.Constant\", \n      \"attrs\": {\n        \"_checked_type_\": \"0\", \n"
             "        \"data\": \"1\", \n        \"span\": \"0\", \n        \"virtual_device_\": \"0\"\n      }\n    }\n"
             "  ], \n  \"b64ndarrays\": [\n    \"%s\", \n    \"%s\"\n  ], \n  \"attrs\": {\"tvm_version\": \"0.19.0\"}\n}\n",
             e1, e2);
    ry_module *m = test_parse(text, true);
    ry_tensor *x = ry_tensor_new(RY_INT16, 2, (int64_t[]){2, 2});
    for (int i = 0; i < 4; i++) ry_tensor_set(x, i, 1);
    ry_value *arg = ry_value_tensor(x), *out = NULL;
    ry_error err;
    if (ry_interp_call(m, "main", 1, &arg, NULL, &out, &err)) fail_msg("%s", err.msg);
    assert_values(out->tuple.fields[0]->tensor, RY_INT16, 4, (double[]){-32767, 0, 3, -32768});
    assert_values(out->tuple.fields[1]->tensor, RY_UINT16, 1, (double[]){60000});
    ry_value_release(out);
    ry_value_release(arg);
    /* printed (constants back into metadata) and parsed again: the same */
    char *s = ry_module_print(m);
    ry_module *m2 = test_parse(s, true);
    char *s2 = ry_module_print(m2);
    assert_string_equal(s, s2);
    ry_free(s);
    ry_free(s2);
    ry_module_free(m2);
    ry_module_free(m);
}

static ry_value *call(ry_module *m, bool vm, int n, ry_value **args) {
    ry_value *out = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_vm_program *p = NULL;
    ry_status st = vm ? ry_vm_compile(m, NULL, &p, &err) : RY_OK;
    if (st == RY_OK) st = vm ? ry_vm_call(p, "main", n, args, NULL, &out, &err) : ry_interp_call(m, "main", n, args, NULL, &out, &err);
    ry_vm_free(p);
    if (st) fail_msg("%s: %s", vm ? "vm" : "interp", err.msg);
    return out;
}

static void test_kernels(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @main(%a: Tensor[(4), int16], %b: Tensor[(4), uint16], %f: Tensor[(4), float32]) {\n"
        "  %0 = cast(%b, dtype=\"int16\");\n"
        "  (add(%a, %a), multiply(%b, %b), subtract(%b, cast(4, dtype=\"uint16\")),\n"
        "   cast(%f, dtype=\"int16\"), cast(%f, dtype=\"uint16\"), cast(%a, dtype=\"uint16\"), %0,\n"
        "   sum(%a), sum(%b), max(%b), min(%a), less(%a, %0), negative(%b), divide(%a, -1i16),\n"
        "   take(%f, %b, mode=\"clip\"), one_hot(%a, 1f, 0f, depth=8, axis=-1, dtype=\"float32\"),\n"
        "   where(greater(%a, 0i16), %a, %0), nn.bias_add(expand_dims(%b, axis=0), %b, axis=1),\n"
        "   cast(%a, dtype=\"float32\"), clip(%a, a_min=-5f, a_max=50f))\n"
        "}\n";
    ry_module *m = test_parse(text, true); /* uint16 has no literal: 4 is a cast */
    const double a[4] = {32767, -32768, -2, 3}, b[4] = {65535, 256, 3, 0}, f[4] = {1e6, -1e6, 3.7, -3.7};
    for (int vm = 0; vm < 2; vm++) {
        ry_value *args[3] = {ry_value_tensor(vec(RY_INT16, 4, a)), ry_value_tensor(vec(RY_UINT16, 4, b)),
                             ry_value_tensor(vec(RY_FLOAT32, 4, f))};
        ry_value *o = call(m, vm, 3, args);
        ry_value *const *r = o->tuple.fields;
        assert_values(r[0]->tensor, RY_INT16, 4, (double[]){-2, 0, -4, 6});         /* wraps */
        assert_values(r[1]->tensor, RY_UINT16, 4, (double[]){1, 0, 9, 0});          /* mod 2^16 */
        assert_values(r[2]->tensor, RY_UINT16, 4, (double[]){65531, 252, 65535, 65532});
        assert_values(r[3]->tensor, RY_INT16, 4, (double[]){32767, -32768, 3, -3}); /* saturates */
        assert_values(r[4]->tensor, RY_UINT16, 4, (double[]){65535, 0, 3, 0});
        assert_values(r[5]->tensor, RY_UINT16, 4, (double[]){32767, 32768, 65534, 3});
        assert_values(r[6]->tensor, RY_INT16, 4, (double[]){-1, 256, 3, 0});
        assert_values(r[7]->tensor, RY_INT16, 1, (double[]){0});       /* 32767 - 32768 - 2 + 3 */
        assert_values(r[8]->tensor, RY_UINT16, 1, (double[]){258});    /* 65794 mod 65536 */
        assert_values(r[9]->tensor, RY_UINT16, 1, (double[]){65535});
        assert_values(r[10]->tensor, RY_INT16, 1, (double[]){-32768});
        assert_values(r[11]->tensor, RY_BOOL, 4, (double[]){0, 1, 1, 0});
        assert_values(r[12]->tensor, RY_UINT16, 4, (double[]){1, 65280, 65533, 0});
        assert_values(r[13]->tensor, RY_INT16, 4, (double[]){-32767, -32768, 2, -3});
        assert_values(r[14]->tensor, RY_FLOAT32, 4, (double[]){(float)-3.7, (float)-3.7, (float)-3.7, 1e6});
        const ry_tensor *oh = r[15]->tensor;
        assert_int_equal(oh->size, 32);
        for (int i = 0; i < 32; i++) /* only 3 is within depth 8 (-2 and the extremes are not) */
            assert_true(ry_tensor_get(oh, i) == (i == 3 * 8 + 3 ? 1 : 0));
        assert_values(r[16]->tensor, RY_INT16, 4, (double[]){32767, 256, 3, 3});
        assert_values(r[17]->tensor, RY_UINT16, 4, (double[]){65534, 512, 6, 0});
        assert_values(r[18]->tensor, RY_FLOAT32, 4, a);
        assert_values(r[19]->tensor, RY_INT16, 4, (double[]){50, -5, -2, 3});
        ry_value_release(o);
        for (int i = 0; i < 3; i++) ry_value_release(args[i]);
    }
    ry_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_elements),
        cmocka_unit_test(test_npy_round_trip),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_tvm_metadata),
        cmocka_unit_test(test_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
