/*
 * vm_batch.c: automatic batching across instances (ry_vm_call_batch), a
 * run-time agenda in the manner of DyNet's (Neubig et al., "On-the-fly
 * operation batching", 2017), ordered by readiness. The B calls run as B
 * machines of one program. A machine runs until it reaches an operator
 * call that may be stacked (ry_op.batch; vm_batch_parks) and parks there.
 * When every machine is parked or done, the agenda takes the call site
 * (instruction) where the most machines wait, stacks their arguments
 * along axis 0 (an argument every machine shares, such as the weight of a
 * GEMM, once), runs the kernel once, gives each machine its rows of the
 * result (views of one buffer, so a next batched call over the same
 * machines reads them in place without a copy) and resumes those
 * machines. A group of one, and calls whose shapes do not stack, run as
 * without batching. Control flow, closures, refs and the operators that do
 * not stack (reductions over rows, row-sparse rules, gathers) stay each
 * machine's own, so any program runs this way, and its results are those
 * of B separate calls up to the summation order of the stacked kernels.
 * What it leaves to others: batching inside one instance (independent
 * calls of one machine run one at a time), device targets (run one call
 * after another).
 */
#include <string.h>
#include <time.h>

#include "runtime/vm_impl.h"
#include "tensor/mem_guard.h"

#define MAX_ARGS 8 /* the fused operators' most inputs */
#define MAX_RES 8  /* results of one call (the fast path's most) */
#define MAP_MAX_ELEMS 4096 /* per instance, copied for an elementwise map */

/* ---- parking ---- */

bool vm_batch_parks(const vm_machine *mc, const insn *I, ry_value *const *R) {
    const vm_opcall *oc = I->opcall;
    if (oc->batch == RY_BATCH_NO || I->n < 1 || I->n > MAX_ARGS || oc->zeros_like ||
        (mc->sparse_rows && oc->rows_rule))
        return false;
    for (int i = 0; i < I->n; i++) {
        const ry_value *v = R[I->args[i]];
        if (v->kind != RY_VAL_TENSOR || v->tensor->device.kind != RY_DEVICE_CPU) return false;
    }
    const ry_tensor *x = R[I->args[0]]->tensor;
    if (x->ndim < 1 || (oc->batch == RY_BATCH_GEMM && x->ndim < 2)) return false;
    if (oc->batch_axis != VM_NO_AXIS) {
        int a = oc->batch_axis < 0 ? oc->batch_axis + x->ndim : oc->batch_axis;
        if (a == 0) return false;
    }
    return true;
}

/* ---- one group ---- */

/* The program's pool of result buffers: batched results and stacked
 * arguments come back to it, so a repeated step does not fault in fresh
 * pages. */
static ry_allocator *pool_of(ry_vm_program *p) { return p->target->pool_allocator(p->pool); }

static ry_tensor *arg_of(vm_machine *mc, int i) {
    const vframe *fr = &mc->fs[mc->nf - 1];
    const insn *I = &fr->fn->code[fr->pc];
    return mc->regs[fr->base + I->args[i]]->tensor;
}

static bool same_tensor(const ry_tensor *a, const ry_tensor *b) {
    return a == b || (a->data == b->data && a->dtype == b->dtype && a->ndim == b->ndim &&
                      memcmp(a->shape, b->shape, sizeof *a->shape * (size_t)a->ndim) == 0);
}

static bool same_rows(const ry_tensor *a, const ry_tensor *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int d = 1; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

enum { STACK, SHARE };

/* The roles of the arguments, from the group's first machine: a GEMM's
 * operand 0 stacked and operand 1 shared; others of the result's rank
 * stacked unless every machine holds the same one-row tensor there,
 * those of lower rank shared. */
static void roles_of(const insn *I, vm_machine **ms, int n, uint8_t *role) {
    bool gemm = I->opcall->batch == RY_BATCH_GEMM;
    int rank = 0;
    for (int i = 0; i < I->n; i++) {
        int r = arg_of(ms[0], i)->ndim;
        if (r > rank) rank = r;
    }
    if (gemm) rank = arg_of(ms[0], 0)->ndim;
    for (int i = 0; i < I->n; i++) {
        const ry_tensor *x = arg_of(ms[0], i);
        if (gemm && i <= 1) {
            role[i] = i == 0 ? STACK : SHARE;
            continue;
        }
        if (x->ndim < rank) {
            role[i] = SHARE;
            continue;
        }
        bool shared = x->shape[0] == 1;
        for (int b = 1; shared && b < n; b++) shared = same_tensor(arg_of(ms[b], i), x);
        role[i] = shared ? SHARE : STACK;
    }
}

/* Whether machine m fits the group of ms0 with these roles; *rows: its
 * stacked arguments' rows (all the same). */
static bool fits(vm_machine *m, vm_machine *m0, const insn *I, const uint8_t *role, int64_t *rows) {
    bool gemm = I->opcall->batch == RY_BATCH_GEMM;
    int nargs = I->n;
    *rows = -1;
    for (int i = 0; i < nargs; i++) {
        const ry_tensor *x = arg_of(m, i), *x0 = arg_of(m0, i);
        if (role[i] == SHARE) {
            if (!same_tensor(x, x0)) return false;
            continue;
        }
        if (!same_rows(x, x0) || (*rows >= 0 && x->shape[0] != *rows)) return false;
        /* an elementwise map gains only its call's overhead (~1 us): not
         * worth copying a large argument for */
        if (!gemm && x->size > MAP_MAX_ELEMS) return false;
        *rows = x->shape[0];
    }
    return *rows >= 1;
}

/* The stacked argument i of ms[0..n): a view when the machines' tensors
 * lie one after another in one buffer (the rows a batched call gave
 * them), else a copy. NULL on out-of-memory. */
static ry_tensor *stack(vm_machine **ms, int n, int i, int64_t total) {
    const ry_tensor *x0 = arg_of(ms[0], i);
    int64_t shape[RY_MAX_RANK];
    memcpy(shape, x0->shape, sizeof shape);
    shape[0] = total;
    bool adjacent = x0->base != NULL;
    const char *next = (const char *)x0->data + ry_tensor_nbytes(x0);
    for (int b = 1; adjacent && b < n; b++) {
        const ry_tensor *x = arg_of(ms[b], i);
        adjacent = x->base == x0->base && (const char *)x->data == next;
        next = (const char *)x->data + ry_tensor_nbytes(x);
    }
    if (adjacent)
        return ry_tensor_view(x0->base, (size_t)((const char *)x0->data - (const char *)x0->base->data),
                              x0->dtype, x0->ndim, shape);
    ry_tensor *t = ry_tensor_new_on(pool_of(ms[0]->prog), x0->dtype, x0->ndim, shape);
    if (!t) return NULL;
    char *at = t->data;
    for (int b = 0; b < n; b++) {
        const ry_tensor *x = arg_of(ms[b], i);
        size_t nb = ry_tensor_nbytes(x);
        memcpy(at, x->data, nb);
        at += nb;
    }
    return t;
}

/* Machine b's rows [at, at + rows) of the results res[0..nres) as a value
 * of type rt. */
static ry_value *rows_value(const ry_type *rt, int nres, ry_tensor *const *res, int64_t at,
                            int64_t rows) {
    ry_tensor *part[MAX_RES];
    for (int j = 0; j < nres; j++) {
        const ry_tensor *r = res[j];
        int64_t shape[RY_MAX_RANK];
        memcpy(shape, r->shape, sizeof shape);
        shape[0] = rows;
        size_t row_bytes = ry_tensor_nbytes(r) / (size_t)r->shape[0];
        part[j] = ry_tensor_view(res[j], (size_t)at * row_bytes, r->dtype, r->ndim, shape);
        if (!part[j]) {
            for (int k = 0; k < j; k++) ry_tensor_release(part[k]);
            return NULL;
        }
    }
    int k = 0;
    ry_value *v = ry_value_unflatten(rt, part, &k);
    for (int j = 0; j < nres; j++) ry_tensor_release(part[j]); /* those not taken over */
    return v;
}

/* The stacked call's kernel, its types in m0's scratch: under a catch
 * (the types come before any result, so running out strands nothing). */
typedef struct stacked {
    const insn *I;
    vm_machine *m0;
    ry_tensor **in;
    ry_type **rt;
    int *nres;
    ry_tensor ***res;
    ry_status st;
} stacked;

static void run_stacked_op(void *c) {
    stacked *s = c;
    vm_machine *m0 = s->m0;
    const vm_opcall *oc = s->I->opcall;
    ry_arena_reset(m0->scratch);
    ry_type *types[MAX_ARGS];
    for (int i = 0; i < s->I->n; i++) types[i] = ry_type_of_tensor(m0->scratch, s->in[i]);
    ry_kernel_ctx kc = {.op = oc->op, .attrs = &oc->call->call.attrs, .span = oc->call->span,
                        .err = m0->err, .training = m0->training, .rng = &m0->rng};
    s->st = ry_op_run_in(m0->prog->target, oc->op, &oc->call->call.attrs, m0->scratch, s->I->n,
                         types, s->I->n, s->in, &kc, pool_of(m0->prog), s->rt, s->nres, s->res);
}

/* Runs I for the machines ms[0..n) (all parked at I, n >= 2) as one
 * kernel and delivers their results. *fell: the results did not stack
 * (nothing delivered; the caller runs them one by one). */
static ry_status run_stacked(const insn *I, vm_machine **ms, int n, const uint8_t *role,
                             const int64_t *rows, bool *fell) {
    vm_machine *m0 = ms[0];
    const vm_opcall *oc = I->opcall;
    *fell = false;
    int64_t total = 0;
    for (int b = 0; b < n; b++) total += rows[b];
    ry_tensor *in[MAX_ARGS] = {0};
    ry_status st = RY_OK;
    for (int i = 0; i < I->n && st == RY_OK; i++) {
        if (role[i] == SHARE) in[i] = ry_tensor_retain(arg_of(m0, i));
        else if (!(in[i] = stack(ms, n, i, total)))
            st = ry_error_at(m0->err, I->span, "%s: out of memory stacking a batch", oc->op->name);
    }
    ry_type *rt = NULL;
    int nres = 0;
    ry_tensor **res = NULL;
    stacked s = {I, m0, in, &rt, &nres, &res, RY_OK};
    if (st == RY_OK)
        st = ry_oom_catch(run_stacked_op, &s)
                 ? ry_error_at(m0->err, I->span, "%s: out of memory", oc->op->name)
                 : s.st;
    for (int i = 0; i < I->n; i++) ry_tensor_release(in[i]);
    if (st) return RY_ERR;
    bool ok = nres >= 1 && nres <= MAX_RES;
    for (int j = 0; ok && j < nres; j++) ok = res[j]->ndim >= 1 && res[j]->shape[0] == total;
    int64_t at = 0;
    for (int b = 0; ok && b < n; b++) {
        ry_value *v = rows_value(rt, nres, res, at, rows[b]);
        if (!v) {
            st = ry_error_at(m0->err, I->span, "%s: out of memory", oc->op->name);
            break;
        }
        vm_machine_deliver(ms[b], v);
        at += rows[b];
    }
    *fell = !ok;
    for (int j = 0; j < nres; j++) ry_tensor_release(res[j]);
    ry_free(res);
    return st;
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Runs the parked call of mc alone, as the dispatch loop would. */
static ry_status run_alone(vm_machine *mc) {
    vframe *fr = &mc->fs[mc->nf - 1];
    const insn *I = &fr->fn->code[fr->pc];
    ry_value **R = mc->regs + fr->base, *v = NULL;
    if (mc->prog->profile ? vm_run_op_timed(mc, I, R, fr->S, &v) : vm_run_op(mc, I, R, fr->S, &v))
        return RY_ERR;
    vm_machine_deliver(mc, v);
    return RY_OK;
}

/* Runs I for ms[0..n) (all parked at I): the machines that fit the first
 * one's shapes as one kernel, then those that fit the first of the rest,
 * and so on (a group of one alone). A site whose calls never stack (an
 * argument of lower rank that differs per instance) stops parking after
 * a few tries, so its machines no longer wait for it. */
static ry_status run_site(const insn *I, vm_machine **ms, int n) {
    uint8_t role[MAX_ARGS];
    int64_t inline_rows[64], *rows = n <= 64 ? inline_rows : ry_malloc(sizeof *rows * (size_t)n);
    if (!rows) return ry_error_at(ms[0]->err, I->span, "out of memory in the vm");
    vm_opcall *oc = I->opcall;
    ry_status st = RY_OK;
    bool profile = ms[0]->prog->profile, stacked = false;
    bool several = n > 1;
    while (n > 0 && st == RY_OK) {
        int k = 1;
        rows[0] = 0;
        vm_machine *m0 = ms[0];
        if (n > 1) roles_of(I, ms, n, role);
        if (n > 1 && fits(m0, m0, I, role, &rows[0])) {
            for (int b = 1; b < n; b++) {
                int64_t r;
                if (!fits(ms[b], m0, I, role, &r)) continue;
                vm_machine *t = ms[k];
                ms[k] = ms[b];
                ms[b] = t;
                rows[k++] = r;
            }
        }
        bool fell = true;
        if (k >= 2) {
            int64_t t0 = profile ? now_ns() : 0;
            st = run_stacked(I, ms, k, role, rows, &fell);
            stacked |= !fell;
            if (profile && !fell) {
                oc->prof_ns += now_ns() - t0;
                oc->prof_calls += k;
                oc->prof_kernels++;
            }
        }
        for (int b = 0; st == RY_OK && fell && b < k; b++) st = run_alone(ms[b]);
        ms += k;
        n -= k;
    }
    if (rows != inline_rows) ry_free(rows);
    if (several && !stacked && ++oc->batch_misses >= 8) oc->batch = RY_BATCH_NO;
    if (stacked) oc->batch_misses = 0;
    return st;
}

/* ---- the agenda ---- */

typedef struct agenda {
    ry_vm_program *prog;
    int n;
    vm_machine **mc;
    ry_value **out;    /* per instance: its result once done */
    int *live;         /* the instances not done, in instance order */
    int nlive;
    vm_machine **group;
    ry_error *err;
} agenda;

/* The straight-line stretches of f: for each instruction, the last jump
 * target at or before it (0: the entry's). */
typedef struct stretching {
    ry_vm_program *p;
    vm_fn *f;
} stretching;

static void find_stretches(void *c) {
    ry_vm_program *p = ((stretching *)c)->p;
    vm_fn *f = ((stretching *)c)->f;
    int *st = RY_NEW_ARRAY(p->arena, int, f->ncode ? f->ncode : 1);
    bool *target = RY_NEW_ARRAY(p->arena, bool, f->ncode ? f->ncode : 1);
    for (int i = 0; i < f->ncode; i++) {
        uint8_t op = f->code[i].op;
        int b = f->code[i].b;
        if ((op == I_JMPF || op == I_JMP || op == I_TESTCTOR || op == I_TESTTUP) && b >= 0 &&
            b < f->ncode)
            target[b] = true;
    }
    for (int i = 0, at = 0; i < f->ncode; i++) st[i] = at = target[i] ? i : at;
    f->stretch = st;
}

/* The stretch instruction pc of f belongs to. Worked out once per
 * function, in the program's arena; without the memory for it, 0 (one
 * stretch: the choice of site is a heuristic, and it is tried again). */
static int stretch_of(ry_vm_program *p, vm_fn *f, int pc) {
    if (!f->stretch && ry_oom_catch(find_stretches, &(stretching){p, f})) return 0;
    return f->stretch[pc];
}

/* The next site to run. Phases first: only machines in the function
 * compiled first among those where live machines wait (a gradient
 * program's forward pass before its backpropagators, which are compiled
 * as they are first made) are candidates, so machines that finish their
 * forward pass early wait for the others instead of running their
 * backward pass alone. Then majority across straight-line stretches of
 * that function (its instructions between jump targets: a match clause,
 * a branch): the stretch where most wait. Then the laggards first: its
 * first instruction where one waits, so the machines behind catch up
 * before the others go on and machines walking trees or sequences of
 * different shapes move through a clause's calls together. */
static const insn *next_site(const agenda *a) {
    enum { K = 64 };
    /* nk >= 1 at the end (the machine of the lowest id is a candidate);
     * zeroed so that gcc -O1 sees fn[best] and first[best] set */
    const vm_fn *fn[K] = {0};
    int stretch[K], count[K], first[K] = {0}, nk = 0, best = 0, minid = -1;
    for (int j = 0; j < a->nlive; j++) {
        const vm_machine *m = a->mc[a->live[j]];
        int id = m->fs[m->nf - 1].fn->id;
        if (minid < 0 || id < minid) minid = id;
    }
    for (int j = 0; j < a->nlive; j++) {
        const vm_machine *m = a->mc[a->live[j]];
        const vframe *fr = &m->fs[m->nf - 1];
        if (fr->fn->id != minid) continue;
        int s0 = stretch_of(a->prog, fr->fn, fr->pc), s = 0;
        while (s < nk && stretch[s] != s0) s++;
        if (s == nk) {
            if (nk == K) continue;
            fn[nk] = fr->fn;
            stretch[nk] = s0;
            count[nk] = 0;
            first[nk++] = fr->pc;
        }
        count[s]++;
        if (fr->pc < first[s]) first[s] = fr->pc;
        if (count[s] > count[best]) best = s;
    }
    return &fn[best]->code[first[best]];
}

/* Drops the done instances from the live list. */
static void sweep(agenda *a) {
    int k = 0;
    for (int j = 0; j < a->nlive; j++)
        if (a->mc[a->live[j]]->parked) a->live[k++] = a->live[j];
    a->nlive = k;
}

static ry_status run_agenda(agenda *a) {
    sweep(a);
    while (a->nlive > 0) {
        const insn *I = next_site(a);
        int n = 0;
        for (int j = 0; j < a->nlive; j++) {
            vm_machine *m = a->mc[a->live[j]];
            const vframe *fr = &m->fs[m->nf - 1];
            if (&fr->fn->code[fr->pc] == I) a->group[n++] = m;
        }
        if (run_site(I, a->group, n)) return RY_ERR;
        for (int b = 0; b < n; b++) { /* on until each parks again or is done */
            int j = 0;
            while (a->mc[j] != a->group[b]) j++;
            if (vm_machine_resume(a->mc[j], &a->out[j])) {
                ry_error_prefix(a->err, "instance %d of the batch", j + 1);
                return RY_ERR;
            }
        }
        sweep(a);
    }
    return RY_OK;
}

static ry_status one_by_one(ry_vm_program *prog, ry_value *fn, int count, int nargs,
                            ry_value *const *args, const ry_vm_opts *opts, ry_value **outs,
                            ry_error *err) {
    ry_vm_opts o = opts ? *opts : (ry_vm_opts){0};
    for (int j = 0; j < count; j++) {
        o.seed = (opts ? opts->seed : 0) + (uint64_t)j;
        if (ry_vm_apply(prog, fn, nargs, args + (size_t)j * (size_t)nargs, &o, &outs[j], err)) {
            ry_error_prefix(err, "instance %d of the batch", j + 1);
            return RY_ERR;
        }
    }
    return RY_OK;
}

static ry_status apply_batch(ry_vm_program *prog, ry_value *fn, int count, int nargs,
                             ry_value *const *args, const ry_vm_opts *opts, ry_value **outs,
                             ry_error *err) {
    agenda a = {.prog = prog, .n = count, .out = outs, .err = err};
    a.mc = ry_calloc((size_t)count, sizeof *a.mc);
    a.live = ry_calloc((size_t)count, sizeof *a.live);
    a.group = ry_calloc((size_t)count, sizeof *a.group);
    ry_status st = a.mc && a.live && a.group ? RY_OK
                                             : ry_error_at(err, RY_NO_SPAN, "out of memory in the vm");
    ry_mem_guard outer;
    ry_mem_guard_begin(opts ? opts->max_resident : 0, &outer);
    for (int j = 0; j < count && st == RY_OK; j++) {
        if (!(a.mc[j] = vm_machine_get(prog, opts, err))) {
            st = ry_error_at(err, RY_NO_SPAN, "out of memory in the vm");
            break;
        }
        a.mc[j]->rng += (uint64_t)j; /* instance j's dropout seed: opts->seed + j */
        a.mc[j]->batching = true;
        a.live[a.nlive++] = j;
        ry_value *const *aj = args + (size_t)j * (size_t)nargs;
        if (vm_machine_start(a.mc[j], ry_value_retain(fn), nargs, aj, &outs[j])) {
            ry_error_prefix(err, "instance %d of the batch", j + 1);
            st = RY_ERR;
        }
    }
    if (st == RY_OK) st = run_agenda(&a);
    if (st) ry_mem_guard_explain(err);
    ry_mem_guard_end(&outer);
    for (int j = 0; a.mc && j < count; j++)
        if (a.mc[j]) vm_machine_put(prog, a.mc[j]);
    if (st)
        for (int j = 0; j < count; j++) {
            ry_value_release(outs[j]);
            outs[j] = NULL;
        }
    ry_free(a.mc);
    ry_free(a.live);
    ry_free(a.group);
    return st;
}

ry_status ry_vm_apply_batch(ry_vm_program *prog, ry_value *fn, int count, int nargs,
                            ry_value *const *args, const ry_vm_opts *opts, ry_value **outs,
                            ry_error *err) {
    for (int j = 0; j < count; j++) outs[j] = NULL;
    if (count < 0) return ry_error_at(err, RY_NO_SPAN, "a batch of %d calls", count);
    if (count == 0) return RY_OK;
    if (count == 1 || prog->target->dev || (opts && opts->on_final))
        return one_by_one(prog, fn, count, nargs, args, opts, outs, err);
    return apply_batch(prog, fn, count, nargs, args, opts, outs, err);
}

ry_status ry_vm_call_batch(ry_vm_program *prog, const char *entry, int count, int nargs,
                           ry_value *const *args, const ry_vm_opts *opts, ry_value **outs,
                           ry_error *err) {
    for (int j = 0; j < count; j++) outs[j] = NULL;
    ry_value *fn;
    if (vm_entry(prog, entry, nargs, &fn, err)) return RY_ERR;
    return ry_vm_apply_batch(prog, fn, count, nargs, args, opts, outs, err);
}
