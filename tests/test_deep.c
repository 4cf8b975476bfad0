/*
 * test_deep.c: inputs too deep for the machine are a located error, not
 * the OOM killer (issue 13, part 2). The Tree-LSTM's gradient on a
 * 100,000-level tree (a right-branching chain of 200,001 nodes) and the
 * char-LSTM's on a sequence of 100,000 steps recurse that deep; with the
 * memory guard set a few hundred MiB above what the process holds, each run
 * on the interpreter and on the compiled engine stops with an error located
 * at the recursive call of the model, and the process never grew far past
 * the limit. The guard's default (a share of the machine's memory kept
 * free) is checked on its decision function: filling the machine in a
 * test is not an option.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#include "relayc/ad.h"
#include "relayc/pass.h"
#include "relayc/train.h"
#include "test_texts.h"
#include "tensor/mem_guard.h"

#define MIB ((size_t)1 << 20)
#define LEVELS 100000

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* This process's resident memory in bytes (/proc/self/statm). */
static size_t resident(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, pages = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld %ld", &size, &pages), 2);
    fclose(f);
    return (size_t)pages * 4096;
}

static ry_module *gradient_of(const char *path) {
    ry_module *m = NULL;
    ry_error err;
    if (ry_module_parse_file(path, &m, &err) || ry_module_typecheck(m, &err) ||
        ry_grad(m, "loss", NULL, NULL, NULL, &err) || ry_optimize(m, 2, &err))
        fail_msg("%s", err.msg);
    return m;
}

static ry_value *filled(ry_dtype dt, int ndim, const int64_t *shape, int mod) {
    ry_tensor *t = ry_tensor_new(dt, ndim, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++)
        ry_tensor_set(t, i, mod ? (double)(i % mod) : 0.01 * (double)(i % 13 - 6));
    return ry_value_tensor(t);
}

/* Runs loss_gradient on both engines with the guard at RSS + mib MiB:
 * each must fail at a line of path with the guard's message, and the
 * process must not have grown far past the limit. */
static void expect_guard(ry_module *m, const char *path, int n, ry_value **args, size_t mib) {
    for (int vm = 0; vm < 2; vm++) {
        size_t limit = resident() + mib * MIB;
        ry_error err;
        memset(&err, 0, sizeof err);
        ry_value *out = NULL;
        ry_status st;
        if (vm) {
            ry_vm_program *p = NULL;
            if (ry_vm_compile(m, NULL, &p, &err)) fail_msg("%s", err.msg);
            ry_vm_opts o = {.max_resident = limit};
            st = ry_vm_call(p, "loss_gradient", n, args, &o, &out, &err);
            ry_vm_free(p);
        } else {
            ry_interp_opts o = {.max_resident = limit};
            st = ry_interp_call(m, "loss_gradient", n, args, &o, &out, &err);
        }
        print_message("%s %s: %s:%d:%d: %s\n", path, vm ? "vm" : "interp", err.file, err.line,
                      err.col, err.msg);
        assert_int_equal(st, RY_ERR);
        assert_null(out);
        assert_non_null(strstr(err.msg, "out of memory ahead"));
        assert_non_null(strstr(err.msg, "too deep or too long"));
        assert_string_equal(err.file, path);
        assert_true(err.line > 0 && err.col > 0);
        assert_true(resident() < limit + 256 * MIB);
    }
}

/* ---- a 100,000-level tree ---- */

/* (1 (1 w) (1 (1 w) ... (1 w))) in post-order, words below vocab. */
static ry_tree chain_tree(int levels, int32_t vocab) {
    int32_t total = 2 * levels + 1, n = 0, right = 0;
    ry_tree_node *nodes = calloc((size_t)total, sizeof *nodes);
    assert_non_null(nodes);
    nodes[n++] = (ry_tree_node){1, 1, -1, -1};
    for (int k = 0; k < levels; k++) {
        nodes[n] = (ry_tree_node){1, (k * 31) % vocab, -1, -1};
        nodes[n + 1] = (ry_tree_node){1, -1, n, right};
        right = n + 1;
        n += 2;
    }
    return (ry_tree){n, nodes, 1};
}

/* The recursive encoder of test_texts.h: small states, so the depth
 * itself, not the tensors, is what fills the memory. */
static void test_deep_tree(void **state) {
    const char *text = TEST_TREE_TEXT;
    ry_module *m = NULL;
    ry_error err;
    if (ry_module_parse("tree.relay", text, strlen(text), &m, &err) || ry_module_typecheck(m, &err) ||
        ry_grad(m, "loss", NULL, NULL, NULL, &err) || ry_optimize(m, 2, &err))
        fail_msg("%s", err.msg);
    ry_tree tree = chain_tree(LEVELS, 7);
    ry_value *a[6] = {0};
    static const int64_t shapes[6][2] = {{0}, {7, 6}, {6, 12}, {6}, {2, 6}, {2}};
    static const int ndims[6] = {0, 2, 2, 1, 2, 1};
    for (int i = 1; i < 6; i++) a[i] = filled(RY_FLOAT32, ndims[i], shapes[i], 0);
    if (ry_tree_to_value(&tree, ry_module_find_ctor(m, "Leaf"), ry_module_find_ctor(m, "Node"),
                         &a[0], &err))
        fail_msg("%s", err.msg);
    expect_guard(m, "tree.relay", 6, a, 32);
    for (int i = 0; i < 6; i++) ry_value_release(a[i]);
    free((void *)tree.nodes);
    ry_module_free(m);
}

/* ---- a sequence of 100,000 steps ---- */

static void test_long_sequence(void **state) {
    const char *path = "models/charlstm.relay";
    ry_module *m = gradient_of(path);
    ry_global *g = ry_module_find_global(m, "loss");
    assert_non_null(g);
    int np = g->func->func.nparams;
    ry_value **a = calloc((size_t)np, sizeof *a);
    assert_non_null(a);
    /* x, y: (1, LEVELS) ids below 65; h0, c0 (1, 256); the rest from the
     * annotations */
    for (int i = 0; i < np; i++) {
        const ry_type *t = g->func->func.params[i]->annot;
        assert_true(t && t->kind == RY_TYPE_TENSOR);
        int64_t shape[4];
        for (int k = 0; k < t->tensor.ndim; k++)
            shape[k] = t->tensor.dims[k].kind == RY_DIM_CONST ? t->tensor.dims[k].value
                       : k == 0                                 ? 1
                                                                : LEVELS;
        bool ids = t->tensor.dtype == RY_INT32;
        a[i] = filled(t->tensor.dtype, t->tensor.ndim, shape, ids ? 65 : 0);
    }
    expect_guard(m, path, np, a, 64);
    for (int i = 0; i < np; i++) ry_value_release(a[i]);
    free(a);
    ry_module_free(m);
}

/* ---- through the trainer: the guard reaches both engines' calls ---- */

static void test_trainer_deep_tree(void **state) {
    static const char *TREES_PATH = "build-test-deep-trees.txt";
    FILE *f = fopen(TREES_PATH, "w");
    assert_non_null(f);
    for (int k = 0; k < LEVELS; k++) fputs("(1 (1 w) ", f);
    fputs("(1 w)", f);
    for (int k = 0; k < LEVELS; k++) fputc(')', f);
    fputc('\n', f);
    fclose(f);
    for (int vm = 0; vm < 2; vm++) {
        ry_train_opts o = ry_train_defaults();
        o.optim = ry_optim_defaults(RY_OPTIM_ADAGRAD);
        o.engine = vm ? RY_ENGINE_VM : RY_ENGINE_INTERP;
        o.threads = 1;
        o.max_resident = resident() + 128 * MIB;
        ry_trainer *tr = NULL;
        ry_error err;
        if (ry_trainer_new_file("models/treelstm.relay", &o, &tr, &err)) fail_msg("%s", err.msg);
        ry_vocab *v = ry_vocab_new();
        ry_treebank *tb = NULL;
        if (ry_treebank_read(TREES_PATH, v, true, &tb, &err)) fail_msg("%s", err.msg);
        ry_tree_source src;
        ry_train_data d;
        ry_value *tree = NULL;
        int64_t idx = 0;
        if (ry_train_data_trees(tr, tb, &src, &d, &err) || d.fetch(&d, &idx, 1, &tree, &err))
            fail_msg("%s", err.msg);
        double loss = 0;
        memset(&err, 0, sizeof err);
        assert_int_equal(ry_trainer_step(tr, 1, &tree, &loss, &err), RY_ERR);
        print_message("trainer %s: %s:%d:%d: %s\n", vm ? "vm" : "interp", err.file, err.line,
                      err.col, err.msg);
        assert_non_null(strstr(err.msg, "out of memory ahead"));
        assert_string_equal(err.file, "models/treelstm.relay");
        /* the trainer is still usable: a small tree trains (not under
         * ASan, whose quarantine keeps what the run freed resident, over
         * the limit) */
        ry_value_release(tree);
        ry_treebank_free(tb);
        if (!SANITIZED) {
            const char *small = "(1 (0 a) (1 (1 w) (0 b)))\n";
            if (ry_treebank_parse("small", small, strlen(small), v, true, &tb, &err) ||
                ry_train_data_trees(tr, tb, &src, &d, &err) || d.fetch(&d, &idx, 1, &tree, &err) ||
                ry_trainer_step(tr, 1, &tree, &loss, &err))
                fail_msg("after the guard: %s", err.msg);
            assert_true(isfinite(loss) && loss > 0);
            ry_value_release(tree);
            ry_treebank_free(tb);
        }
        ry_vocab_free(v);
        ry_trainer_free(tr);
    }
    remove(TREES_PATH);
}

/* ---- the default: a share of the machine kept free ---- */

static void test_default_room(void **state) {
    const double G = 1024.0 * 1024 * 1024, M = 1024.0 * 1024;
    assert_true(ry_mem_guard_room(2 * G, 24 * G));      /* 2 GiB left of 24: room */
    assert_false(ry_mem_guard_room(1 * G, 24 * G));     /* under a twentieth */
    assert_false(ry_mem_guard_room(200 * M, 2 * G));    /* under 256 MiB */
    assert_true(ry_mem_guard_room(300 * M, 2 * G));
    assert_true(ry_mem_guard_room(-1, -1));             /* unknown: never stops a run */
    /* this machine, now, has room: the default lets a deep run go on */
    ry_error err;
    assert_int_equal(ry_mem_guard_check(0, 1000, RY_NO_SPAN, &err), RY_OK);
    assert_int_equal(ry_mem_guard_check(1, 1000, RY_NO_SPAN, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "1000 frames deep"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_room),
        cmocka_unit_test(test_deep_tree),
        cmocka_unit_test(test_long_sequence),
        cmocka_unit_test(test_trainer_deep_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
