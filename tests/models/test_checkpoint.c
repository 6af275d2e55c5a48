/* Checkpoints: a round trip restores weights, optimizer state, learning rate, dropout streams and
 * metadata; a resumed run is bit-identical to an uninterrupted one; a checkpoint of another model
 * or optimizer, a missing, extra or reshaped tensor, or bad metadata is a clear error that leaves
 * the model untouched. One test also writes a CNN checkpoint for the PyTorch side of the interop
 * check (scripts/make_reference_nn.py --check). */
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>

#include "rgtest.h"

enum { BATCH = 8 };

/* A deterministic synthetic batch for step k. */
static void batch(int64_t k, rg_tensor **x, rg_tensor **y) {
    *x = rg_tensor_empty(RG_F32, RG_SHAPE(BATCH, 1, 28, 28), RG_CPU);
    uint64_t off = 0;
    rg_tensor_uniform_(*x, 0, 1, 1000 + (uint64_t)k, &off);
    *y = rg_tensor_empty(RG_I64, RG_SHAPE(BATCH), RG_CPU);
    for (int i = 0; i < BATCH; i++) ((int64_t *)(*y)->data)[i] = (i * 3 + k) % 10;
}

static void train(rg_model *net, rg_optim *opt, int64_t from, int64_t to) {
    for (int64_t k = from; k < to; k++) {
        rg_scope_begin();
        rg_tensor *x, *y;
        batch(k, &x, &y);
        rg_backward(rg_cross_entropy(rg_model_forward(net, x, RG_TRAIN), y));
        rg_optim_step(opt);
        rg_optim_zero_grad(opt);
        rg_scope_end();
    }
}

static rg_optim *make_adamw(rg_model *net) {
    rg_optim *opt =
        rg_adamw_new(rg_model_params(net), &(rg_adam_opts){.lr = 1e-3f, .weight_decay = 0.01f});
    rg_optim_set_schedule(opt, &(rg_lr_schedule){.kind = RG_LR_COSINE,
                                                 .base_lr = 1e-3,
                                                 .t_max = 10,
                                                 .warmup_steps = 2,
                                                 .warmup_start = 0.1});
    return opt;
}

/* Asserts two lists hold bit-identical tensors. */
static void assert_same(const rg_param_list *a, const rg_param_list *b, const char *what) {
    cr_assert_eq(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        cr_assert_str_eq(a->items[i].name, b->items[i].name);
        const rg_tensor *x = a->items[i].tensor, *y = b->items[i].tensor;
        cr_assert(memcmp(x->data, y->data, rg_tensor_nbytes(x)) == 0, "%s: %s differs", what,
                  a->items[i].name);
    }
}

static const char *file_in(const char *dir, const char *name) {
    static char buf[4200];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

Test(models_checkpoint, resume_is_bit_identical_to_an_uninterrupted_run) {
    const char *path = file_in(rgt_tmpdir("ckpt_resume"), "step3.safetensors");
    rg_model *a = rg_model_mlp(1);
    rg_optim *oa = make_adamw(a);
    train(a, oa, 0, 6);

    rg_model *b = rg_model_mlp(1);
    rg_optim *ob = make_adamw(b);
    train(b, ob, 0, 3);
    rg_status s =
        rg_checkpoint_save(path, b, ob, &(rg_checkpoint_meta){.step = 3, .epoch = 1, .seed = 1});
    cr_assert_eq(s, RG_OK, "%s", rg_last_error());
    rg_optim_free(ob), rg_model_free(b);

    rg_model *c = rg_model_mlp(42); /* other weights and other dropout seeds until loaded */
    rg_optim *oc = make_adamw(c);
    rg_checkpoint_meta meta;
    s = rg_checkpoint_load(path, c, oc, &meta);
    cr_assert_eq(s, RG_OK, "%s", rg_last_error());
    cr_assert(meta.step == 3 && meta.epoch == 1 && meta.seed == 1);
    cr_assert_str_eq(meta.model, "mlp");
    cr_assert_eq(rg_optim_num_steps(oc), 3);
    train(c, oc, 3, 6);
    assert_same(rg_model_params(a), rg_model_params(c), "weights after resume");
    assert_same(rg_optim_state(oa), rg_optim_state(oc), "optimizer state after resume");
    cr_assert_eq(rg_optim_get_lr(oa), rg_optim_get_lr(oc));
    int n;
    const rg_named_stream *sa = rg_model_streams(a, &n), *sc = rg_model_streams(c, &n);
    cr_assert(sa[0].stream->seed == sc[0].stream->seed &&
              sa[0].stream->offset == sc[0].stream->offset);
    rg_optim_free(oa), rg_model_free(a), rg_optim_free(oc), rg_model_free(c);
}

Test(models_checkpoint, round_trip_restores_everything_with_sgd) {
    const char *path = file_in(rgt_tmpdir("ckpt_round_trip"), "c.safetensors");
    rg_model *a = rg_model_mlp(3);
    rg_optim *oa = rg_sgd_new(rg_model_params(a), &(rg_sgd_opts){.lr = 0.05f, .momentum = 0.9f});
    train(a, oa, 0, 2);
    rg_optim_set_lr(oa, 0.0123f);
    cr_assert_eq(rg_checkpoint_save(path, a, oa, NULL), RG_OK, "%s", rg_last_error());
    rg_model *b = rg_model_mlp(4);
    rg_optim *ob = rg_sgd_new(rg_model_params(b), &(rg_sgd_opts){.lr = 0.05f, .momentum = 0.9f});
    rg_checkpoint_meta meta = {.step = 99};
    cr_assert_eq(rg_checkpoint_load(path, b, ob, &meta), RG_OK, "%s", rg_last_error());
    cr_assert_eq(meta.step, 0, "NULL meta saves zeros");
    assert_same(rg_model_params(a), rg_model_params(b), "weights");
    assert_same(rg_optim_state(oa), rg_optim_state(ob), "momentum buffers and steps");
    cr_assert_eq(rg_optim_get_lr(ob), 0.0123f, "the learning rate round-trips exactly");
    /* the file is also a plain state_dict for --init, and weights-only loading ignores the rest */
    rg_model *c = rg_model_mlp(5);
    cr_assert_eq(rg_checkpoint_load_weights(path, c), RG_OK, "%s", rg_last_error());
    assert_same(rg_model_params(a), rg_model_params(c), "weights-only load");
    /* a checkpoint loaded without an optimizer restores the model alone */
    rg_model *d = rg_model_mlp(6);
    cr_assert_eq(rg_checkpoint_load(path, d, NULL, NULL), RG_OK, "%s", rg_last_error());
    assert_same(rg_model_params(a), rg_model_params(d), "load without optimizer");
    rg_optim_free(oa), rg_optim_free(ob);
    rg_model_free(a), rg_model_free(b), rg_model_free(c), rg_model_free(d);
}

/* Expects `s` to be `want` with a message naming the file and containing `needle`, and the
 * model's weights to equal `before`. */
static void expect_failure(rg_status s, rg_status want, const char *path, const char *needle,
                           const rg_model *m, const rg_model *before) {
    cr_assert_eq(s, want, "'%s': got %s: %s", needle, rg_status_name(s), rg_last_error());
    cr_assert(strstr(rg_last_error(), path), "names the file: %s", rg_last_error());
    cr_assert(strstr(rg_last_error(), needle), "'%s' lacks '%s'", rg_last_error(), needle);
    if (before)
        assert_same(rg_model_params(before), rg_model_params(m), "model after a failed load");
}

Test(models_checkpoint, another_model_or_optimizer_is_a_mismatch) {
    const char *dir = rgt_tmpdir("ckpt_mismatch");
    char mlp_path[4200], weights_path[4200];
    snprintf(mlp_path, sizeof mlp_path, "%s", file_in(dir, "mlp.safetensors"));
    snprintf(weights_path, sizeof weights_path, "%s", file_in(dir, "weights.safetensors"));
    rg_model *mlp = rg_model_mlp(1);
    rg_optim *sgd = rg_sgd_new(rg_model_params(mlp), &(rg_sgd_opts){.lr = 0.1f, .momentum = 0.5f});
    cr_assert_eq(rg_checkpoint_save(mlp_path, mlp, sgd, NULL), RG_OK, "%s", rg_last_error());
    cr_assert_eq(rg_checkpoint_save(weights_path, mlp, NULL, NULL), RG_OK, "%s", rg_last_error());

    rg_model *cnn = rg_model_cnn(1), *cnn_copy = rg_model_cnn(1);
    expect_failure(rg_checkpoint_load(mlp_path, cnn, NULL, NULL), RG_EMISMATCH, mlp_path,
                   "model 'mlp', not of 'cnn'", cnn, cnn_copy);
    expect_failure(rg_checkpoint_load_weights(mlp_path, cnn), RG_EMISMATCH, mlp_path,
                   "model 'mlp', not of 'cnn'", cnn, cnn_copy);

    rg_model *m2 = rg_model_mlp(2), *m2_copy = rg_model_mlp(2);
    rg_optim *adam = rg_adam_new(rg_model_params(m2), NULL);
    expect_failure(rg_checkpoint_load(mlp_path, m2, adam, NULL), RG_EMISMATCH, mlp_path,
                   "'sgd' optimizer, not of 'adam'", m2, m2_copy);
    expect_failure(rg_checkpoint_load(weights_path, m2, adam, NULL), RG_EMISMATCH, weights_path,
                   "no optimizer state", m2, m2_copy);
    rg_optim *plain = rg_sgd_new(rg_model_params(m2), &(rg_sgd_opts){.lr = 0.1f});
    expect_failure(rg_checkpoint_load(mlp_path, m2, plain, NULL), RG_EMISMATCH, mlp_path,
                   "momentum_buffer", m2, m2_copy);
    expect_failure(rg_checkpoint_load(file_in(dir, "absent"), m2, NULL, NULL), RG_ENOENT, "absent",
                   "cannot open", m2, m2_copy);
    rg_optim_free(sgd), rg_optim_free(adam), rg_optim_free(plain);
    rg_model_free(mlp), rg_model_free(cnn), rg_model_free(cnn_copy), rg_model_free(m2),
        rg_model_free(m2_copy);
}

/* Writes the MLP's tensors with fc2.weight replaced by `replace` (or dropped when NULL), plus
 * `extra` if not NULL, and the given metadata. */
static void write_variant(const char *path, const rg_model *m, rg_tensor *replace, rg_tensor *extra,
                          const rg_safetensors_kv *meta, int n_meta) {
    const rg_param_list *p = rg_model_params(m);
    rg_named_tensor ts[16];
    int n = 0;
    for (int i = 0; i < p->n; i++) {
        if (strcmp(p->items[i].name, "fc2.weight") != 0)
            ts[n++] = p->items[i];
        else if (replace)
            ts[n++] = (rg_named_tensor){"fc2.weight", replace, false};
    }
    if (extra) ts[n++] = (rg_named_tensor){"fc4.weight", extra, false};
    cr_assert_eq(rg_safetensors_save(path, ts, n, meta, n_meta), RG_OK, "%s", rg_last_error());
}

Test(models_checkpoint, missing_extra_or_reshaped_tensors_are_mismatches) {
    char path[4200];
    snprintf(path, sizeof path, "%s", file_in(rgt_tmpdir("ckpt_tensors"), "v.safetensors"));
    rg_model *src = rg_model_mlp(7), *m = rg_model_mlp(8), *m_copy = rg_model_mlp(8);
    rg_tensor *wrong_shape = rg_tensor_new(RG_F32, RG_SHAPE(256, 128), RG_CPU);
    rg_tensor *wrong_dtype = rg_tensor_new(RG_I32, RG_SHAPE(128, 256), RG_CPU);
    rg_tensor *fc2 = rg_param_list_find(rg_model_params(src), "fc2.weight")->tensor;

    write_variant(path, src, NULL, NULL, NULL, 0);
    expect_failure(rg_checkpoint_load_weights(path, m), RG_EMISMATCH, path,
                   "no tensor 'fc2.weight'", m, m_copy);
    write_variant(path, src, fc2, fc2, NULL, 0);
    expect_failure(rg_checkpoint_load_weights(path, m), RG_EMISMATCH, path,
                   "'fc4.weight' has no counterpart", m, m_copy);
    write_variant(path, src, wrong_shape, NULL, NULL, 0);
    expect_failure(rg_checkpoint_load_weights(path, m), RG_EMISMATCH, path,
                   "F32 (256,128), expected F32 (128,256)", m, m_copy);
    write_variant(path, src, wrong_dtype, NULL, NULL, 0);
    expect_failure(rg_checkpoint_load_weights(path, m), RG_EMISMATCH, path, "I32 (128,256)", m,
                   m_copy);

    /* a plain state_dict (as PyTorch writes it) loads as weights but cannot resume training */
    write_variant(path, src, fc2, NULL, NULL, 0);
    cr_assert_eq(rg_checkpoint_load_weights(path, m), RG_OK, "%s", rg_last_error());
    assert_same(rg_model_params(src), rg_model_params(m), "weights from a PyTorch-style file");
    expect_failure(rg_checkpoint_load(path, m, NULL, NULL), RG_EMISMATCH, path,
                   "not a ringgrad checkpoint", m, src);
    rgt_free_all(2, (rg_tensor *[]){wrong_shape, wrong_dtype});
    rg_model_free(src), rg_model_free(m), rg_model_free(m_copy);
}

/* A NaN or Inf anywhere in the weights or the optimizer state is refused, naming the tensor, and
 * the model is left as it was (issue 10: NaN weights used to load and train silently). */
Test(models_checkpoint, non_finite_values_are_refused_naming_the_tensor) {
    char path[4200];
    snprintf(path, sizeof path, "%s", file_in(rgt_tmpdir("ckpt_nonfinite"), "v.safetensors"));
    rg_model *src = rg_model_mlp(7), *m = rg_model_mlp(8), *m_copy = rg_model_mlp(8);
    rg_tensor *bad = rg_tensor_new(RG_F32, RG_SHAPE(128, 256), RG_CPU);
    const float poison[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        memcpy(bad->data, rg_param_list_find(rg_model_params(src), "fc2.weight")->tensor->data,
               rg_tensor_nbytes(bad));
        rg_tensor_f32(bad)[1000 + k] = poison[k];
        write_variant(path, src, bad, NULL, NULL, 0);
        expect_failure(rg_checkpoint_load_weights(path, m), RG_ECORRUPT, path,
                       "tensor 'fc2.weight' holds a non-finite value", m, m_copy);
        cr_assert(strstr(rg_last_error(), "element 10"), "%s", rg_last_error());
    }
    /* in the optimizer state, through rg_checkpoint_load */
    rg_optim *opt = rg_sgd_new(rg_model_params(src), &(rg_sgd_opts){.lr = 0.1f, .momentum = 0.9f});
    train(src, opt, 0, 1);
    const rg_param_list *st = rg_optim_state(opt);
    rg_tensor *buf = NULL;
    for (int i = 0; i < st->n && !buf; i++)
        if (st->items[i].tensor->dtype == RG_F32 && st->items[i].tensor->numel > 1)
            buf = st->items[i].tensor;
    cr_assert(buf, "an optimizer buffer");
    rg_tensor_f32(buf)[0] = NAN;
    cr_assert_eq(rg_checkpoint_save(path, src, opt, NULL), RG_OK, "%s", rg_last_error());
    rg_model *m2 = rg_model_mlp(8);
    rg_optim *o2 = rg_sgd_new(rg_model_params(m2), &(rg_sgd_opts){.lr = 0.1f, .momentum = 0.9f});
    rg_status s = rg_checkpoint_load(path, m2, o2, NULL);
    cr_assert_eq(s, RG_ECORRUPT, "%s", rg_last_error());
    cr_assert(strstr(rg_last_error(), "optim.") && strstr(rg_last_error(), "non-finite"), "%s",
              rg_last_error());
    assert_same(rg_model_params(m_copy), rg_model_params(m2), "model after a refused load");
    rg_optim_free(opt), rg_optim_free(o2);
    rg_tensor_free(bad);
    rg_model_free(src), rg_model_free(m), rg_model_free(m_copy), rg_model_free(m2);
}

static const rg_safetensors_kv good_meta[] = {{"ringgrad.format_version", "1"},
                                              {"model", "mlp"},
                                              {"step", "12"},
                                              {"epoch", "1"},
                                              {"seed", "7"},
                                              {"rng.dropout1.seed", "5"},
                                              {"rng.dropout1.offset", "64"}};

static const struct {
    int key; /* index into good_meta */
    const char *value;
    rg_status want;
    const char *needle;
} bad_meta[] = {
    {2, "12x", RG_ECORRUPT, "'step' is '12x'"},
    {2, "-1", RG_ECORRUPT, "not an unsigned"},
    {2, "", RG_ECORRUPT, "'step'"},
    {4, "18446744073709551616", RG_ECORRUPT, "'seed'"},
    {3, "9223372036854775808", RG_ECORRUPT, "out of range"},
    {6, "0x40", RG_ECORRUPT, "rng.dropout1.offset"},
    {0, "2", RG_ENOTSUP, "version '2'"},
    {1, "cnn", RG_EMISMATCH, "model 'cnn', not of 'mlp'"},
};

Test(models_checkpoint, bad_metadata_is_an_error) {
    char path[4200];
    snprintf(path, sizeof path, "%s", file_in(rgt_tmpdir("ckpt_meta"), "v.safetensors"));
    rg_model *src = rg_model_mlp(7), *m = rg_model_mlp(8), *m_copy = rg_model_mlp(8);
    rg_tensor *fc2 = rg_param_list_find(rg_model_params(src), "fc2.weight")->tensor;
    write_variant(path, src, fc2, NULL, good_meta, 7);
    cr_assert_eq(rg_checkpoint_load(path, m_copy, NULL, NULL), RG_OK, "%s", rg_last_error());
    cr_assert_eq(rg_model_streams(m_copy, &(int){0})[0].stream->offset, 64, "stream restored");
    for (size_t i = 0; i < sizeof bad_meta / sizeof bad_meta[0]; i++) {
        rg_safetensors_kv changed[7];
        memcpy(changed, good_meta, sizeof changed);
        changed[bad_meta[i].key].value = bad_meta[i].value;
        write_variant(path, src, fc2, NULL, changed, 7);
        expect_failure(rg_checkpoint_load(path, m, NULL, NULL), bad_meta[i].want, path,
                       bad_meta[i].needle, m, NULL);
    }
    write_variant(path, src, fc2, NULL, good_meta, 6); /* no rng.dropout1.offset */
    expect_failure(rg_checkpoint_load(path, m, NULL, NULL), RG_ECORRUPT, path,
                   "rng.dropout1.offset' is missing", m, NULL);
    rg_model_free(m_copy);
    m_copy = rg_model_mlp(8);
    assert_same(rg_model_params(m_copy), rg_model_params(m), "model after failed loads");
    rg_model_free(src), rg_model_free(m), rg_model_free(m_copy);
}

/* A user's model with a long name: 60 characters round-trip (they were cut at 47, and the
 * checkpoint then refused to load into the same model); 300 are refused on save. */
Test(models_checkpoint, long_model_names_round_trip_or_are_refused) {
    char path[4200], name[301];
    snprintf(path, sizeof path, "%s", file_in(rgt_tmpdir("ckpt_name"), "n.safetensors"));
    rg_rng_stream init = {1, 0};
    memset(name, 'm', 60), name[60] = '\0';
    rg_layer *root = rg_sequential_new("");
    rg_layer_add(root, rg_linear_new("fc", 3, 2, &init));
    rg_model *m = rg_model_new(name, root, 1);
    cr_assert_eq(rg_checkpoint_save(path, m, NULL, NULL), RG_OK, "%s", rg_last_error());
    cr_assert_eq(rg_checkpoint_load(path, m, NULL, NULL), RG_OK, "%s", rg_last_error());
    rg_model_free(m);
    memset(name, 'm', 300), name[300] = '\0';
    root = rg_sequential_new("");
    rg_layer_add(root, rg_linear_new("fc", 3, 2, &init));
    m = rg_model_new(name, root, 1);
    cr_assert_eq(rg_checkpoint_save(path, m, NULL, NULL), RG_EINVAL);
    cr_assert(
        strstr(rg_last_error(), "the model's name has 300 characters; a checkpoint keeps 255"),
        "%s", rg_last_error());
    rg_model_free(m);
}

Test(models_interop, cnn_checkpoint_for_pytorch) {
    /* Fixed path, for: /usr/bin/python3 scripts/make_reference_nn.py --check
     * build/tests/tmp/interop */
    char dir[4096], cmd[4200];
    snprintf(dir, sizeof dir, "%s/tests/tmp/interop", RG_BINARY_DIR);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    rg_model *net = rg_model_cnn(11);
    rg_optim *opt = rg_adam_new(rg_model_params(net), NULL);
    train(net, opt, 0, 1);
    cr_assert_eq(rg_checkpoint_save(file_in(dir, "cnn.safetensors"), net, opt, NULL), RG_OK, "%s",
                 rg_last_error());
    rg_scope_begin();
    rg_tensor *x, *y;
    batch(0, &x, &y);
    rg_tensor *logits = rg_model_forward(net, x, RG_EVAL);
    rg_named_tensor io[] = {{"input", x, false}, {"logits", logits, false}};
    cr_assert_eq(rg_safetensors_save(file_in(dir, "cnn_io.safetensors"), io, 2, NULL, 0), RG_OK);
    rg_model *back = rg_model_cnn(12);
    cr_assert_eq(rg_checkpoint_load_weights(file_in(dir, "cnn.safetensors"), back), RG_OK, "%s",
                 rg_last_error());
    rg_tensor *again = rg_model_forward(back, x, RG_EVAL);
    cr_assert(memcmp(again->data, logits->data, rg_tensor_nbytes(logits)) == 0);
    rg_scope_end();
    rg_optim_free(opt), rg_model_free(net), rg_model_free(back);
}
