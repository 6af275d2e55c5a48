/* schedule.c — learning-rate schedules as pure functions of the step: nothing to save in a
 * checkpoint but the step itself. The formulas are the closed forms of torch's StepLR,
 * CosineAnnealingLR and LinearLR (+ SequentialLR for the warmup). */
#include <math.h>

#include "ringgrad/optim.h"

static const char *const kind_names[] = {"constant", "step", "cosine"};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == RG_LR_KIND_COUNT, "schedule names");

/* The base schedule at t >= 0 (warmup excluded). */
static double base_at(const rg_lr_schedule *s, int64_t t) {
    switch (s->kind) {
    case RG_LR_CONSTANT:
        return s->base_lr;
    case RG_LR_STEP: /* base * gamma^floor(t / step_size) */
        return s->base_lr * pow(s->gamma, (double)(t / s->step_size));
    case RG_LR_COSINE: /* eta_min + (base - eta_min)(1 + cos(pi t / t_max)) / 2 */
        return s->eta_min +
               (s->base_lr - s->eta_min) * (1.0 + cos(M_PI * (double)t / (double)s->t_max)) / 2.0;
    default:
        rg_fatal(__FILE__, __LINE__, "lr schedule: bad kind %d", (int)s->kind);
    }
}

float rg_lr_schedule_at(const rg_lr_schedule *s, int64_t t) {
    RG_CHECK(s && t >= 0, "lr schedule: NULL schedule or negative step");
    RG_CHECK((unsigned)s->kind < RG_LR_KIND_COUNT, "lr schedule: bad kind %d", (int)s->kind);
    RG_CHECK(s->kind != RG_LR_STEP || s->step_size >= 1, "lr schedule %s: step_size %lld < 1",
             kind_names[s->kind], (long long)s->step_size);
    RG_CHECK(s->kind != RG_LR_COSINE || s->t_max >= 1, "lr schedule %s: t_max %lld < 1",
             kind_names[s->kind], (long long)s->t_max);
    RG_CHECK(s->warmup_steps >= 0 && s->warmup_start >= 0.0 && s->warmup_start <= 1.0,
             "lr schedule: warmup of %lld steps from %g (need steps >= 0, start in [0, 1])",
             (long long)s->warmup_steps, s->warmup_start);
    if (t < s->warmup_steps) { /* LinearLR: base * (start + (1 - start) t / total) */
        double f = s->warmup_start + (1.0 - s->warmup_start) * (double)t / (double)s->warmup_steps;
        return (float)(s->base_lr * f);
    }
    return (float)base_at(s, t - s->warmup_steps);
}
