/* classify.c — the C inference API (include/sfvit.h) in one small program: load a trained
 * checkpoint, classify one image, print the three most likely classes.
 *
 *   build/examples/classify runs/fmnist/best.safetensors shirt.png
 */
#include <stdio.h>
#include <stdlib.h>

#include "sfvit.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CHECKPOINT.safetensors IMAGE.png|jpg\n", argv[0]);
        return 2;
    }
    sfvit_classifier *c = sfvit_classifier_load(argv[1], NULL);
    if (!c) return 1;
    const int K = sfvit_classifier_num_classes(c);
    float *probs = malloc((size_t)K * sizeof(float));
    int top[3], status = 1;
    if (probs && sfvit_classifier_predict_image(c, argv[2], probs) == 0) {
        const int k = sfvit_topk(probs, K, 3, top);
        for (int j = 0; j < k; j++) {
            const char *name = sfvit_classifier_class_name(c, top[j]);
            printf("%d. %s (class %d): %.4f\n", j + 1, name ? name : "?", top[j], probs[top[j]]);
        }
        status = 0;
    }
    free(probs);
    sfvit_classifier_free(c);
    return status;
}
