/* protobuf.c — the protocol-buffers wire format (include/sfvit/protobuf.h): every field is
 * a varint key (field << 3 | wire type) followed by a varint, 4 or 8 little-endian bytes,
 * or a varint length and that many bytes. */
#include "sfvit/protobuf.h"

#include <stdlib.h>
#include <string.h>

#include "sfvit/core.h"

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

void sf_pb_init(sf_pb *pb) { memset(pb, 0, sizeof(*pb)); }

void sf_pb_free(sf_pb *pb) {
    free(pb->data);
    sf_pb_init(pb);
}

void sf_pb_reset(sf_pb *pb) { pb->len = 0; }

void sf_pb_append(sf_pb *pb, const void *data, size_t n) {
    if (pb->len + n > pb->cap) {
        size_t cap = pb->cap ? pb->cap : 256;
        while (cap < pb->len + n) cap *= 2;
        pb->data = sf_realloc(pb->data, cap);
        pb->cap = cap;
    }
    if (n) memcpy(pb->data + pb->len, data, n);
    pb->len += n;
}

static void put_varint(sf_pb *pb, uint64_t v) {
    uint8_t b[10];
    int n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) b[n] |= 0x80;
        n++;
    } while (v);
    sf_pb_append(pb, b, (size_t)n);
}

static void put_key(sf_pb *pb, int field, int wire) { put_varint(pb, ((uint64_t)field << 3) | (uint64_t)wire); }

void sf_pb_varint(sf_pb *pb, int field, uint64_t v) {
    put_key(pb, field, WIRE_VARINT);
    put_varint(pb, v);
}

void sf_pb_fixed32(sf_pb *pb, int field, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put_key(pb, field, WIRE_FIXED32);
    sf_pb_append(pb, b, 4);
}

void sf_pb_float(sf_pb *pb, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    sf_pb_fixed32(pb, field, u);
}

void sf_pb_double(sf_pb *pb, int field, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(u >> (8 * i));
    put_key(pb, field, WIRE_FIXED64);
    sf_pb_append(pb, b, 8);
}

void sf_pb_bytes(sf_pb *pb, int field, const void *data, size_t n) {
    put_key(pb, field, WIRE_LEN);
    put_varint(pb, n);
    sf_pb_append(pb, data, n);
}

void sf_pb_string(sf_pb *pb, int field, const char *s) { sf_pb_bytes(pb, field, s, strlen(s)); }

void sf_pb_message(sf_pb *pb, int field, const sf_pb *msg) { sf_pb_bytes(pb, field, msg->data, msg->len); }
