/*
 * async.h: the async ops in flight, started and not completed yet.
 *
 * An async op's function starts work and returns; the op finishes when
 * somebody calls vf_completion_finish on it, from any thread, at any time. If
 * nobody ever does, every wait on what it writes would block forever, and
 * the user needs to know which op is to blame: timed waits (wait.c) name
 * the ops listed here, and vf_engine_stats counts them.
 *
 * While an async op is in flight, its `next` and `child` links (op.h: used
 * only while it waits in a ready list or a queue) link it into this list,
 * under the list's own lock (a leaf: nothing is taken under it). Sync ops
 * never come here: the list costs only async ops a lock round trip at
 * start and at completion.
 *
 * What a vf_completion names is not the op but a completion slot: its
 * ticket (even while the op may be completed, odd once it has been) and
 * the op. A slot is taken at the op's start and given back at its
 * completion with its ticket moved on, so a handle used again fails the
 * ticket's compare-and-swap (VF_EALREADY), whoever uses the slot next.
 * Slots come from a free list whose blocks are never freed (freelist.h:
 * VF__FL_COMPLETION): a handle used again after its engine was destroyed,
 * and the op blocks freed with the last engine, still reads a slot.
 *
 * The message vf_run_set_error leaves for the finish (op.h:
 * pending_message) passes between threads too: the function may go on
 * setting it while a thread it handed the completion to finishes the op.
 * Each side swaps the pointer in one atomic exchange, so a string is freed
 * only by whoever swapped it out.
 */
#ifndef VF_ASYNC_H
#define VF_ASYNC_H

#include <pthread.h>

#include "core/op.h"

typedef struct vf__completion_slot {
    void *free_links_[2];    /* the free list's, while free (freelist.h) */
    _Atomic uint64_t ticket; /* kept while free; a fresh slot's is 0 */
    vf__op *op;
} vf__completion_slot;

/* The handle for `op`'s start, naming a slot taken for it: 0, or
 * VF_ENOMEM. */
int vf__async_completion(vf__op *op, vf_completion *out);

/* The async op's message becomes a copy of `message` (NULL when out of
 * memory); the one before is freed. Any thread; takes no lock. */
void vf__async_set_message(vf__op *op, const char *message);

/* The async op's message, now the caller's to free (NULL: none); the op
 * keeps none. Any thread; takes no lock. */
char *vf__async_take_message(vf__op *op);

typedef struct vf__async_ops {
    pthread_mutex_t lock;
    vf__op *head; /* lock: the newest started; `child` points back */
    /* Written under the lock, read without it (relaxed): a timed wait
     * that gives up asks for the list's sentence, and with none in flight
     * it takes no lock (a recursion polling with 1 ms timed waits had 50
     * of 204 threads queued on it: the reviewer of row 438). */
    _Atomic uint64_t count;
    /* Lock: the async ops' functions running now, completed or not. An
     * op completed inside its function finishes there (its pending count
     * goes), but the function runs on and may push: stop, fork's drain
     * and destroy wait for it too (vf__async_calls). Stop returned with
     * one running, whose child then waited for ever, and destroy freed
     * the engine under it (found by a reviewer of the lifecycle code). */
    uint64_t calls;
} vf__async_ops;

/* VF_ESYSTEM when the lock cannot be made. */
int vf__async_init(vf__async_ops *a);
/* The list must be empty, or the engine gone past caring (destroy). */
void vf__async_destroy(vf__async_ops *a);

/* The op's function is about to start / the op was completed. */
void vf__async_started(vf__async_ops *a, vf__op *op);
void vf__async_completed(vf__async_ops *a, vf__op *op);

/* An op's function that vf__async_started counted has returned, and its
 * thread is done with the engine: a destroy that sees no call left (the
 * lock taken after this one's) may free it. */
void vf__async_call_over(vf__async_ops *a);

/* How many async ops' functions run now (calls). */
uint64_t vf__async_calls(vf__async_ops *a);

/* How many are in flight. */
uint64_t vf__async_count(vf__async_ops *a);

/* A sentence naming the ops in flight (the oldest first, at most a few:
 * name, place in push order, age), written to buf (size n, always
 * terminated): "2 async ops started and never completed: \"fetch\" (op
 * #3, started 2.0 s ago), op #7 (started 0.5 s ago)", or "no async op in
 * flight". An op's start is kept in its `seq` (op.h) while in flight. */
void vf__async_describe(vf__async_ops *a, char *buf, size_t n);

#endif /* VF_ASYNC_H */
