/*
 * alloc_failures.h: how many of the library's allocations have failed in
 * this process (a NULL from ry_malloc, ry_calloc, ry_realloc or the CPU
 * allocator, the hook's or the system's). The checkpoint reader's child
 * compares it before and after a read to tell a shortage of memory on
 * its own side, which says nothing of the file, from the file's fault.
 * Private to src/.
 */
#ifndef RELAYC_ALLOC_FAILURES_H
#define RELAYC_ALLOC_FAILURES_H

long ry_alloc_failures(void);

#endif
