/*
 * init.h: parameter initializers (zeros, ones, uniform, normal, Xavier /
 * Glorot and Kaiming / He as torch.nn.init defines them), drawn from the
 * seeded ry_rng, and the parser for the header lines of a model file that
 * say which data parameters its entries take and how each parameter starts:
 *
 *   // data: x y
 *   // predict-data: x
 *   // init: w1=kaiming_uniform b1=zeros emb=normal(1) w=uniform(-0.1,0.1)
 *
 * It knows nothing of programs: binding the names to a module's parameters
 * is the training loop's.
 */
#ifndef RELAYC_INIT_H
#define RELAYC_INIT_H

#include "relayc/rng.h"
#include "relayc/tensor.h"

RY_BEGIN_API

typedef enum ry_init_kind {
    RY_INIT_ZEROS,
    RY_INIT_ONES,
    RY_INIT_UNIFORM,         /* uniform(a,b): U(a, b) */
    RY_INIT_NORMAL,          /* normal(std) or normal(mean,std) */
    RY_INIT_XAVIER_UNIFORM,  /* U(-r, r), r = gain * sqrt(6 / (fan_in + fan_out)) */
    RY_INIT_XAVIER_NORMAL,   /* N(0, gain^2 * 2 / (fan_in + fan_out)) */
    RY_INIT_KAIMING_UNIFORM, /* U(-r, r), r = sqrt(2) * sqrt(3 / fan_in) */
    RY_INIT_KAIMING_NORMAL   /* N(0, 2 / fan_in) */
} ry_init_kind;

/* One initializer. a, b: uniform's bounds; normal's mean (a) and standard
 * deviation (b); xavier's gain (a, 1 by default); unused otherwise. The
 * Kaiming kinds use torch's defaults: mode fan_in, gain sqrt(2) (a ReLU). */
typedef struct ry_init {
    ry_init_kind kind;
    double a, b;
} ry_init;

/* torch.nn.init._calculate_fan_in_and_fan_out: for a shape (out, in, k...)
 * fan_in = in * prod(k), fan_out = out * prod(k). Error for rank < 2. */
ry_status ry_init_fans(int ndim, const int64_t *shape, int64_t *fan_in, int64_t *fan_out,
                       ry_error *err);

/* Fills t (float32 or float64) in flat order with draws from rng. Errors:
 * another dtype, rank < 2 for the Xavier and Kaiming kinds. An empty tensor
 * is left as it is. */
ry_status ry_init_fill(ry_tensor *t, const ry_init *init, ry_rng *rng, ry_error *err);

/* Parses one initializer as the `// init:` line writes it: zeros, ones,
 * uniform(A,B), normal(STD), normal(MEAN,STD), xavier_uniform,
 * xavier_normal (each with an optional (GAIN)), kaiming_uniform,
 * kaiming_normal; glorot_* and he_* are the same as xavier_* and
 * kaiming_*. Errors: an unknown kind, a wrong argument count, a bad number,
 * uniform with A > B, a negative standard deviation. */
ry_status ry_init_parse(const char *s, size_t len, ry_init *out, ry_error *err);
/* Writes init back in that form ("uniform(-0.1,0.1)") into buf; returns buf. */
const char *ry_init_str(const ry_init *init, char *buf, size_t n);

/* ---- a model file's header lines --------------------------------------------
 * Lines (anywhere in the text) that start, after blanks, with `// data:`,
 * `// predict-data:` or `// init:`. data and predict-data list the names of
 * the leading (data) parameters of @loss and @predict, each line once;
 * init lines (any number) give NAME=KIND for each parameter, each name
 * once. */
#define RY_INIT_NAME_MAX 64

typedef struct ry_init_entry {
    char name[RY_INIT_NAME_MAX];
    ry_init init;
} ry_init_entry;

typedef struct ry_init_spec {
    int ndata;
    char (*data)[RY_INIT_NAME_MAX];          /* @loss's data parameters */
    int npredict_data;
    char (*predict_data)[RY_INIT_NAME_MAX];  /* @predict's data parameters */
    int nparams;
    ry_init_entry *params;                    /* in the order written */
    bool has_data, has_predict_data;         /* whether the lines were there */
    char vocab[RY_INIT_NAME_MAX];            /* `// vocab: NAME`: the dimension a data
                                                set's vocabulary fills ("": none) */
    bool has_metrics;                        /* a `// metrics:` line (loss, accuracy) */
    bool accuracy;                           /* ... that lists accuracy */
} ry_init_spec;

/* Parses the header lines of text (name is used in error locations). *out
 * is owned by the caller (ry_init_spec_free). Errors, at the line and
 * column: a bad initializer, an entry without `=`, a name too long, a name
 * given twice, a data or predict-data line given twice. A text without any
 * such line gives an empty spec. */
ry_status ry_init_spec_parse(const char *name, const char *text, size_t len,
                             ry_init_spec **out, ry_error *err);
/* The initializer of parameter name, NULL when the spec has none. */
const ry_init *ry_init_spec_find(const ry_init_spec *s, const char *name);
/* Whether name is one of the data (predict: predict-data) parameters. */
bool ry_init_spec_is_data(const ry_init_spec *s, const char *name, bool predict);
void ry_init_spec_free(ry_init_spec *s); /* NULL is fine */

RY_END_API

#endif
