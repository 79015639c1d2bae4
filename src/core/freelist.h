/*
 * freelist.h: per-thread free lists of fixed-size blocks (op blocks, with
 * their places in var queues), so the hot path never calls malloc.
 *
 * Each thread keeps a private stack of free blocks per kind (no atomics, no
 * locks). Blocks are usually freed by a different thread than allocated them
 * (pushed by the program, completed by a worker), so caches drift: a thread
 * whose cache grows past 2 * VF__FL_BATCH hands a batch of VF__FL_BATCH
 * blocks to the process-wide depot, and a thread whose cache is empty takes a
 * whole batch back; only then, once per batch, does it take the depot's
 * mutex. When the depot is empty too, blocks come from malloc.
 *
 * The lists are process-wide, not per engine: a thread may push to several
 * engines, and a block does not care which engine it serves. A thread's
 * cache goes back to the depot when the thread exits, and vf__fl_trim()
 * frees the depot (called when the last engine is destroyed), so nothing is
 * left behind for leak checkers.
 */
#ifndef VF_FREELIST_H
#define VF_FREELIST_H

#include <stdbool.h>

#include "base/common.h"

typedef enum vf__fl_kind {
    /* Op blocks, one kind per var count from 0 to VF__OP_LISTED_VARS
     * (op.h): VF__FL_OP + n holds vf__op_block_size(n) bytes. */
    VF__FL_OP,
    VF__FL_OP_LAST = VF__FL_OP + 8, /* VF__OP_LISTED_VARS (op.h) */
    VF__FL_ARG,    /* VF_OP_ARG_INLINE bytes: a copied argument (arg.h) */
    VF__FL_FAMILY, /* a family (family.h) */
    VF__FL_WAITER, /* a waiter (wait.h) */
    /* What a vf_completion names (async.h): kept, never freed, so that a
     * handle used again at any time reads memory that is still a slot. */
    VF__FL_COMPLETION,
    VF__FL_KINDS
} vf__fl_kind;

/* Register a kind's block size (once, before any allocation of it).
 * Blocks must be at least a pointer in size; the first pointer-sized word
 * of a free block is overwritten. */
void vf__fl_init(vf__fl_kind kind, size_t size);

/* A block of the kind, or NULL when out of memory. Never blocks except on the
 * depot mutex once per batch. Contents are as the last user left them. */
void *vf__fl_alloc(vf__fl_kind kind);

/* Give a block back (from any thread). */
void vf__fl_free(vf__fl_kind kind, void *block);

/* Lock (before a fork) or unlock (after it, in parent and child) every
 * depot, so no thread holds one across the fork. */
void vf__fl_fork_lock(bool lock);

/* Free every block in the depot (blocks in live threads' caches stay),
 * but those of VF__FL_COMPLETION, which stay for the process's life. */
void vf__fl_trim(void);

/* The calling thread exits (thread_exit.h): its caches go to the depot. */
void vf__fl_thread_exit(void);

#endif /* VF_FREELIST_H */
