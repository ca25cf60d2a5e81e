/* info.c — `sfvit info`: the table of blocks with per-image input/output shapes, parameters,
 * MACs (docs/models.md conventions: Linear/Conv/matmul multiply-accumulates only), exp() and GELU
 * counts, per-part sums and totals, and the SimA order each SimA block resolves to. CvT's rows
 * come from its family table (models/cvt.c).
 *
 * Parameters are counted by registering the model on a throwaway parameter store (names and
 * shapes exactly as the real build, no allocation); MACs and counters come from the reference
 * formulas evaluated on the config. SOFT's Newton–Raphson MACs (T·2M³·H per layer) are kept
 * apart from the total, as the table of docs/models.md reports them.
 *
 * Deliberately not here: measured timings (sfvit bench), backward costs.
 *
 * Dimension legend: N tokens, C channels, H heads, D head dim, M landmarks, K classes.
 */
#include "models_internal.h"

#include <stdlib.h>
#include <string.h>



mdl_info_row *mdl_info_row_add(mdl_info_table *t, const char *part, const char *prefix, const char *name) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->rows = sf_realloc(t->rows, (size_t)t->cap * sizeof(mdl_info_row));
    }
    mdl_info_row *r = &t->rows[t->n++];
    memset(r, 0, sizeof(*r));
    snprintf(r->part, sizeof r->part, "%s", part);
    snprintf(r->prefix, sizeof r->prefix, "%s", prefix);
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

void mdl_shape3(char *buf, int a, int b, int c) { snprintf(buf, 40, "(%d, %d, %d)", a, b, c); }
void mdl_shape2(char *buf, int a, int b) { snprintf(buf, 40, "(%d, %d)", a, b); }




/* Token mixing of a ViT/XCiT block on N tokens: its kind's MACs of the products (not the
 * Linears), exp() count and note; a SimA block records the order it resolves to. */
void mdl_info_mixing(mdl_info_table *t, mdl_info_row *r, const sf_model_cfg *c, sf_attn_kind k, int N) {
    mdl_mix_cost cost = {0};
    mdl_attn_defs[k]->cost(c, N, &cost);
    r->macs += cost.macs;
    r->softmax_exp += cost.softmax_exp;
    r->kernel_exp += cost.kernel_exp;
    r->nr_macs += cost.nr_macs;
    r->gelu_erf += cost.gelu_erf;
    snprintf(r->note, sizeof r->note, "%s", cost.note);
    if (k == SF_ATTN_SIMA) {
        t->sima_used = cost.sima_order;
        t->sima_N = N;
        t->sima_D = c->embed_dim / c->num_heads;
    }
}

void mdl_info_mlp(mdl_info_row *r, const sf_model_cfg *c, int N, int C) {
    const int hid = (int)(C * c->mlp_ratio);
    r->macs += 2.0 * N * C * hid;
    if (c->act == SF_ACT_GELU) r->gelu_erf += (double)N * hid;
}

void mdl_info_norm_head(mdl_info_table *t, const sf_model_cfg *c, int norm_tokens, int C) {
    mdl_info_row *r = mdl_info_row_add(t, "norm", "norm.", "norm");
    mdl_shape2(r->in, norm_tokens, C);
    mdl_shape2(r->out, norm_tokens, C);
    r = mdl_info_row_add(t, "head", "head.", "head");
    mdl_shape2(r->in, 1, C);
    snprintf(r->out, sizeof r->out, "(%d)", c->num_classes);
    r->macs = (double)C * c->num_classes;
}

/* Registers the model on a throwaway store and credits every trainable parameter to the
 * first row whose prefix it starts with. Returns the trainable total. */
static size_t count_params(const sf_model_cfg *c, mdl_info_table *t) {
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

static int build_table(const sf_model_cfg *c, mdl_info_table *t) {
    memset(t, 0, sizeof(*t));
    if (sf_model_check(c, NULL)) return -1;
    mdl_families[c->family]->info_rows(t, c);
    return 0;
}

size_t sf_model_param_count(const sf_model_cfg *cfg) {
    if (sf_model_check(cfg, NULL)) return 0;
    return count_params(cfg, NULL);
}

double sf_model_macs(const sf_model_cfg *cfg) {
    mdl_info_table t;
    if (build_table(cfg, &t)) return 0;
    double s = 0;
    for (int i = 0; i < t.n; i++) s += t.rows[i].macs;
    free(t.rows);
    return s;
}

void sf_model_largest_product(const sf_model_cfg *cfg, int batch, int *M, int *N, int *K) {
    const int staged = cfg->family == SF_FAMILY_SOFT || cfg->family == SF_FAMILY_CVT, S = cfg->img_size;
    const int width = staged ? cfg->embed_dims[0] : cfg->embed_dim;
    const int tokens = staged ? (S / 4) * (S / 4) : (S / cfg->patch_size) * (S / cfg->patch_size);
    *M = batch * tokens;
    *N = (int)(width * (cfg->mlp_ratio > 0 ? cfg->mlp_ratio : 4));
    *K = width;
}

/* exp() per image: softmax (MSA, XCA, class attention) plus the SOFT Gaussian kernel. */
double sf_model_exp_count(const sf_model_cfg *cfg) {
    mdl_info_table t;
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
    mdl_info_table t;
    if (build_table(c, &t)) return;
    size_t total = count_params(c, &t);
    char b1[32], b2[32], b3[32];
    fprintf(f, "model %s: family %s, attn %s", c->name[0] ? c->name : "(custom)",
            sf_family_names[c->family], sf_attn_names[c->attn]);
    if (mdl_attn_defs[c->attn]->norms) fprintf(f, " (%s)", sf_attn_norm_names[c->attn_norm]);
    fprintf(f, ", img %d, in_chans %d, classes %d\n", c->img_size, c->in_chans, c->num_classes);
    fprintf(f, "%-20s %-16s %-16s %12s %11s  %s\n", "layer", "input", "output", "params", "MMACs", "note");
    double macs = 0, nr = 0, sexp = 0, kexp = 0, erf = 0, tanh_ = 0, sigm = 0;
    for (int i = 0; i < t.n; i++) {
        const mdl_info_row *r = &t.rows[i];
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
                sf_sima_order_names[t.sima_used], t.sima_N, t.sima_Nk, t.sima_D, sf_sima_order_names[c->sima_order]);
    else if (t.sima_used != SF_SIMA_AUTO)
        fprintf(f, "SimA order:               %s (N=%d, D=%d; sima_order=%s)\n", sf_sima_order_names[t.sima_used],
                t.sima_N, t.sima_D, sf_sima_order_names[c->sima_order]);
    else
        fprintf(f, "SimA order:               none (no SimA block)\n");
    free(t.rows);
}
