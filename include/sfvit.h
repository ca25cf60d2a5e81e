/* sfvit.h — the C inference API: load a checkpoint written by `sfvit train` (or converted
 * with `sfvit convert --model`), classify images or ready-made tensors, read the class names.
 * This one header is all a program embedding a trained model needs; the types behind it are
 * opaque. Link with the sfvit libraries (meson: the sfvit_dep dependency; examples/).
 *
 * Images go through the checkpoint's own eval transform: shorter side resized to
 * img_size / aug.crop_pct with aug.interpolation, centre crop img_size x img_size, scaled to
 * [0, 1], normalized with aug.mean / aug.std, all read from the config stored in the
 * checkpoint. Errors are reported on stderr ("sfvit: error: ...", naming the file) and the
 * call returns NULL or -1.
 *
 * Threads: the checkpoint's train.threads, else SFVIT_THREADS, else every core (OpenMP and
 * OpenBLAS together). A classifier is not safe to use from two threads at once.
 *
 * Shapes: B images, C channels (1 or 3), S the input side, K classes.
 */
#ifndef SFVIT_H
#define SFVIT_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfvit_classifier sfvit_classifier;

/* Loads the weights of checkpoint_path and builds its model. config_path: a config YAML
 * for a checkpoint that stores none (NULL: the one in the checkpoint). */
sfvit_classifier *sfvit_classifier_load(const char *checkpoint_path, const char *config_path);
void sfvit_classifier_free(sfvit_classifier *c);

/* K, and the input the model takes: C channels of S x S pixels. */
int sfvit_classifier_num_classes(const sfvit_classifier *c);
void sfvit_classifier_input_shape(const sfvit_classifier *c, int *channels, int *size);
/* The name of class k (the training class folder), or NULL when the checkpoint was written
 * before sfvit stored class names (then only class ids are known). */
const char *sfvit_classifier_class_name(const sfvit_classifier *c, int k);

/* Decodes a PNG or JPEG file and applies the eval transform: out (C, S, S). Returns 0, or -1
 * when the file cannot be read or decoded. */
int sfvit_classifier_preprocess(const sfvit_classifier *c, const char *image_path, float *out);

/* images (B, C, S, S), already transformed -> logits (B, K) or probabilities (B, K,
 * softmax of the logits). Returns 0, or -1 on a bad argument. */
int sfvit_classifier_logits(sfvit_classifier *c, const float *images, int batch, float *logits);
int sfvit_classifier_predict(sfvit_classifier *c, const float *images, int batch, float *probs);
/* One image file -> probabilities (K). */
int sfvit_classifier_predict_image(sfvit_classifier *c, const char *image_path, float *probs);

/* The k highest of scores (n of them) in decreasing order (ties: lower id first) into
 * top (k ids); k is clamped to n. Returns the number written. */
int sfvit_topk(const float *scores, int n, int k, int *top);

#ifdef __cplusplus
}
#endif

#endif
