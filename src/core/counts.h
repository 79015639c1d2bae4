/*
 * counts.h: the engine's pending and active counts, kept per thread and
 * summed when a wait needs them (counts.c).
 *
 * What is counted (the meaning engine.h gives them):
 *   pending: ops pushed and not finished (wait_all waits for 0);
 *   active:  ops ready, running, or in flight (async), and not blocked in
 *            a nested wait; an op finishing counts the ops it made ready
 *            active before it stops counting itself, so active never drops
 *            to zero while progress is possible (engine.h).
 *
 * No line written by every op. Each thread counts in a slot of its own, a
 * cache line of the engine's slot array holding two monotonic words:
 *   start = (ops counted pending) << 32 + (ops made active),
 *   end   = (ops counted out of pending) << 32 + (ops made inactive),
 * both only ever added to (seq_cst read-modify-writes). A transition that
 * raises a count adds to `start`, one that lowers it adds to `end`; a
 * finish that makes k >= 1 ops ready adds (k - 1) active to `start` rather
 * than k to `start` and 1 to `end`: one step, as before, so there is no
 * transient zero. A thread's slot is found through a one-entry thread-local
 * cache keyed by the engine's serial number (never reused in the process),
 * so the hot path is a compare and one uncontended atomic add on a line
 * the thread owns.
 *
 * Summing (vf__counts_sum), and why it is exact enough. The reader loads
 * `nused` (the slots ever claimed, a high-water mark), every slot's `end`,
 * `nused` again, then every slot's `start`, all seq_cst. Let T be the
 * second load of `nused` in the single total order S of seq_cst
 * operations. Each `end` was read before T and words only grow, so the sum
 * of what was read is <= End(T), the true sum at T, component by
 * component. Each `start` was read after T, and every slot with an
 * addition before T was claimed before T (a thread claims before its first
 * add), so lies below the `nused` read at T: the sum read is >= Start(T).
 * At every instant Start - End is the pair (pending, active) >= 0, because
 * every lowering is preceded in S by the raising it undoes (same thread, or
 * handed over through a var's lock or a queue: happens-before, which S
 * respects). Hence, component by component,
 *     read(start) - read(end) >= Start(T) - End(T) >= 0,
 * and a component read as 0 proves that count WAS 0 at the instant T:
 * pending == 0 is a quiescent instant, active == 0 a stuck one. A
 * component read as n > 0 is only an upper bound at T (what moved during
 * the read may be counted on one side). The two 32-bit halves of a word
 * carry into each other (counts in a slot exceed 2^32 over time), but the
 * difference of the sums decodes exactly as long as fewer than 2^32 ops
 * are pending and fewer than 2^32 move during one read (the old packed
 * counter's limit).
 *
 * Waking on a count (engine.h: vf__engine_count_out). Whoever waits for a
 * count (wait_all for pending 0, a nested waiter for active 0) first adds
 * itself to waits.watchers, then sums; whoever lowers a count adds to its
 * `end`, then loads waits.watchers (seq_cst both): a Dekker pair. Either
 * the lowerer sees a watcher and sums itself (and wakes it under
 * waits.lock when the sum reaches the state watched for), or the
 * watcher's sum comes after the lowering in S and sees it. Only an op that
 * made nothing ready can bring a count to zero: one that made some ready
 * leaves them pending and active, and skips the check.
 *
 * Slots. An engine has 1 + its CPU workers + VF__COUNT_SPARE_SLOTS slots;
 * slot 0 is shared. A thread claims a free slot on its first count on an
 * engine (under the process-wide slots lock) and keeps it until it exits
 * (a pthread key's destructor gives it back when the engine is still
 * alive: the live engines are listed under the lock) or until its cache of
 * VF__COUNT_CACHE engines overflows. A thread that finds no free slot
 * (more than the spare count of outside threads at once, device workers
 * beyond it) counts in slot 0, which its adds share with other such
 * threads: still exact (all adds are atomic), only slower. A slot given
 * back keeps its counts (the next owner adds on: still monotonic). An
 * engine destroyed while a thread still caches one of its slots leaves a
 * stale entry that never matches again (serial numbers are never reused)
 * and is not given back at exit (the engine is no longer listed).
 *
 * Fork: the slots lock is taken before a fork (lifecycle.c). In the child
 * every engine was drained (or is dead), so every slot's words go to zero,
 * and every slot owned by a thread of the parent, which is gone, is freed;
 * the forking thread keeps its own.
 *
 * The in-flight bound (max_inflight) needs pending at every push and the
 * moment it falls to `unblock_at`, which no per-thread sum gives cheaply:
 * an engine with a bound also keeps `inflight`, a shared exact pending
 * count, on that path only.
 */
#ifndef VF_COUNTS_H
#define VF_COUNTS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"

#define VF__COUNT_PENDING ((uint64_t)1 << 32)
#define VF__COUNT_ACTIVE ((uint64_t)1)
/* Slots beyond the CPU workers', for outside threads and device workers. */
#define VF__COUNT_SPARE_SLOTS 16
/* Engines a thread keeps a slot in at once. */
#define VF__COUNT_CACHE 8

typedef struct vf__count_slot {
    _Atomic uint64_t start; /* seq_cst: pending << 32 + active, raised */
    _Atomic uint64_t end;   /* seq_cst: pending << 32 + active, lowered */
    void *owner;            /* slots lock: the owning thread's cache */
} __attribute__((aligned(VF__CACHELINE))) vf__count_slot;

typedef struct vf__counts {
    uint64_t serial;       /* unique in the process, never 0 */
    vf__count_slot *slots; /* nslots, aligned; slot 0 shared */
    int nslots;
    atomic_int nused;             /* seq_cst: slots ever claimed (high-water) */
    struct vf__counts *next_live; /* slots lock */
    /* The in-flight bound's exact pending count (engines with a bound
     * only; seq_cst, paired with nblocked, engine.h). Padded onto a line
     * of its own (the engine is not allocated aligned): every push and
     * finish of such an engine writes it. */
    char pad0_[VF__CACHELINE];
    _Atomic uint32_t inflight;
    char pad1_[VF__CACHELINE];
} vf__counts;

/* This thread's slot in the engine it counts in last. */
typedef struct vf__count_mru {
    uint64_t serial;
    vf__count_slot *slot;
} vf__count_mru;
extern _Thread_local vf__count_mru vf__count_mru_;

/* Slots for `nworkers` workers plus the spare ones; VF_ENOMEM. */
int vf__counts_init(vf__counts *c, int nworkers);
/* After every thread counting in `c` stopped (destroy). Safe on a zeroed
 * struct. */
void vf__counts_destroy(vf__counts *c);

/* The calling thread's slot (claimed on its first call for `c`). */
vf__count_slot *vf__counts_slot_slow(vf__counts *c);

/* The calling thread exits (thread_exit.h): its slots go back to the
 * engines still alive, and its cache is freed. */
void vf__counts_thread_exit(void);

static inline vf__count_slot *vf__counts_slot(vf__counts *c)
{
    if (VF__LIKELY(vf__count_mru_.serial == c->serial))
        return vf__count_mru_.slot;
    return vf__counts_slot_slow(c);
}

/* Raise (start) or lower (end) counts by `delta` (VF__COUNT_* multiples)
 * in this thread's slot. */
static inline void vf__counts_raise(vf__counts *c, uint64_t delta)
{
    atomic_fetch_add(&vf__counts_slot(c)->start, delta);
}
static inline void vf__counts_lower(vf__counts *c, uint64_t delta)
{
    atomic_fetch_add(&vf__counts_slot(c)->end, delta);
}

/* pending << 32 | active, as proven above: a zero component was zero at one
 * instant during the call; a non-zero one is an upper bound there. */
uint64_t vf__counts_sum(vf__counts *c);

static inline uint32_t vf__counts_pending(uint64_t sum)
{
    return (uint32_t)(sum >> 32);
}
static inline uint32_t vf__counts_active(uint64_t sum)
{
    return (uint32_t)sum;
}

/* Fork (lifecycle.c): take or let go of the process-wide slots lock. */
void vf__counts_fork_lock(bool lock);
/* In a forked child (one thread): zero the counts and free the slots of
 * the parent's other threads. */
void vf__counts_after_fork(vf__counts *c);

#endif /* VF_COUNTS_H */
