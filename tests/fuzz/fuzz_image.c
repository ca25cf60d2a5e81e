/* fuzz_image.c — PNG and JPEG decoding as the data loader uses it: sf_image_decode to 1 and 3
 * channels (and 0, as `sfvit data check` does), then the eval transform on every image that
 * decodes. Invariants: a decode either fails with a reason or returns a w x h x c image with
 * the channel count asked for; the transform output is finite.
 * Deliberately not here: file reading (sf_read_file is a plain fread loop).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "sfvit/data.h"
#include "fuzz_util.h"

#define OUT_SIZE 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    static const int want[3] = {1, 3, 0};
    static float out[3 * OUT_SIZE * OUT_SIZE]; // (C, S, S)
    for (int k = 0; k < 3; k++) {
        sf_image img;
        char err[256];
        err[0] = 0;
        int rc = sf_image_decode(data, size, want[k], &img, err, sizeof err);
        if (rc != 0) {
            FUZZ_CHECK(err[0] != 0, "decode failed without a reason");
            FUZZ_CHECK(img.px == NULL, "failed decode left pixels");
            /* The outcome does not depend on the channel count asked for. */
            if (k == 0) return 0;
            FUZZ_CHECK(0, "want_c=%d failed (%s) after want_c=1 succeeded", want[k], err);
        }
        FUZZ_CHECK(img.w > 0 && img.h > 0 && img.px, "decoded %dx%d", img.w, img.h);
        FUZZ_CHECK(want[k] == 0 ? (img.c == 1 || img.c == 3) : img.c == want[k], "c=%d want %d",
                   img.c, want[k]);
        /* Touch every pixel (ASan checks the buffer is w*h*c). */
        unsigned sum = 0;
        for (size_t i = 0; i < (size_t)img.w * img.h * img.c; i++) sum += img.px[i];
        (void)sum;
        if (want[k] != 0) {
            int interp = size ? data[size - 1] & 1 : 0;
            sf_transform_eval(&img, OUT_SIZE, 0.875f, interp, mean, std, out);
            for (int i = 0; i < img.c * OUT_SIZE * OUT_SIZE; i++)
                FUZZ_CHECK(isfinite(out[i]), "eval transform output %d is %g", i, out[i]);
        }
        sf_image_free(&img);
    }
    return 0;
}
