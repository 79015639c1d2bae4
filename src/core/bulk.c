/* bulk.c: a pushing thread's batch: finding the thread's state, collecting
 * its pushes into the batch and flushing it (see bulk.h; bulk_op.c pushes
 * and runs the fused op). */
#include "core/bulk.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/sleeplock.h"
#include "core/arg.h"
#include "core/bulk_op.h"
#include "core/engine.h"
#include "core/exec.h"
#include "core/guard.h"
#include "core/lifecycle.h"
#include "core/push.h"
#include "core/spinlock.h"
#include "core/thread_exit.h"

/* A thread's bulk state for one engine. */
struct vf__bulk {
    vf__bulk *next;       /* the engine's list (bulk.lock) */
    vf__bulk *next_spare; /* the engine's spares (bulk.lock) */
    /* A thread's (true), or given back at its exit, on the spares for
     * the next thread to bulk on the engine (bulk.lock). */
    bool owned;
    /* Guards the rest. The owner takes it at every push, and others to
     * flush. One that sleeps (sleeplock.h), not a spinlock: a program that
     * pushes from hundreds of threads at once on a shared var has each of
     * them flush the batch of the one before (the var's claim passes on
     * at every push), and hundreds of threads spinning and yielding for
     * one lock whose holder was preempted left it to run once a round of
     * them: the program crawled, and a fork in it waited for ever (found
     * by a user tester). */
    vf__sleeplock lock;
    int size;              /* lock: 0 = off */
    vf__bulk_batch *batch; /* lock: the open batch, or NULL */
    /* lock: var -> index in the open batch's union (hashmap.h), reserved
     * for 2 * size vars (so a batch of one var an op fills a quarter of
     * it); cleared at each flush, its table kept for the next batch. */
    vf__hashmap union_map;
};

/* The calling thread's bulk states, most recently found first. A slot is
 * valid while its engine lives: `serial` tells a new engine made at a dead
 * one's address apart. */
#define CACHE_SLOTS 4
typedef struct cache_slot {
    const vf_engine *engine;
    uint64_t serial;
    vf__bulk *bulk;
} cache_slot;

static _Thread_local cache_slot cache[CACHE_SLOTS];
static _Thread_local int thread_slots; /* slots in use */
/* Every engine's vf__bulk states, alive (vf__bulk_maybe). */
_Atomic int vf__bulk_states_alive;

/* The states the calling thread owns, for its lookups past the cache and
 * for its exit to give them back (vf__bulk_thread_exit): engine, serial
 * and state, as a cache slot. Kept here, not found by walking the
 * engine's list under its lock: every thread's first push to an engine
 * walked every state there, and with threads coming faster than the
 * walks, thousands queued on the lock and a fork waited for it for ever
 * (found by a user tester). */
typedef struct owned_state {
    vf_engine *engine;
    uint64_t serial;
    vf__bulk *state;
} owned_state;
static _Thread_local owned_state *owned;
static _Thread_local int nowned, cap_owned;

static bool same_serial(const vf_engine *e, const void *serial)
{
    return e->bulk.serial == *(const uint64_t *)serial;
}

/* The state this thread owns on `e`, or NULL. */
static vf__bulk *owned_here(const vf_engine *e)
{
    for (int i = 0; i < nowned; i++)
        if (owned[i].engine == e && owned[i].serial == e->bulk.serial)
            return owned[i].state;
    return NULL;
}

/* The entry of `owned` to fill with a state on `e` the thread is about to
 * take: that of an engine gone at the same address, else a new one past
 * the last (counted once filled: own_state); NULL out of memory. An
 * entry of an engine gone is of no use (its give-back is refused), and
 * those go when the list is full, so a thread that makes an engine for
 * each job keeps as many entries as it has engines alive, not as it ever
 * had (found by the reviewer: 16 bytes an engine, and a refused guard
 * each at its exit). */
static owned_state *owned_entry(const vf_engine *e)
{
    for (int i = 0; i < nowned; i++)
        if (owned[i].engine == e)
            return &owned[i];
    if (nowned == cap_owned) {
        int kept = 0;
        for (int i = 0; i < nowned; i++)
            if (vf__guard_listed_with(owned[i].engine, same_serial,
                                      &owned[i].serial))
                owned[kept++] = owned[i];
        nowned = kept;
    }
    if (nowned == cap_owned) {
        int cap = cap_owned ? 2 * cap_owned : 4;
        owned_state *o = realloc(owned, (size_t)cap * sizeof *o);
        if (o == NULL)
            return NULL;
        owned = o;
        cap_owned = cap;
    }
    return &owned[nowned];
}

/* Remember in `at` (owned_entry's) that this thread owns `s` on `e`. */
static void own_state(owned_state *at, vf_engine *e, vf__bulk *s)
{
    (void)vf__thread_exit_arm(); /* armed by its pushes already */
    *at = (owned_state){e, e->bulk.serial, s};
    if (at == &owned[nowned])
        nowned++;
}

/* --- batches ----------------------------------------------------------- */

void vf__bulk_batch_free(vf__bulk_batch *b)
{
    if (b == NULL)
        return;
    for (int i = 0; i < b->nitems; i++) {
        if (b->items[i].opr != NULL)
            vf__operator_unref(b->items[i].opr);
        vf__argcopy_free(&b->items[i].argcopy);
    }
    vf__family_unref(b->up);
    free(b->items);
    free(b->refs);
    free(b->vars);
    free(b->last_use); /* and the rest, in the same block */
    free(b);
}

static vf__bulk_batch *batch_new(int size, int priority, vf__pool *pool)
{
    vf__bulk_batch *b = vf__calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->cap_items = size;
    b->cap_refs = b->cap_vars = 2 * size < 8 ? 8 : 2 * size;
    b->items = vf__malloc((size_t)b->cap_items * sizeof *b->items);
    b->refs = vf__malloc((size_t)b->cap_refs * sizeof *b->refs);
    b->vars = vf__malloc((size_t)b->cap_vars * sizeof *b->vars);
    b->priority = priority;
    b->pool = pool;
    if (!b->items || !b->refs || !b->vars) {
        vf__bulk_batch_free(b);
        return NULL;
    }
    return b;
}

/* Double the union (out of memory: false, the batch unchanged). */
static bool grow_vars(vf__bulk_batch *b)
{
    int cap = 2 * b->cap_vars;
    vf__varref *vars = realloc(b->vars, (size_t)cap * sizeof *vars);
    if (vars == NULL)
        return false;
    b->vars = vars;
    b->cap_vars = cap;
    return true;
}

/* The index of `r`'s var in the union, adding it (a write wins). -1: out
 * of memory (the union and the map unchanged). */
static int union_index(vf__bulk *s, vf__bulk_batch *b, const vf__varref *r)
{
    uint64_t key = (uint64_t)(uintptr_t)r->var;
    uint64_t index;
    int rc = vf__hashmap_put(&s->union_map, key, (uint64_t)b->nvars, &index);
    if (rc == 1) {
        b->vars[index].write |= r->write;
        return (int)index;
    }
    if (rc < 0)
        return -1;
    if (b->nvars == b->cap_vars && !grow_vars(b)) {
        vf__hashmap_remove(&s->union_map, key);
        return -1;
    }
    b->vars[b->nvars] = *r;
    return b->nvars++;
}

/* Add one op to the batch: its item, made in place (b->items[nitems]),
 * and its var set in normal form. */
static int batch_add(vf__bulk *s, vf__bulk_batch *b, const vf__varref *vars,
                     int nvars)
{
    if (b->nrefs + nvars > b->cap_refs) {
        int cap = b->cap_refs;
        while (cap < b->nrefs + nvars)
            cap *= 2;
        uint32_t *refs = realloc(b->refs, (size_t)cap * sizeof *refs);
        if (refs == NULL)
            return VF_ENOMEM;
        b->refs = refs;
        b->cap_refs = cap;
    }
    vf__bulk_item *it = &b->items[b->nitems];
    it->first = b->nrefs;
    it->nrefs = nvars;
    for (int i = 0; i < nvars; i++) {
        int x = union_index(s, b, &vars[i]);
        if (x < 0)
            return VF_ENOMEM;
        b->refs[b->nrefs++] = (uint32_t)x << 1 | (vars[i].write ? 1u : 0u);
    }
    b->nitems++;
    return 0;
}

/* Push the state's open batch (lock held). */
static void flush_locked(vf_engine *e, vf__bulk *s)
{
    vf__bulk_batch *b = s->batch;
    if (b == NULL)
        return;
    s->batch = NULL;
    atomic_fetch_sub(&e->bulk.open, 1);
    if (vf__hashmap_sparse(&s->union_map)) /* a few vars, say a chain */
        for (int i = 0; i < b->nvars; i++)
            vf__hashmap_remove(&s->union_map, (uintptr_t)b->vars[i].var);
    else
        vf__hashmap_clear(&s->union_map);
    vf__bulk_batch_push(e, b);
}

/* --- finding a thread's state ---------------------------------------- */

/* bulk.lock held: a state comes to be owned (+1) or is given back (-1). */
static void count_owned(vf_engine *e, int delta)
{
    atomic_fetch_add_explicit(&e->bulk.nstates, delta, memory_order_relaxed);
    atomic_fetch_add_explicit(&vf__bulk_states_alive, delta,
                              memory_order_relaxed);
}

/* find's way when the first slot is not the answer. */
static vf__bulk *find_slow(vf_engine *e, bool create)
{
    int n = thread_slots;
    for (int i = 0; i < n; i++) {
        if (cache[i].engine == e && cache[i].serial == e->bulk.serial) {
            cache_slot hit = cache[i];
            if (hit.bulk == NULL && create) { /* none then: make it now */
                memmove(&cache[i], &cache[i + 1],
                        (size_t)(n - i - 1) * sizeof *cache);
                thread_slots = --n;
                break;
            }
            memmove(&cache[1], &cache[0], (size_t)i * sizeof *cache);
            cache[0] = hit;
            return hit.bulk;
        }
    }
    vf__bulk *s = owned_here(e);
    owned_state *at = s == NULL && create ? owned_entry(e) : NULL;
    if (at != NULL) {
        pthread_mutex_lock(&e->bulk.lock);
        /* An exited thread's, first: a program whose threads come and
         * go keeps as many states as threads bulk at once, not as ever
         * lived (each exited one's was walked by every wait: found by a
         * user tester). Its claims on vars (bulk.h) hold nothing: it was
         * flushed when its thread gave it back. */
        if ((s = e->bulk.spare) != NULL) {
            e->bulk.spare = s->next_spare;
            vf__sleeplock_lock(&s->lock);
            s->size = e->bulk.size;
            vf__sleeplock_unlock(&s->lock);
        } else if ((s = vf__calloc(1, sizeof *s)) != NULL) {
            s->size = e->bulk.size;
            vf__sleeplock_init(&s->lock);
            vf__hashmap_init(&s->union_map, vf__calloc);
            s->next = e->bulk.list;
            e->bulk.list = s;
        }
        if (s != NULL) {
            s->owned = true;
            count_owned(e, 1);
        }
        pthread_mutex_unlock(&e->bulk.lock);
        if (s != NULL)
            own_state(at, e, s);
    }
    /* Remembered either way, "none" too: the next push finds it here. */
    n = n < CACHE_SLOTS ? n + 1 : CACHE_SLOTS;
    memmove(&cache[1], &cache[0], (size_t)(n - 1) * sizeof *cache);
    cache[0] = (cache_slot){e, e->bulk.serial, s};
    thread_slots = n;
    return s;
}

/* The calling thread's state for `e`; made when `create` (NULL when out of
 * memory, or none and !create). A slot may remember "none". Inline: every
 * bulk push asks. */
static inline vf__bulk *find(vf_engine *e, bool create)
{
    if (VF__LIKELY(thread_slots > 0 && cache[0].engine == e &&
                   cache[0].serial == e->bulk.serial &&
                   (cache[0].bulk != NULL || !create)))
        return cache[0].bulk; /* the same engine as last time */
    return find_slow(e, create);
}

/* --- order across threads (bulk.h) -------------------------------------- */

/* `v` is claimed by `o`, another thread's state: push o's batch if it
 * holds `v`, and clear the claim (o's lock held, o cannot take `v` again
 * meanwhile). Called holding no bulk lock. */
static void settle_claim(vf_engine *e, vf__bulk *o, vf__var *v)
{
    vf__sleeplock_lock(&o->lock);
    if (o->batch != NULL &&
        vf__hashmap_find(&o->union_map, (uint64_t)(uintptr_t)v) != NULL)
        flush_locked(e, o);
    vf__bulk *expected = o;
    atomic_compare_exchange_strong_explicit(
        &v->bulk, &expected, NULL, memory_order_relaxed, memory_order_relaxed);
    vf__sleeplock_unlock(&o->lock);
}

static inline void after_claim(vf_engine *e, vf__bulk *me, vf__var *v)
{
    /* Acquire: `o` was made by its thread before it claimed v (var.h). */
    vf__bulk *o = atomic_load_explicit(&v->bulk, memory_order_acquire);
    if (o != NULL && o != me)
        settle_claim(e, o, v);
}

/* A push that joins no batch (`desc`, or `opr`'s run) comes after every
 * other thread's batch that holds one of its vars: those are pushed first.
 * `me`: the calling thread's state (its own batch was pushed), or NULL.
 * A handle that does not resolve is left to the push to report. */
/* Whether another thread than the one whose state is `me` (or NULL) may
 * hold a batch on `e`: some other thread has bulk state there, and the
 * engine batches (the naive engine does not). */
static bool others_may_batch(vf_engine *e, const vf__bulk *me)
{
    return atomic_load_explicit(&e->bulk.nstates, memory_order_relaxed) >
               (me != NULL ? 1 : 0) &&
           e->kind != VF_ENGINE_NAIVE;
}

static void after_other_batches(vf_engine *e, vf__bulk *me, const vf_op *desc,
                                const vf_operator *opr)
{
    if (!others_may_batch(e, me))
        return;
    if (opr != NULL) {
        for (int i = 0; i < opr->nvars; i++)
            after_claim(e, me, opr->vars[i].var);
        return;
    }
    if (desc == NULL)
        return;
    const vf_var_list lists[2] = {desc->reads, desc->writes};
    for (int l = 0; l < 2; l++) {
        for (int i = 0; i < lists[l].count && lists[l].vars != NULL; i++) {
            vf__var *v;
            if (vf__var_lookup(&e->vars, lists[l].vars[i], &v) == 0)
                after_claim(e, me, v);
        }
    }
}

void vf__bulk_settle_var(vf_engine *e, vf__var *v)
{
    /* Acquire: `o` was made by its thread before it claimed v (var.h). */
    vf__bulk *o = atomic_load_explicit(&v->bulk, memory_order_acquire);
    if (o != NULL)
        settle_claim(e, o, v);
}

bool vf__bulk_this_thread_bulks(vf_engine *e)
{
    if (e->kind == VF_ENGINE_NAIVE)
        return false; /* no batches there */
    const vf__bulk *s = find(e, false);
    return s != NULL ? s->size > 0 : e->bulk.size > 0;
}

void vf__bulk_after_batches(vf_engine *e, const vf__varref *vars, int nvars)
{
    vf__bulk *me = find(e, false);
    if (!others_may_batch(e, me))
        return;
    for (int i = 0; i < nvars; i++)
        after_claim(e, me, vars[i].var);
}

/* Under the calling thread's lock: take the vars of an op about to join
 * its batch, claiming those nobody claims. NULL when each is usable and
 * this thread's; else the first that is not (deleted, or claimed by
 * another thread's state: take_slow says which). */
static inline vf__var *take_vars(vf__bulk *s, const vf__varref *vars, int nvars)
{
    for (int i = 0; i < nvars; i++) {
        vf__var *v = vars[i].var;
        vf__spin_lock(&v->lock);
        vf__bulk *o = atomic_load_explicit(&v->bulk, memory_order_relaxed);
        /* A delete held by a stopped engine refuses the var already, as a
         * lone push's hold_vars does (var.h: delete_held). */
        bool usable = vf__var_nameable(v, vars[i].gen);
        if (o == NULL && usable) {
            atomic_store_explicit(&v->bulk, s, memory_order_release);
            o = s;
        }
        vf__spin_unlock(&v->lock);
        if (VF__UNLIKELY(o != s || !usable))
            return v;
    }
    return NULL;
}

/* take_vars stopped at `v` (s's lock held): VF_ESTALE when v's delete
 * was pushed (refused now, as a lone push would be: the batch is pushed
 * later; a delete pushed meanwhile by another thread is met by
 * batch_push's op-by-op fallback); else 0, after another thread's batch
 * that holds `v` was pushed (its lock is taken without ours, bulk.h). */
static int take_slow(vf_engine *e, vf__bulk *s, vf__var *v, uint32_t gen,
                     const char *who, const vf_op *desc, vf_operator *opr)
{
    vf__spin_lock(&v->lock);
    bool usable = vf__var_nameable(v, gen);
    vf__spin_unlock(&v->lock);
    if (!usable) /* refused now, as a lone push would be */
        return opr != NULL ? vf__fail_deleted(e, who, opr->def.name, v, gen)
                           : vf__varset_deleted(e, who, desc->name, desc->reads,
                                                desc->writes, v, gen);
    vf__sleeplock_unlock(&s->lock);
    after_claim(e, s, v);
    vf__sleeplock_lock(&s->lock);
    return 0;
}

/* --- pushing ------------------------------------------------------------ */

/* Whether a push with this definition may join a batch. Not while an
 * async op of the engine is pushed and not finished: a fused op waits for
 * every input of its ops, so an op of a batch that completes that async op
 * (or lets another thread do it) would wait behind a later op of its batch
 * that reads what the async op writes, for ever (found trying async ops
 * with VF_BULK_SIZE as a user: bulking changed a program that finishes
 * into one that hangs). Nor on an engine with an in-flight bound: the
 * bound counts ops, and a batch is one op in the counts while it holds
 * many, none of them counted before the batch is pushed (a bound of 1 let
 * two ops run at once: found trying features combined as a user). Nor
 * from outside the engine's ops and threads (`outside`: push.c,
 * held_by_stop) while a stop holds such pushes: an async op held is
 * counted unfinished only once the start pushes it, and the ops held
 * behind it were fused as if there were none (found by a reviewer of the
 * bulk code: the same hang). A push from inside is not held, and comes
 * before every held op. */
static bool bulkable(vf_engine *e, const vf__opdef *def, bool outside)
{
    return e->kind != VF_ENGINE_NAIVE && e->max_inflight == 0 &&
           def->fn != NULL && def->property == VF_PROP_NORMAL &&
           def->device.type == VF_DEVICE_CPU && !def->nonblocking &&
           atomic_load_explicit(&e->state, memory_order_relaxed) ==
               VF__RUNNING &&
           atomic_load_explicit(&e->async_unfinished, memory_order_relaxed) ==
               0 &&
           !(outside &&
             atomic_load_explicit(&e->life.holding, memory_order_relaxed));
}

/* Whether an op on `vars` pushed from inside `parent` (running) waits for
 * the parent's end: it writes a var the parent holds, or reads one the
 * parent writes (for a fused parent, a var its batch still holds). */
static bool waits_for_parent(const vf__op *parent, const vf__varref *vars,
                             int nvars)
{
    /* Both var sets are in normal form (sorted by address): one walk. */
    int j = 0;
    for (int i = 0; i < nvars && j < parent->nvars; i++) {
        uintptr_t want = (uintptr_t)vars[i].var;
        const vf__dep *d = NULL;
        while (j < parent->nvars &&
               (uintptr_t)vf__dep_var(d = vf__op_dep(parent, j)) < want)
            j++;
        if (j == parent->nvars || vf__dep_var(d) != vars[i].var)
            continue;
        if ((vars[i].write || vf__dep_write(d)) &&
            !(parent->def->kind == &vf__kind_bulk &&
              vf__bulk_released(parent, vars[i].var)))
            return true;
    }
    return false;
}

/* Whether an op on `vars` pushed from inside `parent` goes ahead behind
 * an ancestor above its parent, one that writes a var of it (the family
 * knows: vf__family_writes): batched, it would wait for its batch's push,
 * which may come after that ancestor ended, and then take its place behind
 * the ops pushed after the ancestor (a grandchild sitting in its worker's
 * batch came after its batched grandparent's later op, 22 where the ops
 * alone give 12: found by the second reviewer of the batch split). */
static bool ahead_of_an_ancestor(const vf__op *parent, const vf__varref *vars,
                                 int nvars)
{
    if (parent->up == NULL)
        return false;
    for (int i = 0; i < nvars; i++)
        if (vf__family_writes(parent->up, vars[i].var, vars[i].gen) != 0)
            return true;
    return false;
}

int vf__bulk_push(vf_engine *e, const char *who, const vf_op *desc,
                  vf_operator *opr, int priority, void *arg, size_t arg_size)
{
    vf__bulk *s = find(e, e->bulk.size > 0);
    if (s == NULL) {
        after_other_batches(e, NULL, desc, opr);
        return 0;
    }
    /* Check and normalize the op first: a bad one is refused at its push,
     * as it would be alone. */
    vf__opdef local;
    const vf__opdef *def = opr ? &opr->def : &local;
    vf__varref small[8]; /* most ops name a few vars: no malloc */
    vf__varref *heap = NULL;
    const vf__varref *vars;
    int nvars;
    int rc;
    if (opr == NULL) {
        if ((rc = vf__opdef_fill(e, who, desc, &local)) != 0 ||
            (rc = vf__arg_check(who, desc->arg, desc->arg_size)) != 0)
            return rc;
        priority = desc->priority;
        arg = desc->arg;
        arg_size = desc->arg_size;
    }
    /* The running op of this engine it is pushed from, if any: a batch's
     * ops share their parent (bulk.h). */
    vf__op *parent = vf__current_op();
    if (VF__UNLIKELY(parent != NULL) && vf__op_engine(parent) != e)
        parent = NULL;
    /* Pushed from an op of a fused batch: the batch lets go of its
     * earlier ops' vars first (vf__bulk_release_ran), here and not under
     * this thread's bulk lock below, for the ops that makes ready may run
     * here (an async one's function, inline) and push in turn, which takes
     * that lock (a worker hung on it: test_random_serial's bulk rounds).
     * The family's lookup under the lock then finds nothing new. */
    if (VF__UNLIKELY(parent != NULL) && parent->def->kind == &vf__kind_bulk)
        vf__bulk_release_ran(parent);
    vf__sleeplock_lock(&s->lock);
    if (s->size == 0 || !bulkable(e, def, vf__exec_current_engine() != e)) {
        flush_locked(e, s);
        vf__sleeplock_unlock(&s->lock);
        after_other_batches(e, s, desc, opr);
        return 0;
    }
    if (opr == NULL) {
        rc = vf__varset_build(e, who, desc->reads, desc->writes, small, 8,
                              &heap);
        if (rc < 0) {
            vf__sleeplock_unlock(&s->lock);
            return rc;
        }
        vars = heap ? heap : small;
        nvars = rc;
    } else {
        vars = opr->vars;
        nvars = opr->nvars;
    }
    if (VF__UNLIKELY(parent != NULL) &&
        ((parent->def->kind->flags & VF__KIND_GRAPH) ||
         waits_for_parent(parent, vars, nvars) ||
         ahead_of_an_ancestor(parent, vars, nvars))) {
        /* It cannot run before its parent ends; fused, its siblings in
         * the batch could not either, and the parent's wait for one of
         * them would wait for itself (VF_EDEADLK where the ops alone give
         * 0: found by the second reviewer of the batch's early release).
         * Or it goes ahead behind an ancestor, which its batch's push
         * might come too late for. Or its parent is a replay's node,
         * whose graph's hold on the vars splits around the node's
         * children at their pushes (graph.h), which a batch's push would
         * miss (it came after the graph's later ops: found by the second
         * reviewer of the split). Alone, as it would be unbulked. */
        flush_locked(e, s);
        vf__sleeplock_unlock(&s->lock);
        free(heap);
        after_other_batches(e, s, desc, opr);
        return 0;
    }
    vf__var *v;
    while (VF__UNLIKELY((v = take_vars(s, vars, nvars)) != NULL)) {
        int i = 0;
        while (vars[i].var != v)
            i++;
        if ((rc = take_slow(e, s, v, vars[i].gen, who, desc, opr)) != 0) {
            /* Pushed from inside an op: a delete pushed after that op may
             * still take it where it goes ahead of the delete (push.c:
             * child_passes_delete). Alone, as unbulked: the lone push
             * decides (and refuses it where it would queue behind). */
            if (parent != NULL) {
                flush_locked(e, s);
                vf__sleeplock_unlock(&s->lock);
                free(heap);
                after_other_batches(e, s, desc, opr);
                return 0;
            }
            vf__sleeplock_unlock(&s->lock);
            free(heap);
            return rc;
        }
    }
    vf__bulk_batch *b = s->batch;
    /* A reference the batch keeps when it is new (family.h). */
    vf__family *up = parent != NULL ? vf__push_family(parent) : NULL;
    if (VF__UNLIKELY(parent != NULL && up == NULL)) {
        vf__sleeplock_unlock(&s->lock);
        free(heap);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    if (b != NULL &&
        (b->priority != priority || b->pool != def->pool || b->up != up)) {
        flush_locked(e, s);
        b = NULL;
    }
    if (b != NULL) {
        vf__family_unref(up); /* the batch holds it */
        up = NULL;
    }
    if (b == NULL) {
        if (vf__hashmap_reserve(&s->union_map, 2 * (size_t)s->size) != 0 ||
            (b = batch_new(s->size, priority, def->pool)) == NULL) {
            vf__sleeplock_unlock(&s->lock);
            vf__family_unref(up);
            free(heap);
            return vf__fail(VF_ENOMEM, "%s: out of memory", who);
        }
        b->up = up;
        b->parent = up != NULL ? parent : NULL;
        b->nest = parent != NULL ? vf__push_nest_below(parent) : 0;
        /* Idle workers watch open batches (sched.h): the count, then
         * the first one wakes a sleeper, which then looks. */
        if (atomic_fetch_add(&e->bulk.open, 1) == 0)
            vf__pool_nudge(b->pool);
    }
    s->batch = b;
    /* Made in place; it joins the batch when batch_add counts it. */
    vf__bulk_item *item = &b->items[b->nitems];
    *item = (vf__bulk_item){.fn = def->fn,
                            .arg = arg,
                            .done = def->done,
                            .name = def->name,
                            .opr = opr,
                            .no_skip = def->no_skip};
    if (arg_size != 0) {
        if (!vf__argcopy_make(&item->argcopy, arg, arg_size)) {
            vf__sleeplock_unlock(&s->lock);
            free(heap);
            return vf__fail(VF_ENOMEM, "%s: out of memory", who);
        }
        item->arg = item->argcopy.ptr;
    }
    if ((rc = batch_add(s, b, vars, nvars)) != 0) {
        vf__argcopy_free(&item->argcopy);
        /* The batch holds its earlier ops whole (at worst a var too many
         * in the union, which only orders more): push them, refuse this. */
        flush_locked(e, s);
        vf__sleeplock_unlock(&s->lock);
        free(heap);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    /* Its number now, as a lone push's once it can no longer fail; and
     * as a lone child, its vars against its ancestors' writes (push.c:
     * note_ancestors_writes). */
    item->place = vf__push_take_places(e, 1);
    if (b->up != NULL)
        for (int i = 0; i < nvars; i++)
            vf__family_child_var(b->up, vars[i].var, vars[i].gen);
    if (opr != NULL)
        atomic_fetch_add_explicit(&opr->refs, 1, memory_order_relaxed);
    if (b->nitems == b->cap_items)
        flush_locked(e, s);
    vf__sleeplock_unlock(&s->lock);
    if (VF__UNLIKELY(heap != NULL)) /* most ops: none (small) */
        free(heap);
    return 1;
}

/* --- public calls ------------------------------------------------------- */

static int bulk_set_size(vf_engine *e, int size, const char *who)
{
    if (size < 0 || size > VF__BULK_MAX)
        return vf__fail(VF_EINVAL,
                        "%s: size %d (must be 0..%d; 0 turns "
                        "bulking off)",
                        who, size, VF__BULK_MAX);
    /* A thread without state starts with the engine's size at its first
     * push: a 0 it asks for before must be kept when that size is not 0
     * (it was not: the thread bulked anyway, found by the second reviewer
     * of the batch split). */
    vf__bulk *s = find(e, size > 0 || e->bulk.size > 0);
    if (s == NULL) {
        if (size > 0 || e->bulk.size > 0)
            return vf__fail(VF_ENOMEM, "%s: out of memory", who);
        return 0; /* off before, off now: nothing to keep */
    }
    vf__sleeplock_lock(&s->lock);
    int previous = s->size;
    s->size = size;
    if (s->batch != NULL &&
        (size == 0 || s->batch->nitems >= size || s->batch->cap_items != size))
        flush_locked(e, s);
    vf__sleeplock_unlock(&s->lock);
    return previous;
}

VF_API int vf_bulk_set_size(vf_engine *e, int size)
{
    static const char who[] = "vf_bulk_set_size";
    return VF__GUARDED_LIVE(e, who, bulk_set_size(e, size, who));
}

static int bulk_flush(vf_engine *e)
{
    vf__bulk *s = find(e, false);
    if (s != NULL) {
        vf__sleeplock_lock(&s->lock);
        flush_locked(e, s);
        vf__sleeplock_unlock(&s->lock);
    }
    return 0;
}

VF_API int vf_bulk_flush(vf_engine *e)
{
    return VF__GUARDED_LIVE(e, "vf_bulk_flush", bulk_flush(e));
}

void vf__bulk_run_over(vf__op *op, const vf__family *f)
{
    vf_engine *e = vf__op_engine(op);
    if (!vf__bulk_maybe(e->bulk.size))
        return;
    vf__bulk *s = find(e, false);
    if (s == NULL)
        return;
    vf__sleeplock_lock(&s->lock);
    if (s->batch != NULL && s->batch->up == f)
        flush_locked(e, s);
    vf__sleeplock_unlock(&s->lock);
}

/* --- every thread's batches ------------------------------------------- */

void vf__bulk_flush_all(vf_engine *e)
{
    if (atomic_load_explicit(&e->bulk.nstates, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&e->bulk.lock);
    for (vf__bulk *s = e->bulk.list; s != NULL; s = s->next) {
        vf__sleeplock_lock(&s->lock);
        flush_locked(e, s);
        vf__sleeplock_unlock(&s->lock);
    }
    pthread_mutex_unlock(&e->bulk.lock);
}

bool vf__bulk_any_open(vf_engine *e)
{
    if (atomic_load_explicit(&e->bulk.nstates, memory_order_relaxed) == 0)
        return false;
    bool open = false;
    pthread_mutex_lock(&e->bulk.lock);
    for (vf__bulk *s = e->bulk.list; s != NULL && !open; s = s->next) {
        vf__sleeplock_lock(&s->lock);
        open = s->batch != NULL;
        vf__sleeplock_unlock(&s->lock);
    }
    pthread_mutex_unlock(&e->bulk.lock);
    return open;
}

void vf__bulk_engine_init(vf_engine *e)
{
    pthread_mutex_init(&e->bulk.lock, NULL);
    e->bulk.list = NULL;
    e->bulk.spare = NULL;
    atomic_init(&e->bulk.nstates, 0);
    atomic_init(&e->bulk.open, 0);
    atomic_init(&e->bulk.bulks, 0);
    atomic_init(&e->bulk.bulked, 0);
    static atomic_uint_fast64_t next_serial = 1;
    e->bulk.serial = atomic_fetch_add_explicit(&next_serial, 1,
                                               memory_order_relaxed);
}

void vf__bulk_engine_destroy(vf_engine *e)
{
    vf__bulk *s = e->bulk.list;
    while (s != NULL) {
        vf__bulk *next = s->next;
        if (s->owned) /* a given-back one was counted out then */
            atomic_fetch_sub_explicit(&vf__bulk_states_alive, 1,
                                      memory_order_relaxed);
        VF__ASSERT(s->batch == NULL);
        vf__bulk_batch_free(s->batch);
        vf__hashmap_destroy(&s->union_map);
        free(s);
        s = next;
    }
    e->bulk.list = e->bulk.spare = NULL;
    pthread_mutex_destroy(&e->bulk.lock);
}

/* Give this thread's state `s` on `e` back (its thread exits): its batch
 * pushed, as a wait would, and the state kept for the next thread that
 * bulks on `e`. Inside a guard on `e`: the engine lives throughout. */
static int give_back(vf_engine *e, uint64_t serial, vf__bulk *s)
{
    if (e->bulk.serial != serial) /* another engine at the address */
        return 0;
    vf__sleeplock_lock(&s->lock);
    flush_locked(e, s);
    vf__sleeplock_unlock(&s->lock);
    pthread_mutex_lock(&e->bulk.lock);
    s->owned = false;
    s->next_spare = e->bulk.spare;
    e->bulk.spare = s;
    count_owned(e, -1);
    pthread_mutex_unlock(&e->bulk.lock);
    return 0;
}

void vf__bulk_thread_exit(void)
{
    for (int i = 0; i < nowned; i++) {
        /* Refused (the engine destroyed, or being destroyed: its destroy
         * frees the state) without harm. */
        (void)VF__GUARDED(
            owned[i].engine, "the exit of a thread that bulked",
            give_back(owned[i].engine, owned[i].serial, owned[i].state));
    }
    free(owned);
    owned = NULL;
    nowned = cap_owned = 0;
    thread_slots = 0;
}

int vf__bulk_owned_count(void)
{
    return nowned;
}

int vf__bulk_states_listed(vf_engine *e)
{
    int n = 0;
    pthread_mutex_lock(&e->bulk.lock);
    for (vf__bulk *s = e->bulk.list; s != NULL; s = s->next)
        n++;
    pthread_mutex_unlock(&e->bulk.lock);
    return n;
}

bool vf__bulk_held_back(const vf__pool *p)
{
    return p == p->engine->cpu_pool && atomic_load(&p->engine->bulk.open) > 0;
}

void vf__bulk_release(vf__pool *p)
{
    vf__bulk_flush_all(p->engine);
}

void vf__bulk_fork_lock(vf_engine *e, bool lock)
{
    if (lock) {
        pthread_mutex_lock(&e->bulk.lock);
        for (vf__bulk *s = e->bulk.list; s != NULL; s = s->next)
            vf__sleeplock_lock(&s->lock);
    } else {
        for (vf__bulk *s = e->bulk.list; s != NULL; s = s->next)
            vf__sleeplock_unlock(&s->lock);
        pthread_mutex_unlock(&e->bulk.lock);
    }
}
