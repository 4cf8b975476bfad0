/*
 * vm_profile.c: the VM's operator profile (vm.h: ry_vm_set_profile,
 * ry_vm_print_profile). Each operator call site keeps its time and call
 * count in its vm_opcall, so profiling allocates nothing while running.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/vm_impl.h"

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

ry_status vm_run_op_timed(vm_machine *mc, const insn *I, ry_value **R, ry_value **S,
                          ry_value **out) {
    const ry_target *t = mc->prog->target;
    if (t->prof_begin) t->prof_begin();
    int64_t t0 = now_ns();
    ry_status st = vm_run_op(mc, I, R, S, out);
    /* on a device: the kernels' own time from its events (prof_end waits
     * for them, so the host time then includes the kernels too) */
    if (t->prof_end) I->opcall->prof_dev_ns += t->prof_end();
    I->opcall->prof_ns += now_ns() - t0;
    I->opcall->prof_calls++;
    I->opcall->prof_kernels++;
    return st;
}

/* Calls every operator call site of p's functions with fn(site, ctx). */
static void each_opcall(const ry_vm_program *p, void (*fn)(vm_opcall *, void *), void *ctx) {
    for (int f = 0; f < p->nfns; f++)
        for (int i = 0; i < p->fns[f]->ncode; i++)
            if (p->fns[f]->code[i].op == I_OP) fn(p->fns[f]->code[i].opcall, ctx);
}

static void clear(vm_opcall *oc, void *ctx) {
    (void)ctx;
    oc->prof_ns = oc->prof_calls = oc->prof_dev_ns = oc->prof_kernels = 0;
}

void ry_vm_set_profile(ry_vm_program *p, bool on) {
    if (!p) return;
    if (on) each_opcall(p, clear, NULL);
    if (on) ry_target_counters(p->target, &p->prof_from);
    p->profile = on;
}

typedef struct sites {
    vm_opcall **at;
    int n;
    int64_t ns, calls;
} sites;

static void collect(vm_opcall *oc, void *ctx) {
    sites *s = ctx;
    if (!oc->prof_calls) return;
    if (s->at) s->at[s->n] = oc;
    s->n++;
    s->ns += oc->prof_ns;
    s->calls += oc->prof_calls;
}

static int by_time(const void *a, const void *b) {
    int64_t x = (*(vm_opcall *const *)a)->prof_ns, y = (*(vm_opcall *const *)b)->prof_ns;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The call's text on one line, at most width characters. */
static void print_call(FILE *out, const ry_expr *call, int width) {
    char *text = ry_expr_print(call);
    if (!text) {
        fputs("?", out);
        return;
    }
    int n = 0;
    for (const char *c = text; *c && n < width; c++) {
        if (*c == '\n') continue;
        fputc(*c, out);
        n++;
    }
    if ((int)strlen(text) > width) fputs("...", out);
    free(text);
}

void ry_vm_print_profile(const ry_vm_program *p, FILE *out, int top) {
    sites s = {0};
    each_opcall(p, collect, &s);
    if (!s.n) {
        fprintf(out, "profile: no operator calls timed\n");
        return;
    }
    s.at = ry_malloc(sizeof *s.at * (size_t)s.n);
    if (!s.at) {
        fprintf(out, "profile: out of memory\n");
        return;
    }
    s.n = 0;
    s.ns = s.calls = 0;
    each_opcall(p, collect, &s);
    qsort(s.at, (size_t)s.n, sizeof *s.at, by_time);
    bool dev = p->target->prof_end != NULL;
    /* with automatic batching: how many calls each kernel covered */
    bool batched = false;
    for (int i = 0; i < s.n; i++) batched |= s.at[i]->prof_kernels < s.at[i]->prof_calls;
    if (batched) fprintf(out, "%9s ", "per kernel");
    if (dev)
        fprintf(out, "%7s %10s %10s %9s %10s  %s\n", "share", "total ms", "device ms", "calls",
                "us/call", "location: operator call");
    else
        fprintf(out, "%7s %10s %9s %10s  %s\n", "share", "total ms", "calls", "us/call",
                "location: operator call");
    int shown = top > 0 && top < s.n ? top : s.n;
    for (int i = 0; i < shown; i++) {
        const vm_opcall *oc = s.at[i];
        ry_span sp = oc->call->span;
        if (batched)
            fprintf(out, "%9.1f ", (double)oc->prof_calls / (double)(oc->prof_kernels ? oc->prof_kernels : 1));
        fprintf(out, "%6.2f%% %10.3f ", 100.0 * (double)oc->prof_ns / (double)s.ns,
                (double)oc->prof_ns / 1e6);
        if (dev) fprintf(out, "%10.3f ", (double)oc->prof_dev_ns / 1e6);
        fprintf(out, "%9lld %10.2f  ", (long long)oc->prof_calls,
                (double)oc->prof_ns / 1e3 / (double)oc->prof_calls);
        if (sp.src && sp.line) fprintf(out, "%s:%d:%d: ", sp.src->name, sp.line, sp.col);
        else fputs("(made by a pass): ", out);
        print_call(out, oc->call, 100);
        if (oc->nsig) { /* the result type of the shapes it ran with last */
            char buf[160];
            fprintf(out, " -> %s", ry_type_str(oc->sig[oc->hit].out_type, buf, sizeof buf));
        }
        fputc('\n', out);
    }
    fprintf(out, "%d call sites (%d shown), %lld calls, %.3f ms in operators\n", s.n, shown,
            (long long)s.calls, (double)s.ns / 1e6);
    if (dev) { /* "am I copying too much": the copies since profiling began */
        ry_device_counters c;
        ry_target_counters(p->target, &c);
        const ry_device_counters *a = &p->prof_from;
        fprintf(out, "%s: %lld bytes in %ld copies to the device, %lld bytes in %ld copies back; "
                     "%ld kernels built, %ld loaded from the cache; %ld buffers from the driver\n",
                p->target->name, (long long)(c.bytes_to_device - a->bytes_to_device),
                c.copies_to_device - a->copies_to_device, (long long)(c.bytes_to_host - a->bytes_to_host),
                c.copies_to_host - a->copies_to_host, c.kernels_built - a->kernels_built,
                c.kernels_loaded - a->kernels_loaded, c.driver_allocs - a->driver_allocs);
    }
    ry_free(s.at);
}
