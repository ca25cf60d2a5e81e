/* cvt.c — CvT (microsoft/CvT, lib/models/cls_cvt.py): three stages, each a convolutional token
 * embedding followed by pre-norm blocks whose attention projects q, k and v through a depthwise
 * convolution + BatchNorm on the token grid; a cls token in the last stage only. Token mixing is
 * softmax (msa, the official model) or SimA. The whole family is the struct `mdl_family_cvt` at
 * the end of this file (checks, build, forward, free, `sfvit info` rows); its presets,
 * cvt_13 and cvt_21, are lines of models/kinds.c calling mdl_cvt_defaults.
 *
 * Stage s (widths 64/192/384, heads 1/3/6 for CvT-13/21):
 *   x = LN(tokens(Conv_{k,s,p}(image)))             embedding 7/4/2, then 3/2/1 and 3/2/1
 *   [cls; x] in the last stage
 *   block: x += DropPath(attn(LN1 x)); x += DropPath(mlp(LN2 x)), LN eps 1e-5, MLP ratio 4
 *   attn:  cls split off; g = the grid tokens as an image (B, C, h, w);
 *          q = BN(DWConv3x3 s1 p1 (g)), k = BN(DWConv3x3 s2 p1 (g)), v likewise (no conv bias);
 *          [cls; q], [cls; k], [cls; v] (the cls token enters unconvolved);
 *          Linear proj_q/k/v (bias), heads, softmax(q k^T · C^-1/2) v with C the stage width
 *          (the official scale, not the head width) or SimA, merge, Linear proj.
 *   head:  LN(final cls token) -> Linear.
 * Drop path: per stage linspace(0, rate_s, depth_s) with rate = (0, 0, model.drop_path_rate),
 * the official recipe's DROP_PATH_RATE [0.0, 0.0, 0.1] for CvT-13 and CvT-21.
 *
 * SimA here: q-hat and k-hat are normalized over their own tokens (q has about 4x the tokens
 * of k and v: stride 1 against stride 2). The product order with sima_order auto is the cheaper
 * one for Nq query and Nk key tokens: (QK^T)V costs 2·Nq·Nk·D, Q(K^T V) costs (Nq + Nk)·D²; with
 * Nq = Nk this is the ViT rule N < D.
 *
 * `sfvit viz`: the last SimA block records the token norms of Q-hat on its stage's grid and of
 * K-hat on the stride-2 key grid (mdl_viz_record), the cls token left out.
 *
 * Deliberately not here: the official code's options the CvT-13/21 models do not use (pos_embed,
 * avg or linear q/k/v projections, a cls token in earlier stages, attention dropout), CvT-W24's
 * sizes. The ONNX form is models/onnx.c's cvt_graph.
 *
 * Dimension legend: B batch, C stage width, H heads, D head dim, h×w the stage grid, hk×wk the
 * key/value grid, Nq = [1+]h·w query tokens, Nk = [1+]hk·wk key/value tokens, K classes.
 */
#include "models_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CVT_STAGES MDL_CVT_STAGES
const int mdl_cvt_embed_k[CVT_STAGES] = {7, 3, 3}, mdl_cvt_embed_stride[CVT_STAGES] = {4, 2, 2},
          mdl_cvt_embed_pad[CVT_STAGES] = {2, 1, 1};

typedef struct cvt_attn {
    mdl_conv conv_q, conv_k, conv_v;     // (C, 1, 3, 3), groups C, stride 1 / 2 / 2
    mdl_bn bn_q, bn_k, bn_v;             // (C) each
    mdl_linear proj_q, proj_k, proj_v;   // (C, C) + bias
    mdl_linear proj;                     // (C, C) + bias
    sf_attn_kind kind;
    int H;
    int record_viz;                      // the model's last SimA block: records Q-hat/K-hat token norms
} cvt_attn;

typedef struct cvt_block {
    mdl_ln norm1, norm2;
    cvt_attn attn;
    mdl_mlp mlp;
    float drop_path;
} cvt_block;

typedef struct cvt_stage {
    mdl_conv embed;          // patch_embed.proj (C, C_prev, k, k) + bias
    mdl_ln embed_norm;       // patch_embed.norm
    sf_tensor *cls_token;    // (1, 1, C), last stage only
    cvt_block *blocks;
    int depth;
} cvt_stage;

typedef struct cvt_model {
    cvt_stage st[CVT_STAGES];
    mdl_ln norm;             // on the final cls token
    mdl_linear head;         // (K, C)
} cvt_model;

/* ---- sizes ---- */

int mdl_cvt_embed_out(int side, int s) {
    return (side + 2 * mdl_cvt_embed_pad[s] - mdl_cvt_embed_k[s]) / mdl_cvt_embed_stride[s] + 1;
}
int mdl_cvt_kv_side(int side) { return (side - 1) / 2 + 1; }  // 3x3, stride 2, padding 1

/* The SimA product order for Nq query and Nk key tokens of head width D (see the top); the
 * ONNX graph (onnx.c) emits the same. */
sf_sima_order mdl_cvt_sima_order(sf_sima_order o, int Nq, int Nk, int D) {
    if (o != SF_SIMA_AUTO) return o;
    return 2.0 * Nq * Nk < (double)(Nq + Nk) * D ? SF_SIMA_QK_FIRST : SF_SIMA_KV_FIRST;
}

/* ---- defaults and checks ---- */

int mdl_cvt_defaults(sf_model_cfg *c, const char *name) {
    int d1;
    if (!strcmp(name, "cvt_13")) d1 = 2;
    else if (!strcmp(name, "cvt_21")) d1 = 4;
    else return -1;
    static const int dims[CVT_STAGES] = {64, 192, 384}, heads[CVT_STAGES] = {1, 3, 6};
    const int depths[CVT_STAGES] = {1, d1, d1 == 2 ? 10 : 16};
    c->family = SF_FAMILY_CVT;
    c->num_stages = CVT_STAGES;
    c->depth = 0;
    memset(c->embed_dims, 0, sizeof c->embed_dims);
    memset(c->depths, 0, sizeof c->depths);
    memset(c->stage_heads, 0, sizeof c->stage_heads);
    for (int s = 0; s < CVT_STAGES; s++) {
        c->embed_dims[s] = dims[s];
        c->stage_heads[s] = heads[s];
        c->depths[s] = depths[s];
        c->depth += depths[s];
    }
    /* the single-width keys mirror the last stage (informational; sf_model_derive keeps them so) */
    c->patch_size = 16;  // the total stride 4·2·2
    c->embed_dim = dims[2];
    c->num_heads = heads[2];
    c->mlp_ratio = 4.0f;
    c->attn = SF_ATTN_MSA;
    c->attn_norm = SF_NORM_L1;
    c->act = SF_ACT_QUICK_GELU;   // the official classification model's act_layer
    c->drop_path_rate = 0.1f;     // the last stage's rate (official DROP_PATH_RATE [0, 0, 0.1])
    return 0;
}

static int cvt_check(const sf_model_cfg *c, const char *where) {
    if (c->num_stages != CVT_STAGES)
        return mdl_bad(where, "model.num_stages %d: CvT has %d stages", c->num_stages, CVT_STAGES);
    int total = 0;
    for (int s = 0; s < CVT_STAGES; s++) {
        if (c->embed_dims[s] < 1 || c->stage_heads[s] < 1 || c->embed_dims[s] % c->stage_heads[s])
            return mdl_bad(where, "model.embed_dims[%d] %d must be a positive multiple of model.stage_heads[%d] %d", s,
                           c->embed_dims[s], s, c->stage_heads[s]);
        if (c->depths[s] < 1) return mdl_bad(where, "model.depths[%d] %d must be >= 1", s, c->depths[s]);
        total += c->depths[s];
    }
    if (c->embed_dims[CVT_STAGES] || c->depths[CVT_STAGES] || c->stage_heads[CVT_STAGES])
        return mdl_bad(where, "model.depths: model.embed_dims, model.depths or model.stage_heads has more values "
                       "than CvT's %d stages", CVT_STAGES);
    if (total > SF_MAX_BLOCKS) return mdl_bad(where, "model.depths: %d blocks, at most %d", total, SF_MAX_BLOCKS);
    if (c->img_size < 3) return mdl_bad(where, "model.img_size %d: CvT's 7x7 stride-4 embedding needs >= 3", c->img_size);
    return mdl_check_block_kinds(c, total, where);
}

/* ---- build ---- */

static mdl_conv dw_add(sf_params *ps, const char *prefix, const char *which, int C, int stride) {
    char p[160];
    snprintf(p, sizeof p, "%sconv_proj_%s.conv", prefix, which);
    return mdl_conv_add(ps, SF_FAMILY_CVT, p, C, C, 3, stride, 1, C, 0);
}

static mdl_bn bn_add(sf_params *ps, const char *prefix, const char *which, int C) {
    char p[160];
    snprintf(p, sizeof p, "%sconv_proj_%s.bn", prefix, which);
    return mdl_bn_add(ps, SF_FAMILY_CVT, p, C);
}

static mdl_linear lin_add(sf_params *ps, const char *prefix, const char *which, int C) {
    char p[160];
    snprintf(p, sizeof p, "%s%s", prefix, which);
    return mdl_linear_add(ps, SF_FAMILY_CVT, p, C, C, 1);
}

/* The grids `sfvit viz` maps the recorded norms to: the stage's h x w for the queries, its
 * stride-2 key grid for the keys. Set at build (for the configured size) and again by the
 * recording block's forward (for the size it runs at). */
static void viz_grids(sf_model *m, int h, int w) {
    m->viz_h = h;
    m->viz_w = w;
    m->viz_kh = mdl_cvt_kv_side(h);
    m->viz_kw = mdl_cvt_kv_side(w);
}

static int cvt_build(sf_model *m, sf_params *ps) {
    const sf_model_cfg *c = &m->cfg;
    const sf_family F = SF_FAMILY_CVT;
    cvt_model *v = sf_calloc(1, sizeof(*v));
    m->family = v;
    char p[160];
    int cin = c->in_chans, i_global = 0, last_sima = -1, side = c->img_size;
    for (int i = 0; i < mdl_block_count(c); i++)
        if (mdl_block_attn(c, i) == SF_ATTN_SIMA) last_sima = i;
    /* Registration in the official state_dict order: per stage cls_token, patch_embed, blocks
     * (norm1, attn: conv_proj_q/k/v {conv, bn}, proj_q/k/v, proj; norm2, mlp); then norm, head. */
    for (int s = 0; s < CVT_STAGES; s++) {
        cvt_stage *st = &v->st[s];
        const int C = c->embed_dims[s], L = c->depths[s];
        const float rate = s == CVT_STAGES - 1 ? c->drop_path_rate : 0.0f;
        if (s == CVT_STAGES - 1) {
            snprintf(p, sizeof p, "stage%d.", s);
            st->cls_token = mdl_param(ps, F, p, "cls_token", 3, (int[]){1, 1, C}, 1, 0, SF_INIT_TRUNC_NORMAL, 0.02f);
        }
        snprintf(p, sizeof p, "stage%d.patch_embed.proj", s);
        st->embed =
            mdl_conv_add(ps, F, p, C, cin, mdl_cvt_embed_k[s], mdl_cvt_embed_stride[s], mdl_cvt_embed_pad[s], 1, 1);
        snprintf(p, sizeof p, "stage%d.patch_embed.norm", s);
        st->embed_norm = mdl_ln_add(ps, F, p, C, 1e-5f);
        st->depth = L;
        st->blocks = sf_calloc((size_t)L, sizeof(cvt_block));
        for (int j = 0; j < L; j++, i_global++) {
            cvt_block *b = &st->blocks[j];
            char q[128];
            snprintf(p, sizeof p, "stage%d.blocks.%d.norm1", s, j);
            b->norm1 = mdl_ln_add(ps, F, p, C, 1e-5f);
            snprintf(q, sizeof q, "stage%d.blocks.%d.attn.", s, j);
            cvt_attn *a = &b->attn;
            a->kind = mdl_block_attn(c, i_global);
            a->H = c->stage_heads[s];
            a->record_viz = i_global == last_sima;
            if (a->record_viz) viz_grids(m, mdl_cvt_embed_out(side, s), mdl_cvt_embed_out(side, s));
            a->conv_q = dw_add(ps, q, "q", C, 1);
            a->bn_q = bn_add(ps, q, "q", C);
            a->conv_k = dw_add(ps, q, "k", C, 2);
            a->bn_k = bn_add(ps, q, "k", C);
            a->conv_v = dw_add(ps, q, "v", C, 2);
            a->bn_v = bn_add(ps, q, "v", C);
            a->proj_q = lin_add(ps, q, "proj_q", C);
            a->proj_k = lin_add(ps, q, "proj_k", C);
            a->proj_v = lin_add(ps, q, "proj_v", C);
            a->proj = lin_add(ps, q, "proj", C);
            snprintf(p, sizeof p, "stage%d.blocks.%d.norm2", s, j);
            b->norm2 = mdl_ln_add(ps, F, p, C, 1e-5f);
            snprintf(p, sizeof p, "stage%d.blocks.%d.mlp.", s, j);
            b->mlp = mdl_mlp_add(ps, F, p, C, (int)(C * c->mlp_ratio), c->act, c->drop_rate);
            b->drop_path = L > 1 ? rate * (float)j / (float)(L - 1) : 0.0f;  // torch.linspace(0, rate, L)
        }
        cin = C;
        side = mdl_cvt_embed_out(side, s);
    }
    const int CL = c->embed_dims[CVT_STAGES - 1];
    v->norm = mdl_ln_add(ps, F, "norm", CL, 1e-5f);
    v->head = mdl_linear_add(ps, F, "head", c->num_classes, CL, 1);
    return 0;
}

static void cvt_free(sf_model *m) {
    cvt_model *v = m->family;
    if (!v) return;
    for (int s = 0; s < CVT_STAGES; s++) free(v->st[s].blocks);
    free(v);
}

/* ---- forward ---- */

/* Depthwise conv + BatchNorm of the grid image (B, C, h, w), back to tokens (B, n, C). */
static sf_tensor *conv_proj(sf_ctx *g, const mdl_conv *conv, const mdl_bn *bn, sf_tensor *img) {
    return mdl_tokens_from_image_last_use(g, mdl_bn_fwd(g, bn, mdl_conv_fwd(g, conv, img)));
}

/* x (B, [1+]h·w, C), already normalized -> (B, [1+]h·w, C). */
static sf_tensor *cvt_attn_fwd(sf_ctx *g, sf_model *m, const cvt_attn *a, sf_tensor *x, int h, int w, int has_cls) {
    const sf_model_cfg *c = &m->cfg;
    const int N = x->shape[1], C = x->shape[2], D = C / a->H;
    sf_tensor *cls = has_cls ? sf_slice_tokens(g, x, 0, 1) : NULL;                  // (B, 1, C)
    sf_tensor *grid = has_cls ? sf_slice_tokens(g, x, 1, N - 1) : x;                // (B, h·w, C)
    if (cls) sf_tensor_release_data(g, x); /* its two slices are all that is read of it */
    sf_tensor *img = mdl_image_from_tokens_last_use(g, grid, h, w);                 // (B, C, h, w)
    sf_tensor *q = conv_proj(g, &a->conv_q, &a->bn_q, img);                         // (B, h·w, C)
    sf_tensor *k = conv_proj(g, &a->conv_k, &a->bn_k, img);                         // (B, hk·wk, C)
    sf_tensor *v = conv_proj(g, &a->conv_v, &a->bn_v, img);                         // (B, hk·wk, C)
    if (cls) {
        q = sf_concat_tokens(g, cls, q);
        k = sf_concat_tokens(g, cls, k);
        v = sf_concat_tokens(g, cls, v);
    }
    /* q, k, v are fresh tokens (a concat or permute copy) that only their projection reads */
    /* SimA: Q̂, K̂ normalized as they are split, F.normalize's default eps 1e-12 (as the
     * ViT/XCiT SimA blocks) */
    const sf_attn_norm qk_norm = a->kind == SF_ATTN_MSA ? SF_NORM_NONE : c->attn_norm;
    sf_tensor *Q = mdl_heads_norm(g, mdl_linear_last_use(g, &a->proj_q, q), 1, 0, a->H, qk_norm, 1e-12f);  // (B, H, Nq, D)
    sf_tensor *K = mdl_heads_norm(g, mdl_linear_last_use(g, &a->proj_k, k), 1, 0, a->H, qk_norm, 1e-12f);  // (B, H, Nk, D)
    sf_tensor *V = sf_heads_split(g, mdl_linear_last_use(g, &a->proj_v, v), 1, 0, a->H);  // (B, H, Nk, D)
    if (a->record_viz) {
        viz_grids(m, h, w);
        mdl_viz_record(m, Q, K, has_cls);
    }
    sf_tensor *o;                                                                    // (B, H, Nq, D)
    if (a->kind == SF_ATTN_MSA)
        o = sf_msa(g, Q, K, V, 1.0f / sqrtf((float)C));  // the official dim_out ** -0.5
    else
        o = sf_sima_last_use(g, Q, K, V, mdl_cvt_sima_order(c->sima_order, Q->shape[2], K->shape[2], D),
                             SF_SIMA_HAND_Q | SF_SIMA_HAND_K | SF_SIMA_HAND_V);
    sf_tensor *y = mdl_linear_last_use(g, &a->proj, sf_heads_merge_to_linear(g, o));  // (B, Nq, C)
    return c->drop_rate > 0 ? sf_dropout(g, y, c->drop_rate) : y;
}

static sf_tensor *cvt_forward(sf_ctx *g, sf_model *m, sf_tensor *images) {
    const sf_model_cfg *c = &m->cfg;
    cvt_model *v = m->family;
    char b[64];
    SF_ASSERT(images->shape[2] >= 3, "CvT images %s: side below 3", sf_shape_str(images, b, sizeof b));
    const int B = images->shape[0];
    sf_tensor *img = images;  // (B, C_prev, S, S)
    sf_tensor *x = NULL;      // (B, [1+]h·w, C)
    for (int s = 0; s < CVT_STAGES; s++) {
        const cvt_stage *st = &v->st[s];
        img = mdl_conv_fwd(g, &st->embed, img);  // (B, C, h, w)
        const int h = img->shape[2], w = img->shape[3];
        x = mdl_ln_fwd(g, &st->embed_norm, mdl_tokens_from_image_last_use(g, img));  // (B, h·w, C)
        if (st->cls_token) x = sf_concat_tokens(g, st->cls_token, x);     // (B, 1+h·w, C)
        if (c->drop_rate > 0) x = sf_dropout(g, x, c->drop_rate);
        for (int j = 0; j < st->depth; j++) {
            const cvt_block *bk = &st->blocks[j];
            sf_tensor *in = x;
            sf_scope_begin(g);  // evaluation: the block's intermediates are scratch
            sf_tensor *a = cvt_attn_fwd(g, m, &bk->attn, mdl_ln_fwd(g, &bk->norm1, x), h, w, st->cls_token != NULL);
            x = mdl_residual(g, x, a, bk->drop_path);
            x = mdl_residual(g, x, mdl_norm_mlp_fwd(g, &bk->norm2, &bk->mlp, x), bk->drop_path);
            x = sf_scope_end(g, x, in);
        }
        if (s < CVT_STAGES - 1) img = mdl_image_from_tokens_last_use(g, x, h, w);
    }
    /* the last stage has the cls token in front: LN of that token, then the classifier */
    const int C = c->embed_dims[CVT_STAGES - 1];
    sf_tensor *cls = sf_reshape(g, sf_slice_tokens(g, x, 0, 1), 2, (int[]){B, C});  // (B, C)
    return mdl_linear_fwd(g, &v->head, mdl_ln_fwd(g, &v->norm, cls));                // (B, K)
}

/* ---- `sfvit info` rows ----
 * MACs: every Conv2d (kernel taps x output positions x output channels / groups), every Linear
 * (in x out per token, bias not counted) and both attention products (msa: 2·Nq·Nk·C; sima: the
 * order's 2·Nq·Nk·C or (Nq + Nk)·D·C), the conventions of the other families. The official
 * compute_macs also adds each Linear's bias per token; it changes the totals by < 0.1%. */
static void cvt_info_rows(mdl_info_table *t, const sf_model_cfg *c) {
    int side = c->img_size, cin = c->in_chans, i_global = 0;
    for (int s = 0; s < CVT_STAGES; s++) {
        const int C = c->embed_dims[s], H = c->stage_heads[s], D = C / H, cls = s == CVT_STAGES - 1;
        const int ns = mdl_cvt_embed_out(side, s), n = ns * ns, nk = mdl_cvt_kv_side(ns) * mdl_cvt_kv_side(ns);
        const int Nq = n + cls, Nk = nk + cls, hid = (int)(C * c->mlp_ratio);
        char part[32], pre[48], nm[48];
        snprintf(part, sizeof part, "stage%d", s);
        if (cls) {
            snprintf(pre, sizeof pre, "stage%d.cls_token", s);
            mdl_info_row *r = mdl_info_row_add(t, part, pre, pre);
            snprintf(r->in, 40, "(%d, %d)", n, C);
            snprintf(r->out, 40, "(%d, %d)", n + 1, C);
        }
        snprintf(pre, sizeof pre, "stage%d.patch_embed.", s);
        snprintf(nm, sizeof nm, "stage%d.patch_embed", s);
        mdl_info_row *r = mdl_info_row_add(t, part, pre, nm);
        snprintf(r->in, 40, "(%d, %d, %d)", cin, side, side);
        snprintf(r->out, 40, "(%d, %d)", n, C);
        snprintf(r->note, sizeof r->note, "conv %dx%d s%d p%d + LN", mdl_cvt_embed_k[s], mdl_cvt_embed_k[s],
                 mdl_cvt_embed_stride[s], mdl_cvt_embed_pad[s]);
        r->macs = (double)n * C * cin * mdl_cvt_embed_k[s] * mdl_cvt_embed_k[s];
        for (int j = 0; j < c->depths[s]; j++, i_global++) {
            snprintf(pre, sizeof pre, "stage%d.blocks.%d.", s, j);
            snprintf(nm, sizeof nm, "stage%d.blocks.%d", s, j);
            r = mdl_info_row_add(t, part, pre, nm);
            snprintf(r->in, 40, "(%d, %d)", Nq, C);
            snprintf(r->out, 40, "(%d, %d)", Nq, C);
            r->macs = 9.0 * C * (n + 2.0 * nk)            // depthwise q (h·w), k and v (hk·wk)
                      + (double)C * C * (2.0 * Nq + 2.0 * Nk)  // proj_q, proj (Nq); proj_k, proj_v (Nk)
                      + 2.0 * Nq * C * hid;                    // MLP
            const sf_attn_kind k = mdl_block_attn(c, i_global);
            if (k == SF_ATTN_MSA) {
                r->macs += 2.0 * Nq * Nk * C;
                r->softmax_exp = (double)H * Nq * Nk;
                snprintf(r->note, sizeof r->note, "msa Nq=%d Nk=%d", Nq, Nk);
            } else {
                const sf_sima_order o = mdl_cvt_sima_order(c->sima_order, Nq, Nk, D);
                r->macs += o == SF_SIMA_QK_FIRST ? 2.0 * Nq * Nk * C : (double)(Nq + Nk) * D * C;
                snprintf(r->note, sizeof r->note, "sima %s %s Nq=%d Nk=%d", sf_attn_norm_names[c->attn_norm],
                         o == SF_SIMA_QK_FIRST ? "qk_first" : "kv_first", Nq, Nk);
                t->sima_used = o;
                t->sima_N = Nq;
                t->sima_Nk = Nk;
                t->sima_D = D;
            }
            if (c->act == SF_ACT_GELU) r->gelu_erf = (double)Nq * hid;
            if (c->act == SF_ACT_QUICK_GELU) r->gelu_sigmoid = (double)Nq * hid;
        }
        side = ns;
        cin = C;
    }
    mdl_info_norm_head(t, c, 1, c->embed_dims[CVT_STAGES - 1]);  // the class token only
}

/* The family's entry points: the registry (registry.c) and `sfvit info` (info.c) use only this. */
const mdl_family_def mdl_family_cvt = {
    .title = "CvT", .sima_record = 1,
    .check = cvt_check, .build = cvt_build, .forward = cvt_forward, .free = cvt_free, .info_rows = cvt_info_rows,
};
