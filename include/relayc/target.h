/*
 * target.h: where a program's kernels run, as a value. A target is the CPU
 * (always built in), an OpenCL device or a CUDA GPU (when built in and
 * present). The compiled engine (vm.h) and the trainer (train.h) are handed
 * one; the IR, the passes and the AD transform never name one. The
 * interpreter (interp.h) is the reference engine and runs on the CPU target
 * only. What a target answers (its kernels and their facts, its memory, its
 * optimizer and gradient kernels) is private to the library
 * (src/backend/target.h); this header names and finds targets.
 */
#ifndef RELAYC_TARGET_H
#define RELAYC_TARGET_H

#include "relayc/base.h"

RY_BEGIN_API

typedef struct ry_target ry_target;

/* How a program is run, which is another question than where its kernels
 * run: the compiled engine (vm.h), or the reference interpreter
 * (interp.h; CPU target only). */
typedef enum ry_engine { RY_ENGINE_VM = 0, RY_ENGINE_INTERP } ry_engine;

/* The CPU target (OpenBLAS and relayc's own kernels, on relayc's thread
 * pool: threads.h). Never NULL; lives as long as the process. */
const ry_target *ry_target_cpu(void);

/* The target called name ("cpu", "opencl", "cuda"). Errors: an unknown
 * name (the message lists the known ones), a target this build does not
 * include, or one whose device is not present. On success *out lives as
 * long as the process. */
ry_status ry_target_find(const char *name, const ry_target **out, ry_error *err);

/* Its name, as ry_target_find takes it. */
const char *ry_target_name(const ry_target *t);

RY_END_API

#endif
