/* Tests for rg_error's message buffer (core/status.c): a message longer than the buffer keeps its
 * beginning and its end and says how much of the middle was cut (issue 10: a 5,000-character
 * path hid the reason at the end of the message). */
#include <string.h>

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
