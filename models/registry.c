/* registry.c — the public model API: build, init, forward, free (each through the family
 * table), the SimA order switch and the SimA token-norm record.
 *
 * Deliberately not here: the tables, presets and the validator (kinds.c), the block table and
 * FLOP counts (info.c), family code (vit.c, xcit.c, soft.c).
 */
#include "models_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- the public model API ---- */

sf_model *sf_model_build(const sf_model_cfg *cfg, sf_params *ps) {
    if (sf_model_check(cfg, NULL)) return NULL;
    sf_model *m = sf_calloc(1, sizeof(*m));
    m->cfg = *cfg;
    if (mdl_families[cfg->family]->build(m, ps)) {
        sf_model_free(m);
        return NULL;
    }
    return m;
}

void sf_model_init(sf_model *m, sf_params *ps, sf_rng *rng) {
    (void)m;
    sf_params_init_values(ps, rng);
}

void sf_model_free(sf_model *m) {
    if (!m) return;
    mdl_families[m->cfg.family]->free(m);
    free(m->viz_q);
    free(m->viz_k);
    free(m);
}

sf_tensor *sf_model_forward(sf_ctx *g, sf_model *m, sf_tensor *images) {
    const sf_model_cfg *c = &m->cfg;
    char b[64];
    SF_ASSERT(images->ndim == 4 && images->shape[1] == c->in_chans && images->shape[2] == images->shape[3],
              "model %s expects images (B, %d, S, S), got %s", c->name, c->in_chans,
              sf_shape_str(images, b, sizeof b));
    m->viz_valid = 0;
    return mdl_families[c->family]->forward(g, m, images);
}

const sf_model_cfg *sf_model_config(const sf_model *m) { return &m->cfg; }

void sf_model_set_sima_order(sf_model *m, sf_sima_order order) { m->cfg.sima_order = order; }

static int model_has_sima(const sf_model_cfg *c) {
    if (!mdl_families[c->family]->sima_record) return 0;
    for (int i = 0; i < mdl_block_count(c); i++)
        if (mdl_block_attn(c, i) == SF_ATTN_SIMA) return 1;
    return 0;
}

int sf_model_sima_token_norms(sf_model *m, float *q_norms, float *k_norms, int q_grid[2], int k_grid[2]) {
    if (!model_has_sima(&m->cfg)) return -1;
    if (q_grid) q_grid[0] = m->viz_h, q_grid[1] = m->viz_w;
    if (k_grid) k_grid[0] = m->viz_kh, k_grid[1] = m->viz_kw;
    if (!q_norms && !k_norms) return 0;  // grid query only
    if (!m->viz_valid) return -1;        // no forward since build
    SF_ASSERT(m->viz_n == m->viz_h * m->viz_w && m->viz_kn == m->viz_kh * m->viz_kw,
              "recorded %d and %d tokens for the grids %dx%d and %dx%d", m->viz_n, m->viz_kn, m->viz_h, m->viz_w,
              m->viz_kh, m->viz_kw);
    if (q_norms) memcpy(q_norms, m->viz_q, (size_t)m->viz_n * sizeof(float));
    if (k_norms) memcpy(k_norms, m->viz_k, (size_t)m->viz_kn * sizeof(float));
    return 0;
}
