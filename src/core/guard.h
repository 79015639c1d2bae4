/*
 * guard.h: which engine handles are live, and the calls in progress on
 * them (rule 14: a call on a destroyed engine is VF_EINVAL, never a read of
 * freed memory; calls racing destroy end before it frees the engine).
 *
 * The registry. An engine is listed in a process-wide set from the end of
 * its creation until its destroy is about to free it; a handle is checked
 * against the set before anything reads the memory it points at, so a
 * destroyed engine (or NULL, or garbage) is refused without a dereference.
 * A pointer that a new engine reuses is that engine's: nothing freed is
 * ever read.
 *
 * The guard. Every public call that takes an engine enters a guard on it
 * first and leaves it when it returns. Entering publishes "this thread is
 * in a call on e" in the thread's call slot (one per thread, in a list
 * destroy can walk; a nested call saves the slot's value in its guard and
 * puts it back on leaving), then checks that e is listed. Destroy, before
 * it frees e, takes it off the list and then waits until no slot names e.
 * The slot store and the check on entry, and the unlisting and the scan in
 * destroy, are seq_cst: a Dekker pair. Either the scan sees the caller's
 * slot (and waits for it to leave), or the caller's check comes after the
 * unlisting and refuses the handle. Destroy does the same once before it
 * drains, with the state: a call either sees DRAINING (engine.h), or is
 * seen by that first scan and waited for, so no push can slip in after
 * the drain.
 *
 * The hot path. A push must not pay a lock or a shared line written by
 * every op. The check is a one-entry thread-local cache of the engine last
 * found listed, valid while a process-wide epoch is unchanged; only an
 * unlisting bumps the epoch (a line read by all and written by destroys
 * only). So entering costs a few loads, a compare and one store to the
 * thread's own slot (seq_cst: on x86 an xchg), leaving one store. A miss
 * (the first call of a thread, another engine than the last, a destroy
 * anywhere since) looks a few more recent engines up, then the set under
 * its lock.
 *
 * Fork: in the child, the slots of the parent's other threads name no
 * engine and are free (those threads do not exist there).
 *
 * Limits. A thread that cannot get a slot (no memory for its first one)
 * gets VF_ENOMEM. Slots are never freed: a thread that exits gives its
 * slot back for the next thread (a pthread key's destructor).
 */
#ifndef VF_GUARD_H
#define VF_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"

/* Engines a thread remembers as listed (the first is checked inline). */
#define VF__GUARD_CACHE 4

/* A thread's call slot: the engine of its innermost call in progress. */
typedef struct vf__call_slot {
    /* Written by its thread only (seq_cst on entering, release on
     * leaving); read by destroy's scans (seq_cst). */
    _Atomic(const vf_engine *) engine;
    atomic_bool taken;          /* a thread owns it */
    struct vf__call_slot *next; /* the list of every slot: set once */
} vf__call_slot;

/* A thread's side: its slot and the engines it found listed at `epoch`. */
typedef struct vf__guard_tls {
    vf__call_slot *slot; /* NULL until its first call */
    uint64_t epoch;
    const vf_engine *listed[VF__GUARD_CACHE];
} vf__guard_tls;

extern _Thread_local vf__guard_tls vf__guard_tls_;
/* Bumped (seq_cst) by each unlisting: a cache of an older epoch is void. */
extern _Atomic uint64_t vf__guard_epoch;

/* A call's guard, on its stack: what its slot held before. */
typedef struct vf__guard {
    const vf_engine *prev;
} vf__guard;

/* The slow side of vf__engine_enter (guard.c). */
int vf__engine_enter_slow(const vf_engine *e, vf__guard *g, const char *who);

/*
 * Enter a guard on `e` (any pointer, NULL included) for the public call
 * `who`: 0, and the engine cannot be freed until vf__engine_leave; else
 * VF_EINVAL ("not an engine (NULL or destroyed)") or VF_ENOMEM, with the
 * detail set, and nothing to leave. Does not block.
 */
static inline int vf__engine_enter(const vf_engine *e, vf__guard *g,
                                   const char *who)
{
    vf__guard_tls *t = &vf__guard_tls_;
    vf__call_slot *s = t->slot;
    if (VF__LIKELY(s != NULL)) {
        g->prev = atomic_load_explicit(&s->engine, memory_order_relaxed);
        atomic_store(&s->engine, e); /* then the check: the Dekker pair */
        if (VF__LIKELY(t->listed[0] == e &&
                       t->epoch == atomic_load(&vf__guard_epoch)))
            return 0;
    }
    return vf__engine_enter_slow(e, g, who);
}

/* Leave the guard (after the call's last touch of the engine). */
static inline void vf__engine_leave(const vf__guard *g)
{
    atomic_store_explicit(&vf__guard_tls_.slot->engine, g->prev,
                          memory_order_release);
}

/* Run `call` (an int expression using `e`) inside a guard on `e`: the
 * body of a public call, `return VF__GUARDED(...)`. */
#define VF__GUARDED(e, who, call)                                              \
    __extension__({                                                            \
        vf__guard g_;                                                          \
        int rc_ = vf__engine_enter((e), &g_, (who));                           \
        if (rc_ == 0) {                                                        \
            rc_ = (call);                                                      \
            vf__engine_leave(&g_);                                             \
        }                                                                      \
        rc_;                                                                   \
    })

/* List a new engine (VF_ENOMEM), or take it off the list: from then on a
 * call entering a guard on it is refused. */
int vf__engine_list(const vf_engine *e);
void vf__engine_unlist(const vf_engine *e);

/* Whether a thread other than the caller is in a call on `e` now (a
 * seq_cst read of every slot). */
bool vf__engine_calls_in_progress(const vf_engine *e);

/* Whether `e` is listed (takes the registry lock: not for hot paths). */
bool vf__engine_listed(const vf_engine *e);

/* Fork (lifecycle.c): take or let go of the registry lock; in the child,
 * forget the calls of the parent's other threads (gone) and free their
 * slots. */
void vf__guard_fork_lock(bool lock);
void vf__guard_after_fork(void);

#endif /* VF_GUARD_H */
