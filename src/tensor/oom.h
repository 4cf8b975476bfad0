/*
 * oom.h: recovery from running out of the IR's memory (issue 13, part 4).
 * The IR's thousands of node constructors assume success (as chibicc's and
 * QBE's do), so they are not made to return errors. Instead a public entry
 * point that builds IR runs its work under a recovery point (ry_oom_guard):
 * when an arena block, an IR constant or the constant table cannot be had,
 * ry_oom_raise jumps back to the innermost point of the thread, which runs
 * the entry's undo (freeing what it built: its context says what), frees
 * every arena made under the point and not yet freed (a pass's scratch
 * arenas, the module's nodes), runs the cleanups still held (ry_oom_hold:
 * the few malloc'd temporaries live across IR construction) and returns
 * RY_ERR with "out of memory". A nested entry gets a point of its own:
 * out of memory inside it, its undo runs and the jump goes on to the outer
 * point, whose undo runs next, so what lies between them never sees the
 * failure as an ordinary error.
 * At run time a VM or interpreter run catches it where it builds types
 * or analyses (ry_oom_catch) and fails with a located error instead.
 * Without a point (code under neither) running out of the IR's memory
 * still ends the process with a message. Private to src/.
 */
#ifndef RELAYC_OOM_H
#define RELAYC_OOM_H

#include "relayc/base.h"

/* True while the calling thread is under a recovery point. */
bool ry_oom_active(void);
/* Out of the IR's memory: jumps to the innermost point, or ends the
 * process with "relayc: out of memory" when there is none. */
_Noreturn void ry_oom_raise(void);

/* Runs body(ctx, err) under a new recovery point. On out-of-memory inside
 * it, undo(ctx) (may be NULL) frees what body built and does not free
 * itself (undo must not build IR), the point's arenas and held cleanups
 * are released, and err gets "WHAT: out of memory" (at the outermost
 * point; an inner one passes the jump on). An arena made under
 * the point and still live when body returns belongs to whatever body
 * stored it in and is left alone. The undo runs first, so an arena owned
 * by what it frees is gone by then; one that body hands to an object made
 * before the point (none does) would have to leave the point's list
 * (ry_oom_untrack) or be freed under that object on a jump. */
ry_status ry_oom_guard(const char *what, ry_status (*body)(void *ctx, ry_error *err),
                       void (*undo)(void *ctx), void *ctx, ry_error *err);

/* Runs body(ctx) under a recovery point that stops the jump: out of
 * memory inside it releases the point's arenas and held cleanups (as
 * ry_oom_guard) and returns true, under an outer point or not; false when
 * body ran through. For run time (the VM, the interpreter), where the
 * code around the catch frees what it holds by status: the caller turns
 * true into an error of its own, located. body must leave nothing that
 * the jump would strand (a value or tensor it made and holds only in its
 * own frame) unless held. */
bool ry_oom_catch(void (*body)(void *ctx), void *ctx);

/* ry_arena_new, or NULL when there is no memory for it. */
ry_arena *ry_oom_arena_new(void);

/* A temporary outside the arenas that must not leak if the IR runs out
 * while it is live: fn(p) runs on a jump. Returns a slot for
 * ry_oom_unhold (call it before freeing or handing p on); -1 (and nothing
 * held) without a point. At most RY_OOM_HOLDS live per thread. */
#define RY_OOM_HOLDS 32
int ry_oom_hold(void (*fn)(void *), void *p);
void ry_oom_unhold(int slot);

/* The arena's side (arena.c): registers a new arena with the innermost
 * point, takes a freed one off, and frees what a failed point leaves. */
typedef struct ry_oom_link {
    struct ry_oom_link *prev, *next;
} ry_oom_link;
void ry_oom_track(ry_oom_link *l);
void ry_oom_untrack(ry_oom_link *l);

#endif
