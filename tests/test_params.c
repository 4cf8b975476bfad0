/*
 * test_params.c: parameter sets carved from one slab (src/tensor/params.c):
 * layout and 64-byte alignment of the views, aliasing between slab and
 * views, the copy/fill/find/same-layout helpers, refused inputs, and every
 * allocation failing in turn without a leak.
 */
#include "test_util.h"

#include "relayc/params.h"

/* w (3, 4), b (5,) and s (a scalar) in dtype dt. */
static ry_param_set *three(ry_dtype dt) {
    const char *names[3] = {"w", "b", "s"};
    int ndims[3] = {2, 1, 0};
    int64_t sw[2] = {3, 4}, sb[1] = {5}, ss[1] = {0};
    const int64_t *shapes[3] = {sw, sb, ss};
    return ry_params_new(dt, 3, names, ndims, shapes);
}

/* Each view starts on a 64-byte line: f32 runs of 12, 5, 1 elements take
 * 16 + 16 + 16 = 48 slots; f64 ones take 16 + 8 + 8 = 32. */
static void test_layout_and_alignment(void **state) {
    (void)state;
    for (int d = 0; d < 2; d++) {
        ry_dtype dt = d ? RY_FLOAT64 : RY_FLOAT32;
        ry_param_set *p = three(dt);
        assert_non_null(p);
        assert_int_equal(p->n, 3);
        assert_int_equal(p->dtype, dt);
        assert_string_equal(p->names[0], "w");
        assert_string_equal(p->names[2], "s");
        assert_int_equal(p->slab->ndim, 1);
        assert_int_equal(p->slab->size, d ? 32 : 48);
        assert_int_equal(p->views[0]->ndim, 2);
        assert_int_equal(p->views[0]->shape[1], 4);
        assert_int_equal(p->views[1]->size, 5);
        assert_int_equal(p->views[2]->ndim, 0);
        assert_int_equal(p->views[2]->size, 1);
        size_t esize = ry_dtype_size(dt);
        size_t offsets[3] = {0, 16 * esize, (d ? 24 : 32) * esize};
        for (int i = 0; i < 3; i++) {
            assert_int_equal((uintptr_t)p->views[i]->data % 64, 0);
            assert_int_equal((size_t)((char *)p->views[i]->data - (char *)p->slab->data), offsets[i]);
            assert_ptr_equal(p->views[i]->base, p->slab);
            assert_int_equal(p->views[i]->dtype, dt);
        }
        for (int64_t i = 0; i < p->slab->size; i++) assert_true(ry_tensor_get(p->slab, i) == 0);
        ry_params_free(p);
    }
}

/* A write through a view is a write into the slab and back. */
static void test_views_alias_slab(void **state) {
    (void)state;
    ry_param_set *p = three(RY_FLOAT32);
    ry_tensor_set(p->views[1], 2, 7.5);
    assert_true(ry_tensor_get(p->slab, 16 + 2) == 7.5);
    ry_tensor_set(p->slab, 32, -3);
    assert_true(ry_tensor_get(p->views[2], 0) == -3);
    /* A view kept past the set keeps the slab alive. */
    ry_tensor *b = ry_tensor_retain(p->views[1]);
    ry_params_free(p);
    assert_true(ry_tensor_get(b, 2) == 7.5);
    ry_tensor_release(b);
    ry_params_free(NULL);
}

static void test_like_copy_fill(void **state) {
    (void)state;
    ry_param_set *p = three(RY_FLOAT64);
    ry_params_fill(p, 1.25);
    assert_true(ry_tensor_get(p->views[0], 11) == 1.25);
    assert_true(ry_tensor_get(p->views[2], 0) == 1.25);
    ry_param_set *q = ry_params_like(p);
    assert_non_null(q);
    assert_true(ry_params_same_layout(p, q));
    assert_ptr_not_equal(q->slab->data, p->slab->data);
    assert_true(ry_tensor_get(q->views[0], 0) == 0);
    ry_tensor_set(p->views[1], 4, -2);
    ry_params_copy(q, p);
    assert_true(ry_tensor_get(q->views[1], 4) == -2);
    assert_true(ry_tensor_get(q->views[0], 3) == 1.25);
    ry_tensor_set(q->views[1], 4, 9); /* independent buffers */
    assert_true(ry_tensor_get(p->views[1], 4) == -2);
    ry_params_free(p);
    ry_params_free(q);
}

static void test_find_and_same_layout(void **state) {
    (void)state;
    ry_param_set *p = three(RY_FLOAT32), *q64 = three(RY_FLOAT64);
    assert_int_equal(ry_params_find(p, "w"), 0);
    assert_int_equal(ry_params_find(p, "s"), 2);
    assert_int_equal(ry_params_find(p, "x"), -1);
    assert_int_equal(ry_params_find(p, ""), -1);
    assert_true(ry_params_same_layout(p, p));
    assert_false(ry_params_same_layout(p, q64));
    const char *names[2] = {"w", "b"};
    int ndims[2] = {2, 1};
    int64_t sw[2] = {3, 4}, sb[1] = {5}, sw2[2] = {4, 3};
    const int64_t *shapes[2] = {sw, sb}, *shapes2[2] = {sw2, sb};
    ry_param_set *two = ry_params_new(RY_FLOAT32, 2, names, ndims, shapes);
    ry_param_set *two_t = ry_params_new(RY_FLOAT32, 2, names, ndims, shapes2);
    const char *other_names[2] = {"w", "c"};
    ry_param_set *renamed = ry_params_new(RY_FLOAT32, 2, other_names, ndims, shapes);
    assert_false(ry_params_same_layout(p, two));
    assert_false(ry_params_same_layout(two, two_t));
    assert_false(ry_params_same_layout(two, renamed));
    ry_params_free(p);
    ry_params_free(q64);
    ry_params_free(two);
    ry_params_free(two_t);
    ry_params_free(renamed);
}

/* Refused: duplicate names, a dtype other than float32/float64, negative
 * dimensions, too many dimensions, element counts that overflow. */
static void test_refused(void **state) {
    (void)state;
    const char *dup[2] = {"w", "w"};
    int ndims[2] = {1, 1};
    int64_t s3[1] = {3}, neg[1] = {-1};
    const int64_t *shapes[2] = {s3, s3};
    assert_null(ry_params_new(RY_FLOAT32, 2, dup, ndims, shapes));
    const char *names[2] = {"a", "b"};
    assert_null(ry_params_new(RY_INT32, 2, names, ndims, shapes));
    assert_null(ry_params_new(RY_FLOAT16, 2, names, ndims, shapes));
    const int64_t *with_neg[2] = {s3, neg};
    assert_null(ry_params_new(RY_FLOAT64, 2, names, ndims, with_neg));
    int deep[2] = {1, RY_MAX_RANK + 1};
    int64_t big[RY_MAX_RANK + 1];
    for (int i = 0; i <= RY_MAX_RANK; i++) big[i] = 1;
    const int64_t *deep_shapes[2] = {s3, big};
    assert_null(ry_params_new(RY_FLOAT64, 2, names, deep, deep_shapes));
    int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    int two_d[2] = {1, 2};
    const int64_t *huge_shapes[2] = {s3, huge};
    assert_null(ry_params_new(RY_FLOAT32, 2, names, two_d, huge_shapes));
}

/* A zero-size parameter takes no room; its neighbours keep their places. */
static void test_empty_parameter(void **state) {
    (void)state;
    const char *names[3] = {"a", "e", "c"};
    int ndims[3] = {1, 2, 1};
    int64_t sa[1] = {3}, se[2] = {4, 0}, sc[1] = {2};
    const int64_t *shapes[3] = {sa, se, sc};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 3, names, ndims, shapes);
    assert_non_null(p);
    assert_int_equal(p->views[1]->size, 0);
    assert_int_equal(p->slab->size, 32);
    assert_int_equal((char *)p->views[2]->data - (char *)p->slab->data, 64);
    ry_params_fill(p, 2);
    assert_true(ry_tensor_get(p->views[2], 1) == 2);
    ry_params_free(p);
}

/* Allocation k failing, for every k until new and like succeed: NULL and no
 * leak (ASan and valgrind check the latter). */
static void test_out_of_memory(void **state) {
    (void)state;
    int failed = 0;
    for (long k = 0; k < 100; k++) {
        ry_alloc_fail_after(k);
        ry_param_set *p = three(RY_FLOAT32);
        ry_alloc_fail_after(-1);
        if (p) {
            ry_params_free(p);
            break;
        }
        failed++;
    }
    assert_true(failed >= 5);
    ry_param_set *src = three(RY_FLOAT64);
    failed = 0;
    for (long k = 0; k < 100; k++) {
        ry_alloc_fail_after(k);
        ry_param_set *q = ry_params_like(src);
        ry_alloc_fail_after(-1);
        if (q) {
            assert_true(ry_params_same_layout(src, q));
            ry_params_free(q);
            break;
        }
        failed++;
    }
    assert_true(failed >= 5);
    ry_params_free(src);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_and_alignment),
        cmocka_unit_test(test_views_alias_slab),
        cmocka_unit_test(test_like_copy_fill),
        cmocka_unit_test(test_find_and_same_layout),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_empty_parameter),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
