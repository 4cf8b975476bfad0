/*
 * schedule.c: learning-rate schedules as pure functions of the step, the
 * closed forms of torch.optim.lr_scheduler's StepLR, MultiStepLR,
 * ExponentialLR, CosineAnnealingLR and LinearLR, optionally preceded by a
 * linear warm-up (SequentialLR). Torch updates most of these recursively;
 * the closed forms agree with it to rounding and need no state to resume.
 */
#include <math.h>

#include "relayc/optim.h"

ry_status ry_schedule_check(const ry_schedule *s, ry_error *err) {
    if (s->warmup_steps < 0)
        return ry_error_at(err, RY_NO_SPAN, "schedule: warmup_steps %lld is negative",
                           (long long)s->warmup_steps);
    if (s->warmup_steps > 0 && !(s->warmup_start_factor > 0 && s->warmup_start_factor <= 1))
        return ry_error_at(err, RY_NO_SPAN, "schedule: warmup_start_factor %g must be in (0, 1]",
                           s->warmup_start_factor);
    switch (s->kind) {
    case RY_SCHED_CONSTANT:
        return RY_OK;
    case RY_SCHED_STEP:
        if (s->step_size <= 0)
            return ry_error_at(err, RY_NO_SPAN, "schedule: step_size %lld must be positive",
                               (long long)s->step_size);
        break;
    case RY_SCHED_MULTISTEP:
        if (s->n_milestones < 0 || s->n_milestones > RY_SCHED_MAX_MILESTONES)
            return ry_error_at(err, RY_NO_SPAN, "schedule: %d milestones (at most %d)",
                               s->n_milestones, RY_SCHED_MAX_MILESTONES);
        for (int i = 0; i < s->n_milestones; i++)
            if (s->milestones[i] < 0 || (i > 0 && s->milestones[i] < s->milestones[i - 1]))
                return ry_error_at(err, RY_NO_SPAN,
                                   "schedule: milestone %d (%lld) is negative or out of order", i,
                                   (long long)s->milestones[i]);
        break;
    case RY_SCHED_EXPONENTIAL:
        break;
    case RY_SCHED_COSINE:
        if (s->t_max <= 0)
            return ry_error_at(err, RY_NO_SPAN, "schedule: t_max %lld must be positive",
                               (long long)s->t_max);
        if (!isfinite(s->eta_min))
            return ry_error_at(err, RY_NO_SPAN, "schedule: eta_min %g is not finite", s->eta_min);
        return RY_OK;
    case RY_SCHED_LINEAR:
        if (!(s->start_factor > 0 && s->start_factor <= 1))
            return ry_error_at(err, RY_NO_SPAN, "schedule: start_factor %g must be in (0, 1]",
                               s->start_factor);
        if (!(s->end_factor >= 0 && s->end_factor <= 1))
            return ry_error_at(err, RY_NO_SPAN, "schedule: end_factor %g must be in [0, 1]",
                               s->end_factor);
        if (s->total_iters <= 0)
            return ry_error_at(err, RY_NO_SPAN, "schedule: total_iters %lld must be positive",
                               (long long)s->total_iters);
        return RY_OK;
    default:
        return ry_error_at(err, RY_NO_SPAN, "schedule: unknown kind %d", (int)s->kind);
    }
    if (!isfinite(s->gamma) || s->gamma < 0)
        return ry_error_at(err, RY_NO_SPAN, "schedule: gamma %g must be finite and >= 0", s->gamma);
    return RY_OK;
}

/* multistep: how many milestones are <= step (Python's bisect_right). */
static int passed(const ry_schedule *s, int64_t step) {
    int k = 0;
    while (k < s->n_milestones && s->milestones[k] <= step) k++;
    return k;
}

/* linear: base (start + (end - start) min(t, total) / total). */
static double linear(double base, double start, double end, int64_t total, int64_t t) {
    double frac = (double)(t < total ? t : total) / (double)total;
    return base * (start + (end - start) * frac);
}

static double schedule_at(const ry_schedule *s, double base, int64_t t) {
    switch (s->kind) {
    case RY_SCHED_STEP:
        return base * pow(s->gamma, (double)(t / s->step_size));
    case RY_SCHED_MULTISTEP:
        return base * pow(s->gamma, passed(s, t));
    case RY_SCHED_EXPONENTIAL:
        return base * pow(s->gamma, (double)t);
    case RY_SCHED_COSINE:
        /* eta_min + (base - eta_min) (1 + cos(pi t / T_max)) / 2: periodic
         * past T_max, as torch's recursive form is. */
        return s->eta_min +
               (base - s->eta_min) * (1 + cos(M_PI * (double)t / (double)s->t_max)) / 2;
    case RY_SCHED_LINEAR:
        return linear(base, s->start_factor, s->end_factor, s->total_iters, t);
    default:
        return base;
    }
}

/* warm-up W: linear from base * start to base over steps [0, W), then the
 * schedule restarted at step - W. */
double ry_schedule_lr(const ry_schedule *s, double base_lr, int64_t step) {
    if (step < 0) step = 0;
    int64_t w = s->warmup_steps;
    if (w > 0 && step < w) return linear(base_lr, s->warmup_start_factor, 1.0, w, step);
    return schedule_at(s, base_lr, w > 0 ? step - w : step);
}
