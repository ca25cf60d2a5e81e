/* dist.h — data-parallel training over MPI (train/dist.c); docs/distributed.md.
 *
 * `mpirun -np P sfvit train CONFIG` runs P ranks. Each rank reads its DistributedSampler
 * shard of the epoch order, computes the gradient of its part of the global batch, and the
 * gradient buffer is averaged in place with MPI_Allreduce before the optimizer, so every
 * rank applies the same update to the same parameters. BatchNorm statistics are reduced over
 * the ranks (train.bn_sync) through the hook below.
 *
 * Without MPI (built with -Dmpi=disabled, or started without a launcher) every call is a
 * single-process no-op: rank 0 of a world of 1. MPI is initialized only when a launcher's
 * environment is present, so a plain `sfvit train` never touches MPI.
 *
 * Deliberately not here: overlapping the reduction with the backward pass (the tape has no
 * per-parameter completion hook; see docs/distributed.md for when it would pay), model
 * parallelism, fp16 compression of gradients.
 */
#ifndef SFVIT_DIST_H
#define SFVIT_DIST_H

#include <stddef.h>

#include "sfvit/tensor.h"

/* Initializes MPI when started by mpirun/srun (idempotent; MPI_Finalize runs at exit).
 * Returns the world size (1 without a launcher), or -1 after an error already reported
 * (started by a launcher with several ranks but built without MPI). */
int sf_dist_init(void);
int sf_dist_rank(void);
/* Ranks on this node (for dividing the cores between them); 1 when single-process. */
int sf_dist_local_world(void);

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
