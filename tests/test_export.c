/*
 * test_export.c: relayc export end to end. Each model (models/mlp.relay,
 * models/lenet.relay, and the programs of tests/export/ for the other
 * emitters) gets a checkpoint of seeded random weights, is exported, its
 * directory built with cc -std=c11 -Wall -Wextra -Werror -pedantic (gcc,
 * and clang where installed for the artifacts that hold every runtime
 * file between them), and its example run on .npy inputs (two batch sizes
 * where the batch is symbolic); the outputs are compared with `relayc run
 * --checkpoint` on the VM. The export sums GEMMs and convolutions in
 * increasing k (OpenBLAS blocks K) and uses libm's exp and tanh (the VM
 * its vector forms), so the comparison is to float32 rounding: rtol 1e-4,
 * atol 1e-5. (The programs of tests/run/, tests/corpus/ and tests/export/
 * are test_export_programs.c's; what both share, export_util.h.) Errors:
 * an operator without a C kernel (located, named), a wrong dimension at the entry (its error code, also
 * under valgrind), a damaged or another model's weights file (CRC, size),
 * a checkpoint of another model (refused by export and run). --blas
 * builds against OpenBLAS where it is installed; relayc train --export
 * exports what the run's last checkpoint holds. Control flow over data:
 * the Tree-LSTM on PTB strings and the char-LSTM against relayc run, the
 * tree constructors from a C driver (tests/export_c/tree_driver.c),
 * malformed trees, too deep a recursion, a wrong batch and a wrong-size
 * weights file as error codes with their messages, and a long window in
 * bounded memory. RY_TEST_FILTER=test_NAME runs one test.
 */
#include "export_util.h"

static void test_mlp(void **s) {
    const char *dir = export_and_check("models/mlp.relay", "mlp", false, 1, (int64_t[]){784}, 1, false);
    /* a wrong dimension: the entry's error code (RT_E_DIM = 4), not a crash */
    random_npy("bad", 2, (int64_t[]){2, 783}, 1);
    assert_int_equal(sh("%s/example %s/bad.npy %s/o.npy", dir, tmpdir, tmpdir), 4);
    assert_log_contains("mlp_predict: input x: dimension 1 is 783, the model needs 784");
    random_npy("bad", 3, (int64_t[]){2, 784, 1}, 1);
    assert_int_equal(sh("%s/example %s/bad.npy %s/o.npy", dir, tmpdir, tmpdir), 4);
    assert_log_contains("input x must have 2 dimensions");
}

static void test_lenet(void **s) {
    const char *dir = export_and_check("models/lenet.relay", "lenet", false, 3, (int64_t[]){1, 28, 28}, 1, true);
    /* the runtime's plain-C kernels (other compilers'): the same answers */
    must(sh("make -s -C %s clean && make -s -C %s CFLAGS='-std=c11 -O2 -Wall -Wextra -Werror -pedantic -DRT_PLAIN_C'", dir,
            dir),
         "make -DRT_PLAIN_C");
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s/lenet.h5", tmpdir);
    compare("models/lenet.relay", dir, ckpt, "x", 1);
}

static void test_lenet_embedded(void **s) {
    const char *dir = export_and_check("models/lenet.relay", "lenet_e", true, 3, (int64_t[]){1, 28, 28}, 1, false);
    char path[600];
    snprintf(path, sizeof path, "%s/lenet.weights", dir);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0); /* no weights file */
}

/* float64 weights: a float64 model's checkpoint exported to the weights
 * file and built in, against relayc run --checkpoint in float64. */
static void test_float64_weights(void **s) {
    char model[600], ckpt[600], dir[600];
    snprintf(model, sizeof model, "%s/mlp64.relay", tmpdir);
    snprintf(ckpt, sizeof ckpt, "%s/mlp64.h5", tmpdir);
    write_text_in(tmpdir, "mlp64.relay",
                  "#[version = \"0.0.5\"]\n"
                  "def @predict(%x: Tensor[(n, 4), float64], %w1: Tensor[(5, 4), float64], %b1: Tensor[(5), float64],\n"
                  "             %w2: Tensor[(3, 5), float64]) {\n"
                  "  %0 = nn.bias_add(nn.dense(%x, %w1), %b1);\n  nn.softmax(nn.dense(tanh(%0), %w2))\n}\n");
    random_checkpoint(model, "predict", ckpt, 11);
    for (int embed = 0; embed < 2; embed++) {
        snprintf(dir, sizeof dir, "%s/mlp64_c%d", tmpdir, embed);
        must(sh("%s export %s --checkpoint %s -o %s%s", relayc(), model, ckpt, dir, embed ? " --embed-weights" : ""),
             "relayc export, float64 weights");
        build(dir);
        for (int64_t rows = 1; rows <= 4; rows += 3) {
            char path[600];
            snprintf(path, sizeof path, "%s/x.npy", tmpdir);
            ry_tensor *x = ry_tensor_new(RY_FLOAT64, 2, (int64_t[]){rows, 4});
            for (int64_t i = 0; i < x->size; i++) ((double *)x->data)[i] = 0.25 * (double)(i % 7) - 0.6 + 0.01 * (double)rows;
            ry_error err;
            assert_int_equal(ry_npy_write(path, x, &err), RY_OK);
            ry_tensor_release(x);
            all_float64 = true;
            compare(model, dir, ckpt, "x", 1);
            all_float64 = false;
        }
    }
}

/* Exits nonzero unless dir/NAME.c makes exactly want weights into GEMM
 * operands (rt_pack, rt_transpose_f64), all inside NAME_open, and no
 * other code packs or transposes a GEMM's b: a call only runs its GEMMs. */
static void packs_in_open(const char *dir, const char *name, int want) {
    must(sh("awk '/^int %s_open\\(/ { o = 1 } o && /^}/ { o = 0 } /(rt_pack|rt_transpose_f64)\\(/ && !/static/ { if (o) n++; else m++ }"
            " END { print n + 0, \"in open,\", m + 0, \"elsewhere\"; exit !(n == %d && m == 0) }' %s/%s.c",
            name, want, dir, name),
         "weights packed once, when the context opens");
}

/* A weight read as a GEMM's b in several shapes (reshaped, transposed or
 * not) gets one operand per weight, shape and transposition, made when
 * the context opens, and GEMMs of the same one share it: float32 packed
 * into the runtime's panels (also under ASan+UBSan), float64 transposed
 * (read as it is untransposed), against relayc run --checkpoint. */
static void test_weight_packs(void **s) {
    for (int f64 = 0; f64 < 2; f64++) {
        const char *T = f64 ? "float64" : "float32";
        char text[1200], name[64], model[600], ckpt[600], dir[600], path[600];
        snprintf(text, sizeof text,
                 "#[version = \"0.0.5\"]\n"
                 "def @predict(%%x: Tensor[(n, 4), %s], %%w: Tensor[(2, 3, 4), %s], %%v: Tensor[(4, 6), %s]) {\n"
                 "  %%0 = nn.dense(%%x, reshape(%%w, newshape=[6, 4]));\n"
                 "  %%1 = nn.dense(%%x, reshape(%%v, newshape=[6, 4]));\n"
                 "  (%%0, %%1, nn.dense(%%0, %%v), nn.matmul(%%x, %%v), nn.dense(tanh(%%x), reshape(%%w, newshape=[6, 4])))\n}\n",
                 T, T, T);
        snprintf(name, sizeof name, "packs%d", f64 ? 64 : 32);
        snprintf(model, sizeof model, "%s/%s.relay", tmpdir, name);
        snprintf(ckpt, sizeof ckpt, "%s/%s.h5", tmpdir, name);
        snprintf(dir, sizeof dir, "%s/%s_c", tmpdir, name);
        char file[80];
        snprintf(file, sizeof file, "%s.relay", name);
        write_text_in(tmpdir, file, text);
        random_checkpoint(model, "predict", ckpt, 12);
        must(sh("%s export %s --checkpoint %s -o %s", relayc(), model, ckpt, dir), "relayc export");
        packs_in_open(dir, name, f64 ? 3 : 4);
        snprintf(path, sizeof path, "%s/x.npy", tmpdir);
        ry_tensor *x = ry_tensor_new(f64 ? RY_FLOAT64 : RY_FLOAT32, 2, (int64_t[]){3, 4});
        for (int64_t i = 0; i < x->size; i++) ry_tensor_set(x, i, 0.25 * (double)(i % 7) - 0.6);
        ry_error err;
        assert_int_equal(ry_npy_write(path, x, &err), RY_OK);
        ry_tensor_release(x);
        all_float64 = f64;
        build(dir);
        compare(model, dir, ckpt, "x", 5);
        if (!f64) {
            must(sh("make -s -C %s clean && make -s -C %s CC=gcc CFLAGS='-std=c11 -O1 -g -fsanitize=address,undefined "
                    "-fno-sanitize-recover=all' LDFLAGS='-fsanitize=address,undefined'", dir, dir),
                 "build with ASan+UBSan");
            compare(model, dir, ckpt, "x", 5);
        }
        all_float64 = false;
    }
}

static void test_ops(void **s) {
    export_and_check("tests/export/ops.relay", "ops", false, 3, (int64_t[]){4, 9, 9}, 3, true);
}

/* --blas: the GEMMs through cblas_sgemm (where OpenBLAS's pkg-config
 * file is there; otherwise said and skipped). */
static void test_blas(void **s) {
    if (system("pkg-config --exists openblas") != 0) {
        print_message("test_blas: no openblas.pc here, --blas not built\n");
        skip();
    }
    char ckpt[512], dir[512];
    snprintf(ckpt, sizeof ckpt, "%s/blas.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/blas_c", tmpdir);
    random_checkpoint("models/lenet.relay", "predict", ckpt, 5);
    must(sh("%s export models/lenet.relay --checkpoint %s -o %s --blas", relayc(), ckpt, dir), "relayc export --blas");
    build(dir);
    random_npy("x", 4, (int64_t[]){2, 1, 28, 28}, 3);
    compare("models/lenet.relay", dir, ckpt, "x", 1);
}

/* The MLP's @loss (one_hot, log_softmax, the reductions) with its data x
 * and y as inputs. */
static void test_loss(void **s) {
    char ckpt[512], dir[512], path[600];
    snprintf(ckpt, sizeof ckpt, "%s/loss.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/loss_c", tmpdir);
    random_checkpoint("models/mlp.relay", "loss", ckpt, 6);
    must(sh("%s export models/mlp.relay --entry loss --checkpoint %s -o %s", relayc(), ckpt, dir), "export @loss");
    build(dir);
    random_npy("x", 2, (int64_t[]){5, 784}, 8);
    snprintf(path, sizeof path, "%s/y.npy", tmpdir);
    ry_tensor *y = ry_tensor_new(RY_INT32, 1, (int64_t[]){5});
    for (int i = 0; i < 5; i++) ((int32_t *)y->data)[i] = (i * 3) % 10;
    ry_error err;
    assert_int_equal(ry_npy_write(path, y, &err), RY_OK);
    ry_tensor_release(y);
    must(sh("%s run models/mlp.relay --entry loss --checkpoint %s --input x=%s/x.npy --input y=%s/y.npy --out %s/lref",
            relayc(), ckpt, tmpdir, tmpdir, tmpdir),
         "relayc run @loss");
    must(sh("%s/example %s/x.npy %s/y.npy %s/lgot.npy", dir, tmpdir, tmpdir, tmpdir), "example @loss");
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/lgot.npy", tmpdir);
    snprintf(b, sizeof b, "%s/lref/out_0.npy", tmpdir);
    ry_tensor *x = test_npy(a), *r = test_npy(b);
    test_assert_close(x, r, 1e-5, 1e-6);
    ry_tensor_release(x);
    ry_tensor_release(r);
}

/* tests/export/heads.relay: a checkpoint of @loss's parameters, one more
 * than @predict takes, exports @predict (and runs it). */
static void test_loss_only_weight(void **s) {
    char ckpt[512], dir[512];
    snprintf(ckpt, sizeof ckpt, "%s/heads.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/heads_c", tmpdir);
    random_checkpoint("tests/export/heads.relay", "loss", ckpt, 2);
    must(sh("%s export tests/export/heads.relay --checkpoint %s -o %s", relayc(), ckpt, dir), "relayc export");
    build(dir);
    random_npy("x", 2, (int64_t[]){4, 3}, 1);
    compare("tests/export/heads.relay", dir, ckpt, "x", 1);
}

/* tests/export/layers.relay: inference-mode batch_norm and dropout,
 * reductions, take (with indices out of range), transpose, concatenate;
 * an int32 input beside the float one. */
static void test_layers(void **s) {
    char ckpt[512], dir[512];
    snprintf(ckpt, sizeof ckpt, "%s/layers.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/layers_c", tmpdir);
    random_checkpoint_ex("tests/export/layers.relay", "predict", ckpt, 9, true);
    must(sh("%s export tests/export/layers.relay --checkpoint %s -o %s", relayc(), ckpt, dir), "relayc export");
    build_with(dir, true);
    random_npy("x", 4, (int64_t[]){3, 3, 8, 8}, 2);
    char path[600];
    snprintf(path, sizeof path, "%s/ids.npy", tmpdir);
    ry_tensor *ids = ry_tensor_new(RY_INT32, 2, (int64_t[]){3, 2});
    for (int i = 0; i < 6; i++) ((int32_t *)ids->data)[i] = i * 3 - 2; /* -2 .. 13: clipped into [0, 7) */
    ry_error err;
    assert_int_equal(ry_npy_write(path, ids, &err), RY_OK);
    ry_tensor_release(ids);
    const char *names[] = {"x", "ids"};
    compare_inputs("tests/export/layers.relay", dir, ckpt, names, 2, 2);
}

/* tests/export/embed.relay: vocab, a symbolic dim of the embedding table,
 * is fixed by the checkpoint (11 rows); argmax gives int32 results. */
static void test_weight_dims(void **s) {
    char ckpt[512], dir[512];
    snprintf(ckpt, sizeof ckpt, "%s/embed.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/embed_c", tmpdir);
    const char *names[] = {"emb", "g", "b", "w"};
    int ndims[] = {2, 1, 1, 2};
    const int64_t *shapes[] = {(int64_t[]){11, 8}, (int64_t[]){8}, (int64_t[]){8}, (int64_t[]){3, 8}};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 4, names, ndims, shapes);
    ry_rng rng;
    ry_rng_seed(&rng, 4);
    for (int64_t i = 0; i < p->slab->size; i++) ((float *)p->slab->data)[i] = (float)ry_rng_normal(&rng);
    ry_checkpoint_meta meta = {0};
    ry_error err;
    assert_int_equal(ry_checkpoint_save(ckpt, p, NULL, &meta, &err), RY_OK);
    ry_params_free(p);
    must(sh("%s export tests/export/embed.relay --checkpoint %s -o %s", relayc(), ckpt, dir), "relayc export");
    build_with(dir, true);
    char path[600];
    snprintf(path, sizeof path, "%s/ids.npy", tmpdir);
    ry_tensor *ids = ry_tensor_new(RY_INT32, 2, (int64_t[]){5, 4});
    for (int i = 0; i < 20; i++) ((int32_t *)ids->data)[i] = (i * 7) % 11;
    assert_int_equal(ry_npy_write(path, ids, &err), RY_OK);
    ry_tensor_release(ids);
    const char *in[] = {"ids"};
    compare_inputs("tests/export/embed.relay", dir, ckpt, in, 1, 2);
    /* the header has vocab as the checkpoint's constant, n as an argument */
    must(sh("grep -q 'int embed_predict(embed_ctx \\*ctx, int64_t n, const int32_t \\*ids, float \\*out0, int32_t \\*out1)' %s/embed.h", dir),
         "the entry's signature");
}

/* A damaged weights file is refused by its CRC, a truncated or another
 * model's by its size (RT_E_WEIGHTS = 2 from the example). */
static void test_weights_checked(void **s) {
    char ckpt[512], dir[512];
    snprintf(ckpt, sizeof ckpt, "%s/w.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/w_c", tmpdir);
    random_checkpoint("models/mlp.relay", "predict", ckpt, 3);
    must(sh("%s export models/mlp.relay --checkpoint %s -o %s --name net", relayc(), ckpt, dir), "export");
    must(sh("make -s -C %s CFLAGS='-std=c11 -O0'", dir), "make");
    random_npy("x", 2, (int64_t[]){2, 784}, 5);
    must(sh("%s/example %s/x.npy %s/o.npy", dir, tmpdir, tmpdir), "example");
    /* the artifact under valgrind: no error, nothing leaked, also on a refused call */
    if (have("valgrind")) {
        const char *vg = "valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect";
        must(sh("%s %s/example %s/x.npy %s/o.npy", vg, dir, tmpdir, tmpdir), "example under valgrind");
        random_npy("bad", 2, (int64_t[]){2, 7}, 1);
        assert_int_equal(sh("%s %s/example %s/bad.npy %s/o.npy", vg, dir, tmpdir, tmpdir), 4);
    }
    must(sh("cp %s/net.weights %s/bad.weights && printf '\\001' | dd of=%s/bad.weights bs=1 seek=4096 conv=notrunc", dir,
            tmpdir, tmpdir),
         "damage");
    assert_int_equal(sh("%s/example -w %s/bad.weights %s/x.npy %s/o.npy", dir, tmpdir, tmpdir, tmpdir), 2);
    assert_log_contains("CRC-32 mismatch: the weights file is damaged");
    must(sh("head -c 5000 %s/net.weights > %s/short.weights", dir, tmpdir), "truncate");
    assert_int_equal(sh("%s/example -w %s/short.weights %s/x.npy %s/o.npy", dir, tmpdir, tmpdir, tmpdir), 2);
    assert_log_contains("has 5000 bytes, the model needs");
    assert_int_equal(sh("%s/example -w %s/none.weights %s/x.npy %s/o.npy", dir, tmpdir, tmpdir, tmpdir), 1);
    assert_log_contains("cannot open the weights file");
}

static void test_errors(void **s) {
    char ckpt[512], other[512];
    snprintf(ckpt, sizeof ckpt, "%s/e.h5", tmpdir);
    snprintf(other, sizeof other, "%s/other.h5", tmpdir);
    random_checkpoint("models/mlp.relay", "predict", ckpt, 1);
    random_checkpoint("models/lenet.relay", "predict", other, 1);
    /* an operator without a C kernel: located and named */
    assert_int_equal(sh("%s export tests/export/unsupported.relay -o %s/u_c", relayc(), tmpdir), 1);
    assert_log_contains("tests/export/unsupported.relay:6:3: error: export: operator nn.max_pool2d_grad has no C kernel in the export yet");
    char path[600];
    struct stat st;
    snprintf(path, sizeof path, "%s/u_c/unsupported.c", tmpdir);
    assert_int_not_equal(stat(path, &st), 0); /* nothing written */
    /* a parameter the export cannot take: a function from outside */
    assert_int_equal(sh("%s export tests/export/fn_param.relay -o %s/t_c", relayc(), tmpdir), 1);
    assert_log_contains("tests/export/fn_param.relay:3:14: error: export: parameter %f has type fn");
    /* a checkpoint of another model */
    assert_int_equal(sh("%s export models/mlp.relay --checkpoint %s -o %s/x_c", relayc(), other, tmpdir), 1);
    assert_log_contains("the weights hold c1b, which no global of the model takes");
    assert_int_equal(sh("%s run models/mlp.relay --entry predict --checkpoint %s --out %s", relayc(), other, tmpdir), 1);
    assert_log_contains("holds parameter c1b, which no global of the model takes");
    /* run: a parameter neither given nor in the checkpoint */
    assert_int_equal(sh("%s run models/mlp.relay --entry predict --checkpoint %s --out %s", relayc(), ckpt, tmpdir), 1);
    assert_log_contains("no input for parameter %x (give --input x=PATH.npy, or --checkpoint)");
    /* the command line */
    assert_int_equal(sh("%s export models/mlp.relay --checkpoint %s", relayc(), ckpt), 1);
    assert_log_contains("missing -o DIR");
    assert_int_equal(sh("%s export models/mlp.relay --checkpoint %s -o %s/y_c --name 9x", relayc(), ckpt, tmpdir), 1);
    assert_log_contains("is not a C identifier");
    assert_int_equal(sh("%s export models/mlp.relay --checkpoint %s/none.h5 -o %s/y_c", relayc(), tmpdir, tmpdir), 1);
}

/* relayc run --checkpoint: a checkpoint tensor whose shape differs from
 * the parameter's is a located error. */
static void test_run_checkpoint_shapes(void **s) {
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s/s.h5", tmpdir);
    const char *names[] = {"w1", "b1", "w2", "b2", "w3", "b3"};
    int ndims[] = {2, 1, 2, 1, 2, 1};
    const int64_t *shapes[] = {(int64_t[]){256, 784}, (int64_t[]){256}, (int64_t[]){128, 256},
                               (int64_t[]){128},      (int64_t[]){10, 129}, (int64_t[]){10}};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 6, names, ndims, shapes);
    ry_checkpoint_meta meta = {0};
    ry_error err;
    assert_int_equal(ry_checkpoint_save(ckpt, p, NULL, &meta, &err), RY_OK);
    ry_params_free(p);
    random_npy("x", 2, (int64_t[]){1, 784}, 5);
    assert_int_equal(sh("%s run models/mlp.relay --entry predict --checkpoint %s --input x=%s/x.npy --out %s", relayc(),
                        ckpt, tmpdir, tmpdir),
                     1);
    assert_log_contains("models/mlp.relay:11:");
    assert_log_contains("parameter %w3 is Tensor[(10, 128), float32], but");
}

/* relayc train --export: the trained parameters exported at the end give
 * what relayc run gives with the run's last checkpoint. */
static void test_train_export(void **s) {
    random_npy("x", 2, (int64_t[]){32, 784}, 11);
    char path[600];
    snprintf(path, sizeof path, "%s/ty.npy", tmpdir);
    ry_tensor *y = ry_tensor_new(RY_INT32, 1, (int64_t[]){32});
    for (int i = 0; i < 32; i++) ((int32_t *)y->data)[i] = (i * 7) % 10;
    ry_error err;
    assert_int_equal(ry_npy_write(path, y, &err), RY_OK);
    ry_tensor_release(y);
    must(sh("%s train models/mlp.relay --data npy:%s/x.npy,%s/ty.npy --steps 2 --batch 16 --optimizer sgd --lr 0.1 "
            "--quiet --checkpoint-dir %s/tck --export %s/trained_c",
            relayc(), tmpdir, tmpdir, tmpdir, tmpdir),
         "relayc train --export");
    char dir[512], ckpt[512];
    snprintf(dir, sizeof dir, "%s/trained_c", tmpdir);
    snprintf(ckpt, sizeof ckpt, "%s/tck/ckpt-2.h5", tmpdir);
    must(sh("make -s -C %s", dir), "make");
    compare("models/mlp.relay", dir, ckpt, "x", 1);
}

/* tmpdir/NAME: one line of text. */
static void write_text(const char *name, const char *text) { write_text_in(tmpdir, name, text); }

/* Line `line` (from 1) of path into buf; false past the end. */
static bool nth_line(const char *path, int line, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    bool ok = false;
    for (int i = 1; fgets(buf, (int)n, f); i++)
        if (i == line) {
            ok = true;
            break;
        }
    fclose(f);
    return ok;
}

/* The Tree-LSTM's @predict (recursion over the Tree ADT, match, the
 * words' concatenation of run-time length): exported with random
 * weights, built, and its example on PTB strings
 * (NAME_parse_tree) against relayc run on the same tree (sst:FILE:LINE
 * numbers the words as the parser does) for the trees of sst_small and
 * the first real SST dev trees; a malformed string, a tree too deep, and
 * a wrong-size weights file are clear errors. */
static void test_treelstm(void **s) {
    char ckpt[512], dir[512], ref[600], got[600];
    snprintf(ckpt, sizeof ckpt, "%s/tl.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/tl_c", tmpdir);
    snprintf(ref, sizeof ref, "%s/tl_ref", tmpdir);
    snprintf(got, sizeof got, "%s/tl_got.npy", tmpdir);
    random_checkpoint("models/treelstm.relay", "predict", ckpt, 5);
    must(sh("%s export models/treelstm.relay --checkpoint %s -o %s", relayc(), ckpt, dir), "relayc export treelstm");
    build_with(dir, true); /* and clang: the values' and the PTB reader's runtime files */
    const char *files[] = {"tests/data/sst_small.txt", "../shared/data/sst/dev.txt"};
    int ntrees = 0, want = 3; /* sst_small's lines 1, 3 and 5 */
    for (int f = 0; f < 2; f++) {
        struct stat st;
        if (f == 1 && stat(files[f], &st) != 0) continue; /* the shared data is not in every checkout */
        if (f == 1) want += 2;
        for (int line = 1; line <= (f == 0 ? 5 : 2); line++) {
            char text[8192];
            if (!nth_line(files[f], line, text, sizeof text)) break;
            if (text[0] != '(') continue;
            write_text("tree.txt", text);
            must(sh("rm -rf %s && %s run models/treelstm.relay --entry predict --checkpoint %s --input tree=sst:%s:%d --out %s",
                    ref, relayc(), ckpt, files[f], line, ref),
                 "relayc run treelstm");
            must(sh("%s/example %s/tree.txt %s", dir, tmpdir, got), "the exported treelstm");
            char want[700];
            snprintf(want, sizeof want, "%s/out_0.npy", ref);
            ry_tensor *x = test_npy(got), *y = test_npy(want);
            test_assert_close(x, y, 1e-4, 1e-5);
            ry_tensor_release(x);
            ry_tensor_release(y);
            ntrees++;
        }
    }
    assert_int_equal(ntrees, want);
    /* malformed strings: the column and what is wrong (RT_E_PARSE = 8) */
    const char *bad[][2] = {{"(3 (2 a) (2 b)", "tree:1: error: '(' not closed"},
                            {"(3 (2 a) (2 b) (2 c))", "tree:16: error: a node with more than two children"},
                            {"(3 (2 a))", "tree:1: error: a node with one child"},
                            {"(x a)", "tree:2: error: expected a label"},
                            {"(2 a))", "tree:6: error: ')' without its '('"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text("bad.txt", bad[i][0]);
        assert_int_equal(sh("%s/example %s/bad.txt %s", dir, tmpdir, got), 8);
        assert_log_contains(bad[i][1]);
    }
    /* a tree deeper than the export's recursion limit: a located error (RT_E_DEPTH = 6), not a crash */
    char deep[40000];
    size_t n = 0;
    for (int i = 0; i < 2500; i++) n += (size_t)snprintf(deep + n, sizeof deep - n, "(1 (2 w) ");
    n += (size_t)snprintf(deep + n, sizeof deep - n, "(2 z)");
    for (int i = 0; i < 2500; i++) deep[n++] = ')';
    deep[n] = 0;
    write_text("deep.txt", deep);
    assert_int_equal(sh("%s/example %s/deep.txt %s", dir, tmpdir, got), 6);
    assert_log_contains("models/treelstm.relay:");
    assert_log_contains("the recursion is deeper than 2000 calls (TREELSTM_MAX_DEPTH)");
    /* the header's constructors and parser from a C program, under valgrind where installed */
    must(sh("cc -std=c11 -Wall -Wextra -Werror -pedantic -I%s -o %s/driver tests/export_c/tree_driver.c %s/treelstm.o -lm", dir,
            tmpdir, dir),
         "build the driver");
    must(sh("%s/driver %s/treelstm.weights", tmpdir, dir), "the constructors' driver");
    /* a weights file of the wrong size */
    must(sh("head -c 100000 %s/treelstm.weights > %s/tl_short.weights", dir, tmpdir), "truncate");
    write_text("tree.txt", "(1 (2 a) (0 film))");
    assert_int_equal(sh("%s/example -w %s/tl_short.weights %s/tree.txt %s", dir, tmpdir, tmpdir, got), 2);
    assert_log_contains("has 100000 bytes, the model needs");
}

/* The char-LSTM's @predict (recursion over the time step, if, a
 * concatenation that grows by a step each level, so the scores' time
 * dim is one only run time knows): exported with random weights and
 * compared with relayc run at two batch and window sizes, its scores an
 * array the call fills. A window longer than the recursion limit is a
 * located error. */
static void test_charlstm(void **s) {
    char ckpt[512], dir[512];
    snprintf(ckpt, sizeof ckpt, "%s/cl.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/cl_c", tmpdir);
    random_checkpoint("models/charlstm.relay", "predict", ckpt, 9);
    must(sh("%s export models/charlstm.relay --checkpoint %s -o %s", relayc(), ckpt, dir), "relayc export charlstm");
    /* the boxed recursion's GEMMs read w_hh and w_out packed when the context opens (and the entry's hoisted
     * embedding GEMM w_ih): no step packs a weight */
    packs_in_open(dir, "charlstm", 3);
    build(dir);
    const int64_t sizes[][2] = {{1, 1}, {3, 7}};
    char path[600];
    snprintf(path, sizeof path, "%s/x.npy", tmpdir);
    ry_error err;
    for (int k = 0; k < 4; k++) { /* then 1900 steps in 150 MB; then 2500, deeper than CHARLSTM_MAX_DEPTH */
        int64_t n = k < 2 ? sizes[k][0] : 1, t = k < 2 ? sizes[k][1] : k == 2 ? 1900 : 2500;
        ry_tensor *x = ry_tensor_new(RY_INT32, 2, (int64_t[]){n, t});
        for (int64_t i = 0; i < x->size; i++) ((int32_t *)x->data)[i] = (int32_t)((i * 17 + k) % 65);
        assert_int_equal(ry_npy_write(path, x, &err), RY_OK);
        ry_tensor_release(x);
        random_npy("h0", 2, (int64_t[]){n, 256}, 3 + (uint64_t)k);
        random_npy("c0", 2, (int64_t[]){n, 256}, 5 + (uint64_t)k);
        const char *names[] = {"x", "h0", "c0"};
        if (k < 2) compare_inputs("models/charlstm.relay", dir, ckpt, names, 3, 3);
        /* each level drops its temporaries and the scores it got when it returns: the window's
         * memory grows with t, not t^2 (which was 500 MB here) */
        if (k == 2)
            must(sh("ulimit -v 150000 && %s/example %s/x.npy %s/h0.npy %s/c0.npy %s/o0.npy %s/o1.npy %s/o2.npy", dir, tmpdir, tmpdir,
                    tmpdir, tmpdir, tmpdir, tmpdir),
                 "1900 steps in 150 MB");
    }
    assert_int_equal(sh("%s/example %s/x.npy %s/h0.npy %s/c0.npy %s/o0.npy %s/o1.npy %s/o2.npy", dir, tmpdir, tmpdir, tmpdir,
                        tmpdir, tmpdir, tmpdir),
                     6);
    assert_log_contains("models/charlstm.relay:");
    assert_log_contains(": the recursion is deeper than 2000 calls (CHARLSTM_MAX_DEPTH)");
    /* a state of another batch than the window's: the dimension's error code, not a crash */
    random_npy("h0", 2, (int64_t[]){2, 256}, 3);
    assert_int_equal(sh("%s/example %s/x.npy %s/h0.npy %s/c0.npy %s/o0.npy %s/o1.npy %s/o2.npy", dir, tmpdir, tmpdir, tmpdir,
                        tmpdir, tmpdir, tmpdir),
                     4);
    assert_log_contains("charlstm_predict: input h0: dimension 0 is 2, the model needs 1");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),           cmocka_unit_test(test_lenet),
        cmocka_unit_test(test_lenet_embedded), cmocka_unit_test(test_ops), cmocka_unit_test(test_layers), cmocka_unit_test(test_loss),
        cmocka_unit_test(test_loss_only_weight), cmocka_unit_test(test_float64_weights),
        cmocka_unit_test(test_weight_dims),   cmocka_unit_test(test_weight_packs), cmocka_unit_test(test_blas),
        cmocka_unit_test(test_weights_checked), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_run_checkpoint_shapes), cmocka_unit_test(test_train_export),
        cmocka_unit_test(test_treelstm),      cmocka_unit_test(test_charlstm),
    };
    const char *filter = getenv("RY_TEST_FILTER"); /* e.g. RY_TEST_FILTER=test_treelstm */
    if (filter) cmocka_set_test_filter(filter);
    if (getenv("RY_KEEP_TMP")) return cmocka_run_group_tests(tests, setup, NULL);
    return cmocka_run_group_tests(tests, setup, teardown);
}
