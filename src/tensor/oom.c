/*
 * oom.c: recovery points for the IR's out-of-memory (oom.h). A point lives
 * in ry_oom_guard's frame; the thread's innermost one is `current`. Arenas
 * made under a point are on its list (intrusive links, so tracking never
 * allocates); held cleanups sit in a fixed per-thread table for the same
 * reason.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor/oom.h"

typedef struct point {
    jmp_buf jb;
    struct point *outer;
    ry_oom_link arenas; /* the list's head; empty when it points to itself */
} point;

static _Thread_local point *current;

static _Thread_local struct {
    void (*fn)(void *);
    void *p;
    point *owner; /* NULL: a free slot */
} holds[RY_OOM_HOLDS];

bool ry_oom_active(void) { return current != NULL; }

_Noreturn void ry_oom_raise(void) {
    point *pt = current;
    if (!pt) {
        fprintf(stderr, "relayc: out of memory\n");
        exit(1);
    }
    current = pt->outer; /* the undo runs outside the failed point */
    longjmp(pt->jb, 1);
}

void ry_oom_track(ry_oom_link *l) {
    if (!current) {
        l->prev = l->next = NULL;
        return;
    }
    ry_oom_link *h = &current->arenas;
    l->prev = h;
    l->next = h->next;
    h->next->prev = l;
    h->next = l;
}

void ry_oom_untrack(ry_oom_link *l) {
    if (!l->next) return;
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->prev = l->next = NULL;
}

int ry_oom_hold(void (*fn)(void *), void *p) {
    if (!current) return -1;
    for (int i = 0; i < RY_OOM_HOLDS; i++)
        if (!holds[i].owner) {
            holds[i].fn = fn;
            holds[i].p = p;
            holds[i].owner = current;
            return i;
        }
    /* A fixed table, so holding never allocates; more than RY_OOM_HOLDS
     * temporaries live at once is a bug in the caller. */
    fprintf(stderr, "relayc: too many held temporaries\n");
    abort();
}

void ry_oom_unhold(int slot) {
    if (slot >= 0) holds[slot].owner = NULL;
}

/* Lets go of what pt tracks; on failure frees it (the arenas through
 * ry_arena_free: the link is the arena's first member, arena.c). */
static void release(point *pt, bool failed) {
    for (int i = 0; i < RY_OOM_HOLDS; i++)
        if (holds[i].owner == pt) {
            holds[i].owner = NULL;
            if (failed) holds[i].fn(holds[i].p);
        }
    while (pt->arenas.next != &pt->arenas) {
        ry_oom_link *l = pt->arenas.next;
        ry_oom_untrack(l);
        if (failed) ry_arena_free((ry_arena *)l);
    }
}

/* Runs body(ctx) under a new point; true when it ran out of memory
 * there (undo(uctx) run, the point's arenas and holds released). */
static bool under_point(void (*body)(void *ctx), void *ctx, void (*undo)(void *uctx), void *uctx) {
    point pt;
    pt.outer = current;
    pt.arenas.prev = pt.arenas.next = &pt.arenas;
    current = &pt;
    if (setjmp(pt.jb)) {
        /* current is pt.outer again (ry_oom_raise); pt's fields are read
         * back from memory: its address escaped to `current`. */
        if (undo) undo(uctx);
        release(&pt, true);
        return true;
    }
    body(ctx);
    current = pt.outer;
    release(&pt, false);
    return false;
}

typedef struct guarded {
    ry_status (*body)(void *ctx, ry_error *err);
    void *ctx;
    ry_error *err;
    ry_status st;
} guarded;

static void run_guarded(void *g) {
    guarded *x = g;
    x->st = x->body(x->ctx, x->err);
}

ry_status ry_oom_guard(const char *what, ry_status (*body)(void *ctx, ry_error *err),
                       void (*undo)(void *ctx), void *ctx, ry_error *err) {
    guarded g = {body, ctx, err, RY_OK};
    if (!under_point(run_guarded, &g, undo, ctx)) return g.st;
    /* Under an outer point the jump goes on to it, so the code between
     * the two never mistakes running out of memory for another error (as
     * a bug, say) and each entry on the way frees its own. */
    if (current) ry_oom_raise();
    return ry_error_file(err, what, "out of memory");
}

bool ry_oom_catch(void (*body)(void *ctx), void *ctx) { return under_point(body, ctx, NULL, NULL); }

static void new_arena(void *a) { *(ry_arena **)a = ry_arena_new(); }

ry_arena *ry_oom_arena_new(void) {
    ry_arena *a = NULL;
    return ry_oom_catch(new_arena, &a) ? NULL : a;
}
