/* test_strbuf.c — core/strbuf.c: growth, printf of any length, JSON string escaping. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"

Test(strbuf, grows_across_many_appends_and_long_printf) {
    rg_strbuf b = {0};
    for (int i = 0; i < 1000; i++) rg_strbuf_printf(&b, "%d,", i % 10);
    cr_assert_eq(b.len, 2000);
    cr_assert_eq(strlen(b.s), 2000);
    char big[5000];
    memset(big, 'x', sizeof big - 1), big[sizeof big - 1] = '\0';
    rg_strbuf_printf(&b, "[%s]", big); /* longer than any fixed scratch buffer */
    cr_assert_eq(b.len, 2000 + 5001);
    cr_assert_eq(b.s[b.len - 1], ']');
    cr_assert(!b.oom);
    free(b.s);
}

Test(strbuf, json_string_escapes_quotes_backslashes_and_controls) {
    rg_strbuf b = {0};
    rg_strbuf_json_string(&b, "a\"b\\c\n\x01z é");
    cr_assert_str_eq(b.s, "\"a\\\"b\\\\c\\u000a\\u0001z é\"");
    rg_strbuf_json_string(&b, "");
    cr_assert_str_eq(b.s + strlen(b.s) - 2, "\"\"");
    free(b.s);
}
