/*
 * test_init.c: parameter initializers (init.h). Fans as torch.nn.init
 * computes them; for every kind the sample mean, variance and bounds of a
 * large fill against the distribution's; determinism per seed and the draw
 * order; the errors; the parser for one initializer and for a model file's
 * header lines, including out-of-memory at every allocation.
 */
#include "test_util.h"

#include "relayc/init.h"

static ry_tensor *new2(ry_dtype dt, int64_t a, int64_t b) {
    ry_tensor *t = ry_tensor_new(dt, 2, (int64_t[]){a, b});
    assert_non_null(t);
    return t;
}

static ry_init parse_ok(const char *s) {
    ry_init init;
    ry_error err;
    if (ry_init_parse(s, strlen(s), &init, &err)) fail_msg("%s: %s", s, err.msg);
    return init;
}

/* ---- fans --------------------------------------------------------------------- */

static void test_fans(void **state) {
    int64_t in = 0, out = 0;
    ry_error err;
    assert_int_equal(ry_init_fans(2, (int64_t[]){256, 784}, &in, &out, &err), RY_OK);
    assert_int_equal(in, 784);
    assert_int_equal(out, 256);
    /* conv (O, I, KH, KW): receptive field KH * KW on both sides */
    assert_int_equal(ry_init_fans(4, (int64_t[]){16, 6, 5, 5}, &in, &out, &err), RY_OK);
    assert_int_equal(in, 150);
    assert_int_equal(out, 400);
    assert_int_equal(ry_init_fans(3, (int64_t[]){4, 3, 2}, &in, &out, &err), RY_OK);
    assert_int_equal(in, 6);
    assert_int_equal(out, 8);
    assert_int_equal(ry_init_fans(1, (int64_t[]){10}, &in, &out, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "rank 2 or more"));
    assert_int_equal(ry_init_fans(0, NULL, &in, &out, &err), RY_ERR);
}

/* ---- statistics ---------------------------------------------------------------
 * For N draws of a distribution with variance v, the sample mean is within
 * 5 sqrt(v / N) of the mean and the sample variance within 5% of v (N is
 * 120000: the variance's relative error has a standard deviation under
 * 0.7%). Uniform fills stay inside their bounds and come near both ends. */
typedef struct stats {
    double mean, var, min, max;
} stats;

static stats stats_of(const ry_tensor *t) {
    stats s = {0, 0, INFINITY, -INFINITY};
    for (int64_t i = 0; i < t->size; i++) {
        double v = ry_tensor_get(t, i);
        s.mean += v;
        s.min = fmin(s.min, v);
        s.max = fmax(s.max, v);
    }
    s.mean /= (double)t->size;
    for (int64_t i = 0; i < t->size; i++) {
        double d = ry_tensor_get(t, i) - s.mean;
        s.var += d * d;
    }
    s.var /= (double)(t->size - 1);
    return s;
}

static stats fill_stats(const char *spec, ry_dtype dt, int ndim, const int64_t *shape,
                        uint64_t seed) {
    ry_tensor *t = ry_tensor_new(dt, ndim, shape);
    assert_non_null(t);
    ry_init init = parse_ok(spec);
    ry_rng rng;
    ry_rng_seed(&rng, seed);
    ry_error err;
    assert_int_equal(ry_init_fill(t, &init, &rng, &err), RY_OK);
    stats s = stats_of(t);
    ry_tensor_release(t);
    return s;
}

static void expect(const char *spec, ry_dtype dt, int ndim, const int64_t *shape, double mean,
                   double var, double lo, double hi) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    stats s = fill_stats(spec, dt, ndim, shape, 42);
    if (fabs(s.mean - mean) > 5 * sqrt(var / (double)n))
        fail_msg("%s: mean %g, expected %g", spec, s.mean, mean);
    if (fabs(s.var - var) > 0.05 * var) fail_msg("%s: variance %g, expected %g", spec, s.var, var);
    if (isfinite(lo)) {
        /* float32 rounding may land exactly on a bound */
        assert_true(s.min >= lo - 1e-7 * fabs(lo) && s.max <= hi + 1e-7 * fabs(hi));
        assert_true(s.min < lo + 0.01 * (hi - lo) && s.max > hi - 0.01 * (hi - lo));
    }
}

static const int64_t lin[2] = {400, 300};        /* fan_in 300, fan_out 400 */
static const int64_t conv[4] = {64, 30, 5, 5};   /* fan_in 750, fan_out 1600 */

static void test_uniform_normal(void **state) {
    double w = 2.5;
    expect("uniform(-0.5,2)", RY_FLOAT32, 2, lin, 0.75, w * w / 12, -0.5, 2);
    expect("uniform(-0.5,2)", RY_FLOAT64, 2, lin, 0.75, w * w / 12, -0.5, 2);
    expect("normal(0.3)", RY_FLOAT32, 2, lin, 0, 0.09, -INFINITY, INFINITY);
    expect("normal(1,2)", RY_FLOAT64, 2, lin, 1, 4, -INFINITY, INFINITY);
    /* a normal's tails: about 0.27% of draws beyond 3 sigma */
    ry_tensor *t = new2(RY_FLOAT64, 400, 300);
    ry_init init = parse_ok("normal(1)");
    ry_rng rng;
    ry_rng_seed(&rng, 5);
    assert_int_equal(ry_init_fill(t, &init, &rng, NULL), RY_OK);
    int64_t beyond = 0;
    for (int64_t i = 0; i < t->size; i++) beyond += fabs(ry_tensor_get(t, i)) > 3;
    assert_true(beyond > 200 && beyond < 450);
    ry_tensor_release(t);
}

static void test_xavier(void **state) {
    double v = 2.0 / 700, r = sqrt(6.0 / 700);
    expect("xavier_uniform", RY_FLOAT32, 2, lin, 0, v, -r, r);
    expect("glorot_uniform", RY_FLOAT64, 2, lin, 0, v, -r, r);
    expect("xavier_normal", RY_FLOAT32, 2, lin, 0, v, -INFINITY, INFINITY);
    /* a gain scales the standard deviation */
    expect("xavier_uniform(2)", RY_FLOAT32, 2, lin, 0, 4 * v, -2 * r, 2 * r);
    expect("xavier_normal(0.5)", RY_FLOAT64, 2, lin, 0, 0.25 * v, -INFINITY, INFINITY);
    double vc = 2.0 / (750 + 1600), rc = sqrt(6.0 / 2350);
    expect("xavier_uniform", RY_FLOAT32, 4, conv, 0, vc, -rc, rc);
}

static void test_kaiming(void **state) {
    /* mode fan_in, gain sqrt(2): var 2 / fan_in, bound sqrt(6 / fan_in) */
    double v = 2.0 / 300, r = sqrt(6.0 / 300);
    expect("kaiming_uniform", RY_FLOAT32, 2, lin, 0, v, -r, r);
    expect("he_uniform", RY_FLOAT64, 2, lin, 0, v, -r, r);
    expect("kaiming_normal", RY_FLOAT32, 2, lin, 0, v, -INFINITY, INFINITY);
    expect("he_normal", RY_FLOAT64, 2, lin, 0, v, -INFINITY, INFINITY);
    double vc = 2.0 / 750, rc = sqrt(6.0 / 750);
    expect("kaiming_uniform", RY_FLOAT32, 4, conv, 0, vc, -rc, rc);
    expect("kaiming_normal", RY_FLOAT32, 4, conv, 0, vc, -INFINITY, INFINITY);
}

static void test_constants(void **state) {
    ry_rng rng;
    ry_rng_seed(&rng, 1);
    uint64_t before[4], after[4];
    ry_rng_get_state(&rng, before);
    const char *specs[] = {"zeros", "ones"};
    for (int k = 0; k < 2; k++) {
        ry_tensor *t = ry_tensor_new(RY_FLOAT32, 1, (int64_t[]){17});
        ry_init init = parse_ok(specs[k]);
        assert_int_equal(ry_init_fill(t, &init, &rng, NULL), RY_OK);
        for (int64_t i = 0; i < t->size; i++) assert_true(ry_tensor_get(t, i) == (double)k);
        ry_tensor_release(t);
    }
    /* constants draw nothing */
    ry_rng_get_state(&rng, after);
    assert_memory_equal(before, after, sizeof before);
    /* a scalar and an empty tensor */
    ry_tensor *s = ry_tensor_new(RY_FLOAT64, 0, NULL);
    ry_init one = parse_ok("ones");
    assert_int_equal(ry_init_fill(s, &one, &rng, NULL), RY_OK);
    assert_true(ry_tensor_get(s, 0) == 1.0);
    ry_tensor_release(s);
    ry_tensor *e = ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){0, 5});
    ry_init xu = parse_ok("xavier_uniform");
    assert_int_equal(ry_init_fill(e, &xu, &rng, NULL), RY_OK);
    ry_tensor_release(e);
}

/* ---- determinism --------------------------------------------------------------- */

static ry_tensor *filled(const char *spec, uint64_t seed) {
    ry_tensor *t = new2(RY_FLOAT32, 30, 20);
    ry_init init = parse_ok(spec);
    ry_rng rng;
    ry_rng_seed(&rng, seed);
    assert_int_equal(ry_init_fill(t, &init, &rng, NULL), RY_OK);
    return t;
}

static void test_determinism(void **state) {
    const char *specs[] = {"uniform(-1,1)", "normal(1)", "xavier_uniform", "xavier_normal",
                           "kaiming_uniform", "kaiming_normal"};
    for (int k = 0; k < 6; k++) {
        ry_tensor *a = filled(specs[k], 123), *b = filled(specs[k], 123), *c = filled(specs[k], 124);
        assert_memory_equal(a->data, b->data, ry_tensor_nbytes(a));
        assert_memory_not_equal(a->data, c->data, ry_tensor_nbytes(a));
        ry_tensor_release(a);
        ry_tensor_release(b);
        ry_tensor_release(c);
    }
    /* the draw order: element i is the i-th draw of the rng, in flat order,
     * and the rng moves on, so a second fill differs from the first */
    ry_tensor *t = new2(RY_FLOAT64, 3, 4), *u = new2(RY_FLOAT64, 3, 4);
    ry_init init = parse_ok("uniform(-2,3)");
    ry_rng rng, ref;
    ry_rng_seed(&rng, 9);
    ry_rng_seed(&ref, 9);
    assert_int_equal(ry_init_fill(t, &init, &rng, NULL), RY_OK);
    for (int64_t i = 0; i < t->size; i++)
        assert_true(ry_tensor_get(t, i) == -2 + 5 * ry_rng_uniform(&ref));
    assert_int_equal(ry_init_fill(u, &init, &rng, NULL), RY_OK);
    assert_memory_not_equal(t->data, u->data, ry_tensor_nbytes(t));
    ry_tensor *k = new2(RY_FLOAT64, 3, 4);
    ry_init kn = parse_ok("kaiming_normal");
    ry_rng_seed(&rng, 9);
    ry_rng_seed(&ref, 9);
    assert_int_equal(ry_init_fill(k, &kn, &rng, NULL), RY_OK);
    for (int64_t i = 0; i < k->size; i++)
        assert_true(fabs(ry_tensor_get(k, i) - sqrt(2.0 / 4) * ry_rng_normal(&ref)) < 1e-15);
    ry_tensor_release(t);
    ry_tensor_release(u);
    ry_tensor_release(k);
}

static void test_fill_errors(void **state) {
    ry_rng rng;
    ry_rng_seed(&rng, 1);
    ry_error err;
    ry_tensor *i32 = new2(RY_INT32, 2, 2);
    ry_init u = parse_ok("uniform(0,1)");
    assert_int_equal(ry_init_fill(i32, &u, &rng, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "float32 or float64"));
    assert_non_null(strstr(err.msg, "int32[2, 2]"));
    ry_tensor_release(i32);
    ry_tensor *vec = ry_tensor_new(RY_FLOAT32, 1, (int64_t[]){8});
    const char *fanned[] = {"xavier_uniform", "xavier_normal", "kaiming_uniform",
                            "kaiming_normal"};
    for (int k = 0; k < 4; k++) {
        ry_init init = parse_ok(fanned[k]);
        assert_int_equal(ry_init_fill(vec, &init, &rng, &err), RY_ERR);
        assert_non_null(strstr(err.msg, "rank 2 or more"));
    }
    ry_tensor_release(vec);
}

/* ---- parsing one initializer ------------------------------------------------------ */

static void test_parse_one(void **state) {
    ry_init i = parse_ok("uniform(-0.0625,0.0625)");
    assert_int_equal(i.kind, RY_INIT_UNIFORM);
    assert_true(i.a == -0.0625 && i.b == 0.0625);
    i = parse_ok("normal(1)");
    assert_int_equal(i.kind, RY_INIT_NORMAL);
    assert_true(i.a == 0 && i.b == 1);
    i = parse_ok("normal(-1,0.5)");
    assert_true(i.a == -1 && i.b == 0.5);
    i = parse_ok("xavier_normal");
    assert_int_equal(i.kind, RY_INIT_XAVIER_NORMAL);
    assert_true(i.a == 1);
    i = parse_ok("glorot_uniform(1.5)");
    assert_int_equal(i.kind, RY_INIT_XAVIER_UNIFORM);
    assert_true(i.a == 1.5);
    assert_int_equal(parse_ok("he_normal").kind, RY_INIT_KAIMING_NORMAL);
    assert_int_equal(parse_ok("kaiming_uniform").kind, RY_INIT_KAIMING_UNIFORM);
    assert_int_equal(parse_ok("zeros").kind, RY_INIT_ZEROS);
    assert_int_equal(parse_ok("ones").kind, RY_INIT_ONES);
    /* ry_init_str writes what ry_init_parse reads back */
    const char *specs[] = {"uniform(-0.1,0.3)", "normal(2,0.25)", "xavier_uniform(3)",
                           "xavier_normal", "kaiming_normal", "zeros"};
    for (int k = 0; k < 6; k++) {
        char buf[128];
        ry_init a = parse_ok(specs[k]);
        ry_init b = parse_ok(ry_init_str(&a, buf, sizeof buf));
        assert_int_equal(a.kind, b.kind);
        assert_true(a.a == b.a && a.b == b.b);
    }
}

static void parse_fails(const char *s, const char *msg) {
    ry_init init;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_init_parse(s, strlen(s), &init, &err) == RY_OK) fail_msg("%s parsed", s);
    if (!strstr(err.msg, msg)) fail_msg("%s: message \"%s\" lacks \"%s\"", s, err.msg, msg);
}

static void test_parse_errors(void **state) {
    parse_fails("gaussian", "unknown initializer \"gaussian\"");
    parse_fails("", "unknown initializer");
    parse_fails("uniform", "takes 2 to 2 arguments, not 0");
    parse_fails("uniform(1)", "takes 2 to 2 arguments, not 1");
    parse_fails("uniform(1,2,3)", "too many arguments");
    parse_fails("uniform(a,b)", "\"a\" is not a number");
    parse_fails("uniform(1,)", "\"\" is not a number");
    parse_fails("uniform(2,1)", "bounds reversed");
    parse_fails("uniform(0,1", "expected \")\"");
    parse_fails("normal(-1)", "std >= 0");
    parse_fails("normal(inf)", "not a number");
    parse_fails("normal(nan)", "not a number");
    parse_fails("zeros(1)", "takes 0 to 0 arguments");
    parse_fails("kaiming_uniform(2)", "takes 0 to 0 arguments");
    parse_fails("normal()", "\"\" is not a number");
}

/* ---- header lines --------------------------------------------------------------- */

static const char *header =
    "#[version = \"0.0.5\"]\n"
    "// A model.\n"
    "// data: x y h0\n"
    "  //predict-data: x h0\n"
    "// init: w=kaiming_uniform b=zeros\n"
    "// init:  emb=normal(1)\temb2=uniform(-0.5,0.5)\n"
    "def @loss(%x: float32) { %x }  // init: w2=ones\n";

static void test_spec(void **state) {
    ry_init_spec *s = NULL;
    ry_error err;
    assert_int_equal(ry_init_spec_parse("m.relay", header, strlen(header), &s, &err), RY_OK);
    assert_true(s->has_data && s->has_predict_data);
    assert_int_equal(s->ndata, 3);
    assert_string_equal(s->data[0], "x");
    assert_string_equal(s->data[1], "y");
    assert_string_equal(s->data[2], "h0");
    assert_int_equal(s->npredict_data, 2);
    assert_string_equal(s->predict_data[1], "h0");
    /* only lines that start with the comment count */
    assert_int_equal(s->nparams, 4);
    assert_string_equal(s->params[0].name, "w");
    assert_string_equal(s->params[3].name, "emb2");
    assert_int_equal(ry_init_spec_find(s, "w")->kind, RY_INIT_KAIMING_UNIFORM);
    assert_int_equal(ry_init_spec_find(s, "b")->kind, RY_INIT_ZEROS);
    const ry_init *e = ry_init_spec_find(s, "emb2");
    assert_true(e->kind == RY_INIT_UNIFORM && e->a == -0.5 && e->b == 0.5);
    assert_null(ry_init_spec_find(s, "w2"));
    assert_null(ry_init_spec_find(s, "x"));
    assert_true(ry_init_spec_is_data(s, "y", false));
    assert_false(ry_init_spec_is_data(s, "y", true));
    assert_false(ry_init_spec_is_data(s, "w", false));
    ry_init_spec_free(s);
    /* no header lines: an empty spec */
    const char *plain = "def @main() { 1f }\n";
    assert_int_equal(ry_init_spec_parse("p.relay", plain, strlen(plain), &s, &err), RY_OK);
    assert_false(s->has_data || s->has_predict_data);
    assert_int_equal(s->ndata + s->npredict_data + s->nparams, 0);
    ry_init_spec_free(s);
    ry_init_spec_free(NULL);
}

static void spec_fails(const char *text, int line, int col, const char *msg) {
    ry_init_spec *s = (ry_init_spec *)1;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_init_spec_parse("bad.relay", text, strlen(text), &s, &err) == RY_OK)
        fail_msg("parsed: %s", text);
    assert_null(s);
    assert_string_equal(err.file, "bad.relay");
    if (!strstr(err.msg, msg)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, msg);
    if (err.line != line || err.col != col)
        fail_msg("%s: at %d:%d, expected %d:%d", err.msg, err.line, err.col, line, col);
}

static void test_spec_errors(void **state) {
    spec_fails("// init: w=zeros w=ones\n", 1, 18, "\"w\" is given an initializer twice");
    spec_fails("// init: w=zeros\n// init: b=ones w=ones\n", 2, 17, "given an initializer twice");
    spec_fails("// init: w\n", 1, 10, "expected NAME=INITIALIZER");
    spec_fails("// init: =zeros\n", 1, 10, "expected NAME=INITIALIZER");
    spec_fails("\n// init: w=uniform(2,1)\n", 2, 12, "bounds reversed");
    spec_fails("// init: w=gauss\n", 1, 12, "unknown initializer");
    spec_fails("// data: x\n// data: y\n", 2, 4, "a second \"data:\" line");
    spec_fails("// predict-data: x\n//predict-data: y\n", 2, 3, "a second");
    spec_fails("// data: a23456789012345678901234567890123456789012345678901234567890123456\n",
               1, 10, "name too long");
}

/* Every allocation of the parser failing in turn: an error, nothing leaked. */
static void test_spec_oom(void **state) {
    int failures = 0;
    for (long n = 0; n < 64; n++) {
        ry_init_spec *s = NULL;
        ry_error err;
        ry_alloc_fail_after(n);
        ry_status st = ry_init_spec_parse("m.relay", header, strlen(header), &s, &err);
        ry_alloc_fail_after(-1);
        if (st == RY_OK) {
            assert_int_equal(s->nparams, 4);
            ry_init_spec_free(s);
            break;
        }
        assert_null(s);
        assert_non_null(strstr(err.msg, "out of memory"));
        failures++;
    }
    assert_true(failures > 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fans),         cmocka_unit_test(test_uniform_normal),
        cmocka_unit_test(test_xavier),       cmocka_unit_test(test_kaiming),
        cmocka_unit_test(test_constants),    cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_fill_errors),  cmocka_unit_test(test_parse_one),
        cmocka_unit_test(test_parse_errors), cmocka_unit_test(test_spec),
        cmocka_unit_test(test_spec_errors),  cmocka_unit_test(test_spec_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
