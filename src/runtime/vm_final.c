/*
 * vm_final.c: when a gradient program's gradients are final
 * (ry_vm_opts.on_final). An entry that runs straight through its own
 * body (no branch, no tail call) and returns (result, (g0, g1, ...)),
 * both tuples built there, holds gk final once the last instruction
 * before the inner tuple that writes gk's register has run: the register
 * stays live until that tuple, so nothing takes its buffer over (the
 * in-place rule counts references). The run's first frame reports each
 * gk as it passes that point, so a data-parallel trainer can start
 * reducing the last layers' gradients while the first layers' are still
 * being computed. Entries of any other shape report nothing: the caller
 * then reads the result as usual.
 */
#include <stdlib.h>

#include "runtime/vm_impl.h"

/* The last instruction before `before` that writes reg, or -1. */
static int def_of(const vm_fn *f, int reg, int before) {
    for (int j = before - 1; j >= 0; j--) {
        const insn *I = &f->code[j];
        if (I->op != I_RET && I->dst == reg) return j;
    }
    return -1;
}

static bool straight(const vm_fn *f) {
    for (int j = 0; j < f->ncode; j++)
        switch ((vm_opcode)f->code[j].op) {
        case I_JMPF:
        case I_JMP:
        case I_TESTCTOR:
        case I_TESTTUP:
        case I_TCALL:
        case I_TCALLG:
        case I_MATCHFAIL:
            return false;
        default: break;
        }
    return true;
}

typedef struct final_entry {
    int pc, field, reg;
} final_entry;

static int by_pc(const void *a, const void *b) {
    const final_entry *x = a, *y = b;
    return x->pc != y->pc ? (x->pc > y->pc) - (x->pc < y->pc) : (x->field > y->field) - (x->field < y->field);
}

void vm_final_plan(ry_vm_program *p, vm_fn *f) {
    f->final_planned = true;
    f->nfinal = 0;
    if (f->ncode < 1 || !straight(f)) return;
    const insn *ret = &f->code[f->ncode - 1];
    if (ret->op != I_RET) return;
    int pair = def_of(f, ret->a, f->ncode - 1);
    if (pair < 0 || f->code[pair].op != I_TUPLE || f->code[pair].n != 2) return;
    int inner = def_of(f, f->code[pair].args[1], pair);
    if (inner < 0 || f->code[inner].op != I_TUPLE || f->code[inner].n < 1) return;
    const insn *T = &f->code[inner];
    final_entry *e = ry_calloc((size_t)T->n, sizeof *e);
    if (!e) return; /* out of memory: report nothing, which is allowed */
    int held = ry_oom_hold(ry_free, e); /* so is running out of the arena (vm_final_report) */
    int n = 0, args = f->nfree + f->nparams;
    for (int k = 0; k < T->n; k++) {
        int reg = T->args[k], at = def_of(f, reg, inner);
        if (at < 0 && reg >= args) continue; /* never written here: not reported */
        e[n++] = (final_entry){at, k, reg};
    }
    qsort(e, (size_t)n, sizeof *e, by_pc);
    f->final_pc = RY_NEW_ARRAY(p->arena, int, n ? n : 1);
    f->final_field = RY_NEW_ARRAY(p->arena, int, n ? n : 1);
    f->final_reg = RY_NEW_ARRAY(p->arena, int, n ? n : 1);
    for (int j = 0; j < n; j++) {
        f->final_pc[j] = e[j].pc;
        f->final_field[j] = e[j].field;
        f->final_reg[j] = e[j].reg;
    }
    f->nfinal = n;
    ry_oom_unhold(held);
    ry_free(e);
}

typedef struct planning {
    ry_vm_program *p;
    vm_fn *f;
} planning;

static void plan(void *c) { vm_final_plan(((planning *)c)->p, ((planning *)c)->f); }

void vm_final_report(vm_machine *mc, const vframe *fr, int pc) {
    vm_fn *f = fr->fn;
    /* out of the program's arena: f->nfinal stays 0, nothing is reported */
    if (!f->final_planned) ry_oom_catch(plan, &(planning){mc->prog, f});
    const ry_value *const *R = (const ry_value *const *)mc->regs + fr->base;
    while (mc->final_next < f->nfinal && f->final_pc[mc->final_next] < pc) {
        int j = mc->final_next++;
        const ry_value *v = R[f->final_reg[j]];
        if (v) mc->on_final(mc->final_ctx, f->final_field[j], v);
    }
}
