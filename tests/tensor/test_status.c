/* Tests for rg_error's message buffer (core/status.c): a message longer than the buffer keeps its
 * beginning and its end and says how much of the middle was cut (issue 10: a 5,000-character
 * path hid the reason at the end of the message). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rgtest.h"

Test(core_status, a_long_message_keeps_its_end_and_says_it_was_cut) {
    char path[5001];
    memset(path, 'x', 5000);
    path[5000] = '\0';
    cr_assert_eq(rg_error(RG_EIO, "%s: cannot open: %s", path, "No such file or directory"), RG_EIO);
    const char *m = rg_last_error();
    cr_assert_lt(strlen(m), 1024);
    cr_assert(strstr(m, "characters cut ...]"), "%.200s", m);
    size_t n = strlen(m);
    const char *end = ": cannot open: No such file or directory";
    cr_assert_str_eq(m + n - strlen(end), end, "the reason survives: ...%s", m + n - 60);
    cr_assert_eq(strncmp(m, "xxxxxxxx", 8), 0);
}

Test(core_status, a_short_message_is_unchanged) {
    RG_IGNORE(rg_error(RG_EINVAL, "%s %d", "short", 7));
    cr_assert_str_eq(rg_last_error(), "short 7");
}

/* A fatal handler learns why it runs: rg_fatal_oom (an op's output that could not be allocated)
 * gives RG_ENOMEM, so ringgrad-train can exit 1 rather than abort; a failed check gives
 * RG_EINVAL. Each case exits with the status its handler saw. */
static void exit_with_fatal_status(void) {
    _exit(10 + (int)rg_fatal_status());
}

Test(core_status, a_fatal_handler_sees_out_of_memory, .exit_code = 10 + RG_ENOMEM) {
    cr_assert_eq(rg_fatal_status(), RG_OK, "no fatal error in progress yet");
    rg_set_fatal_handler(exit_with_fatal_status);
    rg_fatal_oom(__FILE__, __LINE__, "out of memory allocating %d bytes", 7);
}

Test(core_status, a_fatal_handler_sees_a_failed_check, .exit_code = 10 + RG_EINVAL) {
    rg_set_fatal_handler(exit_with_fatal_status);
    RG_CHECK(1 + 1 == 3, "a failed check");
}

Test(core_status, an_op_that_cannot_allocate_its_output_is_out_of_memory,
     .exit_code = 10 + RG_ENOMEM) {
    cr_assert_eq(setenv("RG_CPU_MEM_LIMIT", "1M", 1), 0);
    rg_set_fatal_handler(exit_with_fatal_status);
    rg_scope_begin();
    rg_tensor_empty(RG_F32, RG_SHAPE(1 << 20), RG_CPU); /* 4 MiB */
}
