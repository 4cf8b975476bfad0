/*
 * test_memory.c: peak memory of a forward and backward pass grows linearly
 * with the input. The Tree-LSTM of models/treelstm.relay is differentiated
 * once and run on balanced trees of n, 2n and 4n nodes, on the interpreter
 * and on the compiled engine, each run in a child process that measures its
 * own peak resident memory (VmHWM, reset through /proc/self/clear_refs just
 * before the call). Linear growth doubles the increment when the size
 * doubles; n^2 quadruples it. Before grad_shapes.c every leaf's backward
 * closure held a (leaves, 150) product it needed only for its shape: 4x.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

#include "relayc/ad.h"
#include "relayc/pass.h"

/* "VmHWM:" or "VmRSS:" of /proc/self/status, in KiB; -1 if unreadable. */
static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0) v = atol(line + n);
    fclose(f);
    return v;
}

/* Resets VmHWM to the current RSS (Linux 4.0 and later). */
static bool reset_peak(void) {
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd < 0) return false;
    bool ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok;
}

/* A balanced binary tree over k leaves in post-order. */
static int32_t balanced(int k, ry_tree_node *nodes, int32_t *n) {
    if (k == 1) {
        nodes[*n] = (ry_tree_node){1, (*n * 31) % 18281, -1, -1};
        return (*n)++;
    }
    int32_t l = balanced(k / 2, nodes, n), r = balanced(k - k / 2, nodes, n);
    nodes[*n] = (ry_tree_node){2, -1, l, r};
    return (*n)++;
}

static ry_value *filled(int ndim, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, ndim, shape);
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, 0.01 * (double)(i % 13 - 6));
    return ry_value_tensor(t);
}

/* In a child: @loss_gradient on a tree of `nodes` nodes; writes the peak
 * growth over the call in KiB to fd, or -1. */
static void child(ry_module *m, bool vm, int nodes, int fd) {
    long kb = -1;
    ry_error err = {0};
    int k = (nodes + 1) / 2;
    ry_tree_node *nd = calloc((size_t)(2 * k), sizeof *nd);
    int32_t n = 0;
    balanced(k, nd, &n);
    ry_tree tree = {n, nd, 1};
    ry_value *a[10] = {0};
    static const int64_t shapes[10][2] = {{0},      {18281, 300}, {150, 300}, {150}, {150, 300},
                                          {150},    {750, 300},   {750},      {5, 150}, {5}};
    static const int ndims[10] = {0, 2, 2, 1, 2, 1, 2, 1, 2, 1};
    for (int i = 1; i < 10; i++) a[i] = filled(ndims[i], shapes[i]);
    ry_vm_program *p = NULL;
    ry_value *out = NULL;
    bool ok = ry_tree_to_value(&tree, ry_module_find_ctor(m, "Leaf"), ry_module_find_ctor(m, "Node"),
                               &a[0], &err) == RY_OK &&
              (!vm || ry_vm_compile(m, NULL, &p, &err) == RY_OK);
    long before = ok && reset_peak() ? status_kb("VmRSS:") : -1;
    if (before >= 0) {
        ok = vm ? ry_vm_call(p, "loss_gradient", 10, a, NULL, &out, &err) == RY_OK
                : ry_interp_call(m, "loss_gradient", 10, a, NULL, &out, &err) == RY_OK;
        long peak = status_kb("VmHWM:");
        if (ok && peak >= before) kb = peak - before;
    }
    if (!ok) fprintf(stderr, "child: %s\n", err.msg);
    if (write(fd, &kb, sizeof kb) != (ssize_t)sizeof kb) _exit(2);
    _exit(0);
}

static long peak_kb(ry_module *m, bool vm, int nodes) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        child(m, vm, nodes, fds[1]);
    }
    close(fds[1]);
    long kb = -1;
    assert_int_equal(read(fds[0], &kb, sizeof kb), (ssize_t)sizeof kb);
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(kb >= 0);
    return kb;
}

static ry_module *treelstm_gradient(bool optimized) {
    ry_module *m = NULL;
    ry_error err;
    if (ry_module_parse_file("models/treelstm.relay", &m, &err) || ry_module_typecheck(m, &err) ||
        ry_grad(m, "loss", NULL, NULL, NULL, &err) || (optimized && ry_optimize(m, 2, &err)))
        fail_msg("%s", err.msg);
    return m;
}

/* Increments from n to 2n and from 2n to 4n nodes: linear is 2x, n^2 4x. */
static void linear_in_nodes(bool vm) {
    ry_module *m = treelstm_gradient(vm);
    enum { N = 400 };
    long p1 = peak_kb(m, vm, N + 1), p2 = peak_kb(m, vm, 2 * N + 1), p4 = peak_kb(m, vm, 4 * N + 1);
    double ratio = (double)(p4 - p2) / (double)(p2 - p1 > 1024 ? p2 - p1 : 1024);
    print_message("%s: peak growth %ld, %ld, %ld KiB at %d, %d, %d nodes (increment ratio %.2f)\n",
                  vm ? "vm" : "interp", p1, p2, p4, N + 1, 2 * N + 1, 4 * N + 1, ratio);
    assert_true(p4 > p2);
    assert_true(ratio < 3.0);
    ry_module_free(m);
}

static void test_treelstm_interp_linear(void **state) {
    (void)state;
    linear_in_nodes(false);
}

static void test_treelstm_vm_linear(void **state) {
    (void)state;
    linear_in_nodes(true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_treelstm_interp_linear),
        cmocka_unit_test(test_treelstm_vm_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
