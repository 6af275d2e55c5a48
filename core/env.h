/* env.h — the library's switches in the environment: RG_FUSE=0, RG_HUGEPAGES=1, RG_CONV_GEMM=0 ...
 *
 * Each switch takes one of a few spellings. A value that is none of them (RG_FUSE=off, a typo of
 * RG_HUGEPAGES=yes) used to be ignored without a word, so a user comparing "with" and "without"
 * compared the default with itself; now it is still ignored, but with one warning on stderr per
 * variable and process:
 *
 *   ringgrad: warning: RG_FUSE="off" is not one of 0, relu, 1; using 1
 *
 * An unset or empty variable is the default, silently. */
#ifndef RG_CORE_ENV_H
#define RG_CORE_ENV_H

#include <stdbool.h>

/* The index in choices[0..n) of $name's value; fallback when it is unset, empty or none of them,
 * the last with the warning above. fallback is an index, or -1 for a default that has no spelling
 * ("the default" in the warning). */
int rg_env_choice(const char *name, const char *const *choices, int n, int fallback);

/* A switch spelled 0 or 1: whether it is on, `dflt` when it is unset, empty or misspelled. */
bool rg_env_switch(const char *name, bool dflt);

#endif
