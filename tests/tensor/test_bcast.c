/* Tests for rg_bcast_plan (ops/op_impl.h): how a broadcast operand lines up with the result,
 * after size-1 dimensions are dropped and neighbours that step through b alike are merged. */
#include "rgtest.h"

#include "ops/op_impl.h"

/* A header-only tensor: rg_bcast_plan reads ndim, shape and numel. */
static rg_tensor shaped(int ndim, const int64_t *shape) {
    rg_tensor t = {.dtype = RG_F32, .ndim = ndim};
    for (int i = 0; i < ndim; i++) t.shape[i] = shape[i];
    t.numel = rg_shape_numel(ndim, shape);
    return t;
}

typedef struct {
    int big_nd, small_nd;
    int64_t big[6], small[6];
    int nd; /* expected collapsed dims */
    int64_t shape[6], bstride[6];
} plan_case;

static const plan_case cases[] = {
    /* same shape: one contiguous run */
    {3, 3, {2, 3, 4}, {2, 3, 4}, 1, {24}, {1}},
    /* row bias (N,C)+(C) */
    {2, 1, {7, 5}, {5}, 2, {7, 5}, {0, 1}},
    /* channel bias (N,C,H,W)+(C,1,1): H and W merge into one broadcast run */
    {4, 3, {2, 3, 4, 5}, {3, 1, 1}, 3, {2, 3, 20}, {0, 1, 0}},
    /* the same with the leading 1 spelled out */
    {4, 4, {2, 3, 4, 5}, {1, 3, 1, 1}, 3, {2, 3, 20}, {0, 1, 0}},
    /* scalars, shape () and (1) */
    {3, 0, {2, 3, 4}, {0}, 1, {24}, {0}},
    {3, 1, {2, 3, 4}, {1}, 1, {24}, {0}},
    /* per-(N,C) value (N,C,1,1): N and C merge, H and W merge */
    {4, 4, {2, 3, 4, 5}, {2, 3, 1, 1}, 2, {6, 20}, {1, 0}},
    /* alternating (N,1,H,1): nothing merges */
    {4, 4, {2, 3, 4, 5}, {2, 1, 4, 1}, 4, {2, 3, 4, 5}, {4, 0, 1, 0}},
    /* trailing match (N,H,W)+(H,W): H and W merge */
    {3, 2, {2, 3, 4}, {3, 4}, 2, {2, 12}, {0, 1}},
    /* column (N,C)+(N,1) */
    {2, 2, {9, 4}, {9, 1}, 2, {9, 4}, {1, 0}},
    /* size-1 dimensions of the result are dropped */
    {4, 3, {1, 5, 1, 3}, {5, 1, 3}, 1, {15}, {1}},
    {4, 4, {5, 1, 1, 3}, {1, 1, 1, 3}, 2, {5, 3}, {0, 1}},
    /* a one-element result keeps one dimension */
    {3, 0, {1, 1, 1}, {0}, 1, {1}, {0}},
    {0, 0, {0}, {0}, 1, {1}, {0}},
    /* an empty result */
    {2, 1, {0, 3}, {3}, 2, {0, 3}, {0, 1}},
};

Test(tensor_bcast, plan_collapses_dims_and_strides) {
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const plan_case *c = &cases[k];
        rg_tensor big = shaped(c->big_nd, c->big), small = shaped(c->small_nd, c->small);
        char bs[96], ss[96];
        rg_shape_str(big.ndim, big.shape, bs, sizeof bs);
        rg_shape_str(small.ndim, small.shape, ss, sizeof ss);
        rg_bcast bc;
        cr_assert(rg_bcast_plan(&big, &small, &bc), "case %zu %s+%s: refused", k, bs, ss);
        cr_assert_eq(bc.ndim, c->nd, "case %zu %s+%s: %d dims, want %d", k, bs, ss, bc.ndim, c->nd);
        for (int d = 0; d < c->nd; d++) {
            cr_assert_eq(bc.shape[d], c->shape[d], "case %zu %s+%s: shape[%d] = %lld, want %lld", k,
                         bs, ss, d, (long long)bc.shape[d], (long long)c->shape[d]);
            cr_assert_eq(bc.bstride[d], c->bstride[d],
                         "case %zu %s+%s: bstride[%d] = %lld, want %lld", k, bs, ss, d,
                         (long long)bc.bstride[d], (long long)c->bstride[d]);
        }
        cr_assert_eq(bc.n, big.numel, "case %zu: n", k);
        cr_assert_eq(bc.nb, small.numel, "case %zu: nb", k);
    }
}

Test(tensor_bcast, plan_refuses_shapes_that_do_not_broadcast) {
    int64_t s34[] = {3, 4}, s43[] = {4, 3}, s4[] = {4}, s3[] = {3}, s134[] = {1, 3, 4},
            s31[] = {3, 1};
    int64_t s14[] = {1, 4};
    rg_bcast bc;
    rg_tensor a = shaped(2, s34), b = shaped(2, s43);
    cr_assert(!rg_bcast_plan(&a, &b, &bc), "(3,4) with (4,3)");
    b = shaped(1, s3);
    cr_assert(!rg_bcast_plan(&a, &b, &bc), "(3,4) with (3)");
    b = shaped(3, s134);
    cr_assert(!rg_bcast_plan(&a, &b, &bc), "the smaller operand may not have more dims");
    a = shaped(2, s31), b = shaped(2, s14);
    cr_assert(!rg_bcast_plan(&a, &b, &bc), "(3,1) with (1,4): neither has the result's shape");
    cr_assert(!rg_bcast_plan(&b, &a, &bc), "(1,4) with (3,1)");
    a = shaped(1, s4);
    b = shaped(2, s14);
    cr_assert(!rg_bcast_plan(&a, &b, &bc), "(4) with (1,4)");
    cr_assert(rg_bcast_plan(&b, &a, &bc), "(1,4) with (4)");
}

/* Offset into b of output element i, walking the collapsed plan. */
static int64_t plan_offset(const rg_bcast *bc, int64_t i) {
    int64_t off = 0;
    for (int d = bc->ndim - 1; d >= 0; d--) {
        off += (i % bc->shape[d]) * bc->bstride[d];
        i /= bc->shape[d];
    }
    return off;
}

Test(tensor_bcast, plan_addresses_the_naive_element_on_random_shapes) {
    for (uint64_t t = 0; t < 300; t++) {
        int64_t bshape[6], sshape[6];
        int bnd = (int)rgt_randint(0, 6, 3, 20 * t), snd = (int)rgt_randint(0, bnd, 3, 20 * t + 1);
        for (int d = 0; d < bnd; d++) bshape[d] = rgt_randint(1, 4, 3, 20 * t + 2 + d);
        for (int d = 0; d < snd; d++)
            sshape[d] = rgt_randint(0, 2, 3, 20 * t + 10 + d) ? bshape[bnd - snd + d] : 1;
        rg_tensor big = shaped(bnd, bshape), small = shaped(snd, sshape);
        rg_bcast bc;
        cr_assert(rg_bcast_plan(&big, &small, &bc), "random case %llu refused",
                  (unsigned long long)t);
        cr_assert_leq(bc.ndim, bnd > 0 ? bnd : 1);
        for (int d = 0; d < bc.ndim; d++) cr_assert(bc.shape[d] > 1 || bc.ndim == 1, "size-1 kept");
        for (int64_t i = 0; i < big.numel; i++) {
            int64_t want = rgt_bcast_index(bnd, bshape, snd, sshape, i);
            cr_assert_eq(plan_offset(&bc, i), want, "case %llu element %lld", (unsigned long long)t,
                         (long long)i);
        }
    }
}
