/*
 * mem_guard.h: a located error before the machine runs out of memory on a
 * deep input. A 100,000-level tree or a very long sequence makes a program
 * recurse as deep, holding closures and tensors level after level, and
 * Linux overcommits: malloc keeps succeeding until the OOM killer ends the
 * process without a word. While an engine runs a call (begin .. end), the
 * guard looks at the memory left (a) as the frame stack deepens (every
 * RY_MEM_GUARD_EVERY frames pushed once it is that deep: a shallow program
 * never pays) and (b) every RY_MEM_GUARD_BYTES of fresh tensor memory the
 * CPU allocator hands out; it answers (a) with an error at the call being
 * made and (b) by refusing the allocation, which the operator reports at
 * its own location, the guard's reason added (ry_mem_guard_explain).
 * Private to src/.
 */
#ifndef RELAYC_MEM_GUARD_H
#define RELAYC_MEM_GUARD_H

#include "relayc/base.h"

#define RY_MEM_GUARD_EVERY 256
#define RY_MEM_GUARD_BYTES ((size_t)64 << 20)

/* The calling thread's guard while a run is active. */
typedef struct ry_mem_guard {
    bool active;
    size_t max_resident; /* 0: the machine's share (ry_mem_guard_room) */
    size_t fresh;        /* bytes handed out since the last look */
    unsigned long pushes;
    bool refused;        /* an allocation was refused; why holds the reason */
    char why[200];
} ry_mem_guard;

/* Starts guarding this thread's run (saving the outer run's guard in
 * *saved); end restores it. max_resident > 0: this process's resident
 * memory stays at most that many bytes; 0: the machine (MemAvailable, and
 * the cgroup's limit less its use where one is set) keeps a twentieth of
 * its memory, and 256 MiB, free. */
void ry_mem_guard_begin(size_t max_resident, ry_mem_guard *saved);
void ry_mem_guard_end(const ry_mem_guard *saved);

/* (a) Whether a frame push at depth is one the guard looks at (a run is
 * active, the stack RY_MEM_GUARD_EVERY deep, and this the
 * RY_MEM_GUARD_EVERY-th push since the last look); then
 * ry_mem_guard_frame gives an error at span when memory is short. */
bool ry_mem_guard_due(long depth);
ry_status ry_mem_guard_frame(long depth, ry_span span, ry_error *err);
/* (b) The CPU allocator is about to hand out nbytes of fresh memory:
 * false when the guard refuses it. */
bool ry_mem_guard_allows(size_t nbytes);
/* After a failed run: when the guard refused an allocation, its reason is
 * added to err's message. */
void ry_mem_guard_explain(ry_error *err);

/* Whether avail bytes left of total (either -1: unknown) are room enough:
 * a twentieth of total, at least 256 MiB (unknown counts as room). */
bool ry_mem_guard_room(double avail, double total);
/* The check itself, outside a run: RY_OK while there is room (as begin
 * describes), else an error at span naming the depth and the memory. */
ry_status ry_mem_guard_check(size_t max_resident, long depth, ry_span span, ry_error *err);

#endif
