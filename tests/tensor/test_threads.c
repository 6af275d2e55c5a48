/* test_threads.c — the CPU thread count: RG_NUM_THREADS validated, set once under races. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ringgrad.h"

static rg_status env_threads(const char *v, int *n) {
    if (v) setenv("RG_NUM_THREADS", v, 1);
    else unsetenv("RG_NUM_THREADS");
    return rg_env_num_threads(n);
}

Test(threads, env_values_accepted) {
    int n = -1;
    cr_assert_eq(env_threads(NULL, &n), RG_OK);
    cr_assert_eq(n, 0, "unset means 'the default'");
    cr_assert_eq(env_threads("3", &n), RG_OK);
    cr_assert_eq(n, 3);
    cr_assert_eq(env_threads("1024", &n), RG_OK);
    cr_assert_eq(n, RG_MAX_THREADS);
}

Test(threads, env_values_refused_with_a_message) {
    const char *bad[] = {"abc", "-3", "0", "100000", "", "2x", "1e3", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int n = -1;
        cr_assert_eq(env_threads(bad[i], &n), RG_EINVAL, "'%s' accepted", bad[i]);
        cr_assert_eq(n, 0);
        cr_assert(strstr(rg_last_error(), "RG_NUM_THREADS"), "%s", rg_last_error());
        cr_assert(strstr(rg_last_error(), "1 to 1024"), "%s", rg_last_error());
    }
}

static void *first_read(void *arg) {
    *(int *)arg = rg_num_threads();
    return NULL;
}

/* The first readers race to pick the default; pthread_once makes them all see one value. */
Test(threads, default_picked_once_under_a_race) {
    setenv("RG_NUM_THREADS", "2", 1);
    pthread_t th[8];
    int got[8];
    for (int i = 0; i < 8; i++) pthread_create(&th[i], NULL, first_read, &got[i]);
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 8; i++) cr_assert_eq(got[i], 2, "thread %d saw %d", i, got[i]);
    cr_assert_eq(rg_set_num_threads(1), 1);
    cr_assert_eq(rg_num_threads(), 1);
}

Test(threads, too_many_is_a_misuse, .signal = SIGABRT) {
    rg_set_num_threads(RG_MAX_THREADS + 1);
}
