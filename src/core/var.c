/* var.c: the var queue state machine and the handle table (see var.h). */
#include "core/var.h"

#include <string.h>

#include "base/alloc.h"
#include "core/bulk.h"
#include "core/engine.h"
#include "core/family.h"
#include "core/freelist.h"
#include "core/graph.h"
#include "core/profiling.h"

/* --- queue ------------------------------------------------------------- */

bool vf__var_append(vf__var *v, vf__dep *d)
{
    if (!vf__dep_write(d) && v->head == NULL) {
        VF__ASSERT(v->nreaders >= 0);
        v->nreaders++; /* no write ahead of it */
        return true;
    }
    d->next = NULL;
    if (v->tail != NULL)
        v->tail->next = d;
    v->tail = d;
    if (v->head != NULL)
        return false;
    v->head = d; /* a write, at the head */
    if (v->nreaders != 0)
        return false; /* the running reads release it */
    v->nreaders = VF__WRITE_RUNNING;
    return true;
}

bool vf__var_write_held_by(const vf__var *v, const vf__op *holder)
{
    return v->nreaders == VF__WRITE_RUNNING && v->head != NULL &&
           vf__dep_op(v->head) == holder;
}

vf__dep *vf__var_write_place_of(const vf__var *v, const vf__op *holder)
{
    for (vf__dep *d = v->head; d != NULL; d = d->next)
        if (vf__dep_op(d) == holder)
            return vf__dep_write(d) ? d : NULL;
    return NULL;
}

vf__dep *vf__var_last_write_before(const vf__var *v, vf__wait_key key)
{
    vf__dep *last = NULL;
    for (vf__dep *d = v->head; d != NULL; d = d->next) {
        const vf__op *op = vf__dep_op(d);
        if (vf__dep_write(d) &&
            vf__wait_key_after(op->up, op->place, key.up, key.next, key.self))
            last = d;
    }
    return last;
}

void vf__var_insert_behind(vf__var *v, vf__dep *d, vf__dep *at)
{
    VF__ASSERT(!vf__dep_write(d) && vf__dep_write(at));
    while (at->next != NULL && vf__dep_op(at->next)->ahead)
        at = at->next;
    d->next = at->next;
    at->next = d;
    if (v->tail == at)
        v->tail = d;
}

/* Whether an op whose parent's family is `up` descends from the op at
 * `place` (a family's place is its op's; to VF__FAMILY_DEPTH: deeper, an
 * ancestor may be missed, and the child then takes its place at its
 * push). */
static bool descends_from(const vf__family *up, uint64_t place)
{
    for (const vf__family *f = up; f != NULL; f = f->up)
        if (f->place == place)
            return true;
    return false;
}

static const vf__var *batch_var_at(const void *vars, int i)
{
    return ((const vf__varref *)vars)[i].var;
}

/* Whether `parent` reads v (its deps). */
static bool reads_var(const vf__op *parent, const vf__var *v)
{
    if (parent == NULL)
        return false;
    /* A fused parent (a batch of children's, pushed from another thread)
     * may rewrite its other dep words meanwhile (bulk_op.c: narrow): its
     * batch's var list finds v, and v's dep is read under v's lock. */
    int i = parent->def->kind == &vf__kind_bulk
                ? vf__varset_find(((const vf__bulk_batch *)parent->arg)->vars,
                                  parent->nvars, v, batch_var_at)
                : vf__op_find(parent, v);
    return i >= 0 && !vf__dep_write(vf__op_dep(parent, i));
}

/* Whether `o`, queued on v, comes before `op`, a child, in the serial
 * program. A user op's key is its place under its family (tree order,
 * family.h), a fused op's that of its first item using v: a batch may
 * hold ops pushed before and after another thread's op on other vars,
 * and a child of that op comes before the later ones (found trying
 * bulking from two threads as a user: the child ran after a later op of
 * the batch, which its first op held back). A wait's marker or a delete stands
 * where the program's thread was when it was pushed: its place is the last one
 * taken then (vf__push_wait_place), so one pushed from outside the ops comes
 * after every top-level op up to that place and everything that descends from
 * them, and before the rest. A delete pushed from inside an op stands
 * within that op's run, after the children it pushed before it (family.h:
 * deletes from inside): an op pushed after it there, or after that op in
 * tree order, that went ahead of it ran before the free that the serial
 * program runs first (found trying deletes from inside ops, and by the
 * reviewer: the op's parent's later push, a later sibling's); but one
 * pushed outside the run of the op at `holder`, which `op` goes ahead
 * behind, queued after that op's descendants too (vf__family_after_delete;
 * `holder` 0: `op` goes ahead behind no op). */
static bool queued_before(const vf__op *o, const vf__op *op, const vf__var *v,
                          uint64_t holder)
{
    if (o->def->kind->flags & VF__KIND_NUMBERED)
        return vf__family_before(o->up, o->place, op->up, op->place);
    /* Its items are siblings in push order (bulk.h). */
    if (o->def->kind == &vf__kind_bulk)
        return vf__family_before(o->up, vf__bulk_first_place_on(o, v), op->up,
                                 op->place);
    if ((o->def->kind->flags & VF__KIND_DELETES) && o->delete_from != NULL)
        return vf__family_after_delete(op->up, op->place, holder,
                                       o->delete_from, o->place);
    return o->up != NULL || op->up->root > o->place;
}

/* Where `op` goes ahead on v, behind `start` (NULL: at the front of the
 * queue) and the ops queued right behind it that went ahead too
 * (vf__op.ahead), descend from the op at `ancestor` and come before `op`
 * in tree order: in *at (NULL: the front). False when an op queued after
 * that spot comes before `op` in tree order (a sibling pushed earlier that
 * took its place at its push, say): `op` must not pass it, nor an op that
 * did not go ahead, which may wait for ops `op` would pass (each would
 * wait for the other: found by the second reviewer). */
static bool child_spot(const vf__var *v, const vf__op *op, vf__dep *start,
                       uint64_t ancestor, vf__dep **at)
{
    vf__dep *n = start != NULL ? start->next : v->head;
    *at = start;
    for (; n != NULL; n = n->next) {
        const vf__op *o = vf__dep_op(n);
        if (!o->ahead || o->up == NULL || !descends_from(o->up, ancestor) ||
            !queued_before(o, op, v, ancestor))
            break;
        *at = n;
    }
    for (; n != NULL; n = n->next) {
        const vf__op *o = vf__dep_op(n);
        if (queued_before(o, op, v, ancestor))
            return false;
    }
    return true;
}

/* The place of the op whose running write heads v, as the descendants
 * that go ahead behind it know it (0: none does). A fused op's is its
 * running item's (bulk.h), when that item writes v or reads it as `d`
 * does, for the batch then lets the descendant run before its later items
 * (bulk_op.c: it splits). On a var the item does not use, a descendant
 * takes its place at its push, behind the later items that use it, as it
 * would behind those items pushed alone, which came before it in time.
 * A graph's launch op (or a split's rest op: graph.h) stands for its
 * running node that is the child's parent and writes v. */
static uint64_t holder_place(const vf__var *v, const vf__dep *d,
                             vf__child_look *look)
{
    const vf__op *h = vf__dep_op(v->head);
    if (VF__UNLIKELY(vf__graph_holds_for(h))) /* for the running node */
        return vf__graph_holder_place(h, v, look->parent);
    if (VF__LIKELY(h->def->kind != &vf__kind_bulk))
        /* Not a place of its own (a delete's: the last one taken at its
         * push): no ancestor. A child of the op whose place a granted
         * delete borrowed went ahead behind it, so ran after the delete,
         * and the var's slot was freed with it queued (found by the
         * reviewer of revived vars' children). */
        return h->def->kind->flags & VF__KIND_NUMBERED ? h->place : 0;
    if (look->batch == NULL) {
        look->batch = h;
        look->item = vf__bulk_watch_running(h);
    } else if (look->batch != h) {
        return 0; /* a second holder: the child does not go ahead */
    }
    return vf__bulk_item_place_on(h, look->item, v, vf__dep_write(d));
}

/* The place of the graph's rest op that `op`, a child of the replay's
 * node `parent`, goes before on v (graph.h: vf__graph_rest_ahead), where
 * every place queued before it is of an op that descends from `parent`
 * (its children let go there by the split, the marker of its wait); else
 * NULL. The ops it passes, the rest op and those behind it, waited for
 * those already, and they for nothing but the node's holds: no cycle. */
static vf__dep *rest_ahead(const vf__var *v, const vf__op *op,
                           const vf__op *parent)
{
    vf__dep *r = vf__graph_rest_ahead(v, parent);
    if (r == NULL)
        return NULL;
    for (const vf__dep *at = v->head; at != r; at = at->next) {
        if (at == NULL)
            return NULL; /* not queued */
        const vf__op *o = vf__dep_op(at);
        bool mine = o->def->kind == &vf__kind_wait
                        ? o->waiter != NULL &&
                              o->waiter->key.up == op->up /* its wait's */
                        : o->up != NULL && descends_from(o->up, parent->place);
        if (!mine)
            return NULL;
    }
    return r;
}

int vf__var_child_place(const vf__var *v, const vf__dep *d, const vf__op *op,
                        const vf__op *parent, vf__child_look *look)
{
    vf__dep *at;
    if (v->nreaders == VF__WRITE_RUNNING) {
        uint64_t place = holder_place(v, d, look);
        if (place != 0 && descends_from(op->up, place) &&
            child_spot(v, op, v->head, place, &at))
            return VF__CHILD_BEHIND_ANCESTOR;
        return VF__UNLIKELY(rest_ahead(v, op, parent) != NULL)
                   ? VF__CHILD_BEFORE_REST
                   : VF__CHILD_QUEUED;
    }
    if (v->head == NULL && (!vf__dep_write(d) || v->nreaders == 0))
        return VF__CHILD_FREE;
    /* A read beside its parent's running read, ahead of the write queued
     * behind the reads; not a write: it would wait for every read granted
     * there, and a granted read's op may itself wait for an op the write
     * passes (found by the second reviewer). */
    if (!vf__dep_write(d) && v->nreaders > 0 && reads_var(parent, v) &&
        child_spot(v, op, NULL, parent->place, &at) && at == NULL)
        return VF__CHILD_BESIDE_PARENT;
    return VF__UNLIKELY(rest_ahead(v, op, parent) != NULL)
               ? VF__CHILD_BEFORE_REST
               : VF__CHILD_QUEUED;
}

/* vf__var_insert_child's VF__CHILD_BEFORE_REST: `d` right before the rest
 * op's place; at the head, a read joins the reads running there. */
static bool insert_before_rest(vf__var *v, vf__dep *d, const vf__op *op,
                               const vf__op *parent)
{
    vf__dep *r = rest_ahead(v, op, parent);
    VF__ASSERT(r != NULL);
    vf__dep *prev = NULL;
    for (vf__dep *at = v->head; at != r; at = at->next)
        prev = at;
    if (prev == NULL && !vf__dep_write(d) && v->nreaders > 0 &&
        v->nreaders != VF__WRITE_RUNNING) {
        v->nreaders++; /* the rest op waits for the reads: one more */
        return true;
    }
    d->next = r;
    if (prev != NULL)
        prev->next = d;
    else
        v->head = d; /* the reads running release it */
    return false;
}

bool vf__var_insert_child(vf__var *v, vf__dep *d, const vf__op *op, int where,
                          vf__child_look *look)
{
    vf__dep *at;
    if (VF__UNLIKELY(where == VF__CHILD_BEFORE_REST))
        return insert_before_rest(v, d, op, look->parent);
    if (where == VF__CHILD_BESIDE_PARENT) {
        VF__ASSERT(!vf__dep_write(d) && v->nreaders > 0);
        v->nreaders++; /* runs beside its parent's read */
        return true;
    }
    bool spot = child_spot(v, op, v->head, holder_place(v, d, look), &at);
    VF__ASSERT(spot && at != NULL);
    (void)spot;
    d->next = at->next;
    at->next = d;
    if (v->tail == at)
        v->tail = d;
    return false;
}

bool vf__var_insert_rest(vf__var *v, vf__dep *d, const vf__op *holder)
{
    if (!vf__var_write_held_by(v, holder)) {
        /* Held as a read: every item of the batch reads v. */
        VF__ASSERT(!vf__dep_write(d) && v->nreaders > 0);
        v->nreaders++;
        return true;
    }
    /* Past the ops that went ahead behind the batch and come before its
     * later items in tree order (descendants of the items that ran); not
     * past one that comes after them: a later relative that went ahead
     * behind a common ancestor, queued behind the batch. */
    const vf__op *rest = vf__dep_op(d);
    vf__dep *at = v->head;
    while (at->next != NULL && vf__dep_op(at->next)->ahead &&
           queued_before(vf__dep_op(at->next), rest, v, 0))
        at = at->next;
    d->next = at->next;
    at->next = d;
    if (v->tail == at)
        v->tail = d;
    return false;
}

static void make_ready(vf__op *op, const vf__var *v, bool write,
                       const vf__op *from, vf__readylist *ready);

/* The head write `head` lets go of its place (lock held): the reads right
 * behind it leave the queue together, from *first (their count
 * returned), and the next write, or nothing, heads it (tail kept). */
static inline int unqueue_reads(vf__var *v, const vf__dep *head,
                                vf__dep **first)
{
    vf__dep *d = *first = head->next;
    int nreads = 0;
    while (d != NULL && !vf__dep_write(d)) {
        nreads++;
        d = d->next;
    }
    v->head = d;
    if (d == NULL)
        v->tail = NULL;
    return nreads;
}

/* Make ready the `n` reads unqueue_reads took from the queue. Their places
 * left it under the lock: no other thread reaches them now, so they are
 * walked unlocked. Each `next` is read before its op is released: once
 * ready, the op (and its place) may run, finish and be freed on another
 * thread. */
static inline void release_reads(const vf__var *v, vf__dep *d, int n,
                                 const vf__op *from, vf__readylist *ready)
{
    for (int i = 0; i < n; i++) {
        vf__dep *next = d->next;
        make_ready(vf__dep_op(d), v, false, from, ready);
        d = next;
    }
}

void vf__var_downgrade(vf__var *v, vf__dep *d, vf__readylist *ready)
{
    const vf__op *from = vf__dep_op(d);
    vf__spin_lock(&v->lock);
    VF__ASSERT(v->head == d);
    d->var_w &= ~(uintptr_t)VF__DEP_WRITE;
    vf__dep *first_read;
    int nreads = vf__var_downgrade_locked(v, &first_read);
    vf__spin_unlock(&v->lock);
    release_reads(v, first_read, nreads, from, ready);
}

void vf__var_hold_to_read_locked(vf__var *v, vf__dep *rest)
{
    VF__ASSERT(v->nreaders == VF__WRITE_RUNNING && vf__dep_write(rest));
    vf__dep *d = v->head;
    rest->next = d->next;
    v->head = rest;
    if (v->tail == d)
        v->tail = rest;
    v->nreaders = 1;
}

int vf__var_downgrade_locked(vf__var *v, vf__dep **first_read)
{
    VF__ASSERT(v->nreaders == VF__WRITE_RUNNING && v->head != NULL);
    int nreads = unqueue_reads(v, v->head, first_read);
    v->nreaders = 1 + nreads;
    return nreads;
}

void vf__var_release_reads(const vf__var *v, vf__dep *first_read, int n,
                           const vf__op *from, vf__readylist *ready)
{
    release_reads(v, first_read, n, from, ready);
}

bool vf__var_ahead_behind(vf__var *v, const vf__op *holder,
                          const vf__family *up, uint64_t place)
{
    vf__spin_lock(&v->lock);
    const vf__op *o = vf__var_write_held_by(v, holder) && v->head->next != NULL
                          ? vf__dep_op(v->head->next)
                          : NULL;
    /* Only one before the next item (at `place` under `up`) in tree order:
     * a later relative of the items queued there is no reason to split. */
    bool ahead = o != NULL && o->ahead && o->up != NULL &&
                 ((o->def->kind->flags & VF__KIND_NUMBERED) ||
                  o->def->kind == &vf__kind_bulk) &&
                 vf__family_before(o->up, o->place, up, place);
    vf__spin_unlock(&v->lock);
    return ahead;
}

/* `from` released op's var v (op holds it to write when `write`): record
 * the edge when profiling, and collect the op when that was the last
 * thing it waited for. From an op not recorded (a wait's marker, one
 * pushed while paused or before the latest profile start), the edge is
 * the one its push would have had, had the var been free: from the last
 * recorded ops to end on v, those that op waited for. (It had none: an op
 * pushed right after a vf_var_wait whose marker had not ended lost its edge;
 * found by a CI run of test_profile.) */
static void make_ready(vf__op *op, const vf__var *v, bool write,
                       const vf__op *from, vf__readylist *ready)
{
    bool recorded = VF__UNLIKELY(op->hooks & VF__HOOK_PROF);
    if (recorded && !((from->hooks & VF__HOOK_PROF) &&
                      vf__prof_op_edge(op->prof, from->prof)))
        vf__profiling_edge_past(op, v, write);
    if (vf__op_release(op, 1)) {
        if (recorded)
            vf__prof_op_ready(vf__op_engine(op)->prof, op->prof);
        vf__readylist_add(ready, op);
    }
}

void vf__var_complete_read(vf__var *v, const vf__op *from, vf__readylist *ready)
{
    vf__op *write_op = NULL;
    vf__spin_lock(&v->lock);
    VF__ASSERT(v->nreaders > 0);
    if (--v->nreaders == 0 && v->head != NULL) {
        v->nreaders = VF__WRITE_RUNNING;
        write_op = vf__dep_op(v->head);
    }
    vf__spin_unlock(&v->lock);
    if (write_op)
        make_ready(write_op, v, true, from, ready);
}

void vf__var_set_failure(vf__var *v, vf__failure *f)
{
    vf__spin_lock(&v->lock);
    vf__failure *old = vf__var_swap_failure_locked(v, f);
    vf__spin_unlock(&v->lock);
    vf__failure_unref(old);
}

void vf__var_complete_write(vf__var *v, const vf__op *from,
                            vf__failure *failure, bool ran,
                            vf__readylist *ready)
{
    if (failure != NULL) {
        /* We hold the var exclusively: no op reads `failure` now (a wait
         * may: vf__var_set_failure). */
        vf__failure_ref(failure);
        vf__var_set_failure(v, failure);
    }
    if (ran)
        vf__var_wrote(v);

    vf__spin_lock(&v->lock);
    VF__ASSERT(v->nreaders == VF__WRITE_RUNNING && v->head != NULL);
    /* The reads right behind the finishing write, then the next write (or
     * nothing): the reads leave the queue together. */
    vf__dep *first_read;
    int nreads = unqueue_reads(v, v->head, &first_read);
    vf__op *next_write = NULL;
    if (nreads > 0)
        v->nreaders = nreads;
    else if (v->head != NULL)
        next_write = vf__dep_op(v->head); /* nreaders stays WRITE_RUNNING */
    else
        v->nreaders = 0;
    vf__spin_unlock(&v->lock);
    release_reads(v, first_read, nreads, from, ready);
    if (next_write)
        make_ready(next_write, v, true, from, ready);
}

/* --- handle table ------------------------------------------------------ */

vf_var vf__var_handle(const vf__var_table *t, const vf__var *v, uint32_t gen)
{
    return (vf_var){
        .id = ((uint64_t)t->tag << (VF__VAR_INDEX_BITS + VF__VAR_GEN_BITS)) |
              ((uint64_t)gen << VF__VAR_INDEX_BITS) | v->index};
}

static vf_var make_handle(const vf__var_table *t, const vf__var *v)
{
    return vf__var_handle(t, v,
                          atomic_load_explicit(&v->gen, memory_order_relaxed));
}

int vf__var_table_init(vf__var_table *t, uint16_t tag)
{
    VF__ASSERT(tag != 0);
    if (pthread_mutex_init(&t->lock, NULL) != 0)
        return VF_ESYSTEM;
    t->tag = tag;
    t->nslots = 0;
    t->free_head = NULL;
    for (unsigned i = 0; i < VF__VAR_MAX_CHUNKS; i++)
        atomic_init(&t->chunks[i], NULL);
    return 0;
}

/* Chunk c of the table, or NULL past the last one made (walks of the
 * whole table run with no op in flight: relaxed). */
static vf__var *chunk_at(vf__var_table *t, unsigned c)
{
    return c < VF__VAR_MAX_CHUNKS
               ? atomic_load_explicit(&t->chunks[c], memory_order_relaxed)
               : NULL;
}

void vf__var_table_after_fork(vf__var_table *t)
{
    vf__var *chunk;
    for (unsigned c = 0; (chunk = chunk_at(t, c)) != NULL; c++) {
        for (unsigned i = 0; i < VF__VAR_CHUNK; i++) {
            vf__spin_init(&chunk[i].lock);
            vf__fences_drop_after_fork(&chunk[i]);
        }
    }
}

void vf__var_table_drop_fences(vf__var_table *t)
{
    vf__var *chunk;
    for (unsigned c = 0; (chunk = chunk_at(t, c)) != NULL; c++)
        for (unsigned i = 0; i < VF__VAR_CHUNK; i++)
            vf__fences_drop(&chunk[i]);
}

uint64_t vf__var_table_destroy(vf__var_table *t)
{
    uint64_t live = 0;
    vf__var *chunk;
    for (unsigned c = 0; (chunk = chunk_at(t, c)) != NULL; c++) {
        for (unsigned i = 0; i < VF__VAR_CHUNK; i++) {
            vf__var *v = &chunk[i];
            VF__ASSERT(v->state == VF__VAR_FREE || v->head == NULL);
            live += v->state == VF__VAR_LIVE;
            vf__failure_unref(
                atomic_load_explicit(&v->failure, memory_order_relaxed));
            /* A var still marked (its last write skipped for a later op's
             * failure) keeps its mark to the end (found by a reviewer:
             * leaked with its family and failure). */
            vf__skip_mark_free(
                atomic_load_explicit(&v->skip_mark, memory_order_relaxed));
        }
        free(chunk);
    }
    pthread_mutex_destroy(&t->lock);
    return live;
}

int vf__var_create(vf__var_table *t, vf_var *out, const char *who)
{
    pthread_mutex_lock(&t->lock);
    vf__var *v = t->free_head;
    if (v != NULL) {
        t->free_head = v->next_free;
    } else {
        uint32_t index = t->nslots;
        if (index >= (1u << VF__VAR_INDEX_BITS)) {
            pthread_mutex_unlock(&t->lock);
            return vf__fail(VF_ENOMEM, "%s: all %u variable slots are in use",
                            who, 1u << VF__VAR_INDEX_BITS);
        }
        unsigned c = index >> VF__VAR_CHUNK_BITS;
        vf__var *chunk = atomic_load_explicit(&t->chunks[c],
                                              memory_order_relaxed);
        if (chunk == NULL) {
            chunk = vf__aligned_calloc(VF__VAR_ALIGN,
                                       VF__VAR_CHUNK * sizeof *chunk);
            if (chunk == NULL) {
                pthread_mutex_unlock(&t->lock);
                return vf__fail(VF_ENOMEM, "%s: out of memory", who);
            }
            for (unsigned i = 0; i < VF__VAR_CHUNK; i++) {
                vf__spin_init(&chunk[i].lock);
                chunk[i].index = (c << VF__VAR_CHUNK_BITS) | i;
                atomic_init(&chunk[i].gen, 1);
                atomic_init(&chunk[i].failure, NULL);
                atomic_init(&chunk[i].version, 0);
                atomic_init(&chunk[i].watched, false);
                atomic_init(&chunk[i].notice_skipped, false);
                atomic_init(&chunk[i].skip_mark, NULL);
            }
            /* Release: lookups that see the chunk see it initialized. */
            atomic_store_explicit(&t->chunks[c], chunk, memory_order_release);
        }
        v = &chunk[index & (VF__VAR_CHUNK - 1)];
        t->nslots++;
    }
    pthread_mutex_unlock(&t->lock);

    vf__spin_lock(&v->lock);
    v->nreaders = 0;
    v->head = NULL;
    v->tail = NULL;
    v->state = VF__VAR_LIVE;
    v->delete_held = false;
    atomic_store_explicit(&v->version, 0, memory_order_relaxed);
    v->version_old = false;
    v->kept_deletes = 0;
    v->deleted_gen = UINT32_MAX;
    vf__spin_unlock(&v->lock);
    *out = make_handle(t, v);
    return 0;
}

vf__var *vf__var_slot(vf__var_table *t, vf_var h)
{
    uint32_t index = (uint32_t)h.id & ((1u << VF__VAR_INDEX_BITS) - 1);
    vf__var *chunk = atomic_load_explicit(
        &t->chunks[index >> VF__VAR_CHUNK_BITS], memory_order_acquire);
    return chunk != NULL ? &chunk[index & (VF__VAR_CHUNK - 1)] : NULL;
}

int vf__var_lookup(vf__var_table *t, vf_var h, vf__var **out)
{
    if (h.id == 0)
        return VF_EINVAL;
    if (vf__var_handle_tag(h) != t->tag)
        return VF_EXDEV;
    vf__var *v = vf__var_slot(t, h);
    if (v == NULL)
        return VF_EINVAL;
    if (atomic_load_explicit(&v->gen, memory_order_relaxed) !=
        vf__var_handle_gen(h))
        return VF_ESTALE;
    *out = v;
    return 0;
}

/* Generations run from 1 (a slot's first) to 2^24 - 1; the one after the
 * last is 0, which retires the slot (var.h: never used again). */
static uint32_t gen_after(uint32_t gen)
{
    return (gen + 1) & ((1u << VF__VAR_GEN_BITS) - 1);
}

static uint32_t next_gen(const vf__var *v)
{
    return gen_after(atomic_load_explicit(&v->gen, memory_order_relaxed));
}

void vf__var_delete_ran(vf__var *v, uint32_t gen)
{
    vf__spin_lock(&v->lock);
    atomic_store_explicit(&v->version, 0, memory_order_relaxed);
    v->deleted_gen = gen;
    v->pending_from = gen_after(gen);
    /* The generation right after it is the slot's now: its count starts. */
    if (v->version_old &&
        gen_after(gen) == atomic_load_explicit(&v->gen, memory_order_relaxed))
        v->version_old = false;
    vf__spin_unlock(&v->lock);
}

void vf__var_kept_delete_ran(vf__var *v)
{
    vf__spin_lock(&v->lock);
    atomic_store_explicit(&v->version, 0, memory_order_relaxed);
    VF__ASSERT(v->kept_deletes > 0);
    v->kept_deletes--;
    vf__spin_unlock(&v->lock);
}

bool vf__var_free_slot(vf__var_table *t, vf__var *v, uint32_t gen)
{
    vf__spin_lock(&v->lock);
    if (v->state != VF__VAR_DELETING ||
        atomic_load_explicit(&v->gen, memory_order_relaxed) != gen) {
        vf__spin_unlock(&v->lock); /* revived, or deleted again since */
        return false;
    }
    /* Nothing can queue behind the last delete of a generation. */
    VF__ASSERT(v->head == NULL && v->nreaders == 0);
    v->state = VF__VAR_FREE;
    atomic_store_explicit(&v->watched, false, memory_order_relaxed);
    atomic_store_explicit(&v->notice_skipped, false, memory_order_relaxed);
    uint32_t next = next_gen(v);
    atomic_store_explicit(&v->gen, next, memory_order_relaxed);
    vf__failure *f = atomic_exchange_explicit(&v->failure, NULL,
                                              memory_order_acq_rel);
    vf__spin_unlock(&v->lock);
    vf__failure_unref(f);

    if (next == VF__VAR_GEN_RETIRED)
        return true; /* its generations are spent: never given out again */
    pthread_mutex_lock(&t->lock);
    v->next_free = t->free_head;
    t->free_head = v;
    pthread_mutex_unlock(&t->lock);
    return true;
}

int vf__var_revive(vf__var_table *t, vf__var *v, uint32_t gen, vf_var *out)
{
    int rc = VF_ESTALE;
    vf__spin_lock(&v->lock);
    if (atomic_load_explicit(&v->gen, memory_order_relaxed) == gen) {
        if (v->state == VF__VAR_LIVE) {
            rc = 1; /* its delete is held, not queued yet */
        } else if (v->state == VF__VAR_DELETING &&
                   next_gen(v) != VF__VAR_GEN_RETIRED) {
            /* (At its last generation: refused, a new var is made.) */
            /* A new generation: the old handle stays refused, and the
             * delete (pushed with the old one) no longer frees the slot.
             * Its version counts the old var's writes until that delete
             * runs (version_old). */
            bool pending = v->deleted_gen != gen;
            if (pending && !v->version_old)
                v->pending_from = gen;
            v->version_old = pending;
            atomic_store_explicit(&v->gen, next_gen(v), memory_order_relaxed);
            v->state = VF__VAR_LIVE;
            *out = make_handle(t, v);
            rc = 0;
        }
    }
    vf__spin_unlock(&v->lock);
    return rc;
}
