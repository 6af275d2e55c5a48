/* test_hash.c — core/hash.h: FNV-1a 64 against the published test vectors (Fowler, Noll, Vo;
 * "FNV-1a 64" column of the reference table), and chaining over pieces. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/hash.h"

Test(hash, fnv1a_matches_the_published_vectors) {
    cr_assert_eq(rg_fnv1a(RG_FNV1A_BASIS, "", 0), 0xcbf29ce484222325ull);
    cr_assert_eq(rg_fnv1a(RG_FNV1A_BASIS, "a", 1), 0xaf63dc4c8601ec8cull);
    cr_assert_eq(rg_fnv1a(RG_FNV1A_BASIS, "foobar", 6), 0x85944171f73967e8ull);
}

Test(hash, fnv1a_chains_over_pieces) {
    uint64_t h = rg_fnv1a(RG_FNV1A_BASIS, "foo", 3);
    cr_assert_eq(rg_fnv1a(h, "bar", 3), rg_fnv1a(RG_FNV1A_BASIS, "foobar", 6));
}
