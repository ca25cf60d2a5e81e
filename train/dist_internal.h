/* dist_internal.h — the collectives of data-parallel training (train/dist.c), for the
 * trainer only; the public part (init, rank, ranks per node) is include/sfvit/dist.h. */
#ifndef SFVIT_DIST_INTERNAL_H
#define SFVIT_DIST_INTERNAL_H

#include <stddef.h>

#include "sfvit/dist.h"
#include "sfvit/tensor.h"

/* Sums n doubles over all ranks, in place. */
void sf_dist_sum(double *buf, int n);
/* 1 on every rank if ok is non-zero on every rank, else 0 (a collective agreement, so an
 * error on one rank stops all of them instead of leaving the others waiting). */
int sf_dist_all_ok(int ok);
/* Copies rank 0's n floats to every rank. */
void sf_dist_broadcast(float *buf, size_t n);

/* Averages the trainable gradients of ps over the ranks, in place, bucket by bucket
 * (sum, then scale by 1/world). Times itself (sf_dist_allreduce_stats). */
void sf_dist_allreduce_grads(sf_params *ps);
/* Rank 0's parameters (data, and the AdamW moments when with_optim) on every rank. */
void sf_dist_broadcast_params(sf_params *ps, int with_optim);
/* Rank 0's non-trainable views (BatchNorm running statistics) on every rank. */
void sf_dist_broadcast_buffers(sf_params *ps);
/* Whether the parameters are bit-identical on every rank (a cheap checksum comparison). */
int sf_dist_params_in_sync(const sf_params *ps);
/* Seconds spent in sf_dist_allreduce_grads, and calls, since the start. */
void sf_dist_allreduce_stats(double *seconds, long *calls);

/* The SyncBatchNorm hook for a context's sum_over_ranks (tensor.h): with on (train.bn_sync)
 * in a world larger than 1, a function summing n doubles over the ranks in place; else
 * NULL, and BatchNorm keeps per-rank statistics. */
void (*sf_dist_batchnorm_hook(int on))(double *buf, int n);

#endif
