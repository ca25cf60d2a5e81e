/* info.c — `sfvit info`: the table of blocks with per-image input/output shapes, parameters,
 * MACs (docs/models.md conventions: Linear/Conv/matmul multiply-accumulates only), exp() and GELU
 * counts, per-part sums and totals, and the SimA order each SimA block resolves to. CvT's rows
 * come from its family table (models/cvt.c).
 *
 * Parameters are counted by registering the model on a throwaway parameter store (names and
 * shapes exactly as the real build, no allocation); MACs and counters come from the reference
 * formulas evaluated on the config. SOFT's Newton–Raphson MACs (T·2M³·H per layer) are kept
 * apart from the total, as the reference table reports them.
 *
 * Deliberately not here: measured timings (sfvit bench), backward costs.
 *
 * Dimension legend: N tokens, C channels, H heads, D head dim, M landmarks, K classes.
 */
#include "models_internal.h"

#include <stdlib.h>
#include <string.h>

static info_row *row_add(info_table *t, const char *part, const char *prefix, const char *name) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->rows = sf_realloc(t->rows, (size_t)t->cap * sizeof(info_row));
    }
    info_row *r = &t->rows[t->n++];
    memset(r, 0, sizeof(*r));
    snprintf(r->part, sizeof r->part, "%s", part);
    snprintf(r->prefix, sizeof r->prefix, "%s", prefix);
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

info_row *mdl_info_row_add(info_table *t, const char *part, const char *prefix, const char *name) {
    return row_add(t, part, prefix, name);
}

static void shape3(char *buf, int a, int b, int c) { snprintf(buf, 40, "(%d, %d, %d)", a, b, c); }
static void shape2(char *buf, int a, int b) { snprintf(buf, 40, "(%d, %d)", a, b); }

static sf_sima_order resolve(sf_sima_order o, int N, int D) {
    if (o != SF_SIMA_AUTO) return o;
    return N < D ? SF_SIMA_QK_FIRST : SF_SIMA_KV_FIRST;
}

static const char *order_name(sf_sima_order o) {
    return o == SF_SIMA_QK_FIRST ? "qk_first" : o == SF_SIMA_KV_FIRST ? "kv_first" : "auto";
}

/* Token mixing of a ViT/XCiT block on N tokens: MACs of the products (not the Linears). */
static void mixing(info_table *t, info_row *r, const sf_model_cfg *c, sf_attn_kind k, int N) {
    const int C = c->embed_dim, H = c->num_heads, D = C / H;
    if (k == SF_ATTN_MSA) {
        r->macs += 2.0 * N * N * C;
        r->softmax_exp += (double)H * N * N;
        snprintf(r->note, sizeof r->note, "msa");
    } else if (k == SF_ATTN_XCA) {
        r->macs += 2.0 * N * C * D;
        r->softmax_exp += (double)H * D * D;
        snprintf(r->note, sizeof r->note, "xca");
    } else {
        sf_sima_order o = resolve(c->sima_order, N, D);
        r->macs += o == SF_SIMA_QK_FIRST ? 2.0 * N * N * C : 2.0 * N * C * D;
        snprintf(r->note, sizeof r->note, "sima %s %s", mdl_norm_name(c->attn_norm), order_name(o));
        t->sima_used = o;
        t->sima_N = N;
        t->sima_D = D;
    }
}

static void mlp_cost(info_row *r, const sf_model_cfg *c, int N, int C) {
    const int hid = (int)(C * c->mlp_ratio);
    r->macs += 2.0 * N * C * hid;
    if (c->act == SF_ACT_GELU) r->gelu_erf += (double)N * hid;
}

static void vit_rows(info_table *t, const sf_model_cfg *c) {
    const int C = c->embed_dim, G = c->img_size / c->patch_size, Np = G * G, N = Np + 1;
    info_row *r = row_add(t, "patch_embed", "patch_embed.", "patch_embed");
    shape3(r->in, c->in_chans, c->img_size, c->img_size);
    shape2(r->out, Np, C);
    r->macs = (double)Np * C * c->in_chans * c->patch_size * c->patch_size;
    r = row_add(t, "cls_token", "cls_token", "cls_token");
    shape2(r->in, Np, C);
    shape2(r->out, N, C);
    r = row_add(t, "pos_embed", "pos_embed", "pos_embed");
    shape2(r->in, N, C);
    shape2(r->out, N, C);
    for (int i = 0; i < c->depth; i++) {
        char p[48], nm[48];
        snprintf(p, sizeof p, "blocks.%d.", i);
        snprintf(nm, sizeof nm, "blocks.%d", i);
        r = row_add(t, "blocks", p, nm);
        shape2(r->in, N, C);
        shape2(r->out, N, C);
        r->macs = 4.0 * N * C * C;  // qkv + proj
        mixing(t, r, c, mdl_block_attn(c, i), N);
        mlp_cost(r, c, N, C);
    }
    r = row_add(t, "norm", "norm.", "norm");
    shape2(r->in, N, C);
    shape2(r->out, N, C);
    r = row_add(t, "head", "head.", "head");
    shape2(r->in, 1, C);
    snprintf(r->out, 40, "(%d)", c->num_classes);
    r->macs = (double)C * c->num_classes;
}

static void xcit_rows(info_table *t, const sf_model_cfg *c) {
    const int C = c->embed_dim, H = c->num_heads, P = c->patch_size, G = c->img_size / P, N = G * G;
    const int units = P == 16 ? 4 : 3;
    info_row *r = row_add(t, "patch_embed", "patch_embed.", "patch_embed");
    shape3(r->in, c->in_chans, c->img_size, c->img_size);
    shape2(r->out, N, C);
    int cin = c->in_chans, side = c->img_size;
    for (int u = 0; u < units; u++) {
        int cout = C >> (units - 1 - u);
        side = (side - 1) / 2 + 1;  // conv3x3 s2 p1
        r->macs += (double)side * side * cout * cin * 9;
        if (u < units - 1) r->gelu_erf += (double)side * side * cout;
        cin = cout;
    }
    r = row_add(t, "pos_embeder", "pos_embeder.", "pos_embeder");
    shape2(r->in, N, 64);
    shape2(r->out, N, C);
    r->macs = (double)N * 64 * C;
    for (int i = 0; i < c->depth; i++) {
        char p[48], nm[48];
        snprintf(p, sizeof p, "blocks.%d.", i);
        snprintf(nm, sizeof nm, "blocks.%d", i);
        r = row_add(t, "blocks", p, nm);
        shape2(r->in, N, C);
        shape2(r->out, N, C);
        r->macs = 4.0 * N * C * C;
        mixing(t, r, c, mdl_block_attn(c, i), N);
        if (c->lpi) {
            r->macs += 18.0 * N * C;  // two depthwise 3×3
            r->gelu_erf += (double)N * C;
        }
        mlp_cost(r, c, N, C);
    }
    r = row_add(t, "cls_token", "cls_token", "cls_token");
    shape2(r->in, N, C);
    shape2(r->out, N + 1, C);
    for (int j = 0; j < c->cls_attn_layers; j++) {
        char p[48], nm[48];
        snprintf(p, sizeof p, "cls_attn_blocks.%d.", j);
        snprintf(nm, sizeof nm, "cls_attn_blocks.%d", j);
        r = row_add(t, "cls_attn_blocks", p, nm);
        shape2(r->in, N + 1, C);
        shape2(r->out, N + 1, C);
        /* qkv on all tokens, one query row against N+1 keys, proj and MLP on the cls row */
        r->macs = 3.0 * (N + 1) * C * C + 2.0 * (N + 1) * C + (double)C * C;
        if (c->attn == SF_ATTN_SIMA) {
            snprintf(r->note, sizeof r->note, "sima %s qk_first", mdl_norm_name(c->attn_norm));
        } else {
            r->softmax_exp = (double)H * (N + 1);
            snprintf(r->note, sizeof r->note, "softmax");
        }
        mlp_cost(r, c, 1, C);
    }
    r = row_add(t, "norm", "norm.", "norm");
    shape2(r->in, N + 1, C);
    shape2(r->out, N + 1, C);
    r = row_add(t, "head", "head.", "head");
    shape2(r->in, 1, C);
    snprintf(r->out, 40, "(%d)", c->num_classes);
    r->macs = (double)C * c->num_classes;
}

static void soft_rows(info_table *t, const sf_model_cfg *c) {
    static const int ratio[3] = {8, 4, 2}, vk[3] = {9, 5, 3};
    info_row *r = row_add(t, "patch_embed1", "patch_embed1.", "patch_embed1");
    shape3(r->in, c->in_chans, c->img_size, c->img_size);
    int side = c->img_size, cin = c->in_chans;
    const int stem_out[3] = {32, 32, c->embed_dims[0]}, stem_stride[3] = {2, 1, 2};
    for (int u = 0; u < 3; u++) {
        side = (side - 1) / stem_stride[u] + 1;
        r->macs += (double)side * side * stem_out[u] * cin * 9;
        cin = stem_out[u];
    }
    shape2(r->out, side * side, c->embed_dims[0]);
    for (int st = 0; st < 4; st++) {
        const int C = c->embed_dims[st], H = c->stage_heads[st], D = C / H;
        char p[48], nm[48];
        if (st > 0) {
            snprintf(p, sizeof p, "patch_embed%d.", st + 1);
            snprintf(nm, sizeof nm, "patch_embed%d", st + 1);
            r = row_add(t, "downsample", p, nm);
            shape2(r->in, side * side, c->embed_dims[st - 1]);
            side = (side - 1) / 2 + 1;
            shape2(r->out, side * side, C);
            r->macs = (double)side * side * C * c->embed_dims[st - 1] * 9;
        }
        const int n = side * side;
        if (st == 3) {
            r = row_add(t, "cls_token", "cls_token", "cls_token");
            shape2(r->in, n, C);
            shape2(r->out, n + 1, C);
        }
        snprintf(p, sizeof p, "pos_embed%d", st + 1);
        r = row_add(t, "pos_embed", p, p);
        shape2(r->in, n + (st == 3), C);
        shape2(r->out, n + (st == 3), C);
        for (int i = 0; i < c->depths[st]; i++) {
            snprintf(p, sizeof p, "block%d.%d.", st + 1, i);
            snprintf(nm, sizeof nm, "block%d.%d", st + 1, i);
            r = row_add(t, st == 3 ? "stage4 (msa)" : "soft layers", p, nm);
            if (st == 3) {
                const int N = n + 1;
                shape2(r->in, N, C);
                shape2(r->out, N, C);
                r->macs = 4.0 * N * C * C + 2.0 * N * N * C;
                r->softmax_exp = (double)H * N * N;
                snprintf(r->note, sizeof r->note, "msa");
                mlp_cost(r, c, N, C);
                continue;
            }
            const int rr = ratio[st], hs = (side - rr) / rr + 1, M = hs * hs, k = vk[st];
            shape2(r->in, n, C);
            shape2(r->out, n, C);
            r->macs = 11.0 * n * C * C                 // W_q, W_v, ff, ff1, ff2
                      + (double)M * rr * rr * D * C    // landmark conv (= nDC when r | side)
                      + ((double)n * M + (double)M * M) * C  // K1, K2 distances
                      + (double)n * M * M * H          // K1·Z
                      + 2.0 * n * M * C                // K1ᵀV, R·T
                      + (double)n * C * k * k;         // V conv
            r->nr_macs = (double)c->nr_iters * 2.0 * M * M * M * H;
            r->kernel_exp = (double)H * ((double)n * M + (double)M * M);
            r->gelu_erf = (double)M * D * H;           // landmark GELU
            r->gelu_tanh = (double)n * 4 * C;          // MLP (tanh GELU)
            snprintf(r->note, sizeof r->note, "%s M=%d NR%d", c->attn_norm == SF_NORM_SYMMETRIC ? "soft++" : "soft",
                     M, c->nr_iters);
        }
    }
    const int C4 = c->embed_dims[3];
    r = row_add(t, "norm", "norm.", "norm");
    shape2(r->in, side * side + 1, C4);
    shape2(r->out, side * side + 1, C4);
    r = row_add(t, "head", "head.", "head");
    shape2(r->in, 1, C4);
    snprintf(r->out, 40, "(%d)", c->num_classes);
    r->macs = (double)C4 * c->num_classes;
}

/* Registers the model on a throwaway store and credits every trainable parameter to the
 * first row whose prefix it starts with. Returns the trainable total. */
static size_t count_params(const sf_model_cfg *c, info_table *t) {
    sf_params ps;
    sf_params_init(&ps);
    sf_model *m = sf_model_build(c, &ps);
    size_t total = 0;
    if (m) {
        for (int i = 0; i < ps.count; i++) {
            const sf_param *p = &ps.list[i];
            if (!(p->flags & SF_PARAM_TRAINABLE)) continue;
            total += p->t->numel;
            if (!t) continue;
            int hit = 0;
            for (int j = 0; j < t->n && !hit; j++)
                if (!strncmp(p->t->name, t->rows[j].prefix, strlen(t->rows[j].prefix))) {
                    t->rows[j].params += p->t->numel;
                    hit = 1;
                }
            SF_ASSERT(hit, "info: parameter %s belongs to no row", p->t->name);
        }
        sf_model_free(m);
    }
    sf_params_free(&ps);
    return total;
}

static int build_table(const sf_model_cfg *c, info_table *t) {
    memset(t, 0, sizeof(*t));
    if (mdl_check_cfg(c)) return -1;
    switch (c->family) {
    case SF_FAMILY_VIT: vit_rows(t, c); break;
    case SF_FAMILY_XCIT: xcit_rows(t, c); break;
    case SF_FAMILY_SOFT: soft_rows(t, c); break;
    case SF_FAMILY_CVT: mdl_cvt_family.info_rows(t, c); break;
    }
    return 0;
}

size_t sf_model_param_count(const sf_model_cfg *cfg) {
    if (mdl_check_cfg(cfg)) return 0;
    return count_params(cfg, NULL);
}

double sf_model_macs(const sf_model_cfg *cfg) {
    info_table t;
    if (build_table(cfg, &t)) return 0;
    double s = 0;
    for (int i = 0; i < t.n; i++) s += t.rows[i].macs;
    free(t.rows);
    return s;
}

/* exp() per image: softmax (MSA, XCA, class attention) plus the SOFT Gaussian kernel. */
double sf_model_exp_count(const sf_model_cfg *cfg) {
    info_table t;
    if (build_table(cfg, &t)) return 0;
    double s = 0;
    for (int i = 0; i < t.n; i++) s += t.rows[i].softmax_exp + t.rows[i].kernel_exp;
    free(t.rows);
    return s;
}

/* 1234567 -> "1,234,567" */
static const char *commas(char *buf, double v) {
    char raw[32];
    snprintf(raw, sizeof raw, "%.0f", v);
    int len = (int)strlen(raw), o = 0;
    for (int i = 0; i < len; i++) {
        buf[o++] = raw[i];
        if (raw[i] != '-' && (len - 1 - i) % 3 == 0 && i != len - 1) buf[o++] = ',';
    }
    buf[o] = 0;
    return buf;
}

void sf_model_info(const sf_model_cfg *c, FILE *f) {
    info_table t;
    if (build_table(c, &t)) return;
    size_t total = count_params(c, &t);
    char b1[32], b2[32], b3[32];
    fprintf(f, "model %s: family %s, attn %s", c->name[0] ? c->name : "(custom)",
            mdl_family_name(c->family), mdl_attn_name(c->attn));
    if (c->attn == SF_ATTN_SIMA || c->attn == SF_ATTN_SOFT) fprintf(f, " (%s)", mdl_norm_name(c->attn_norm));
    fprintf(f, ", img %d, in_chans %d, classes %d\n", c->img_size, c->in_chans, c->num_classes);
    fprintf(f, "%-20s %-16s %-16s %12s %11s  %s\n", "layer", "input", "output", "params", "MMACs", "note");
    double macs = 0, nr = 0, sexp = 0, kexp = 0, erf = 0, tanh_ = 0, sigm = 0;
    for (int i = 0; i < t.n; i++) {
        const info_row *r = &t.rows[i];
        fprintf(f, "%-20s %-16s %-16s %12s %11.2f  %s\n", r->name, r->in, r->out,
                commas(b1, (double)r->params), r->macs / 1e6, r->note);
        macs += r->macs;
        nr += r->nr_macs;
        sexp += r->softmax_exp;
        kexp += r->kernel_exp;
        erf += r->gelu_erf;
        tanh_ += r->gelu_tanh;
        sigm += r->gelu_sigmoid;
    }
    fprintf(f, "per part:\n");
    for (int i = 0; i < t.n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(t.rows[j].part, t.rows[i].part);
        if (seen) continue;
        double p = 0, mm = 0;
        for (int j = i; j < t.n; j++)
            if (!strcmp(t.rows[j].part, t.rows[i].part)) {
                p += (double)t.rows[j].params;
                mm += t.rows[j].macs;
            }
        fprintf(f, "  %-20s params %12s   MACs %14s\n", t.rows[i].part, commas(b1, p), commas(b2, mm));
    }
    fprintf(f, "total params (trainable): %s\n", commas(b1, (double)total));
    fprintf(f, "total MACs per image:     %s (%.3f G)", commas(b2, macs), macs / 1e9);
    if (nr > 0) fprintf(f, " + Newton-Raphson %s (%.3f G)", commas(b3, nr), nr / 1e9);
    fputc('\n', f);
    fprintf(f, "exp() per image:          softmax %s, SOFT kernel %s\n", commas(b1, sexp), commas(b2, kexp));
    fprintf(f, "GELU per image:           erf %s, tanh %s", commas(b1, erf), commas(b2, tanh_));
    if (sigm > 0) fprintf(f, ", QuickGELU sigmoid %s (one exp each)", commas(b3, sigm));
    fputc('\n', f);
    if (t.sima_used != SF_SIMA_AUTO && t.sima_Nk)
        fprintf(f, "SimA order:               %s (last block: Nq=%d, Nk=%d, D=%d; sima_order=%s)\n",
                order_name(t.sima_used), t.sima_N, t.sima_Nk, t.sima_D, order_name(c->sima_order));
    else if (t.sima_used != SF_SIMA_AUTO)
        fprintf(f, "SimA order:               %s (N=%d, D=%d; sima_order=%s)\n", order_name(t.sima_used),
                t.sima_N, t.sima_D, order_name(c->sima_order));
    else
        fprintf(f, "SimA order:               none (no SimA block)\n");
    free(t.rows);
}
