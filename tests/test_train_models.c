/*
 * test_train_models.c: a short training run of every model in models/:
 * a few Adam steps on one small synthetic batch (the models' batch and
 * sequence dimensions are symbolic, so the real files run at toy sizes),
 * through the same trainer as `relayc train`. The loss must fall.
 */
#include "test_util.h"
#include "relayc/train.h"

static ry_value *tensor_value(ry_dtype dtype, int ndim, const int64_t *shape, ry_rng *rng, int64_t classes) {
    ry_tensor *t = ry_tensor_new(dtype, ndim, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++)
        ry_tensor_set(t, i, classes ? (double)ry_rng_below(rng, (uint64_t)classes) : ry_rng_uniform(rng));
    return ry_value_tensor(t);
}

typedef void (*make_data_fn)(ry_trainer *tr, ry_value **data);

/* Trains model for steps on the data make gives (values of the trainer's
 * DATA parameters); returns the first and last losses. */
static void fit(const char *model, int ndata, make_data_fn make, int steps, double lr, double *first,
                double *last) {
    ry_value *data[4] = {NULL};
    ry_error err;
    ry_train_opts o = ry_train_defaults();
    o.optim.kind = RY_OPTIM_ADAM;
    o.optim.lr = lr;
    ry_trainer *tr = NULL;
    if (ry_trainer_new_file(model, &o, &tr, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("cannot build a trainer for %s", model);
    }
    assert_int_equal(ry_trainer_ndata(tr), ndata);
    make(tr, data);
    for (int s = 0; s < steps; s++) {
        double loss;
        ry_trainer_reset_state(tr); /* the same window each step */
        if (ry_trainer_step(tr, ndata, data, &loss, &err)) {
            ry_error_print(stderr, &err);
            fail_msg("%s: step %d failed", model, s);
        }
        if (s == 0) *first = loss;
        *last = loss;
    }
    ry_trainer_free(tr);
    for (int i = 0; i < ndata; i++) ry_value_release(data[i]);
}

/* Random images and labels: x (16, 784) or (8, 1, 28, 28), y (batch). */
static void mlp_data(ry_trainer *tr, ry_value **data) {
    ry_rng rng;
    ry_rng_seed(&rng, 1);
    data[0] = tensor_value(RY_FLOAT32, 2, (int64_t[]){16, 784}, &rng, 0);
    data[1] = tensor_value(RY_INT32, 1, (int64_t[]){16}, &rng, 10);
}

static void lenet_data(ry_trainer *tr, ry_value **data) {
    ry_rng rng;
    ry_rng_seed(&rng, 1);
    data[0] = tensor_value(RY_FLOAT32, 4, (int64_t[]){8, 1, 28, 28}, &rng, 0);
    data[1] = tensor_value(RY_INT32, 1, (int64_t[]){8}, &rng, 10);
}

/* A window of 2 streams x 6 characters and its targets. */
static void char_data(ry_trainer *tr, ry_value **data) {
    ry_rng rng;
    ry_rng_seed(&rng, 2);
    data[0] = tensor_value(RY_INT32, 2, (int64_t[]){2, 6}, &rng, 65);
    data[1] = tensor_value(RY_INT32, 2, (int64_t[]){2, 6}, &rng, 65);
}

static void check_falls(const char *model, int ndata, make_data_fn make, int steps, double lr, double ratio) {
    double first, last;
    fit(model, ndata, make, steps, lr, &first, &last);
    if (!(last < ratio * first)) fail_msg("%s: loss %g -> %g did not fall enough", model, first, last);
}

static void test_mlp(void **s) { check_falls("models/mlp.relay", 2, mlp_data, 8, 1e-3, 0.7); }
static void test_lenet(void **s) { check_falls("models/lenet.relay", 2, lenet_data, 8, 1e-3, 0.7); }
static void char_model(const char *model) { check_falls(model, 2, char_data, 8, 1e-2, 0.8); }

static void test_charlstm(void **s) { char_model("models/charlstm.relay"); }
static void test_chargru(void **s) { char_model("models/chargru.relay"); }
static void test_charrnn(void **s) { char_model("models/charrnn.relay"); }

/* ((7 3) (12 (5 9))) with a label at every node, as ry_tree_to_value
 * builds it: Leaf(word, label), Node(left, right, label). */
static ry_value *scalar(int64_t v) { return ry_value_tensor(ry_tensor_scalar(RY_INT32, (double)v)); }

static ry_value *leaf(const ry_ctor *c, int word, int label) {
    ry_value *f[2] = {scalar(word), scalar(label)};
    return ry_value_adt(c, 2, f);
}

static ry_value *node(const ry_ctor *c, ry_value *l, ry_value *r, int label) {
    ry_value *f[3] = {l, r, scalar(label)};
    return ry_value_adt(c, 3, f);
}

/* The tree's constructors must be those of the trainer's own module. */
static void tree_data(ry_trainer *tr, ry_value **data) {
    ry_module *m = ry_trainer_module(tr);
    const ry_ctor *lf = ry_module_find_ctor(m, "Leaf"), *nd = ry_module_find_ctor(m, "Node");
    assert_non_null(lf);
    assert_non_null(nd);
    data[0] = node(nd, node(nd, leaf(lf, 7, 1), leaf(lf, 3, 4), 3),
                   node(nd, leaf(lf, 12, 2), node(nd, leaf(lf, 5, 0), leaf(lf, 9, 2), 1), 1), 2);
}

static void test_treelstm(void **s) { check_falls("models/treelstm.relay", 1, tree_data, 6, 1e-2, 0.7); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),     cmocka_unit_test(test_lenet),   cmocka_unit_test(test_charlstm),
        cmocka_unit_test(test_chargru), cmocka_unit_test(test_charrnn), cmocka_unit_test(test_treelstm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
