/*
 * test_tensor.c: dtypes, float16 conversion, devices, and tensors: creation,
 * reference counting, views, copies, element access, and behaviour when any
 * allocation fails. File reading and writing are in test_npy.c.
 */
#include "test_util.h"

/* ---- dtypes ------------------------------------------------------------- */

static void test_dtype_names_and_sizes(void **state) {
    (void)state;
    static const struct {
        ry_dtype d;
        const char *name;
        size_t size;
        bool is_float, is_int;
    } want[] = {
        {RY_FLOAT32, "float32", 4, true, false}, {RY_FLOAT64, "float64", 8, true, false},
        {RY_FLOAT16, "float16", 2, true, false}, {RY_INT8, "int8", 1, false, true},
        {RY_INT32, "int32", 4, false, true},     {RY_INT64, "int64", 8, false, true},
        {RY_UINT8, "uint8", 1, false, true},     {RY_BOOL, "bool", 1, false, false},
        {RY_INT16, "int16", 2, false, true},     {RY_UINT16, "uint16", 2, false, true},
    };
    assert_int_equal(sizeof want / sizeof want[0], RY_DTYPE_COUNT);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(ry_dtype_name(want[i].d), want[i].name);
        assert_int_equal(ry_dtype_size(want[i].d), want[i].size);
        assert_int_equal(ry_dtype_is_float(want[i].d), want[i].is_float);
        assert_int_equal(ry_dtype_is_int(want[i].d), want[i].is_int);
        ry_dtype back = RY_DTYPE_COUNT;
        assert_true(ry_dtype_parse(want[i].name, strlen(want[i].name), &back));
        assert_int_equal(back, want[i].d);
    }
    assert_int_equal(ry_dtype_size(RY_DTYPE_COUNT), 0);
    assert_string_equal(ry_dtype_name((ry_dtype)-1), "invalid");
}

static void test_dtype_parse_rejects(void **state) {
    (void)state;
    ry_dtype d = RY_INT8;
    /* n counts the bytes: a prefix of a longer token must match exactly */
    assert_true(ry_dtype_parse("float32, more", 7, &d));
    assert_int_equal(d, RY_FLOAT32);
    assert_true(ry_dtype_parse("int8x", 4, &d));
    assert_int_equal(d, RY_INT8);
    const char *bad[] = {"float", "float322", "Float32", "", "int", "f4", "uint32", "boolean", "int1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d = RY_UINT8;
        assert_false(ry_dtype_parse(bad[i], strlen(bad[i]), &d));
        assert_int_equal(d, RY_UINT8); /* untouched on failure */
    }
    assert_false(ry_dtype_parse("float32", 6, &d));
    assert_false(ry_dtype_parse(NULL, 0, &d));
    assert_true(ry_dtype_parse("bool", 4, NULL));
}

static void test_device(void **state) {
    (void)state;
    assert_string_equal(ry_device_name(RY_CPU), "cpu");
    ry_allocator *a = ry_cpu_allocator();
    assert_int_equal(a->device.kind, RY_DEVICE_CPU);
    void *p = a->alloc(a, 100);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 64, 0);
    a->free(a, p);
}

/* ---- float16 ------------------------------------------------------------ */

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void test_f16_known_values(void **state) {
    (void)state;
    static const struct {
        uint16_t h;
        float f;
    } exact[] = {
        {0x0000, 0.0f},       {0x3c00, 1.0f},          {0xc000, -2.0f},
        {0x3555, 0.333251953125f}, {0x7bff, 65504.0f}, {0x0400, 6.103515625e-05f},
        {0x0001, 5.9604644775390625e-08f}, {0x03ff, 6.097555160522461e-05f},
        {0x7c00, INFINITY},   {0xfc00, -INFINITY},     {0x3800, 0.5f},
    };
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        assert_true(ry_f16_to_f32(exact[i].h) == exact[i].f);
        assert_int_equal(ry_f32_to_f16(exact[i].f), exact[i].h);
    }
    /* negative zero keeps its sign both ways */
    assert_int_equal(bits_of(ry_f16_to_f32(0x8000)), 0x80000000u);
    assert_int_equal(ry_f32_to_f16(-0.0f), 0x8000);
    /* nan stays nan, with its sign */
    assert_true(isnan(ry_f16_to_f32(0x7e00)));
    assert_true(isnan(ry_f16_to_f32(0x7c01))); /* signalling payload */
    uint16_t hn = ry_f32_to_f16(NAN);
    assert_int_equal(hn & 0x7c00, 0x7c00);
    assert_true((hn & 0x3ff) != 0);
    float snan;
    uint32_t snan_bits = 0x7f800001u; /* payload only in the low bits */
    memcpy(&snan, &snan_bits, 4);
    assert_true(isnan(ry_f16_to_f32(ry_f32_to_f16(snan))));
    assert_int_equal(ry_f32_to_f16(-NAN) & 0x8000, 0x8000);
    /* overflow and rounding at the top: 65519 rounds down, 65520 is the tie
     * that goes to even, i.e. to inf */
    assert_int_equal(ry_f32_to_f16(65519.0f), 0x7bff);
    assert_int_equal(ry_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(ry_f32_to_f16(1e10f), 0x7c00);
    assert_int_equal(ry_f32_to_f16(-1e10f), 0xfc00);
    assert_int_equal(ry_f32_to_f16(3.4e38f), 0x7c00);
    /* underflow: 2^-25 is the tie between 0 and the smallest subnormal, goes
     * to 0 (even); anything above rounds up to it */
    assert_int_equal(ry_f32_to_f16(0x1p-25f), 0x0000);
    assert_int_equal(ry_f32_to_f16(0x1.000002p-25f), 0x0001);
    assert_int_equal(ry_f32_to_f16(0x1.8p-24f), 0x0002); /* 1.5 ulp: tie to even 2 */
    assert_int_equal(ry_f32_to_f16(0x1p-30f), 0x0000);
    assert_int_equal(ry_f32_to_f16(-0x1p-30f), 0x8000);
    assert_int_equal(ry_f32_to_f16(1e-45f), 0x0000); /* float32 subnormal */
    /* the tie above the largest subnormal (odd) rounds up to the smallest normal */
    assert_int_equal(ry_f32_to_f16(0x1.ffcp-15f), 0x0400);
    /* 1 + 2^-11 is the tie between 1 and 1 + 2^-10: even is 1 */
    assert_int_equal(ry_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    assert_int_equal(ry_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    assert_int_equal(ry_f32_to_f16(1.0f + 0x3p-11f), 0x3c02); /* tie, odd below: up */
}

/* Every half converts to a float and back to itself (nan to some nan), and
 * the midpoint between two neighbours rounds to the even one. */
static void test_f16_exhaustive(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = ry_f16_to_f32((uint16_t)h);
        bool is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan) {
            assert_true(isnan(f));
            continue;
        }
        assert_int_equal(ry_f32_to_f16(f), h);
        if ((h & 0x7fff) >= 0x7bff) continue; /* no finite neighbour above */
        float next = ry_f16_to_f32((uint16_t)(h + 1));
        float mid = (float)(((double)f + (double)next) / 2); /* exact in float32 */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        assert_int_equal(ry_f32_to_f16(mid), even);
        /* a hair either side of the midpoint decides it */
        assert_int_equal(ry_f32_to_f16(nextafterf(mid, f)), h);
        assert_int_equal(ry_f32_to_f16(nextafterf(mid, next)), h + 1);
    }
}

/* Against numpy's own float32 -> float16 on random and halfway values. */
static void test_f16_matches_numpy(void **state) {
    (void)state;
    ry_tensor *in = test_npy("tests/npy/f16_round_in.npy");
    ry_tensor *out = test_npy("tests/npy/f16_round_out.npy");
    assert_int_equal(in->dtype, RY_FLOAT32);
    assert_int_equal(out->dtype, RY_FLOAT16);
    assert_int_equal(in->size, 2000);
    assert_int_equal(out->size, in->size);
    for (int64_t i = 0; i < in->size; i++) {
        uint16_t want = ((uint16_t *)out->data)[i];
        uint16_t got = ry_f32_to_f16(((float *)in->data)[i]);
        if (got != want) fail_msg("element %lld: %a -> 0x%04x, numpy 0x%04x", (long long)i,
                                  (double)((float *)in->data)[i], got, want);
    }
    ry_tensor_release(in);
    ry_tensor_release(out);
}

/* ---- creation ----------------------------------------------------------- */

static void test_new_shapes(void **state) {
    (void)state;
    int64_t shape[RY_MAX_RANK + 1] = {2, 3, 4, 1, 1, 1, 1, 2, 1};
    for (int nd = 0; nd <= RY_MAX_RANK; nd++) {
        ry_tensor *t = ry_tensor_new(RY_FLOAT64, nd, shape);
        assert_non_null(t);
        int64_t size = 1;
        for (int i = 0; i < nd; i++) size *= shape[i];
        assert_int_equal(t->ndim, nd);
        assert_int_equal(t->size, size);
        assert_int_equal(t->refcount, 1);
        assert_int_equal(t->dtype, RY_FLOAT64);
        assert_int_equal(t->device.kind, RY_DEVICE_CPU);
        assert_ptr_equal(t->alloc, ry_cpu_allocator());
        assert_null(t->base);
        assert_non_null(t->data);
        assert_int_equal(ry_tensor_nbytes(t), (size_t)size * 8);
        for (int i = 0; i < nd; i++) assert_int_equal(t->shape[i], shape[i]);
        /* the whole buffer is writable (ASan checks the bounds) */
        memset(t->data, 0xab, ry_tensor_nbytes(t));
        ry_tensor_release(t);
    }
    /* a scalar needs no shape array */
    ry_tensor *s = ry_tensor_new(RY_INT8, 0, NULL);
    assert_non_null(s);
    assert_int_equal(s->size, 1);
    ry_tensor_release(s);
}

static void test_new_rejects(void **state) {
    (void)state;
    int64_t shape[RY_MAX_RANK + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    assert_null(ry_tensor_new(RY_FLOAT32, RY_MAX_RANK + 1, shape));
    assert_null(ry_tensor_new(RY_FLOAT32, -1, shape));
    assert_null(ry_tensor_new(RY_FLOAT32, 2, NULL));
    assert_null(ry_tensor_new(RY_DTYPE_COUNT, 1, shape));
    int64_t neg[2] = {3, -1};
    assert_null(ry_tensor_new(RY_FLOAT32, 2, neg));
    assert_null(ry_tensor_zeros(RY_FLOAT32, 2, neg));
    int64_t huge[3] = {INT64_MAX / 2, 4, 1}; /* element count overflows */
    assert_null(ry_tensor_new(RY_INT8, 3, huge));
    int64_t bytes[1] = {INT64_MAX / 4}; /* bytes overflow though count fits */
    assert_null(ry_tensor_new(RY_FLOAT64, 1, bytes));
    int64_t ptrdiff[1] = {PTRDIFF_MAX / 8 + 1}; /* just past PTRDIFF_MAX bytes */
    assert_null(ry_tensor_new(RY_FLOAT64, 1, ptrdiff));
    /* empty, but the other dimensions overflow: numpy refuses it too */
    int64_t empty_huge[3] = {0, INT64_MAX / 2, 4};
    assert_null(ry_tensor_new(RY_INT8, 3, empty_huge));
    assert_null(ry_tensor_new_on(NULL, RY_FLOAT32, 1, shape));
}

static void test_zero_size(void **state) {
    (void)state;
    int64_t shape[3] = {2, 0, 3};
    ry_tensor *t = ry_tensor_zeros(RY_FLOAT32, 3, shape);
    assert_non_null(t);
    assert_int_equal(t->size, 0);
    assert_int_equal(ry_tensor_nbytes(t), 0);
    assert_true(isnan(ry_tensor_get(t, 0)));
    ry_tensor *c = ry_tensor_copy(t);
    assert_non_null(c);
    assert_true(ry_tensor_same_shape(t, c));
    ry_tensor *v = ry_tensor_view(t, 0, RY_INT64, 1, (int64_t[]){0});
    assert_non_null(v);
    ry_tensor_release(v);
    ry_tensor_release(c);
    ry_tensor_release(t);
}

static void test_zeros_every_dtype(void **state) {
    (void)state;
    int64_t shape[2] = {3, 5};
    for (int d = 0; d < RY_DTYPE_COUNT; d++) {
        ry_tensor *t = ry_tensor_zeros((ry_dtype)d, 2, shape);
        assert_non_null(t);
        assert_int_equal(t->dtype, d);
        for (size_t i = 0; i < ry_tensor_nbytes(t); i++) assert_int_equal(((uint8_t *)t->data)[i], 0);
        for (int64_t i = 0; i < t->size; i++) assert_true(ry_tensor_get(t, i) == 0.0);
        ry_tensor_release(t);
    }
}

static void test_scalar(void **state) {
    (void)state;
    static const struct {
        ry_dtype d;
        double in, out;
    } cases[] = {
        {RY_FLOAT32, 0.1, (float)0.1}, {RY_FLOAT64, 0.1, 0.1},  {RY_FLOAT16, 0.1, 0.0999755859375},
        {RY_INT8, -7.9, -7},           {RY_INT32, 123456.7, 123456}, {RY_INT64, -5e15, -5e15},
        {RY_UINT8, 200, 200},          {RY_BOOL, -0.5, 1},      {RY_BOOL, 0.0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ry_tensor *t = ry_tensor_scalar(cases[i].d, cases[i].in);
        assert_non_null(t);
        assert_int_equal(t->ndim, 0);
        assert_int_equal(t->size, 1);
        assert_int_equal(t->dtype, cases[i].d);
        assert_true(ry_tensor_get(t, 0) == cases[i].out);
        ry_tensor_release(t);
    }
}

/* ---- element access ----------------------------------------------------- */

static void test_get_set_every_dtype(void **state) {
    (void)state;
    int64_t n = 7;
    for (int d = 0; d < RY_DTYPE_COUNT; d++) {
        ry_tensor *t = ry_tensor_new((ry_dtype)d, 1, &n);
        for (int64_t i = 0; i < n; i++) ry_tensor_set(t, i, (double)(i * 3 - 9));
        for (int64_t i = 0; i < n; i++) {
            double v = (double)(i * 3 - 9), got = ry_tensor_get(t, i);
            if (d == RY_BOOL) assert_true(got == (v != 0));
            else if (d == RY_UINT8 || d == RY_UINT16) assert_true(got == (v < 0 ? 0 : v));
            else assert_true(got == v);
        }
        /* the bytes are the C type's, in place */
        switch (d) {
        case RY_FLOAT32: assert_true(((float *)t->data)[6] == 9.0f); break;
        case RY_FLOAT64: assert_true(((double *)t->data)[6] == 9.0); break;
        case RY_FLOAT16: assert_int_equal(((uint16_t *)t->data)[6], 0x4880); break;
        case RY_INT8: assert_int_equal(((int8_t *)t->data)[0], -9); break;
        case RY_INT32: assert_int_equal(((int32_t *)t->data)[0], -9); break;
        case RY_INT64: assert_int_equal(((int64_t *)t->data)[0], -9); break;
        case RY_UINT8: assert_int_equal(((uint8_t *)t->data)[6], 9); break;
        case RY_BOOL: assert_int_equal(((uint8_t *)t->data)[3], 0); break;
        case RY_INT16: assert_int_equal(((int16_t *)t->data)[0], -9); break;
        case RY_UINT16: assert_int_equal(((uint16_t *)t->data)[6], 9); break;
        }
        /* out of range indices read nan and write nothing */
        assert_true(isnan(ry_tensor_get(t, -1)));
        assert_true(isnan(ry_tensor_get(t, n)));
        ry_tensor_set(t, n, 1.0);
        ry_tensor_set(t, -1, 1.0);
        ry_tensor_release(t);
    }
    assert_true(isnan(ry_tensor_get(NULL, 0)));
    ry_tensor_set(NULL, 0, 1.0);
}

/* Stores saturate rather than invoke undefined float->int conversion. */
static void test_set_saturates(void **state) {
    (void)state;
    static const struct {
        ry_dtype d;
        double in, out;
    } cases[] = {
        {RY_INT8, 1000, 127},         {RY_INT8, -1000, -128},     {RY_INT8, NAN, 0},
        {RY_UINT8, 300, 255},         {RY_UINT8, -1, 0},          {RY_UINT8, INFINITY, 255},
        {RY_INT32, 1e12, INT32_MAX},  {RY_INT32, -1e12, INT32_MIN}, {RY_INT32, NAN, 0},
        {RY_INT64, 1e30, 9223372036854775807.0}, {RY_INT64, -INFINITY, -9223372036854775808.0},
        {RY_INT64, NAN, 0},           {RY_FLOAT16, 1e6, INFINITY},  {RY_BOOL, NAN, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ry_tensor *t = ry_tensor_scalar(cases[i].d, cases[i].in);
        assert_true(ry_tensor_get(t, 0) == cases[i].out);
        ry_tensor_release(t);
    }
    ry_tensor *t = ry_tensor_scalar(RY_INT64, 1e30);
    assert_true(*(int64_t *)t->data == INT64_MAX);
    ry_tensor_set(t, 0, -1e30);
    assert_true(*(int64_t *)t->data == INT64_MIN);
    ry_tensor_set(t, 0, 9007199254740993.0); /* rounds in double first */
    assert_true(*(int64_t *)t->data == 9007199254740992);
    ry_tensor_release(t);
}

/* ---- reference counting, views, copies --------------------------------- */

static void test_retain_release(void **state) {
    (void)state;
    ry_tensor *t = ry_tensor_zeros(RY_FLOAT32, 1, (int64_t[]){4});
    assert_ptr_equal(ry_tensor_retain(t), t);
    assert_int_equal(t->refcount, 2);
    ry_tensor_retain(t);
    assert_int_equal(t->refcount, 3);
    ry_tensor_release(t);
    ry_tensor_release(t);
    assert_int_equal(t->refcount, 1);
    ((float *)t->data)[3] = 1.0f; /* still alive */
    ry_tensor_release(t);
    ry_tensor_release(NULL);
    assert_null(ry_tensor_retain(NULL));
}

/* A slab of 10 floats carved into a (2, 3) weight and a (4,) bias. */
static void test_view_slab(void **state) {
    (void)state;
    ry_tensor *slab = ry_tensor_new(RY_FLOAT32, 1, (int64_t[]){10});
    for (int i = 0; i < 10; i++) ry_tensor_set(slab, i, i);
    ry_tensor *w = ry_tensor_view(slab, 0, RY_FLOAT32, 2, (int64_t[]){2, 3});
    ry_tensor *b = ry_tensor_view(slab, 6 * sizeof(float), RY_FLOAT32, 1, (int64_t[]){4});
    assert_non_null(w);
    assert_non_null(b);
    assert_int_equal(slab->refcount, 3);
    assert_ptr_equal(w->base, slab);
    assert_null(w->alloc);
    assert_int_equal(w->device.kind, RY_DEVICE_CPU);
    assert_true(ry_tensor_get(w, 5) == 5.0);
    assert_true(ry_tensor_get(b, 0) == 6.0);
    assert_true(ry_tensor_get(b, 3) == 9.0);
    /* writes through a view land in the slab */
    ry_tensor_set(b, 1, -1.0);
    assert_true(ry_tensor_get(slab, 7) == -1.0);
    /* the views keep the slab alive after its owner lets go */
    ry_tensor_release(slab);
    assert_true(ry_tensor_get(w, 2) == 2.0);
    ry_tensor_set(w, 2, 42.0);
    assert_true(ry_tensor_get(w, 2) == 42.0);
    ry_tensor_release(w);
    assert_true(ry_tensor_get(b, 3) == 9.0);
    ry_tensor_release(b); /* frees the slab (ASan/valgrind would see a leak) */
}

static void test_view_bounds(void **state) {
    (void)state;
    ry_tensor *t = ry_tensor_zeros(RY_FLOAT32, 2, (int64_t[]){2, 4}); /* 32 bytes */
    /* exactly fitting at the end is fine; one byte more is not */
    ry_tensor *v = ry_tensor_view(t, 24, RY_FLOAT32, 1, (int64_t[]){2});
    assert_non_null(v);
    ry_tensor_release(v);
    assert_null(ry_tensor_view(t, 25, RY_FLOAT32, 1, (int64_t[]){2}));
    assert_null(ry_tensor_view(t, 0, RY_FLOAT64, 1, (int64_t[]){5}));
    assert_null(ry_tensor_view(t, 33, RY_INT8, 0, NULL));
    assert_null(ry_tensor_view(t, SIZE_MAX, RY_INT8, 1, (int64_t[]){2}));
    assert_null(ry_tensor_view(t, 0, RY_INT8, 1, (int64_t[]){-1}));
    assert_null(ry_tensor_view(t, 0, RY_INT8, RY_MAX_RANK + 1, (int64_t[9]){1}));
    assert_null(ry_tensor_view(t, 0, RY_INT8, 1, (int64_t[]){INT64_MAX}));
    assert_null(ry_tensor_view(NULL, 0, RY_INT8, 0, NULL));
    /* a view may reinterpret the bytes under another dtype and rank */
    v = ry_tensor_view(t, 32, RY_INT8, 1, (int64_t[]){0});
    assert_non_null(v);
    ry_tensor_release(v);
    v = ry_tensor_view(t, 4, RY_UINT8, 3, (int64_t[]){2, 2, 7});
    assert_non_null(v);
    assert_int_equal(v->size, 28);
    ((float *)t->data)[1] = 1.0f; /* 0x3f800000, little-endian bytes 00 00 80 3f */
    assert_true(ry_tensor_get(v, 3) == 0x3f);
    /* a view of a view keeps the chain alive */
    ry_tensor *vv = ry_tensor_view(v, 3, RY_UINT8, 0, NULL);
    assert_non_null(vv);
    assert_ptr_equal(vv->base, v);
    ry_tensor_release(v);
    ry_tensor_release(t);
    assert_true(ry_tensor_get(vv, 0) == 0x3f);
    ry_tensor_release(vv);
}

static void test_copy(void **state) {
    (void)state;
    ry_tensor *t = ry_tensor_new(RY_INT32, 2, (int64_t[]){3, 2});
    for (int i = 0; i < 6; i++) ry_tensor_set(t, i, i * i);
    ry_tensor *c = ry_tensor_copy(t);
    assert_non_null(c);
    assert_ptr_not_equal(c->data, t->data);
    assert_int_equal(c->refcount, 1);
    assert_int_equal(c->dtype, RY_INT32);
    assert_true(ry_tensor_same_shape(c, t));
    assert_memory_equal(c->data, t->data, 24);
    ry_tensor_set(c, 0, 100);
    assert_true(ry_tensor_get(t, 0) == 0); /* independent */
    /* the copy of a view owns its memory and outlives the base */
    ry_tensor *v = ry_tensor_view(t, 8, RY_INT32, 1, (int64_t[]){4});
    ry_tensor *vc = ry_tensor_copy(v);
    ry_tensor_release(v);
    ry_tensor_release(t);
    assert_null(vc->base);
    assert_ptr_equal(vc->alloc, ry_cpu_allocator());
    for (int i = 0; i < 4; i++) assert_true(ry_tensor_get(vc, i) == (i + 2) * (i + 2));
    assert_null(ry_tensor_copy(NULL));
    ry_tensor_release(vc);
    ry_tensor_release(c);
}

static void test_same_shape_and_describe(void **state) {
    (void)state;
    ry_tensor *a = ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){2, 3});
    ry_tensor *b = ry_tensor_new(RY_INT64, 2, (int64_t[]){2, 3});
    ry_tensor *c = ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){3, 2});
    ry_tensor *d = ry_tensor_new(RY_FLOAT32, 3, (int64_t[]){2, 3, 1});
    ry_tensor *s = ry_tensor_scalar(RY_BOOL, 1);
    assert_true(ry_tensor_same_shape(a, b)); /* dtype does not matter */
    assert_false(ry_tensor_same_shape(a, c));
    assert_false(ry_tensor_same_shape(a, d));
    assert_false(ry_tensor_same_shape(a, s));
    assert_true(ry_tensor_same_shape(s, s));
    assert_false(ry_tensor_same_shape(a, NULL));
    char buf[64];
    assert_string_equal(ry_tensor_describe(a, buf, sizeof buf), "float32[2, 3]");
    assert_string_equal(ry_tensor_describe(d, buf, sizeof buf), "float32[2, 3, 1]");
    assert_string_equal(ry_tensor_describe(b, buf, sizeof buf), "int64[2, 3]");
    assert_string_equal(ry_tensor_describe(s, buf, sizeof buf), "bool[]");
    assert_string_equal(ry_tensor_describe(NULL, buf, sizeof buf), "(null)");
    /* a short buffer truncates but stays a string */
    assert_string_equal(ry_tensor_describe(a, buf, 10), "float32[2");
    assert_string_equal(ry_tensor_describe(a, buf, 3), "fl");
    assert_string_equal(ry_tensor_describe(a, buf, 1), "");
    int64_t big[RY_MAX_RANK] = {123456789, 123456789, 1, 1, 1, 1, 1, 0};
    ry_tensor *e = ry_tensor_new(RY_FLOAT64, RY_MAX_RANK, big);
    char small[20];
    assert_string_equal(ry_tensor_describe(e, small, sizeof small), "float64[123456789, ");
    assert_int_equal(ry_tensor_nbytes(NULL), 0);
    ry_tensor *tensors[] = {a, b, c, d, s, e};
    for (size_t i = 0; i < 6; i++) ry_tensor_release(tensors[i]);
}

/* ---- a custom allocator (what a GPU backend provides) ------------------- */

typedef struct counting_alloc {
    ry_allocator base;
    int allocs, frees;
} counting_alloc;

static void *count_alloc(ry_allocator *self, size_t n) {
    ((counting_alloc *)self)->allocs++;
    return ry_malloc(n);
}

static void count_free(ry_allocator *self, void *p) {
    ((counting_alloc *)self)->frees++;
    ry_free(p);
}

static void test_custom_allocator(void **state) {
    (void)state;
    counting_alloc ca = {{{RY_DEVICE_CPU, 3}, count_alloc, count_free}, 0, 0};
    ry_tensor *t = ry_tensor_new_on(&ca.base, RY_FLOAT64, 1, (int64_t[]){5});
    assert_non_null(t);
    assert_int_equal(ca.allocs, 1);
    assert_int_equal(t->device.id, 3);
    ry_tensor *v = ry_tensor_view(t, 8, RY_FLOAT64, 0, NULL);
    assert_int_equal(v->device.id, 3);
    ry_tensor *c = ry_tensor_copy(v); /* lands on the owner's allocator */
    assert_int_equal(ca.allocs, 2);
    assert_ptr_equal(c->alloc, &ca.base);
    ry_tensor_release(t);
    assert_int_equal(ca.frees, 0); /* v still holds it */
    ry_tensor_release(v);
    assert_int_equal(ca.frees, 1);
    ry_tensor_release(c);
    assert_int_equal(ca.frees, 2);
}

/* ---- out of memory ------------------------------------------------------
 * Fail allocation n for n = 0, 1, ... until the operation succeeds: every
 * failure must return NULL cleanly (ASan reports any leak at exit). */

static ry_tensor *make_new(ry_tensor *src) { (void)src; return ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){3, 4}); }
static ry_tensor *make_zeros(ry_tensor *src) { (void)src; return ry_tensor_zeros(RY_INT64, 1, (int64_t[]){9}); }
static ry_tensor *make_scalar(ry_tensor *src) { (void)src; return ry_tensor_scalar(RY_FLOAT16, 2.5); }
static ry_tensor *make_view(ry_tensor *src) { return ry_tensor_view(src, 4, RY_FLOAT32, 1, (int64_t[]){2}); }
static ry_tensor *make_copy(ry_tensor *src) { return ry_tensor_copy(src); }

static void test_alloc_failures(void **state) {
    (void)state;
    ry_tensor *(*makers[])(ry_tensor *) = {make_new, make_zeros, make_scalar, make_view, make_copy};
    ry_tensor *src = ry_tensor_zeros(RY_FLOAT32, 1, (int64_t[]){4});
    for (size_t m = 0; m < sizeof makers / sizeof makers[0]; m++) {
        int failures = 0;
        for (long n = 0;; n++) {
            ry_alloc_fail_after(n);
            ry_tensor *t = makers[m](src);
            ry_alloc_fail_after(-1);
            if (t) {
                ry_tensor_release(t);
                break;
            }
            failures++;
            assert_true(n < 10);
        }
        assert_true(failures >= 1); /* every maker allocates at least once */
    }
    assert_int_equal(src->refcount, 1); /* failed views gave back their reference */
    ry_tensor_release(src);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_names_and_sizes),
        cmocka_unit_test(test_dtype_parse_rejects),
        cmocka_unit_test(test_device),
        cmocka_unit_test(test_f16_known_values),
        cmocka_unit_test(test_f16_exhaustive),
        cmocka_unit_test(test_f16_matches_numpy),
        cmocka_unit_test(test_new_shapes),
        cmocka_unit_test(test_new_rejects),
        cmocka_unit_test(test_zero_size),
        cmocka_unit_test(test_zeros_every_dtype),
        cmocka_unit_test(test_scalar),
        cmocka_unit_test(test_get_set_every_dtype),
        cmocka_unit_test(test_set_saturates),
        cmocka_unit_test(test_retain_release),
        cmocka_unit_test(test_view_slab),
        cmocka_unit_test(test_view_bounds),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_same_shape_and_describe),
        cmocka_unit_test(test_custom_allocator),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
