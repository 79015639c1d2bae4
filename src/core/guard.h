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
 * destroy can walk), then checks that e is listed. A slot is a small stack:
 * the engines of the thread's calls in progress, outermost first (a call
 * made from inside another one, by an op run inline, names its engine one
 * place up, unless it is the same engine as the call it is in, which
 * covers it), and `started`, a count of its outermost calls, raised before
 * each publishes its engine. Destroy, before it frees e, takes it off the
 * list and then waits, slot by slot, until the slot names e no more or
 * `started` moved: either way the call it saw has returned (`started`
 * tells so even when the thread is already in its next call, so a thread
 * calling in a tight loop does not hold destroy up). The slot store and the
 * check on entry, and the unlisting and the loads of the scan, are seq_cst: a
 * Dekker pair. Either the scan sees the caller's call (and waits for it to
 * return), or the caller's check comes after the unlisting and refuses the
 * handle. Destroy does the same once before it drains, with the state: a call
 * either sees DRAINING (engine.h), or is seen by that first scan and waited
 * for, so no push can slip in after the drain.
 *
 * The hot path. A push must not pay a lock or a shared line written by
 * every op. The check is a one-entry thread-local cache of the engine last
 * found listed, valid while a process-wide epoch is unchanged; only an
 * unlisting bumps the epoch (a line read by all and written by destroys
 * only). So entering costs a few loads, a compare and one store to the
 * thread's own slot (seq_cst: on x86 an xchg) after raising its count,
 * leaving one store. A miss
 * (the first call of a thread, another engine than the last, a destroy
 * anywhere since) looks a few more recent engines up, then the set under
 * its lock.
 *
 * Fork: in the child, the slots of the parent's other threads name no
 * engine and are free (those threads do not exist there).
 *
 * Limits. A thread that cannot get a slot (no memory for its first one)
 * gets VF_ENOMEM; a call nested inside VF__GUARD_DEPTH calls on engines
 * that alternate (an op of one engine run inline inside a call on
 * another, and so on) gets VF_ENOTSUP (varflow.h says so; it was
 * VF_ENOMEM at a depth of 8, found trying recursion across two naive
 * engines as a user). Slots are never freed: a thread that exits gives its
 * slot back for the next thread (a pthread key's destructor).
 */
#ifndef VF_GUARD_H
#define VF_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"

/* Engines a thread remembers as listed (the first is checked inline). */
#define VF__GUARD_CACHE 4
/* Calls on different engines a thread can be inside at once (a slot's
 * entries, which a destroy's scan reads). */
#define VF__GUARD_DEPTH 32

/* A thread's call slot. Written by its thread only; read by destroy's
 * scans (seq_cst loads). */
typedef struct vf__call_slot {
    /* The engines of the calls in progress, outermost first; NULL above
     * them. Stored seq_cst on entering (the Dekker pair), release (NULL)
     * on leaving. */
    _Atomic(const vf_engine *) calls[VF__GUARD_DEPTH];
    /* Outermost calls begun, counted before each publishes its engine
     * (release): it moves once the call in progress has returned. */
    _Atomic uint64_t started;
    atomic_bool taken;          /* a thread owns it */
    struct vf__call_slot *next; /* the list of every slot: set once */
} vf__call_slot;

/* A thread's side: its slot, how many of its places are in use, and the
 * engines it found listed at `epoch`. */
typedef struct vf__guard_tls {
    vf__call_slot *slot; /* a dummy until its first call takes one */
    unsigned depth;
    /* Bit i: the code running above call i is not an op of its engine's
     * (a wait on it running another engine's deferred ops: exec.c), so
     * call i does not say an op of its engine runs further out. */
    uint32_t hidden;
    uint64_t epoch;
    const vf_engine *listed[VF__GUARD_CACHE];
} vf__guard_tls;

extern _Thread_local vf__guard_tls vf__guard_tls_;
/* Bumped (seq_cst) by each unlisting: a cache of an older epoch is void.
 * (Hidden: one load, no GOT, in the shared library.) */
extern _Atomic uint64_t vf__guard_epoch __attribute__((visibility("hidden")));

/* A call's guard, on its stack: the place it took in its slot, or -1
 * when a call it is inside covers it (-2: a hidden one, which it unhides
 * while it lasts: vf__guard_hide_innermost). */
typedef struct vf__guard {
    int depth;
} vf__guard;

/* The slow sides of vf__guard_enter (guard.c). */
int vf__guard_enter_slow(const vf_engine *e, vf__guard *g, const char *who);
/* Inside a call on another engine than `e`. */
int vf__guard_enter_nested(const vf_engine *e, vf__guard *g, const char *who);

/*
 * Enter a guard on `e` (any pointer, NULL included) for the public call
 * `who`: 0, and the engine cannot be freed until vf__guard_leave; else
 * VF_EINVAL ("not an engine (NULL or destroyed)") or VF_ENOMEM, with the
 * detail set, and nothing to leave. Does not block.
 */
static inline int vf__guard_enter(const vf_engine *e, vf__guard *g,
                                  const char *who)
{
    vf__guard_tls *t = &vf__guard_tls_;
    if (VF__UNLIKELY(t->depth != 0)) {
        /* Inside a call on `e` (an op's push from inside its run): that
         * call keeps `e` alive. */
        if (atomic_load_explicit(&t->slot->calls[t->depth - 1],
                                 memory_order_relaxed) == e) {
            /* A hidden call on e covers no op of e's: unhide it while
             * this one runs (its code may run an op of e inline). */
            uint32_t bit = (uint32_t)1 << (t->depth - 1);
            g->depth = t->hidden & bit ? -2 : -1;
            t->hidden &= ~bit;
            return 0;
        }
        return vf__guard_enter_nested(e, g, who);
    }
    vf__call_slot *s = t->slot;
    atomic_store_explicit(
        &s->started,
        atomic_load_explicit(&s->started, memory_order_relaxed) + 1,
        memory_order_release);
    atomic_store(&s->calls[0], e); /* then the check: the pair */
    t->depth = 1;
    g->depth = 0;
    if (VF__LIKELY(t->listed[0] == e &&
                   t->epoch == atomic_load(&vf__guard_epoch)))
        return 0;
    return vf__guard_enter_slow(e, g, who);
}

/* Leave the guard (after the call's last touch of the engine). */
static inline void vf__guard_leave(const vf__guard *g)
{
    vf__guard_tls *t = &vf__guard_tls_;
    int d = g->depth;
    if (d < 0) {
        if (d == -2)
            t->hidden |= (uint32_t)1 << (t->depth - 1);
        return;
    }
    t->depth = (unsigned)d;
    atomic_store_explicit(&t->slot->calls[d], NULL, memory_order_release);
}

/* Run `call` (an int expression using `e`) inside a guard on `e`: the
 * body of a public call, `return VF__GUARDED(...)`. */
#define VF__GUARDED(e, who, call)                                              \
    __extension__({                                                            \
        vf__guard g_;                                                          \
        int rc_ = vf__guard_enter((e), &g_, (who));                            \
        if (rc_ == 0) {                                                        \
            rc_ = (call);                                                      \
            vf__guard_leave(&g_);                                              \
        }                                                                      \
        rc_;                                                                   \
    })

/* List a new engine (VF_ENOMEM), or take it off the list: from then on a
 * call entering a guard on it is refused. */
int vf__guard_list(const vf_engine *e);
void vf__guard_unlist(const vf_engine *e);

/* Whether the calling thread is inside a call on `e`. */
bool vf__guard_in_call(const vf_engine *e);

/* Whether it is inside a call on `e` further out than its innermost call
 * (the call being made, or the one whose op's code runs now): code of an
 * op of e's runs further out on this thread, around an op of another
 * engine run inline inside it (exec.c: vf__exec_in_engine). */
bool vf__guard_in_outer_call(const vf_engine *e);

/* The engines of the calling thread's calls in progress, outermost first
 * (at most VF__GUARD_DEPTH, into `out`), but the hidden ones: how many. */
int vf__guard_calls(const vf_engine *out[VF__GUARD_DEPTH]);

/* Hide the innermost call (in `hidden`) while code that is not an op of
 * its engine runs inside it; returns the mask to give back to
 * vf__guard_unhide. */
static inline uint32_t vf__guard_hide_innermost(void)
{
    vf__guard_tls *t = &vf__guard_tls_;
    uint32_t was = t->hidden;
    if (t->depth > 0)
        t->hidden |= (uint32_t)1 << (t->depth - 1);
    return was;
}

static inline void vf__guard_unhide(uint32_t was)
{
    vf__guard_tls_.hidden = was;
}

/* The engine of the calling thread's innermost call in progress, or NULL
 * outside calls. */
static inline const vf_engine *vf__guard_innermost(void)
{
    vf__guard_tls *t = &vf__guard_tls_;
    return t->depth > 0 ? atomic_load_explicit(&t->slot->calls[t->depth - 1],
                                               memory_order_relaxed)
                        : NULL;
}

/* A scan of the calls in progress on an engine: the slots seen naming it
 * (up to VF__SCAN_BATCH at a time, with their `started` then), and where in
 * the list of slots the next batch starts. */
#define VF__SCAN_BATCH 64
typedef struct vf__call_scan {
    vf__call_slot *next;
    int n;
    struct {
        vf__call_slot *slot;
        uint64_t started;
    } busy[VF__SCAN_BATCH];
} vf__call_scan;

/* Start a scan (after what a call must see was stored: the state, the
 * unlisting), and advance it: true while a thread is still in a call on
 * `e` that was in progress when the scan saw its slot; false once every
 * such call has returned. Does not block: the caller waits between calls
 * (one batch at a time, so the wait is the longest call's, not the sum). */
void vf__guard_scan_start(vf__call_scan *sc);
bool vf__guard_scan_busy(vf__call_scan *sc, const vf_engine *e);

/* Whether `e` is listed (takes the registry lock: not for hot paths). */
bool vf__guard_listed(const vf_engine *e);

/* Whether `e` is listed and `test(e, arg)` holds, `test` called under the
 * registry lock, so it may read a listed engine (its destroy unlists it
 * under that lock before freeing it); `test` must not enter a guard. For
 * a handle kept across calls, which another thread may have destroyed and
 * another engine may have taken the address of (not for hot paths). */
bool vf__guard_listed_with(const vf_engine *e,
                           bool (*test)(const vf_engine *e, const void *arg),
                           const void *arg);

/* Fork (lifecycle.c): take or let go of the registry lock; in the child,
 * forget the calls of the parent's other threads (gone) and free their
 * slots. */
void vf__guard_fork_lock(bool lock);
void vf__guard_after_fork(void);

/* The calling thread exits (thread_exit.h): its call slot goes to the next
 * thread that needs one. */
void vf__guard_thread_exit(void);

#endif /* VF_GUARD_H */
