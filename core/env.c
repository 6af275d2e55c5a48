/* env.c — the library's switches in the environment (env.h). */
#include "core/env.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The variables warned about already: a switch is read at every convolution, and one warning is
 * enough. Names are the callers' string literals, a handful at most. */
#define MAX_WARNED 32
static const char *warned[MAX_WARNED];
static int n_warned;
static pthread_mutex_t warned_lock = PTHREAD_MUTEX_INITIALIZER;

static bool first_warning(const char *name) {
    bool first = true;
    pthread_mutex_lock(&warned_lock);
    for (int i = 0; i < n_warned && first; i++) first = strcmp(warned[i], name) != 0;
    if (first && n_warned < MAX_WARNED) warned[n_warned++] = name;
    pthread_mutex_unlock(&warned_lock);
    return first;
}

int rg_env_choice(const char *name, const char *const *choices, int n, int fallback) {
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    for (int i = 0; i < n; i++)
        if (strcmp(v, choices[i]) == 0) return i;
    if (first_warning(name)) {
        char list[128] = "";
        for (int i = 0; i < n; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     choices[i]);
        fprintf(stderr, "ringgrad: warning: %s=\"%.40s\" is not one of %s; using %s\n", name, v,
                list, fallback >= 0 && fallback < n ? choices[fallback] : "the default");
    }
    return fallback;
}

bool rg_env_switch(const char *name, bool dflt) {
    static const char *const off_on[] = {"0", "1"};
    return rg_env_choice(name, off_on, 2, dflt ? 1 : 0) == 1;
}
