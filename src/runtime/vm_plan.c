/*
 * vm_plan.c: the VM's memory plan, made once per function at compile time
 * from register liveness. Operator results that are one tensor get storage
 * slots: values whose lifetimes (linear live intervals) do not overlap
 * share a slot, best fit by size class. Each activation of the function
 * owns a set of slots that outlives it (vm_exec.c keeps finished sets for
 * the next activation), so a step that repeats the same shapes reuses the
 * same buffers and value objects and allocates nothing. The plan also marks
 * where a result may be written over an argument (in place): the argument
 * dies at the instruction, has the result's type, and the operator's
 * kernel on the program's target allows out == in. Whether a buffer is really free is decided at
 * run time by reference counts (vm_ops.c), so the plan is an advice that
 * can never make a live value change: a value that escapes (into a tuple,
 * a ref, a closure, the caller) is simply not reused while it lives.
 */
#include <string.h>

#include "runtime/vm_impl.h"

/* Whether argument k of I's operator may be overwritten by its result:
 * the target's kernel says so (target.h: elementwise kernels read each
 * element before writing it; fused.matmul's GEMM operands 0 and 1 are read
 * after its first rows are written, its epilogue inputs are not). */
static bool inplace_arg_ok(const ry_kernel *k, int arg) {
    if (k->flags & RY_KERNEL_INPLACE) return true;
    return (k->flags & RY_KERNEL_INPLACE_EPILOGUE) && arg >= 2;
}

/* Same tensor type: dtype, rank, and each dim the same constant or the
 * same symbol (n and n agree at run time; Any never does). */
static bool same_tensor_type(const ry_type *a, const ry_type *b) {
    if (!a || !b || a->kind != RY_TYPE_TENSOR || b->kind != RY_TYPE_TENSOR) return false;
    if (a->tensor.dtype != b->tensor.dtype || a->tensor.ndim != b->tensor.ndim) return false;
    for (int d = 0; d < a->tensor.ndim; d++) {
        const ry_dim *x = &a->tensor.dims[d], *y = &b->tensor.dims[d];
        if (x->kind != y->kind) return false;
        if (x->kind == RY_DIM_CONST && x->value != y->value) return false;
        if (x->kind == RY_DIM_SYM && (!x->name || !y->name || strcmp(x->name, y->name) != 0))
            return false;
        if (x->kind == RY_DIM_ANY) return false;
    }
    return true;
}

static size_t static_bytes(const ry_type *t) {
    if (!vm_type_static(t) || t->kind != RY_TYPE_TENSOR) return 0;
    size_t n = ry_dtype_size(t->tensor.dtype);
    for (int d = 0; d < t->tensor.ndim; d++) n *= (size_t)t->tensor.dims[d].value;
    return n;
}

/* The result type of an operator call that the plan can hold in a slot:
 * one tensor of a checked type, with a kernel. */
static const ry_type *planned_type(const insn *I) {
    if (I->op != I_OP || !I->opcall->kernel || I->dst < 0) return NULL;
    const ry_type *t = I->e->type;
    return t && t->kind == RY_TYPE_TENSOR ? t : NULL;
}

typedef struct slotinfo {
    int end;       /* last instruction where the current occupant is live */
    size_t bytes;  /* size class: the largest known member */
} slotinfo;

/* A free slot (its occupant dead before pc) for a value of b bytes: the
 * smallest that holds it, else the largest (grown: that costs less memory
 * than a new slot), else -1. Unknown sizes (0) go with unknown sizes. */
static int best_slot(const slotinfo *sl, int n, int pc, size_t b) {
    int fit = -1, grow = -1;
    for (int s = 0; s < n; s++) {
        if (sl[s].end >= pc) continue;
        if ((b == 0) != (sl[s].bytes == 0)) continue;
        if (sl[s].bytes >= b) {
            if (fit < 0 || sl[s].bytes < sl[fit].bytes) fit = s;
        } else if (grow < 0 || sl[s].bytes > sl[grow].bytes) {
            grow = s;
        }
    }
    return fit >= 0 ? fit : grow;
}

static bool in_list(int r, int n, const int *list) {
    for (int i = 0; i < n; i++)
        if (list[i] == r) return true;
    return false;
}

void vm_plan_fn(ry_vm_program *p, vm_fn *f, const uint64_t *live_in, int words) {
    int n = f->ncode, nr = f->nregs;
    ry_arena *a = ry_arena_new();
    /* last[r]: the last instruction r is live into (a linear interval that
     * covers its live range; branches make it conservative) */
    int *last = RY_NEW_ARRAY(a, int, nr ? nr : 1);
    int *home = RY_NEW_ARRAY(a, int, nr ? nr : 1); /* the slot of r's one planned def */
    int *ndefs = RY_NEW_ARRAY(a, int, nr ? nr : 1);
    for (int r = 0; r < nr; r++) last[r] = -1, home[r] = -1;
    for (int pc = 0; pc < n; pc++)
        for (int w = 0; w < words; w++)
            for (uint64_t bits = live_in[(size_t)pc * words + w]; bits; bits &= bits - 1)
                last[w * 64 + __builtin_ctzll(bits)] = pc;
    for (int pc = 0; pc < n; pc++)
        if (f->code[pc].dst >= 0 && f->code[pc].dst < nr) ndefs[f->code[pc].dst]++;
    slotinfo *sl = RY_NEW_ARRAY(a, slotinfo, n + 1);
    int ns = 0, ntup = 0;
    for (int pc = 0; pc < n; pc++) {
        insn *I = &f->code[pc];
        I->slot = -1;
        I->refacc = -1;
        I->inplace = 0;
        if (I->op == I_TUPLE && I->n > 0) { /* a slot of its own, never shared */
            I->slot = ns;
            sl[ns++] = (slotinfo){.end = n, .bytes = 0};
            ntup++;
            continue;
        }
        const ry_type *t = planned_type(I);
        if (!t) continue;
        int r = I->dst, end = last[r] > pc ? last[r] : pc;
        size_t b = static_bytes(t);
        /* in place: an argument dying here with the result's type */
        bool float_out = t->tensor.dtype == RY_FLOAT32 || t->tensor.dtype == RY_FLOAT64;
        int take = -1;
        if (float_out)
            for (int k = 0; k < I->n && k < 8; k++) {
                int ar = I->args[k];
                if (ar < 0 || !in_list(ar, I->nkill, I->kill) || ar == r) continue;
                if (!same_tensor_type(I->e->call.args[k]->type, t) ||
                    !inplace_arg_ok(I->opcall->kernel, k))
                    continue;
                I->inplace |= (uint8_t)(1u << k);
                if (take < 0 && home[ar] >= 0 && sl[home[ar]].end == pc) take = home[ar];
            }
        if (I->inplace && pc + 1 < n && f->code[pc + 1].op == I_REFWRITE &&
            f->code[pc + 1].b == r)
            I->refacc = f->code[pc + 1].a;
        int s = take >= 0 ? take : best_slot(sl, ns, pc, b);
        if (s < 0) {
            s = ns++;
            sl[s] = (slotinfo){.end = -1, .bytes = b};
        }
        if (b > sl[s].bytes) sl[s].bytes = b;
        sl[s].end = end;
        I->slot = s;
        if (ndefs[r] == 1) home[r] = s;
        p->stats.nplanned++;
        if (I->inplace) p->stats.ninplace++;
    }
    f->nslots = ns;
    f->slot_bytes = RY_NEW_ARRAY(p->arena, size_t, ns ? ns : 1);
    for (int s = 0; s < ns; s++) f->slot_bytes[s] = sl[s].bytes;
    f->ntupslots = ntup;
    f->tupslots = RY_NEW_ARRAY(p->arena, int, ntup ? ntup : 1);
    for (int pc = n - 1, k = 0; pc >= 0; pc--)
        if (f->code[pc].op == I_TUPLE && f->code[pc].slot >= 0) f->tupslots[k++] = f->code[pc].slot;
    p->stats.nslots += ns;
    ry_arena_free(a);
    vm_defer_plan(f);
}

/* ---- printing the plan ---- */

static void print_fn(const vm_fn *f, FILE *out) {
    if (f->name) fprintf(out, "@%s", f->name);
    else fprintf(out, "fn at line %d", f->func->span.line);
    fprintf(out, ": %d instructions, %d slots\n", f->ncode, f->nslots);
    for (int s = 0; s < f->nslots; s++) {
        bool tup = false;
        for (int k = 0; k < f->ntupslots; k++) tup |= f->tupslots[k] == s;
        if (tup) fprintf(out, "  slot %d: a tuple\n", s);
        else if (f->slot_bytes[s]) fprintf(out, "  slot %d: %zu bytes\n", s, f->slot_bytes[s]);
        else fprintf(out, "  slot %d: size known at run time\n", s);
    }
    for (int pc = 0; pc < f->ncode; pc++) {
        const insn *I = &f->code[pc];
        if (I->slot < 0) continue;
        const char *what = I->op == I_OP ? I->opcall->op->name : "tuple";
        fprintf(out, "  %4d  line %d: %s -> slot %d", pc, I->span.line, what, I->slot);
        if (I->inplace) {
            fprintf(out, ", in place over argument");
            for (int k = 0; k < 8; k++)
                if (I->inplace >> k & 1) fprintf(out, " %d", k);
        }
        if (I->refacc >= 0) fprintf(out, " (accumulates into a ref)");
        fputc('\n', out);
    }
}

void ry_vm_print_plan(const ry_vm_program *p, FILE *out) {
    for (int i = 0; i < p->nfns; i++)
        if (p->fns[i]->compiled && p->fns[i]->code) print_fn(p->fns[i], out);
}
