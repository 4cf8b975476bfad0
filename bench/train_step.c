/*
 * train_step.c: training throughput of one model with the trainer's
 * engine (the register VM of vm.h), as issue 5's benchmarks ask: each step
 * runs the gradient program (ry_grad, then ry_optimize, both done by
 * ry_trainer_new) and an optimizer
 * update on the trainer's parameter set (train.h: gradients and parameters are one slab
 * each). The workloads follow the PyTorch mirrors (bench_models.h; the
 * Tree-LSTM reads SST from --sst DIR, default /work/shared/data/sst).
 * Prints one JSON line with throughput (samples, sequences or trees per
 * second over the timed steps), its unit, the median step, the compile time
 * and the share of wall time inside cblas_*gemm (summed over threads).
 * --threads N sets the kernels' threads (threads.h: relayc's pool and
 * OpenBLAS) and the trainer's workers (ry_train_opts.threads).
 * --profile prints the operator call sites that took the most time in the
 * timed steps (vm.h: ry_vm_print_profile; ~50 ns per call added).
 * --batch B replaces the workload's batch (the MLP at 64 and 1024 on a GPU).
 * --no-autobatch: the trainer's calls one at a time (ry_train_opts.no_autobatch);
 * --ab: batched and not side by side, steps interleaved (medians of each).
 *   train_step NAME [--threads N] [--seconds S] [--sst DIR] [--profile] [--target T]
 *              [--batch B] [--no-autobatch] [--ab]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_models.h"
#include "bench_util.h"

#define MAX_STEPS 100000

static ry_status run(const bench_workload *w, int threads, double seconds, const char *sst,
                     bool profile, ry_error *err) {
    static double step_s[MAX_STEPS];
    bench_model b;
    ry_status st = RY_ERR;
    double t_compile = 0;
    if (bench_model_new(&b, w, threads, sst, &t_compile, err)) goto out;

    /* one warm-up step: first-touch allocations, OpenBLAS's buffers */
    int64_t items = 0;
    double loss = 0, first_loss = 0;
    /* on a device the first step also builds (or loads) its kernels */
    double t_first = bench_now();
    if (bench_model_step(&b, 0, &items, &first_loss, err)) goto out;
    t_first = bench_now() - t_first;
    const ry_target *tg = bench_model_target ? bench_model_target : ry_target_cpu();
    ry_device_counters c0, c1;
    ry_target_counters(tg, &c0);

    ry_vm_set_profile(ry_trainer_vm(b.tr), profile); /* the timed steps only */
    int n = 0;
    int64_t total_items = 0;
    double start = bench_now(), g0 = bench_gemm_seconds();
    while (n < MAX_STEPS && (n < 3 || bench_now() - start < seconds)) {
        double t0 = bench_now();
        if (bench_model_step(&b, n + 1, &items, &loss, err)) goto out;
        step_s[n++] = bench_now() - t0;
        total_items += items;
    }
    double wall = bench_now() - start;
    double gemm = bench_gemm_seconds() - g0;
    ry_target_counters(tg, &c1);
    double med = bench_median(step_s, n);
    printf("{\"bench\": \"train_step\", \"name\": \"%s\", \"engine\": \"vm\", "
           "\"throughput\": %.1f, \"unit\": \"%s\", \"threads\": %d, \"batch\": %lld, "
           "\"seq\": %lld, \"data\": \"%s\", \"optimizer\": \"%s\", \"opt_level\": %d, "
           "\"steps\": %d, \"seconds\": %.3f, \"step_ms_median\": %.3f, "
           "\"throughput_median_step\": %.1f, \"compile_ms\": %.2f, \"gemm_share\": %.3f, "
           "\"first_loss\": %.5g, \"last_loss\": %.5g, \"target\": \"%s\", \"first_step_ms\": %.1f, "
           "\"bytes_to_device_per_step\": %.0f, \"bytes_to_host_per_step\": %.0f}\n",
           w->name, wall > 0 ? (double)total_items / wall : 0, w->unit, threads,
           (long long)w->batch, (long long)w->seq,
           b.tb ? (b.real_data ? "sst train" : "random trees") : "random",
           ry_optim_kind_name(b.opts.optim.kind),
           2 /* the trainer's ry_optimize level */, n, wall, 1e3 * med,
           med > 0 ? (double)items / med : 0, 1e3 * t_compile, wall > 0 ? gemm / wall : 0,
           first_loss, loss, ry_target_name(tg), 1e3 * t_first,
           (double)(c1.bytes_to_device - c0.bytes_to_device) / n,
           (double)(c1.bytes_to_host - c0.bytes_to_host) / n);
    fflush(stdout);
    if (profile) ry_vm_print_profile(ry_trainer_vm(b.tr), stderr, 30);
    st = RY_OK;
out:
    bench_model_free(&b);
    return st;
}

/* --ab: two trainers of the same model and seed, one batching
 * automatically and one not (--no-autobatch), stepped in turn on the
 * same batches, so both see the same machine load; medians of each. */
static ry_status run_ab(const bench_workload *w, int threads, double seconds, const char *sst,
                        ry_error *err) {
    static double t_on[MAX_STEPS], t_off[MAX_STEPS];
    bench_model on, off;
    double tc = 0;
    bool have_on = false, have_off = false;
    ry_status st = RY_ERR;
    bench_model_no_autobatch = false;
    if (bench_model_new(&on, w, threads, sst, &tc, err)) goto out;
    have_on = true;
    bench_model_no_autobatch = true;
    if (bench_model_new(&off, w, threads, sst, &tc, err)) goto out;
    have_off = true;
    int64_t items = 0;
    double loss_on = 0, loss_off = 0;
    if (bench_model_step(&on, 0, &items, &loss_on, err) || bench_model_step(&off, 0, &items, &loss_off, err))
        goto out;
    int n = 0;
    double start = bench_now();
    while (n < MAX_STEPS && (n < 3 || bench_now() - start < seconds)) {
        double t0 = bench_now();
        if (bench_model_step(&on, n + 1, &items, &loss_on, err)) goto out;
        double t1 = bench_now();
        if (bench_model_step(&off, n + 1, &items, &loss_off, err)) goto out;
        t_on[n] = t1 - t0;
        t_off[n++] = bench_now() - t1;
    }
    double m_on = bench_median(t_on, n), m_off = bench_median(t_off, n);
    /* evaluation (@loss and @predict of each tree: ry_train_evaluate, 25
     * trees per batch) of the first 250 trees, in turn, 5 rounds */
    double e_on[5] = {0}, e_off[5] = {0}, acc_on = 0, acc_off = 0, el;
    int64_t ne = 0;
    if (on.tb) {
        ry_train_data d_on = on.td, d_off = off.td;
        d_on.n = d_off.n = ne = on.td.n < 250 ? on.td.n : 250;
        for (int r = 0; r < 5; r++) {
            double t0 = bench_now();
            if (ry_train_evaluate(on.tr, &d_on, 25, &el, &acc_on, err)) goto out;
            double t1 = bench_now();
            if (ry_train_evaluate(off.tr, &d_off, 25, &el, &acc_off, err)) goto out;
            e_on[r] = t1 - t0;
            e_off[r] = bench_now() - t1;
        }
    }
    double me_on = bench_median(e_on, 5), me_off = bench_median(e_off, 5);
    printf("{\"bench\": \"train_step_ab\", \"name\": \"%s\", \"threads\": %d, \"batch\": %lld, "
           "\"unit\": \"%s\", \"steps\": %d, \"autobatch_step_ms_median\": %.3f, "
           "\"no_autobatch_step_ms_median\": %.3f, \"autobatch_throughput\": %.1f, "
           "\"no_autobatch_throughput\": %.1f, \"speedup\": %.3f, \"last_loss_autobatch\": %.6g, "
           "\"last_loss_no_autobatch\": %.6g, \"eval_trees\": %lld, \"eval_autobatch_trees_per_s\": %.1f, "
           "\"eval_no_autobatch_trees_per_s\": %.1f, \"eval_speedup\": %.3f, "
           "\"eval_acc_autobatch\": %.4f, \"eval_acc_no_autobatch\": %.4f}\n",
           w->name, threads, (long long)w->batch, w->unit, n, 1e3 * m_on, 1e3 * m_off,
           (double)items / m_on, (double)items / m_off, m_off / m_on, loss_on, loss_off,
           (long long)ne, me_on > 0 ? (double)ne / me_on : 0, me_off > 0 ? (double)ne / me_off : 0,
           me_on > 0 ? me_off / me_on : 0, acc_on, acc_off);
    st = RY_OK;
out:
    if (have_on) bench_model_free(&on);
    if (have_off) bench_model_free(&off);
    return st;
}

int main(int argc, char **argv) {
    int threads = 1;
    double seconds = 10;
    const char *sst = "/work/shared/data/sst", *name = NULL;
    bool profile = false, ab = false;
    const char *target = NULL;
    int batch = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = bench_opt(argc, argv, &i, "--threads"))) threads = atoi(v);
        else if ((v = bench_opt(argc, argv, &i, "--seconds"))) seconds = atof(v);
        else if ((v = bench_opt(argc, argv, &i, "--sst"))) sst = v;
        else if ((v = bench_opt(argc, argv, &i, "--target"))) target = v;
        else if ((v = bench_opt(argc, argv, &i, "--batch"))) batch = atoi(v);
        else if (!strcmp(argv[i], "--profile")) profile = true;
        else if (!strcmp(argv[i], "--no-autobatch")) bench_model_no_autobatch = true;
        else if (!strcmp(argv[i], "--ab")) ab = true;
        else if (argv[i][0] != '-' && !name) name = argv[i];
        else name = NULL, i = argc;
    }
    const bench_workload *found = bench_workload_find(name);
    if (!found || threads < 1 || !(seconds >= 0) || batch < 0) {
        fprintf(stderr, "usage: train_step mlp|lenet|charlstm|treelstm [--threads N] "
                        "[--seconds S] [--sst DIR] [--profile] [--target T] [--batch B]\n"
                        "       [--no-autobatch] [--ab]\n");
        return 2;
    }
    bench_workload wb = *found;
    if (batch) wb.batch = batch;
    const bench_workload *w = &wb;
    bench_set_threads(threads);
    ry_error err;
    if (target && ry_target_find(target, &bench_model_target, &err)) {
        fprintf(stderr, "train_step: %s\n", err.msg);
        return 1;
    }
    if (ab ? run_ab(w, threads, seconds, sst, &err) : run(w, threads, seconds, sst, profile, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    return 0;
}
