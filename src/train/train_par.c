/*
 * train_par.c: a step's independent calls on several threads
 * (ry_trainer_accumulate_n: the Tree-LSTM's one call per tree). Each
 * worker runs the gradient program with a compiled program of its own
 * (ry_vm_compile per worker) and values of its own for the parameter views
 * (value reference counts are not atomic; the tensors' are), its kernels
 * serial (threads.h). The calling thread is worker 0 and also takes the
 * results in call order, adding each into the gradient set as soon as it
 * and all before it are done: the sum is formed in exactly the serial
 * order, so the result is bit for bit the serial run's at any thread count.
 * A program keeps references to the values it returned (its memory plan
 * reuses them once it holds the last one) and value reference counts are
 * not atomic, so a result is only read by the calling thread, never
 * retained or released there: the worker that made it releases it once it
 * has been taken.
 * Models with carried state, and the interpreter, run their calls serially.
 */
#include <pthread.h>
#include <string.h>

#include "relayc/threads.h"
#include "train/train_impl.h"

#define MAX_WORKERS 16

struct train_pool {
    int n;                              /* workers with a program (the first is tr's) */
    ry_vm_program *vm[MAX_WORKERS];     /* [0] borrowed: tr->vm */
    ry_value **pvals[MAX_WORKERS];      /* [0] borrowed: tr->param_vals */
};

void train_pool_free(struct train_pool *p) {
    if (!p) return;
    for (int w = 1; w < p->n; w++) {
        ry_vm_free(p->vm[w]);
        for (int i = 0; p->pvals[w] && p->pvals[w][i]; i++) ry_value_release(p->pvals[w][i]);
        ry_free(p->pvals[w]);
    }
    ry_free(p);
}

/* Workers 0..n-1 ready: a compiled program and parameter values each. */
static ry_status pool_grow(ry_trainer *tr, int n, ry_error *err) {
    if (!tr->pool) {
        tr->pool = ry_calloc(1, sizeof *tr->pool);
        if (!tr->pool) return ry_error_at(err, RY_NO_SPAN, "out of memory");
        tr->pool->vm[0] = tr->vm;
        tr->pool->pvals[0] = tr->param_vals;
        tr->pool->n = 1;
    }
    struct train_pool *p = tr->pool;
    int np = tr->params->n;
    while (p->n < n) {
        /* NULL-terminated, for train_pool_free */
        ry_value **vals = ry_calloc((size_t)np + 1, sizeof *vals);
        ry_vm_program *vm = NULL;
        bool ok = vals != NULL;
        for (int i = 0; ok && i < np; i++)
            ok = (vals[i] = ry_value_tensor(ry_tensor_retain(tr->params->views[i]))) != NULL;
        ry_status st = ok ? ry_vm_compile(tr->m, tr->target, &vm, err)
                          : ry_error_at(err, RY_NO_SPAN, "out of memory");
        if (st) {
            for (int i = 0; vals && vals[i]; i++) ry_value_release(vals[i]);
            ry_free(vals);
            return RY_ERR;
        }
        p->vm[p->n] = vm;
        p->pvals[p->n++] = vals;
    }
    return RY_OK;
}

/* One batch of calls, shared by its workers under mu. */
typedef struct batch {
    ry_trainer *tr;
    int k, ndata, nargs;
    ry_value *const *data;      /* call j's at data[j * ndata] */
    int64_t naccum0;            /* the step's calls before this batch */
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* a call finished */
    int next;                   /* the next call to start */
    bool stop;                  /* an error: start no more */
    bool *done;
    bool *taken;                /* added into the gradient set: its maker may drop it */
    int *maker;                 /* the worker that ran each call */
    ry_status *st;
    ry_value **out;
    ry_error *errs;
} batch;

static void run_call(batch *b, int w, int j) {
    ry_trainer *tr = b->tr;
    ry_value *args[RY_TRAIN_MAX_DATA + 256];
    ry_value **a = b->nargs <= (int)(sizeof args / sizeof *args)
                       ? args
                       : ry_calloc((size_t)b->nargs, sizeof *a);
    ry_status st = RY_ERR;
    ry_value *out = NULL;
    if (!a) {
        ry_error_at(&b->errs[j], RY_NO_SPAN, "out of memory");
    } else {
        for (int i = 0; i < b->ndata; i++) a[i] = b->data[(size_t)j * (size_t)b->ndata + (size_t)i];
        for (int i = 0; i < tr->params->n; i++) a[b->ndata + i] = tr->pool->pvals[w][i];
        ry_vm_opts vo = {.training = tr->opts.training,
                         .seed = train_seed(tr, b->naccum0 + j),
                         .max_resident = tr->opts.max_resident,
                         .sparse_rows = !tr->opts.dense_grads};
        ry_threads_serial_begin();
        st = ry_vm_call(tr->pool->vm[w], tr->grad_name, b->nargs, a, &vo, &out, &b->errs[j]);
        ry_threads_serial_end();
    }
    if (a != args) ry_free(a);
    pthread_mutex_lock(&b->mu);
    b->st[j] = st;
    b->out[j] = out;
    b->maker[j] = w;
    b->done[j] = true;
    if (st) b->stop = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* Claims the next call, or -1 when none is left. Under mu. */
static int claim(batch *b) {
    if (b->stop || b->next >= b->k) return -1;
    return b->next++;
}

typedef struct worker {
    batch *b;
    int w;
} worker;

/* Worker w's results that have been taken, dropped on its own thread (its
 * program may be looking at their counts otherwise). */
static void drop_taken(batch *b, int w) {
    for (;;) {
        ry_value *v = NULL;
        pthread_mutex_lock(&b->mu);
        for (int j = 0; j < b->k && !v; j++)
            if (b->taken[j] && b->maker[j] == w && b->out[j]) {
                v = b->out[j];
                b->out[j] = NULL;
            }
        pthread_mutex_unlock(&b->mu);
        if (!v) return;
        ry_value_release(v);
    }
}

static void *worker_main(void *arg) {
    worker *wk = arg;
    batch *b = wk->b;
    for (;;) {
        drop_taken(b, wk->w);
        pthread_mutex_lock(&b->mu);
        int j = claim(b);
        pthread_mutex_unlock(&b->mu);
        if (j < 0) return NULL; /* what is left, the caller drops after the join */
        run_call(b, wk->w, j);
    }
}

/* The calling thread: take finished calls in order; run one itself when
 * the next to take is not done and calls are left; else wait. */
static ry_status drive(batch *b, double *losses, ry_error *err) {
    ry_trainer *tr = b->tr;
    ry_status st = RY_OK;
    for (int take = 0; take < b->k;) {
        pthread_mutex_lock(&b->mu);
        int j = -1;
        while (!b->done[take] && (j = claim(b)) < 0) pthread_cond_wait(&b->cv, &b->mu);
        pthread_mutex_unlock(&b->mu);
        if (j >= 0) {
            run_call(b, 0, j);
            continue;
        }
        /* done[take] was set under mu: its results are visible */
        if (b->st[take]) {
            *err = b->errs[take];
            st = RY_ERR;
            break;
        }
        double l = 0;
        st = train_take_result(tr, b->out[take], &l, err);
        pthread_mutex_lock(&b->mu);
        b->taken[take] = true;
        pthread_mutex_unlock(&b->mu);
        if (b->maker[take] == 0) drop_taken(b, 0);
        if (st) break;
        if (losses) losses[take] = l;
        tr->naccum++;
        take++;
    }
    if (st) {
        pthread_mutex_lock(&b->mu);
        b->stop = true;
        pthread_mutex_unlock(&b->mu);
    }
    return st;
}

static void free_batch(batch *b) {
    ry_free(b->done);
    ry_free(b->taken);
    ry_free(b->maker);
    ry_free(b->st);
    ry_free(b->out);
    ry_free(b->errs);
}

static ry_status run_parallel(ry_trainer *tr, int nthreads, int k, int ndata,
                              ry_value *const *data, double *losses, ry_error *err) {
    if (pool_grow(tr, nthreads, err)) return RY_ERR;
    batch b = {.tr = tr, .k = k, .ndata = ndata, .nargs = ndata + tr->params->n,
               .data = data, .naccum0 = tr->naccum};
    b.done = ry_calloc((size_t)k, sizeof *b.done);
    b.taken = ry_calloc((size_t)k, sizeof *b.taken);
    b.maker = ry_calloc((size_t)k, sizeof *b.maker);
    b.st = ry_calloc((size_t)k, sizeof *b.st);
    b.out = ry_calloc((size_t)k, sizeof *b.out);
    b.errs = ry_calloc((size_t)k, sizeof *b.errs);
    if (!b.done || !b.taken || !b.maker || !b.st || !b.out || !b.errs) {
        free_batch(&b);
        return ry_error_at(err, RY_NO_SPAN, "out of memory");
    }
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    /* The workers and this thread run their kernels serially (threads.h),
     * GEMMs included: OpenBLAS is one-threaded and ry_cpu_gemm does not
     * split in serial mode, so the calls cannot contend for threads. */
    pthread_t th[MAX_WORKERS];
    worker wk[MAX_WORKERS];
    int started = 0;
    for (int w = 1; w < nthreads; w++) {
        wk[w] = (worker){&b, w};
        if (pthread_create(&th[w], NULL, worker_main, &wk[w]) != 0) break;
        started = w;
    }
    ry_threads_serial_begin();
    tr->g.no_keep = true;
    ry_status st = drive(&b, losses, err);
    tr->g.no_keep = false;
    ry_threads_serial_end();
    for (int w = 1; w <= started; w++) pthread_join(th[w], NULL);
    for (int j = 0; j < k; j++) ry_value_release(b.out[j]);
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
    free_batch(&b);
    if (st) tr->naccum = 0; /* a failed call poisons the whole step */
    return st;
}

ry_status ry_trainer_accumulate_n(ry_trainer *tr, int k, int ndata, ry_value *const *data,
                                  double *losses, ry_error *err) {
    if (k <= 0) return ry_error_at(err, RY_NO_SPAN, "accumulate_n: %d calls", k);
    if (ndata != tr->nloss_data - tr->nstate)
        return ry_error_at(err, RY_NO_SPAN, "@%s takes %d data values, %d given", tr->loss_name,
                           tr->nloss_data - tr->nstate, ndata);
    if (k > 1 && train_batches(tr)) return train_accumulate_batched(tr, k, ndata, data, losses, err);
    int nthreads = tr->opts.threads > 0 ? tr->opts.threads : ry_get_num_threads();
    if (nthreads > MAX_WORKERS) nthreads = MAX_WORKERS;
    if (nthreads > k) nthreads = k;
    /* a device's calls share its queue: one at a time */
    if (nthreads < 2 || !tr->vm || tr->nstate > 0 || tr->target->dev) {
        for (int j = 0; j < k; j++) {
            double l;
            if (ry_trainer_accumulate(tr, ndata, data + (size_t)j * (size_t)ndata, &l, err))
                return RY_ERR;
            if (losses) losses[j] = l;
        }
        return RY_OK;
    }
    if (tr->naccum == 0) train_grad_begin(tr);
    return run_parallel(tr, nthreads, k, ndata, data, losses, err);
}
