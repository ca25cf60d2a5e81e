/* protobuf.h — a minimal protocol-buffers encoder: the varint / fixed / length-delimited
 * wire format, enough to write ONNX models (models/onnx.c) and TensorBoard event records
 * (train/tensorboard.c) without a protobuf library or generated code.
 *
 * Why not libprotobuf-c: both formats need only a handful of message types, written once
 * and never read back; a 100-line encoder keeps the build free of protoc, generated
 * sources and a .proto copy that would have to track the upstream schema. Field numbers
 * live next to the code that writes each message.
 *
 * Deliberately not here: decoding (the tests decode with Python), packed repeated fields
 * (every repeated scalar is written one field at a time, which every parser accepts).
 */
#ifndef SFVIT_PROTOBUF_H
#define SFVIT_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

/* A growable message buffer. */
typedef struct sf_pb {
    uint8_t *data;
    size_t len, cap;
} sf_pb;

void sf_pb_init(sf_pb *pb);
void sf_pb_free(sf_pb *pb);
void sf_pb_reset(sf_pb *pb);  /* empty, capacity kept */

/* Fields. int64 values are written as their two's complement (10 bytes when negative),
 * as protobuf's int64 type requires. */
void sf_pb_varint(sf_pb *pb, int field, uint64_t v);                 /* wire type 0 */
void sf_pb_fixed32(sf_pb *pb, int field, uint32_t v);                /* wire type 5 */
void sf_pb_float(sf_pb *pb, int field, float v);                     /* wire type 5 */
void sf_pb_double(sf_pb *pb, int field, double v);                   /* wire type 1 */
void sf_pb_bytes(sf_pb *pb, int field, const void *data, size_t n);  /* wire type 2 */
void sf_pb_string(sf_pb *pb, int field, const char *s);
void sf_pb_message(sf_pb *pb, int field, const sf_pb *msg);          /* embedded message */

/* Raw bytes appended as they are (no tag). */
void sf_pb_append(sf_pb *pb, const void *data, size_t n);

#endif
