/* test_env.c — core/env.c: the environment's switches take their spellings, fall back on the
 * default otherwise, and warn once per variable about a misspelling. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/env.h"

static const char *const levels[] = {"0", "relu", "1"};

Test(env, choices_and_defaults) {
    unsetenv("RG_TEST_LEVEL");
    cr_assert_eq(rg_env_choice("RG_TEST_LEVEL", levels, 3, 2), 2, "unset: the default");
    setenv("RG_TEST_LEVEL", "", 1);
    cr_assert_eq(rg_env_choice("RG_TEST_LEVEL", levels, 3, 2), 2, "empty: the default");
    setenv("RG_TEST_LEVEL", "relu", 1);
    cr_assert_eq(rg_env_choice("RG_TEST_LEVEL", levels, 3, 2), 1);
    setenv("RG_TEST_LEVEL", "0", 1);
    cr_assert_eq(rg_env_choice("RG_TEST_LEVEL", levels, 3, 2), 0);
    setenv("RG_TEST_SWITCH", "0", 1);
    cr_assert(!rg_env_switch("RG_TEST_SWITCH", true));
    setenv("RG_TEST_SWITCH", "1", 1);
    cr_assert(rg_env_switch("RG_TEST_SWITCH", false));
    unsetenv("RG_TEST_SWITCH");
    cr_assert(rg_env_switch("RG_TEST_SWITCH", true));
    cr_assert(!rg_env_switch("RG_TEST_SWITCH", false));
}

/* A misspelling keeps the default, and says so once for each variable. */
Test(env, misspelling_warns_once_and_keeps_the_default, .init = cr_redirect_stderr) {
    setenv("RG_TEST_A", "off", 1);
    setenv("RG_TEST_B", "yes", 1);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(rg_env_choice("RG_TEST_A", levels, 3, 2), 2);
        cr_assert(rg_env_switch("RG_TEST_B", true));
        cr_assert_eq(rg_env_choice("RG_TEST_B", levels, 3, -1), -1);
    }
    fflush(stderr);
    cr_assert_stderr_eq_str(
        "ringgrad: warning: RG_TEST_A=\"off\" is not one of 0, relu, 1; using 1\n"
        "ringgrad: warning: RG_TEST_B=\"yes\" is not one of 0, 1; using 1\n");
}
