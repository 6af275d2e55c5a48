/* init.c — PyTorch's default initialisation, drawn from the counter-based generator.
 *
 * nn.Linear and nn.Conv2d call kaiming_uniform_(w, a=sqrt(5)): gain = sqrt(2/(1+a^2)) = sqrt(1/3),
 * std = gain/sqrt(fan_in), bound = sqrt(3)*std = 1/sqrt(fan_in). The bias is U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)). The numbers differ from PyTorch's (another generator) but the distribution is
 * the same, and they do not depend on the device or the thread count. */
#include <math.h>

#include "ringgrad/layer.h"

void rg_init_kaiming_uniform_(rg_tensor *t, double a, int64_t fan_in, rg_rng_stream *rng) {
    RG_CHECK(t && rng && fan_in >= 0, "kaiming_uniform_: bad arguments");
    double gain = sqrt(2.0 / (1.0 + a * a));
    float bound = fan_in > 0 ? (float)(gain * sqrt(3.0 / (double)fan_in)) : 0.0f;
    rg_tensor_uniform_(t, -bound, bound, rng->seed, &rng->offset);
}

void rg_init_fan_in_uniform_(rg_tensor *t, int64_t fan_in, rg_rng_stream *rng) {
    RG_CHECK(t && rng && fan_in >= 0, "fan_in_uniform_: bad arguments");
    float bound = fan_in > 0 ? (float)(1.0 / sqrt((double)fan_in)) : 0.0f;
    rg_tensor_uniform_(t, -bound, bound, rng->seed, &rng->offset);
}

uint64_t rg_seed_derive(uint64_t seed, uint64_t k) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (k + 1); /* SplitMix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
