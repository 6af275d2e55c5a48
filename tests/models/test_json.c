/* The JSON reader behind safetensors headers: valid documents parse to the right tree; every kind
 * of invalid input is an error naming a byte offset, never a crash (run under ASan). */
#include "models/json.h"
#include "rgtest.h"

static rg_json *parse(const char *s) {
    char err[256];
    rg_json *v = rg_json_parse(s, strlen(s), err, sizeof err);
    cr_assert_not_null(v, "'%s' should parse: %s", s, err);
    return v;
}

Test(models_json, parses_a_safetensors_header) {
    rg_json *v = parse(" {\"__metadata__\":{\"format\":\"pt\"},\n\"fc1.weight\":{\"dtype\":\"F32\","
                       "\"shape\":[128,9216],\"data_offsets\":[0,4718592]}}   ");
    cr_assert_eq(v->kind, RG_JSON_OBJECT);
    cr_assert_eq(v->count, 2);
    const rg_json *e = rg_json_get(v, "fc1.weight");
    cr_assert_not_null(e);
    cr_assert_str_eq(rg_json_get(e, "dtype")->str, "F32");
    const rg_json *shape = rg_json_get(e, "shape");
    cr_assert_eq(shape->kind, RG_JSON_ARRAY);
    cr_assert_eq(shape->count, 2);
    cr_assert(shape->child->is_int && shape->child->integer == 128);
    cr_assert_eq(shape->child->next->integer, 9216);
    cr_assert_str_eq(rg_json_get(rg_json_get(v, "__metadata__"), "format")->str, "pt");
    cr_assert_null(rg_json_get(v, "missing"));
    rg_json_free(v);
}

Test(models_json, scalars_numbers_and_escapes) {
    rg_json *v = parse("[null, true, false, -0, 9223372036854775807, -9223372036854775808, "
                       "9223372036854775808, 1.5e3, \"a\\\"b\\\\c\\/\\n\\u00e9\\ud83d\\ude00\"]");
    const rg_json *e = v->child;
    cr_assert_eq(e->kind, RG_JSON_NULL);
    e = e->next;
    cr_assert(e->kind == RG_JSON_BOOL && e->boolean);
    e = e->next;
    cr_assert(e->kind == RG_JSON_BOOL && !e->boolean);
    e = e->next;
    cr_assert(e->is_int && e->integer == 0);
    e = e->next;
    cr_assert(e->is_int && e->integer == INT64_MAX);
    e = e->next;
    cr_assert(e->is_int && e->integer == INT64_MIN);
    e = e->next;
    cr_assert(!e->is_int, "2^63 does not fit int64");
    e = e->next;
    cr_assert(!e->is_int && e->number == 1500.0);
    e = e->next;
    cr_assert_str_eq(e->str, "a\"b\\c/\n\xc3\xa9\xf0\x9f\x98\x80");
    rg_json_free(v);
}

Test(models_json, invalid_documents_are_errors_with_an_offset) {
    const char *bad[] = {
        "",
        "   ",
        "{",
        "}",
        "[1,]",
        "{\"a\":1,}",
        "{\"a\" 1}",
        "{a:1}",
        "[1 2]",
        "01",
        "-",
        "1.",
        "1e",
        "+1",
        ".5",
        "tru",
        "nul",
        "\"abc",
        "\"a\\x\"",
        "\"\\u12\"",
        "\"\\u0000\"",
        "\"\\ud800\"",
        "\"\\udc00\"",
        "\"\\ud800\\u0041\"",
        "\"tab\there\"",
        "\"\xff\"",
        "\"\xc0\xaf\"",
        "\"\xed\xa0\x80\"",
        "\"\xe2\x82\"",
        "{} {}",
        "[1] x",
        "{\"a\":}",
        "[\"a\":1]",
        "{\"a\":1 \"b\":2}",
        "\"\\",
        "[",
        "[[[",
        "{\"k\":[1,{\"z\":}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256];
        rg_json *v = rg_json_parse(bad[i], strlen(bad[i]), err, sizeof err);
        cr_assert_null(v, "'%s' should not parse", bad[i]);
        cr_assert(strstr(err, "invalid JSON at byte"), "'%s': message '%s'", bad[i], err);
    }
}

Test(models_json, embedded_nul_and_length_bound_are_respected) {
    char err[256];
    /* the NUL ends nothing: the text is "[1]\0" of length 4, which has trailing garbage */
    cr_assert_null(rg_json_parse("[1]\0", 4, err, sizeof err));
    /* only the first 3 bytes count: "[12" is unterminated even though the buffer goes on */
    cr_assert_null(rg_json_parse("[12]", 3, err, sizeof err));
    rg_json *v = rg_json_parse("[12] trailing", 4, err, sizeof err);
    cr_assert_not_null(v);
    rg_json_free(v);
}

Test(models_json, nesting_is_bounded) {
    char deep[2 * RG_JSON_MAX_DEPTH + 10], err[256];
    size_t n = 0;
    for (int i = 0; i < RG_JSON_MAX_DEPTH + 1; i++) deep[n++] = '[';
    for (int i = 0; i < RG_JSON_MAX_DEPTH + 1; i++) deep[n++] = ']';
    cr_assert_null(rg_json_parse(deep, n, err, sizeof err));
    cr_assert(strstr(err, "nested deeper"), "%s", err);
    rg_json *v = rg_json_parse(deep + 1, n - 2, err, sizeof err); /* exactly the limit */
    cr_assert_not_null(v, "%s", err);
    rg_json_free(v);
}
