/*
 * failure.h: failure records, and the engine's log of them.
 *
 * The problem. A failure is part of the serial result (docs/DESIGN.md, rule
 * 9): which ops are skipped, and what each wait reports, must be what the
 * serial program gives, on every engine and in every run. Ops run in
 * parallel and finish in any order, so nothing here may depend on *when*
 * something happened, only on *where in push order* it was pushed.
 *
 * Places. Every op the program pushes to run a function (vf_engine_push, an
 * operator push, each op of a fused batch) takes the next number of the
 * engine's push counter (engine.h): its place, 1, 2, 3, ... in push order
 * (a child that runs alone inside its push takes it only once it needs
 * it, before its push returns: push.h, vf__push_place_of).
 * A wait, and a var delete (which never fails), take the counter's value
 * as it stands (the place of the last op pushed before them) without
 * advancing it. An op pushed from inside a running op also holds its
 * parent's family (family.h), so failures order as in the serial program,
 * where the nested op runs within its parent: by the place of the
 * top-level op each descends from (its root), then in tree order.
 *
 * A record is one failure chain: the op that failed makes it, it is stored
 * on every var the op writes, and skipped ops pass the same record on.
 * Reporting it is a position in push order, not a moment: the first wait
 * that reports it stores its own position there (`cleared_up` and
 * `cleared_next`, claimed by a compare-and-swap from VF__NEVER, so exactly
 * one wait reports a chain). From then on the record is inert for every op
 * after that wait in push order, on every var, while an op before the wait
 * that runs only later still sees it, as it would have in the serial
 * program. Before and after are the tree order of family.h, not the
 * numbers alone: a child of an op pushed before a wait is before it,
 * however late its parent ran and pushed it (a pool's worker may run the
 * parent after the program's thread went on to wait; the serial program
 * ran it, and the child, inside the parent's push). The wait's thread
 * blocks until it has reported, so every op it pushes afterwards is after
 * it. wait_all reports and clears through the log below in the same way.
 *
 * Nothing of this is on the hot path of an op that meets no failure: it
 * loads each var's `failure` pointer, as before, and finds NULL.
 *
 * A failure must not be lost for want of memory: the log keeps a small
 * reserve of records made in advance, used when malloc fails and refilled
 * by records that are let go (vf__failure_unref).
 */
#ifndef VF_FAILURE_H
#define VF_FAILURE_H

#include <pthread.h>
#include <stdbool.h>

#include "base/error.h"
#include "core/family.h"

#define VF__NEVER UINT64_MAX /* cleared_next of a record nobody reported */
/* cleared_next while its wait stores `cleared_up` (a few instructions):
 * still live for everyone, as the wait has not returned yet. */
#define VF__CLAIMING (UINT64_MAX - 1)

/*
 * Where a wait stands in push order: the first key (family.h) after it,
 * `next` under `up`, so an op is before the wait exactly when its key is
 * before this one (vf__family_before). A wait at the top level, or inside
 * an op that pushed children, stands after what was pushed so far: `up` is
 * NULL or that op's family, `next` the place after the last one taken. A
 * wait inside an op that has pushed nothing stands right after the op and
 * before any child it pushes later: the op's own key (its parent's family,
 * its place) with `self` set, for the op itself is before its wait (it
 * began before it), and nothing after the op, its descendants included,
 * is.
 */
typedef struct vf__wait_key {
    vf__family *up;
    uint64_t next;
    bool self;
} vf__wait_key;

/* Whether the op at `place` under `up` is before a wait at the key whose
 * parts are `key_up`, `key_next` and `key_self` (a record's, below). */
static inline bool vf__wait_key_after(const vf__family *up, uint64_t place,
                                      const vf__family *key_up,
                                      uint64_t key_next, bool key_self)
{
    if (VF__LIKELY(up == NULL && key_up == NULL)) /* both at the top level */
        return place < key_next || (key_self && place == key_next);
    return vf__family_before(up, place, key_up, key_next) ||
           (key_self && up == key_up && place == key_next);
}

typedef struct vf__failure vf__failure;
typedef struct vf__failure_reserve vf__failure_reserve;

struct vf__failure {
    atomic_int refs; /* acq_rel: the last unref frees */
    /* The key of the wait that reported it (vf__wait_key: `next`), or
     * VF__NEVER, or VF__CLAIMING while `cleared_up` is stored. Claimed
     * once, by compare-and-swap (acq_rel), then set with release; ops load
     * it with acquire, then `cleared_up` (a reference; NULL: the top
     * level). */
    _Atomic uint64_t cleared_next;
    vf__family *cleared_up;
    bool cleared_self; /* vf__wait_key.self, stored with `cleared_up` */
    uint64_t root;     /* key: the failing op's root (family.h), */
    uint64_t place;    /* then its own place, */
    vf__family *up;    /* under its parent's family (a reference) */
    vf__failure *next; /* the log (log lock), or the reserve's
                          free list (reserve lock) */
    vf__failure_reserve *reserve; /* where it goes back when let go */
    vf_error info;
};

#define VF__FAILURE_RESERVE 4

struct vf__failure_reserve {
    pthread_mutex_t lock;
    vf__failure *head; /* lock */
    int count;         /* lock */
};

void vf__failure_ref(vf__failure *f);
void vf__failure_unref(vf__failure *f);

/* Whether `a` failed before `b` in push order (NULL is after everything). */
static inline bool vf__failure_before(const vf__failure *a,
                                      const vf__failure *b)
{
    if (b == NULL)
        return a != NULL;
    if (a == NULL)
        return false;
    if (a->root != b->root)
        return a->root < b->root;
    return vf__family_before(a->up, a->place, b->up, b->place);
}

/* Whether `f` is the failure of an op after the op at `place` under `up`
 * (its key) in push order. A skip by it is not the serial program's,
 * where that op had not run yet: only a child can meet it, one that took
 * its place on a var by time (on a var no running ancestor holds, say),
 * behind a later op's child that failed there first (var.h:
 * skipped_by_later). */
static inline bool vf__failure_after(const vf__failure *f, const vf__family *up,
                                     uint64_t place)
{
    uint64_t root = vf__family_root(up, place);
    if (f->root != root)
        return f->root > root;
    return vf__family_before(up, place, f->up, f->place);
}

/* Whether the record still makes the op at `place` under `up` (its key,
 * family.h) skip: no wait before that op reported it. */
static inline bool vf__failure_live_for(const vf__failure *f,
                                        const vf__family *up, uint64_t place)
{
    uint64_t next = atomic_load_explicit(&f->cleared_next,
                                         memory_order_acquire);
    return next >= VF__CLAIMING ||
           vf__wait_key_after(up, place, f->cleared_up, next, f->cleared_self);
}

/* Whether the record is still to be reported by a wait at `key`: no wait
 * before it did (one at the same key, or after it, does not count). */
static inline bool vf__failure_live_at(const vf__failure *f, vf__wait_key key)
{
    uint64_t next = atomic_load_explicit(&f->cleared_next,
                                         memory_order_acquire);
    return next >= VF__CLAIMING ||
           !vf__family_before(f->cleared_up, next, key.up, key.next);
}

/* Whether a wait reported the record already. */
static inline bool vf__failure_claimed(const vf__failure *f)
{
    return atomic_load_explicit(&f->cleared_next, memory_order_acquire) !=
           VF__NEVER;
}

/* How many records waits have claimed, in every engine of the process
 * (monotonic; written only when a wait reports a failure). Device work in
 * flight inherits a failure on the device before any wait may claim it;
 * an op that follows such work reads this to learn whether a claim came
 * in between (device_ops.h, "A claim while work is in flight"). A
 * process-wide count costs an engine with no failures nothing, and a
 * claim elsewhere only makes an op meet a fence on the host. */
extern _Atomic uint64_t vf__failure_claims;

/* Report the record for a wait at `key`: true once, for the first wait
 * (that wait returns it); every op after `key` then finds it inert. The
 * caller keeps the key's family alive (its run, or its waiter's). */
static inline bool vf__failure_claim(vf__failure *f, vf__wait_key key)
{
    uint64_t expected = VF__NEVER;
    if (!atomic_compare_exchange_strong_explicit(
            &f->cleared_next, &expected, VF__CLAIMING, memory_order_acq_rel,
            memory_order_acquire))
        return false;
    if (key.up != NULL)
        vf__family_ref(key.up);
    f->cleared_up = key.up;
    f->cleared_self = key.self;
    atomic_store_explicit(&f->cleared_next, key.next, memory_order_release);
    /* Release: an op that reads the new count sees the record claimed. */
    atomic_fetch_add_explicit(&vf__failure_claims, 1, memory_order_release);
    return true;
}

/* The count above, read by an op before it decides what it carries. */
static inline uint64_t vf__failure_claims_now(void)
{
    return atomic_load_explicit(&vf__failure_claims, memory_order_acquire);
}

/* What a wait at `key` reports, claimed (NULL: nothing): the failure the
 * var holds (`stored`), or, when its last write was device work that failed
 * after the op released the var, that work's (`fenced`, device_ops.h). */
static inline vf__failure *
vf__failure_report(vf__failure *stored, vf__failure *fenced, vf__wait_key key)
{
    vf__failure *f = fenced != NULL ? fenced : stored;
    return f != NULL && vf__failure_claim(f, key) ? f : NULL;
}

/*
 * The engine's failures since the last wait_all, in the order they were
 * made (not push order: wait_all picks the first in push order). A record
 * a wait reported (claimed) is one wait_all will not report, and so is
 * one that only the log holds (no var, op or fence: no wait but wait_all
 * can reach it) behind another such in push order: the log lets go of
 * those when it has doubled since it last looked (a new record looks), so
 * a program that meets its failures in var waits, or lets their vars go,
 * and never calls wait_all does not keep every failure it ever had (found
 * by user testers: a service grew by 400 bytes a failed op, without
 * bound).
 */
typedef struct vf__failure_log {
    vf__failure_reserve reserve;
    pthread_mutex_t lock;
    vf__failure *head, *tail; /* lock */
    size_t count;             /* lock: records listed */
    size_t look_at;           /* lock: the count at which the next looks */
} vf__failure_log;

/* VF_ENOMEM (or VF_ESYSTEM) when its reserve or lock cannot be made. */
int vf__failure_log_init(vf__failure_log *log);
/* Drop what is listed and free the reserve: every other record made from
 * the log must have been let go. */
void vf__failure_log_destroy(vf__failure_log *log);

/* The records listed now (tests). Takes the log lock. */
size_t vf__failure_log_count(vf__failure_log *log);

/*
 * A new failure of the op at `place` (pushed from the run of family `up`,
 * or at the top level: NULL; the record takes a reference), listed in
 * the log: returns the record with one reference for the caller. An empty
 * or NULL `op_name` is shown as "op #<place>". Beyond malloc and the
 * reserve, the failure joins the newest one listed that no wait reported
 * and something besides the log holds (reported with it, and skipping
 * what it skips); when there is none, it is lost: NULL (the op fails with no
 * record, and nothing after it skips: RELIABILITY.md, "Known limits"). Takes
 * the log lock (a leaf).
 */
vf__failure *vf__failure_log_record(vf__failure_log *log, int code,
                                    const char *op_name, const char *message,
                                    uint64_t place, vf__family *up);

/*
 * Take back the failure just recorded for the op at `place`, which turned
 * out not to be the op's (it inherited an earlier one: device_ops.c):
 * unlisted, so no wait reports it, and the caller's reference dropped. A
 * record shared with another op (one joined it, out of reserve, or it
 * joined one) stays listed.
 * Takes the log lock.
 */
void vf__failure_log_retract(vf__failure_log *log, vf__failure *f,
                             uint64_t place);

/*
 * wait_all's report, at the place `*pushed` holds (the engine's push
 * counter: every op up to it had finished when wait_all's drain ended, and
 * every op they pushed, but for those another thread pushed since), read
 * under the log lock: the record first in push order among those listed
 * that no wait reported yet is copied to `*err` (when not NULL) and the
 * call returns true; then every listed record is cleared there and leaves
 * the log. Read there, the place comes after every listed record's root
 * (its op was pushed before the record was made): taken before the lock,
 * a record of a later push could stay for the next wait_all while the one
 * the log kept before it (unlist_unreportable) went with this one, and the
 * next reported a later failure (found by the reviewer of that keeping).
 */
bool vf__failure_log_report(vf__failure_log *log,
                            const _Atomic uint64_t *pushed, vf_error *err);

#endif /* VF_FAILURE_H */
