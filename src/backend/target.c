/*
 * target.c: the targets this build has, found by name. A new target adds
 * its folder and one line in `targets` (and its name in `known`).
 */
#include <string.h>

#include "backend/target.h"

extern const ry_target ry_cpu_target;

static const ry_target *const targets[] = {&ry_cpu_target};
#define NTARGETS (int)(sizeof targets / sizeof targets[0])

/* every target relayc has, built in here or not */
static const char *const known[] = {"cpu", "opencl", "cuda"};

const ry_target *ry_target_cpu(void) { return &ry_cpu_target; }

const char *ry_target_name(const ry_target *t) { return t->name; }

ry_status ry_target_find(const char *name, const ry_target **out, ry_error *err) {
    *out = NULL;
    for (int i = 0; i < NTARGETS; i++)
        if (strcmp(targets[i]->name, name) == 0) {
            *out = targets[i];
            return RY_OK;
        }
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strcmp(known[i], name) == 0)
            return ry_error_at(err, RY_NO_SPAN, "target %s is not built into this relayc", name);
    return ry_error_at(err, RY_NO_SPAN, "unknown target '%s' (known: cpu, opencl, cuda)", name);
}
