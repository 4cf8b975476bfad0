/*
 * test_train_args.c: every `relayc train` option reaches the C option it
 * mirrors (src/cli/train_args.c, compiled into this test as the command
 * is), and bad values are refused with a message: counts of 0 or below,
 * malformed schedules and --dim, unknown optimizers.
 */
#include <stdlib.h>

#include "test_util.h"

#include "cli/common.c"
#include "cli/train_args.c"

static char errbuf[4096];

/* Parses the words of line (space-separated) into *a and *o; returns the
 * parse's status (0 ok), with stderr captured in errbuf. */
static int parse(const char *line, train_args *a, ry_train_opts *o) {
    static char buf[2048];
    char *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "train %s", line);
    for (char *t = strtok(buf, " "); t && argc < 63; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    memset(a, 0, sizeof *a);
    fflush(stderr);
    FILE *saved = stderr;
    FILE *f = tmpfile();
    assert_non_null(f);
    stderr = f;
    int rc = train_args_parse(argc, argv, a);
    if (rc == 0) rc = train_args_opts(a, o);
    stderr = saved;
    rewind(f);
    size_t n = fread(errbuf, 1, sizeof errbuf - 1, f);
    errbuf[n] = '\0';
    fclose(f);
    return rc;
}

static void test_every_option_reaches_the_api(void **s) {
    train_args a;
    ry_train_opts o;
    const char *line =
        "m.relay --data npy:x.npy,y.npy --optimizer adam --lr 0.003 --weight-decay 0.01 "
        "--beta1 0.8 --beta2 0.95 --eps 1e-6 --amsgrad --clip-norm 2.5 --clip-value 0.75 "
        "--schedule cosine:100:0.001 --warmup 10:0.5 --dim v=65 --dim n=7 --seed 9 "
        "--epochs 2 --steps 30 --batch 16 --seq 8 --val 4 --checkpoint-dir ck "
        "--checkpoint-every 5 --keep 2 --log-every 3 --threads 2 --csv m.csv --quiet "
        "--inference-gradients --engine vm --target cpu --drop-last --max-memory 3000";
    assert_int_equal(parse(line, &a, &o), 0);
    assert_int_equal(o.optim.kind, RY_OPTIM_ADAM);
    assert_true(o.optim.lr == 0.003 && o.optim.weight_decay == 0.01);
    assert_true(o.optim.beta1 == 0.8 && o.optim.beta2 == 0.95 && o.optim.eps == 1e-6);
    assert_true(o.optim.amsgrad);
    assert_true(o.clip_norm == 2.5 && o.clip_value == 0.75);
    assert_int_equal(o.schedule.kind, RY_SCHED_COSINE);
    assert_int_equal(o.schedule.t_max, 100);
    assert_true(o.schedule.eta_min == 0.001);
    assert_int_equal(o.schedule.warmup_steps, 10);
    assert_true(o.schedule.warmup_start_factor == 0.5);
    assert_int_equal(o.nsyms, 2);
    assert_string_equal(o.sym_names[0], "v");
    assert_int_equal(o.sym_values[0], 65);
    assert_string_equal(o.sym_names[1], "n");
    assert_int_equal(o.sym_values[1], 7);
    assert_int_equal(o.seed, 9);
    assert_false(o.training);
    assert_int_equal(o.engine, RY_ENGINE_VM);
    assert_ptr_equal(o.target, ry_target_cpu());
    assert_int_equal(o.threads, 2);
    assert_true(o.max_resident == (size_t)3000 << 20);
    ry_set_num_threads(1);
    /* what fit takes from the arguments */
    assert_int_equal(a.epochs, 2);
    assert_int_equal(a.steps, 30);
    assert_int_equal(a.batch, 16);
    assert_int_equal(a.seq, 8);
    assert_int_equal(a.val, 4);
    assert_int_equal(a.ckpt_every, 5);
    assert_int_equal(a.keep, 2);
    assert_int_equal(a.log_every, 3);
    assert_true(a.quiet && a.drop_last);
    assert_string_equal(a.ckpt_dir, "ck");
    assert_string_equal(a.csv, "m.csv");

    /* sgd and rmsprop's own */
    assert_int_equal(parse("m.relay --data x --momentum 0.9 --dampening 0 --nesterov", &a, &o), 0);
    assert_int_equal(o.optim.kind, RY_OPTIM_SGD);
    assert_true(o.optim.lr == 0.01 && o.optim.momentum == 0.9 && o.optim.nesterov);
    assert_int_equal(parse("m.relay --data x --optimizer rmsprop --alpha 0.9 --centered", &a, &o), 0);
    assert_true(o.optim.alpha == 0.9 && o.optim.centered);
    assert_int_equal(parse("m.relay --data x --optimizer adagrad --lr-decay 0.1 "
                           "--initial-accumulator 0.2", &a, &o), 0);
    assert_true(o.optim.lr_decay == 0.1 && o.optim.initial_accumulator_value == 0.2);
    /* not given: PyTorch's defaults stand */
    assert_int_equal(parse("m.relay --data x --optimizer adam", &a, &o), 0);
    ry_optim_config d = ry_optim_defaults(RY_OPTIM_ADAM);
    assert_true(o.optim.beta1 == d.beta1 && o.optim.beta2 == d.beta2 && o.optim.eps == d.eps);
    assert_int_equal(o.schedule.kind, RY_SCHED_CONSTANT);
    assert_true(o.training);
}

static void test_schedules(void **s) {
    train_args a;
    ry_train_opts o;
    assert_int_equal(parse("m --data x --schedule step:30", &a, &o), 0);
    assert_int_equal(o.schedule.kind, RY_SCHED_STEP);
    assert_int_equal(o.schedule.step_size, 30);
    assert_true(o.schedule.gamma == 0.1);
    assert_int_equal(parse("m --data x --schedule step:30:0.5", &a, &o), 0);
    assert_true(o.schedule.gamma == 0.5);
    assert_int_equal(parse("m --data x --schedule multistep:10,20,40:0.2", &a, &o), 0);
    assert_int_equal(o.schedule.kind, RY_SCHED_MULTISTEP);
    assert_int_equal(o.schedule.n_milestones, 3);
    assert_int_equal(o.schedule.milestones[2], 40);
    assert_true(o.schedule.gamma == 0.2);
    assert_int_equal(parse("m --data x --schedule exponential:0.99", &a, &o), 0);
    assert_int_equal(o.schedule.kind, RY_SCHED_EXPONENTIAL);
    assert_true(o.schedule.gamma == 0.99);
    assert_int_equal(parse("m --data x --schedule linear:0.5:1:20", &a, &o), 0);
    assert_int_equal(o.schedule.kind, RY_SCHED_LINEAR);
    assert_true(o.schedule.start_factor == 0.5 && o.schedule.end_factor == 1);
    assert_int_equal(o.schedule.total_iters, 20);
    /* the warm-up survives a schedule given after it; 1/3 by default */
    assert_int_equal(parse("m --data x --warmup 5 --schedule constant", &a, &o), 0);
    assert_int_equal(o.schedule.warmup_steps, 5);
    assert_true(o.schedule.warmup_start_factor == 1.0 / 3);
    const char *bad[] = {"step", "step:x", "cosine:10:1:2", "linear:1:2", "multistep:",
                         "exponential", "warm:3", "constant:1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char line[128];
        snprintf(line, sizeof line, "m --data x --schedule %s", bad[i]);
        assert_int_equal(parse(line, &a, &o), 1);
        assert_non_null(strstr(errbuf, "--schedule '"));
    }
    assert_int_equal(parse("m --data x --warmup 0", &a, &o), 1);
    assert_non_null(strstr(errbuf, "--warmup needs STEPS[:FACTOR] with STEPS >= 1, got '0'"));
}

static void test_bad_values(void **s) {
    train_args a;
    ry_train_opts o;
    const char *counts[] = {"--epochs", "--steps", "--batch", "--seq", "--keep",
                            "--log-every", "--threads", "--checkpoint-every"};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        char line[128], want[128];
        snprintf(line, sizeof line, "m --data x %s 0", counts[i]);
        assert_int_equal(parse(line, &a, &o), 1);
        snprintf(want, sizeof want, "%s needs a whole number >= 1, got '0'", counts[i]);
        if (!strstr(errbuf, want)) fail_msg("%s: %s", line, errbuf);
        snprintf(line, sizeof line, "m --data x %s -3", counts[i]);
        assert_int_equal(parse(line, &a, &o), 1);
    }
    assert_int_equal(parse("m --data x --val 0", &a, &o), 0); /* no rows held out */
    assert_int_equal(parse("m --data x --lr -1", &a, &o), 1);
    assert_non_null(strstr(errbuf, "--lr needs a number >= 0, got '-1'"));
    assert_int_equal(parse("m --data x --eps 0", &a, &o), 1);
    assert_non_null(strstr(errbuf, "--eps needs a number > 0, got '0'"));
    assert_int_equal(parse("m --data x --clip-value nan", &a, &o), 1);
    assert_int_equal(parse("m --data x --dim v", &a, &o), 1);
    assert_non_null(strstr(errbuf, "--dim needs NAME=N with N >= 0, got 'v'"));
    assert_int_equal(parse("m --data x --dim v=3 --dim v=4", &a, &o), 1);
    assert_non_null(strstr(errbuf, "--dim v given twice"));
    assert_int_equal(parse("m --data x --optimizer lion", &a, &o), 1);
    assert_non_null(strstr(errbuf, "unknown optimizer 'lion'"));
    assert_int_equal(parse("m --data x --frobnicate", &a, &o), 1);
    assert_non_null(strstr(errbuf, "unknown option '--frobnicate' (relayc help train)"));
    assert_int_equal(parse("m --data x --threads 65", &a, &o), 1);
    assert_int_equal(parse("m --data x --resume", &a, &o), 1);
    assert_non_null(strstr(errbuf, "--resume needs --checkpoint-dir"));
    assert_int_equal(parse("--data x", &a, &o), 1);
    assert_non_null(strstr(errbuf, "no model file"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_option_reaches_the_api),
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_bad_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
