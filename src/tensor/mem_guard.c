/*
 * mem_guard.c: the memory guard of mem_guard.h, from /proc: this process's
 * resident set (statm), the machine's available memory (meminfo) and, in
 * a container, what its cgroup (v2, or v1) still allows. A reading that
 * cannot be made counts as room: the guard never stops a run it cannot
 * judge.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tensor/mem_guard.h"

#define MIB (1024.0 * 1024.0)

static _Thread_local ry_mem_guard g;

static double resident_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = -1;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
        fclose(f);
    }
    return resident < 0 ? -1 : (double)resident * (double)sysconf(_SC_PAGESIZE);
}

/* A "Key: N kB" line of /proc/meminfo, in bytes; -1 if absent. */
static double meminfo_bytes(const char *key) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    size_t n = strlen(key);
    while (v < 0 && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0) {
            long long kb = 0;
            if (sscanf(line + n, " %lld", &kb) == 1) v = 1024.0 * (double)kb;
        }
    fclose(f);
    return v;
}

/* One number in a cgroup file ("max" or absent: -1). */
static double cgroup_bytes(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "/sys/fs/cgroup/%s", name);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long long v = -1;
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
    return (double)v;
}

/* This cgroup's limit and use (v2, else v1); limit -1 when none. */
static void cgroup_limit(double *max, double *cur) {
    *max = cgroup_bytes("memory.max");
    *cur = cgroup_bytes("memory.current");
    if (*max < 0) {
        *max = cgroup_bytes("memory/memory.limit_in_bytes");
        *cur = cgroup_bytes("memory/memory.usage_in_bytes");
    }
    if (*max >= 0x1p60 || *cur < 0) *max = -1; /* v1 writes "no limit" as ~2^63 */
}

bool ry_mem_guard_room(double avail, double total) {
    double reserve = total > 0 ? total / 20 : 0;
    if (reserve < 256 * MIB) reserve = 256 * MIB;
    return avail < 0 || avail >= reserve;
}

/* Bytes the machine (or this cgroup) can still give, and its total. */
static void machine_room(double *avail, double *total) {
    *avail = meminfo_bytes("MemAvailable:");
    *total = meminfo_bytes("MemTotal:");
    double max, cur;
    cgroup_limit(&max, &cur);
    if (max > 0) {
        double left = max > cur ? max - cur : 0;
        if (*avail < 0 || left < *avail) *avail = left;
        if (*total < 0 || max < *total) *total = max;
    }
}

/* Whether there is room; if not, the reason in why. */
static bool room(size_t max_resident, char *why, size_t n) {
    double rss = resident_bytes();
    if (max_resident > 0) {
        if (rss < 0 || rss <= (double)max_resident) return true;
        snprintf(why, n, "the process holds %.0f MiB, over its limit of %.0f MiB (max_resident)",
                 rss / MIB, (double)max_resident / MIB);
        return false;
    }
    double avail, total;
    machine_room(&avail, &total);
    if (ry_mem_guard_room(avail, total)) return true;
    snprintf(why, n, "the process holds %.0f MiB and the machine has %.0f MiB of %.0f left",
             rss / MIB, avail / MIB, total / MIB);
    return false;
}

ry_status ry_mem_guard_check(size_t max_resident, long depth, ry_span span, ry_error *err) {
    char why[200];
    if (room(max_resident, why, sizeof why)) return RY_OK;
    return ry_error_at(err, span,
                       "out of memory ahead: the program is %ld frames deep and %s: the input is "
                       "too deep or too long for this machine",
                       depth, why);
}

void ry_mem_guard_begin(size_t max_resident, ry_mem_guard *saved) {
    *saved = g;
    g = (ry_mem_guard){.active = true, .max_resident = max_resident};
}

void ry_mem_guard_end(const ry_mem_guard *saved) { g = *saved; }

bool ry_mem_guard_due(long depth) {
    return g.active && depth >= RY_MEM_GUARD_EVERY && ++g.pushes % RY_MEM_GUARD_EVERY == 0;
}

ry_status ry_mem_guard_frame(long depth, ry_span span, ry_error *err) {
    return ry_mem_guard_check(g.max_resident, depth, span, err);
}

bool ry_mem_guard_allows(size_t nbytes) {
    if (!g.active || (g.fresh += nbytes) < RY_MEM_GUARD_BYTES) return true;
    g.fresh = 0;
    if (room(g.max_resident, g.why, sizeof g.why)) return true;
    g.refused = true;
    return false;
}

void ry_mem_guard_explain(ry_error *err) {
    if (!g.refused || !err) return;
    size_t len = strlen(err->msg);
    snprintf(err->msg + len, sizeof err->msg - len,
             " (out of memory ahead: %s: the input is too deep or too long for this machine)",
             g.why);
}
