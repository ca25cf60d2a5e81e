/* tensorboard.h — TensorBoard event files written directly (train.tensorboard: true): a
 * TFRecord file of Event messages, each a Summary of scalar values, readable by
 * TensorBoard without TensorFlow in the writing process (train/tensorboard.c).
 */
#ifndef SFVIT_TENSORBOARD_H
#define SFVIT_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

typedef struct sf_tb_writer sf_tb_writer;

/* Creates dir/events.out.tfevents.<unix seconds>.<host>.<pid> and writes its file_version
 * record. A resumed run opens a new file in the same folder; its steps continue the old
 * ones, which TensorBoard reads as one run. Returns NULL with a message naming the file. */
sf_tb_writer *sf_tb_open(const char *dir);
/* One scalar at a global step; the record is flushed whole, so a killed run leaves only
 * complete records. Returns -1 with a message on a write error. */
int sf_tb_scalar(sf_tb_writer *w, const char *tag, long step, float value);
void sf_tb_close(sf_tb_writer *w);
/* The file's path. */
const char *sf_tb_path(const sf_tb_writer *w);

/* CRC-32C (Castagnoli), and the masked form TFRecord stores:
 * ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
uint32_t sf_crc32c(const void *data, size_t n);
uint32_t sf_crc32c_masked(const void *data, size_t n);

#endif
