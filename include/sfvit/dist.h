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


/* Initializes MPI when started by mpirun/srun (idempotent; MPI_Finalize runs at exit).
 * Returns the world size (1 without a launcher), or -1 after an error already reported
 * (started by a launcher with several ranks but built without MPI). */
int sf_dist_init(void);
int sf_dist_rank(void);
/* Ranks on this node (for dividing the cores between them); 1 when single-process. */
int sf_dist_local_world(void);

/* The collectives the trainer uses (sum, broadcast, gradient all-reduce, the SyncBatchNorm
 * hook) are the trainer's own: train/dist_internal.h. */

#endif
