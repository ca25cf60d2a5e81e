/* tensorboard.c — TensorBoard event files (train/tensorboard.h).
 *
 * File: TFRecord records, each  uint64 length | uint32 masked CRC-32C of the 8 length
 * bytes | the Event message | uint32 masked CRC-32C of the message  (little-endian).
 * Event (tensorflow/core/util/event.proto): wall_time = 1 (double), step = 2 (int64),
 * file_version = 3 (string, "brain.Event:2"), summary = 5. Summary: value = 1 (repeated);
 * Summary.Value: tag = 1, simple_value = 2 (float).
 *
 * Deliberately not here: histograms and images (scalars are what log.jsonl has), reading.
 */
#include "tensorboard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "sfvit/core.h"
#include "sfvit/protobuf.h"

enum { EVENT_WALL_TIME = 1, EVENT_STEP = 2, EVENT_FILE_VERSION = 3, EVENT_SUMMARY = 5 };
enum { SUMMARY_VALUE = 1, VALUE_TAG = 1, VALUE_SIMPLE_VALUE = 2 };

struct sf_tb_writer {
    FILE *f;
    char path[SF_PATH_MAX + 128];
    sf_pb event, summary, value, record;
};

uint32_t sf_crc32c(const void *data, size_t n) {
    static uint32_t table[256];
    static int ready;
    if (!ready) {  // reflected Castagnoli polynomial 0x1EDC6F41
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const uint8_t *p = data;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

uint32_t sf_crc32c_masked(const void *data, size_t n) {
    const uint32_t crc = sf_crc32c(data, n);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static double wall_time(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

/* One TFRecord around msg, written and flushed. */
static int write_record(sf_tb_writer *w, const sf_pb *msg) {
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)msg->len >> (8 * i));
    uint32_t c1 = sf_crc32c_masked(len, 8), c2 = sf_crc32c_masked(msg->data, msg->len);
    uint8_t crc1[4], crc2[4];
    for (int i = 0; i < 4; i++) {
        crc1[i] = (uint8_t)(c1 >> (8 * i));
        crc2[i] = (uint8_t)(c2 >> (8 * i));
    }
    sf_pb *r = &w->record;  // the whole record in one fwrite
    sf_pb_reset(r);
    sf_pb_append(r, len, 8);
    sf_pb_append(r, crc1, 4);
    sf_pb_append(r, msg->data, msg->len);
    sf_pb_append(r, crc2, 4);
    if (fwrite(r->data, 1, r->len, w->f) != r->len || fflush(w->f) != 0)
        return sf_error("%s: write failed: %s", w->path, strerror(errno));
    return 0;
}

sf_tb_writer *sf_tb_open(const char *dir) {
    sf_tb_writer *w = sf_calloc(1, sizeof(*w));
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010ld.%s.%ld", dir, (long)time(NULL), host,
             (long)getpid());
    if (!(w->f = fopen(w->path, "wb"))) {
        sf_error("%s: cannot create the TensorBoard event file: %s", w->path, strerror(errno));
        free(w);
        return NULL;
    }
    sf_pb_init(&w->event);
    sf_pb_init(&w->summary);
    sf_pb_init(&w->value);
    sf_pb_init(&w->record);
    sf_pb_double(&w->event, EVENT_WALL_TIME, wall_time());
    sf_pb_string(&w->event, EVENT_FILE_VERSION, "brain.Event:2");
    if (write_record(w, &w->event) != 0) {
        sf_tb_close(w);
        return NULL;
    }
    return w;
}

int sf_tb_scalar(sf_tb_writer *w, const char *tag, long step, float value) {
    sf_pb_reset(&w->value);
    sf_pb_string(&w->value, VALUE_TAG, tag);
    sf_pb_float(&w->value, VALUE_SIMPLE_VALUE, value);
    sf_pb_reset(&w->summary);
    sf_pb_message(&w->summary, SUMMARY_VALUE, &w->value);
    sf_pb_reset(&w->event);
    sf_pb_double(&w->event, EVENT_WALL_TIME, wall_time());
    sf_pb_varint(&w->event, EVENT_STEP, (uint64_t)(int64_t)step);
    sf_pb_message(&w->event, EVENT_SUMMARY, &w->summary);
    return write_record(w, &w->event);
}

const char *sf_tb_path(const sf_tb_writer *w) { return w->path; }

void sf_tb_close(sf_tb_writer *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    sf_pb_free(&w->event);
    sf_pb_free(&w->summary);
    sf_pb_free(&w->value);
    sf_pb_free(&w->record);
    free(w);
}
