/* bulk_op.c: the fused op: a batch sealed and pushed as one op (or op by
 * op when it cannot be), its body and its kind (see bulk.h; bulk.c
 * collects the batch). */
#include "core/bulk_op.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "core/engine.h"
#include "core/exec.h"
#include "core/profiling.h"
#include "core/push.h"
#include "core/run.h"
#include "core/wait.h"

/* --- pushing a batch ---------------------------------------------------- */

typedef struct sort_entry {
    uintptr_t addr;
    int index;
} sort_entry;

static int by_address(const void *a, const void *b)
{
    uintptr_t x = ((const sort_entry *)a)->addr;
    uintptr_t y = ((const sort_entry *)b)->addr;
    return (x > y) - (x < y);
}

/* Put the union in normal form (sorted by address, so the push locks the
 * vars in the global order) and renumber the items' refs. */
static int batch_seal(vf__bulk_batch *b)
{
    int n = b->nvars;
    int sorted_already = 1; /* common: vars made in order, pushed in order */
    for (int i = 1; i < n && sorted_already; i++)
        sorted_already = (uintptr_t)b->vars[i - 1].var <
                         (uintptr_t)b->vars[i].var;
    if (sorted_already)
        return 0;
    /* One block: the entries, the sorted copy, then the ints (alignment). */
    sort_entry *e = vf__malloc((size_t)n *
                               (sizeof *e + sizeof(vf__varref) + sizeof(int)));
    if (e == NULL)
        return VF_ENOMEM;
    vf__varref *sorted = (vf__varref *)(e + n);
    int *moved_to = (int *)(sorted + n);
    for (int i = 0; i < n; i++)
        e[i] = (sort_entry){(uintptr_t)b->vars[i].var, i};
    qsort(e, (size_t)n, sizeof *e, by_address);
    for (int i = 0; i < n; i++) {
        moved_to[e[i].index] = i;
        sorted[i] = b->vars[e[i].index];
    }
    memcpy(b->vars, sorted, (size_t)n * sizeof *sorted);
    for (int i = 0; i < b->nrefs; i++)
        b->refs[i] = (uint32_t)moved_to[b->refs[i] >> 1] << 1 |
                     (b->refs[i] & 1u);
    free(e);
    return 0;
}

static void fail_items(vf_engine *e, vf__bulk_batch *b, int rc, const char *why)
{
    for (int i = 0; i < b->nitems; i++) {
        const vf__bulk_item *it = &b->items[i];
        vf__failure_unref(
            vf__engine_record_failure(e, rc, it->name, why, it->place, b->up));
        if (it->done != NULL)
            it->done(it->arg, rc);
        atomic_fetch_add_explicit(&e->failed, 1, memory_order_relaxed);
    }
}

/* Push one item of a batch that could not be pushed whole, as the lone op
 * it was. 0, or the push's code. On success an operator reference passes
 * to the op. */
static int push_alone(vf_engine *e, const vf__bulk_batch *b, vf__bulk_item *it)
{
    const vf__opdef *def = it->opr != NULL
                               ? &it->opr->def
                               : vf__defs_share(
                                     &e->defs,
                                     &(vf__opdef){.engine = e,
                                                  .kind = &vf__kind_user,
                                                  .pool = b->pool,
                                                  .no_skip = it->no_skip});
    vf__op *op = def == NULL ? NULL
                             : vf__op_alloc(it->opr != NULL ? it->opr->nvars
                                                            : it->nrefs);
    if (op == NULL)
        return VF_ENOMEM;
    /* A batch holds sync ops only; `arg` is vf_operator_push_arg's, or
     * the operator's. */
    vf__op_set_run(op, false, it->fn, NULL, it->arg, it->done, it->name);
    if (it->opr != NULL) {
        vf__op_stage_vars(op, it->opr->vars);
    } else {
        /* The item's refs were added in its own normal form (address
         * order) and keep that order through the union's renumbering. */
        for (int i = 0; i < it->nrefs; i++) {
            uint32_t r = b->refs[it->first + i];
            vf__varref ref = b->vars[r >> 1];
            ref.write = r & 1u;
            vf__op_stage_var(op, i, &ref);
        }
    }
    op->priority = b->priority;
    op->place = it->place;
    op->up = b->up;
    if (op->up != NULL)
        vf__family_ref(op->up);
    op->nest = b->nest;
    op->argcopy = vf__argcopy_origin(&it->argcopy); /* the op's, once
                                                        pushed */
    /* An operator's run holds a reference to it (op.c): the item's, once
     * pushed. */
    op->def = def;
    int rc = vf__push_enqueue_locked(e, op,
                                     "vf_engine_push (a bulk, op by op)");
    if (rc == 0) {
        it->opr = NULL; /* the op holds the reference now */
        it->argcopy = (vf__argcopy){NULL, 0};
        return 0;
    }
    op->def = NULL; /* the item keeps its reference (freed with the batch) */
    op->argcopy = VF__ARG_NONE; /* still the item's */
    vf__op_free(op);
    return rc;
}

/* The fused op of batch `b` (its payload, freed with the op: the kind's
 * free_arg), of definition `def`: the union's vars, the batch's priority,
 * place, family and nest. NULL out of memory. */
static vf__op *fused_op(const vf__opdef *def, vf__bulk_batch *b)
{
    vf__op *op = vf__op_alloc(b->nvars);
    if (op == NULL)
        return NULL;
    vf__op_stage_vars(op, b->vars);
    op->def = def;
    op->fn = NULL;
    op->arg = b;
    op->argcopy = VF__ARG_KIND; /* freed with the op (bulk_free_arg) */
    op->done = NULL;
    op->name = "bulk";
    op->priority = b->priority;
    op->place = b->place;
    op->up = b->up;
    if (op->up != NULL)
        vf__family_ref(op->up);
    op->nest = b->nest;
    return op;
}

/*
 * Seal the batch and push it as one fused op. Should that fail (a var
 * deleted meanwhile, memory), each op is pushed alone, so only those that
 * cannot be pushed fail, each reported like a failed op (nothing is lost).
 */
void vf__bulk_batch_push(vf_engine *e, vf__bulk_batch *b)
{
    b->place = b->items[0].place; /* each op has its own (bulk.h) */
    b->prof_parts = false;
    int rc = batch_seal(b);
    bool sealed = rc == 0;
    /* Each op in it decides whether to skip (run_batch): no_skip. */
    const vf__opdef *def = sealed ? vf__defs_share(
                                        &e->defs,
                                        &(vf__opdef){.engine = e,
                                                     .kind = &vf__kind_bulk,
                                                     .pool = b->pool,
                                                     .no_skip = true})
                                  : NULL;
    vf__op *op = def != NULL ? fused_op(def, b) : NULL;
    if (op != NULL) {
        /* Counted first: once pushed, the batch may run and be freed, and
         * a waiter woken by it must see it counted. */
        uint64_t nitems = (uint64_t)b->nitems;
        atomic_fetch_add_explicit(&e->bulk.bulks, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&e->bulk.bulked, nitems,
                                  memory_order_relaxed);
        if (vf__push_enqueue_fused(e, op, "vf_engine_push (bulk)") == 0)
            return;
        atomic_fetch_sub_explicit(&e->bulk.bulks, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&e->bulk.bulked, nitems,
                                  memory_order_relaxed);
        op->argcopy = VF__ARG_NONE; /* the batch is freed below */
        vf__op_free(op);
    }
    for (int i = 0; i < b->nitems; i++) {
        vf__bulk_item *it = &b->items[i];
        if (!sealed) /* out of memory */
            rc = vf__fail(VF_ENOMEM, "vf_engine_push: out of memory pushing a "
                                     "bulk");
        else if ((rc = push_alone(e, b, it)) == 0)
            continue;
        vf__bulk_batch one = *b;
        one.items = it;
        one.nitems = 1;
        one.place = it->place;
        fail_items(e, &one, rc, vf_error_detail());
    }
    vf__bulk_batch_free(b);
}

/* Whether the fused op is profiled (its items have records). */
static bool recorded(const vf__op *op)
{
    return VF__UNLIKELY(op->hooks & VF__HOOK_PROF) && op->prof != NULL;
}

/* --- splitting (a descendant ahead of the batch's later items) ----------
 *
 * A descendant of item k pushed on a var item k writes (or reads, beside
 * a read of its own) went ahead behind the fused op (var.c:
 * holder_place), as it would behind item k alone, ahead of the later items
 * (pushed before it in time, after its ancestor in the serial program).
 * Item k alone would have let it run at its end, before the later items
 * on that var; the fused op holds the var for them until the batch ends.
 * So, when such a descendant waits there, the batch ends after item k and
 * its later items go each alone (a fused op of one: split_after), queued
 * on each of their vars where they stood: right behind the fused op and the
 * descendants that went ahead there. The queues are then what the items alone
 * would have made them. (Before, the descendant ran after the whole batch: a
 * program's result changed with VF_BULK_SIZE.) */

/* Per var of the union, the last item of the batch (of its items now)
 * that uses it and the last that writes it (-1: none); made at the first
 * need (with `released`, all false then), made again after a split. */
static bool note_last_uses(vf__bulk_batch *b)
{
    if (b->last_use == NULL) {
        b->last_use = vf__malloc(
            (size_t)b->nvars * (2 * sizeof *b->last_use + sizeof *b->released));
        if (b->last_use == NULL)
            return false;
        b->last_write = b->last_use + b->nvars;
        b->released = (bool *)(b->last_write + b->nvars);
        for (int v = 0; v < b->nvars; v++)
            b->released[v] = false;
    }
    for (int v = 0; v < b->nvars; v++)
        b->last_use[v] = b->last_write[v] = -1;
    for (int i = 0; i < b->nitems; i++)
        for (int r = 0; r < b->items[i].nrefs; r++) {
            uint32_t ref = b->refs[b->items[i].first + r];
            b->last_use[ref >> 1] = i;
            if (ref & 1u)
                b->last_write[ref >> 1] = i;
        }
    return true;
}

/* Whether a descendant went ahead behind the fused op `op` on a var an
 * item after item k uses (written: only a write holds descendants behind
 * it). */
static bool must_split(vf__op *op, int k)
{
    vf__bulk_batch *b = op->arg;
    if (b->last_use == NULL && !note_last_uses(b))
        return false; /* out of memory: it runs after the batch */
    for (int x = 0; x < b->nvars; x++) {
        const vf__dep *d = vf__op_dep(op, x);
        if (!b->released[x] && b->last_use[x] > k && vf__dep_write(d) &&
            vf__var_ahead_behind(vf__dep_var(d), op, b->up,
                                 b->items[k + 1].place))
            return true;
    }
    return false;
}

/* The items of `b` from `first` on, as a batch of their own (its union
 * the vars they use, in the same order, so normal form still), taking
 * over their operator references and copied arguments; NULL out of
 * memory. */
static vf__bulk_batch *batch_rest(const vf__bulk_batch *b, int first)
{
    int nitems = b->nitems - first;
    /* Not b->nrefs: items split off before (split_after) keep theirs. */
    const vf__bulk_item *last = &b->items[b->nitems - 1];
    int base = b->items[first].first, nrefs = last->first + last->nrefs - base;
    vf__bulk_batch *r = vf__calloc(1, sizeof *r);
    int *slot = vf__malloc((size_t)b->nvars * sizeof *slot);
    if (r == NULL || slot == NULL)
        goto fail;
    r->items = vf__malloc((size_t)nitems * sizeof *r->items);
    r->refs = vf__malloc((size_t)nrefs * sizeof *r->refs);
    r->vars = vf__malloc((size_t)b->nvars * sizeof *r->vars);
    if (r->items == NULL || r->refs == NULL || r->vars == NULL)
        goto fail;
    for (int x = 0; x < b->nvars; x++)
        slot[x] = -1;
    for (int j = 0; j < nrefs; j++)
        slot[b->refs[base + j] >> 1] = 0;
    for (int x = 0; x < b->nvars; x++) {
        if (slot[x] < 0)
            continue;
        slot[x] = r->nvars;
        r->vars[r->nvars] = b->vars[x];
        r->vars[r->nvars++].write = false;
    }
    for (int j = 0; j < nrefs; j++) {
        uint32_t ref = b->refs[base + j];
        int x = slot[ref >> 1];
        r->refs[j] = (uint32_t)x << 1 | (ref & 1u);
        r->vars[x].write |= (ref & 1u) != 0;
    }
    free(slot);
    memcpy(r->items, &b->items[first], (size_t)nitems * sizeof *r->items);
    for (int i = 0; i < nitems; i++)
        r->items[i].first -= base;
    r->nitems = r->cap_items = nitems;
    r->nrefs = r->cap_refs = nrefs;
    r->cap_vars = b->nvars;
    r->priority = b->priority;
    r->pool = b->pool;
    r->up = b->up;
    if (r->up != NULL)
        vf__family_ref(r->up);
    r->place = r->items[0].place;
    r->nest = b->nest;
    return r;
fail:
    free(slot);
    if (r != NULL) {
        free(r->items);
        free(r->refs);
        free(r->vars);
        free(r);
    }
    return NULL;
}

/* End the fused op `op` after its item k: its later items go to a fused
 * op of their own, queued where they stood (vf__push_enqueue_rest). False
 * out of memory (nothing changed: they run in this batch, after the
 * descendant waits for it). */
static bool split_off(vf_engine *e, vf__op *op, int k)
{
    vf__bulk_batch *b = op->arg;
    vf__bulk_batch *r = batch_rest(b, k + 1);
    vf__op *rest = r != NULL ? fused_op(op->def, r) : NULL;
    if (rest == NULL) {
        if (r != NULL) {
            r->nitems = 0; /* the items are still b's */
            vf__bulk_batch_free(r);
        }
        return false;
    }
    rest->ahead = op->ahead;
    rest->hooks = op->hooks;
    if (recorded(op) &&
        (rest->prof = vf__prof_op_split(e->prof, op->prof, r->nvars,
                                        (uint32_t)r->nitems)) == NULL) {
        /* No record for the rest (memory): its ops go unrecorded, and
         * this one's keep their ids (found by the third reviewer). */
        rest->hooks &= (uint8_t)~VF__HOOK_PROF;
        op->prof->id -= (uint64_t)r->nitems;
    }
    /* The rest are r's now (atomic: vf__bulk_first_place_on reads it from
     * other threads). */
    __atomic_store_n(&b->nitems, k + 1, __ATOMIC_RELAXED);
    atomic_fetch_add_explicit(&e->bulk.bulks, 1, memory_order_relaxed);
    vf__push_enqueue_rest(e, rest, op);
    return true;
}

/* split_off, each later item alone: an async op may go ahead of them
 * (the descendant that makes the split, or one pushed after it, by it or
 * by its own descendants), and one of them may be what completes it;
 * fused with a later item that waits for it (reads what it writes),
 * neither would run (found by a reviewer of the bulk code, and by the
 * next for a second child and a grandchild). No push is fused while an
 * async op is unfinished (bulk.c: bulkable) for the same reason. The last
 * goes first: each queues where it stood, in front of those split off
 * before it. True when the batch ends after item k; false out of memory,
 * with the items not split off yet still in the batch. */
static bool split_after(vf_engine *e, vf__op *op, int k)
{
    vf__bulk_batch *b = op->arg;
    for (int j = b->nitems - 2; j >= k; j--)
        if (!split_off(e, op, j))
            return false;
    return true;
}

/* --- running it --------------------------------------------------------- */

/* The profile id of item `i` of the recorded fused op `op`: its push took
 * an id for each (records), from the record's `first` on (profile/hooks.h:
 * not from its `id`, which changes). */
static uint64_t item_id(const vf__op *op, int i)
{
    return op->prof->first + (uint64_t)i;
}

/* The profile record of the batch's op `i` (run_batch): its id, the op
 * before it as its edge (the first takes the fused op's edges), its times
 * (`ready` the end of the op before it, or the fused op's ready). */
static void record_item(vf_engine *e, const vf__op *op, int i, int worker,
                        uint64_t ready, uint64_t start, int status)
{
    const vf__bulk_batch *b = op->arg;
    const vf__bulk_item *it = &b->items[i];
    vf__op_prof part;
    part.id = part.first = item_id(op, i);
    part.worker = worker;
    part.ready = ready;
    part.start = start;
    part.end = vf__prof_now(e->prof);
    if (status == VF_ESKIPPED)
        part.start = part.end;
    /* What the fused op's record gathered since the item before's: its
     * waits and its children at their push (vf__profiling_inside_end). */
    part.inside = op->prof->inside;
    op->prof->inside = 0;
    atomic_init(&part.ndeps, i > 0 ? 1 : 0);
    part.deps[0] = part.id - 1; /* the op before it (i > 0) */
    vf__prof_part_finished(
        e->prof, op->prof, &part, i == 0,
        &(vf__prof_op_desc){.name = it->name != NULL ? it->name : "",
                            .pool = (int)(b->pool - e->pools),
                            .device = {VF_DEVICE_CPU, 0},
                            .property = VF_PROP_NORMAL,
                            .status = status});
}

/* A fused op's body (bulk.h): each op of the batch in push order, as if
 * alone. The fused op holds every var of the batch, writes exclusively,
 * so an op's failure and version bump go straight onto the vars it
 * writes, where the later ops of the batch find them. The shutdown notice
 * (`shutdown` at the start, and looked at again before each op, as each
 * op alone would) skips the ops not started. */
static void run_batch(vf__op *op, int worker, bool shutdown)
{
    vf_engine *e = vf__op_engine(op);
    vf__bulk_batch *b = op->arg;
    /* Profiled (its push took an id for each of its ops: batch_records):
     * each is recorded as its own, the fused op not (bulk_finished). */
    bool parts = recorded(op);
    uint64_t ready = parts ? op->prof->ready : 0, start = 0;
    vf_run run; /* not zero-initialized: the message buffer is 256 bytes */
    run.op = op;
    run.worker = worker;
    run.cls = NULL;
    run.stream = NULL;
    bool pushed = false; /* the item before pushed an op */
    for (int i = 0; i < b->nitems; i++) {
        /* Item i-1 has ended: a descendant of it that went ahead behind
         * the batch on a var a later item uses runs before that item, as
         * behind the item alone; the batch ends here, its later items
         * each alone behind that descendant (split_after).
         * Only an item that pushed has descendants: after one that did
         * not, the move on is a plain store (no locked instruction per
         * item: a batch's items cost about one op), for a push reading
         * an older index then finds an item it does not descend from. */
        if (VF__UNLIKELY(pushed)) {
            pushed = false;
            atomic_store(&b->running, i);
            if (atomic_exchange(&b->watched, false) && must_split(op, i - 1) &&
                split_after(e, op, i - 1))
                break;
        } else {
            atomic_store_explicit(&b->running, i, memory_order_relaxed);
        }
        const vf__bulk_item *it = &b->items[i];
        const uint32_t *refs = &b->refs[it->first];
        uint64_t place = it->place; /* the item's own (bulk.h) */
        uint8_t slow = atomic_load_explicit(&e->slow, memory_order_relaxed);
        shutdown = shutdown || (slow & VF__SLOW_SHUTDOWN);
        bool skipped = shutdown;
        int status = shutdown ? VF_ESKIPPED : 0;
        vf__failure *f = NULL;
        if (!skipped && !it->no_skip && (slow & VF__SLOW_MAY_INHERIT)) {
            f = vf__exec_inherited_failure(op, refs, it->nrefs, b->up, place,
                                           slow & VF__SLOW_DEVICES);
            if (f != NULL) {
                vf__failure_ref(f);
                skipped = true;
                status = VF_ESKIPPED;
            }
        }
        if (VF__UNLIKELY(parts))
            start = vf__prof_now(e->prof);
        if (!skipped) {
            run.name = it->name;
            run.item_refs = refs;
            run.item_nrefs = it->nrefs;
            run.place = place;
            run.message[0] = '\0';
            /* The fused op stands for this item while it runs: the ops
             * it pushes are the item's children (family.h). */
            vf__running outer;
            op->run = &run;
            vf__running_enter(&outer, op);
            int rc = it->fn(&run, it->arg);
            if (VF__UNLIKELY(op->hooks & VF__HOOK_FORK_DEAD))
                vf__exec_fork_dead_returned();       /* exec.h */
            pushed = vf__running_now.family != NULL; /* (its first push) */
            vf__running_leave(&outer);
            if (rc != 0) {
                status = rc;
                f = vf__engine_record_failure(e, rc, it->name, run.message,
                                              place, b->up);
            }
        }
        /* An op of a batch of children: its parent may wait for them. */
        if (VF__UNLIKELY(f != NULL && b->up != NULL))
            vf__wait_child_failed(b->up, f, place);
        else if (VF__UNLIKELY(skipped && b->up != NULL))
            vf__wait_child_notice_skipped(b->up, place); /* the notice's */
        for (int r = 0; r < it->nrefs; r++) {
            if (!(refs[r] & 1u))
                continue;
            vf__var *v = vf__dep_var(vf__op_dep(op, (int)(refs[r] >> 1)));
            if (f != NULL) {
                vf__failure_ref(f);
                vf__var_set_failure(v, f);
            }
            if (!skipped)
                vf__var_wrote(v);
            else if (f == NULL) /* the notice's (vf__exec_op_skipped) */
                atomic_store_explicit(&v->notice_skipped, true,
                                      memory_order_relaxed);
            else
                vf__var_write_skipped(v, f, b->up, place);
        }
        vf__failure_unref(f);
        if (VF__UNLIKELY(parts)) {
            record_item(e, op, i, worker, ready, start, status);
            ready = vf__prof_now(e->prof);
        }
        if (it->done != NULL)
            vf__exec_call_done(e, it->done, it->arg, status);
        vf__exec_count_outcome(e, status, skipped);
    }
    if (VF__UNLIKELY(parts))
        b->prof_parts = true; /* recorded: bulk_finished drops it */
}

/* A batch held while stopped and never pushed: each op in it fails alone. */
static void bulk_dropped(vf_engine *e, vf__op *op, int rc)
{
    fail_items(e, op->arg, rc,
               "held while the engine was "
               "stopped, and could not be "
               "pushed at start");
    vf__op_free(op);
}

static bool bulk_run(vf__op *op, int worker, bool shutdown)
{
    run_batch(op, worker, shutdown);
    return true;
}

static void bulk_free_arg(void *batch)
{
    vf__bulk_batch_free(batch);
}

/* A batch stands for its ops in a profile (profile/hooks.h). */
static uint32_t batch_records(const vf__op *op)
{
    return (uint32_t)((const vf__bulk_batch *)op->arg)->nitems;
}

/* Its ops were each recorded (run_batch): the fused op is not, its record
 * dropped before finish would append it (after the edges later ops took
 * from it, which name its last op). */
static void bulk_finished(vf__op *op)
{
    vf__bulk_batch *b = op->arg;
    if (recorded(op) && b->prof_parts) {
        vf__prof_op_dropped(op->prof);
        op->prof = NULL;
        op->hooks &= (uint8_t)~VF__HOOK_PROF;
    }
}

int vf__bulk_running_refs(const vf__op *op, const uint32_t **refs)
{
    const vf__bulk_batch *b = op->arg;
    const vf__bulk_item *it =
        &b->items[atomic_load_explicit(&b->running, memory_order_relaxed)];
    *refs = &b->refs[it->first];
    return it->nrefs;
}

/* How the running item of `op` uses v: -1 not at all, else its ref's
 * write bit (an item that reads and writes v has one ref, written). */
static int running_use(const vf__op *op, const vf__var *v)
{
    const uint32_t *refs;
    int n = vf__bulk_running_refs(op, &refs);
    for (int r = 0; r < n; r++)
        if (vf__dep_var(vf__op_dep(op, (int)(refs[r] >> 1))) == v)
            return (int)(refs[r] & 1u);
    return -1;
}

bool vf__bulk_running_writes(const vf__op *op, const vf__var *v)
{
    return running_use(op, v) == 1;
}

bool vf__bulk_running_reads(const vf__op *op, const vf__var *v)
{
    return running_use(op, v) == 0;
}

int vf__bulk_watch_running(const vf__op *op)
{
    vf__bulk_batch *b = op->arg;
    atomic_store(&b->watched, true);
    return atomic_load(&b->running);
}

uint64_t vf__bulk_item_place_on(const vf__op *op, int item, const vf__var *v,
                                bool write)
{
    const vf__bulk_batch *b = op->arg;
    const vf__bulk_item *it = &b->items[item];
    const uint32_t *refs = &b->refs[it->first];
    /* The batch's own var list (immutable once pushed), not the op's dep
     * words, which a downgrade on the batch's thread rewrites meanwhile
     * (narrow: vf__var_downgrade, under another var's lock). */
    for (int r = 0; r < it->nrefs; r++)
        if (b->vars[refs[r] >> 1].var == v)
            return (refs[r] & 1u) || !write ? it->place : 0;
    return 0;
}

uint64_t vf__bulk_first_place_on(const vf__op *op, const vf__var *v)
{
    const vf__bulk_batch *b = op->arg;
    /* Under v's lock, while the batch may run on another thread, whose
     * split shrinks nitems (split_after); the items and the var list stay
     * as they were pushed. */
    int n = __atomic_load_n(&b->nitems, __ATOMIC_RELAXED);
    for (int i = 0; i < n; i++) {
        const vf__bulk_item *it = &b->items[i];
        const uint32_t *refs = &b->refs[it->first];
        for (int r = 0; r < it->nrefs; r++)
            if (b->vars[refs[r] >> 1].var == v)
                return it->place;
    }
    return op->place;
}

/* --- early release (bulk.h: vf__bulk_release_ran) ------------------------ */

/* An early release (or a downgrade) records its edges from the item
 * `item`, the last to use (or write) the var, rather than from the fused
 * op's own record, whose id (its last item's) a split may later give to
 * the fused op of its later items: an op released here could then name,
 * as its dependency, an op that waits for it (a cycle in the profile).
 * The record's id stands for that item while its edges are recorded (on
 * this thread: only the fused op's releases record edges from it);
 * edges_from_fused gives it back (always: -1 once stood for "give it
 * back", and the record kept id 0, found trying the profiler with bulking
 * as a user). A var no item of the batch uses (-1: one only the later
 * items split off used) names none of them: id 0, and the ops it releases
 * take the edge from the ops before the batch (var.c: make_ready). (It
 * named the batch's last item, still running: the items split off, which
 * end before it, named it as their dependency; found by the second
 * reviewer of the table's notes.) */
static void edges_from_item(vf__op *op, int item, uint64_t *own)
{
    if (!recorded(op))
        return;
    const vf__bulk_batch *b = op->arg;
    if (*own == 0)
        *own = op->prof->id;
    op->prof->id = item < 0 ? 0 : *own - (uint64_t)(b->nitems - 1 - item);
}

/* The fused op's record has its own id again (edges_from_item). */
static void edges_from_fused(vf__op *op, const uint64_t *own)
{
    if (*own != 0 && recorded(op))
        op->prof->id = *own;
}

static void release_one(vf__op *op, int v, vf__readylist *ready)
{
    const vf__dep *d = vf__op_dep(op, v);
    /* As finish does for the fused op (its ops bumped the versions and
     * left their failures on the vars as they ran). */
    if (vf__dep_write(d))
        vf__var_complete_write(vf__dep_var(d), op, op->failure, false, ready);
    else
        vf__var_complete_read(vf__dep_var(d), op, ready);
}

/* Let go of var x early, before the batch ends: the profiler is told, as
 * at an op's end, that its last item to use x is the last op to end on it
 * (and its edges name that item). */
static void release_early(vf__op *op, int x, uint64_t *own,
                          vf__readylist *ready)
{
    vf__bulk_batch *b = op->arg;
    b->released[x] = true;
    edges_from_item(op, b->last_use[x], own);
    if (recorded(op) && b->last_use[x] >= 0) /* else the split-off's */
        vf__profiling_var_used(op, x);
    release_one(op, x, ready);
}

void vf__bulk_release_ran(vf__op *op)
{
    vf__bulk_batch *b = op->arg;
    int running = atomic_load_explicit(&b->running, memory_order_relaxed);
    if (running <= b->released_before)
        return; /* nothing ran since the last release */
    /* Once per op, even out of memory: a second try could come where
     * nothing may run (vf__bulk_push's lock). */
    b->released_before = running;
    if (b->last_use == NULL && !note_last_uses(b))
        return;
    vf__readylist ready;
    vf__readylist_init(&ready);
    uint64_t own = 0;
    for (int v = 0; v < b->nvars; v++) {
        if (!b->released[v] && b->last_use[v] < running)
            release_early(op, v, &own, &ready);
    }
    edges_from_fused(op, &own);
    if (ready.count != 0) {
        vf__engine_count_in(vf__op_engine(op),
                            (uint64_t)ready.count * VF__COUNT_ACTIVE);
        vf__exec_dispatch_ready(&ready);
    }
}

/* Whether `child`, pushed from the running item `running` of the fused op
 * `op`, must come before a later item of the batch on a var they share:
 * the later item writes it, or the child does and the later item uses it.
 * (Both var sets are in normal form, sorted by address: one walk.) */
static bool passes_later_items(const vf__op *op, const vf__op *child,
                               int running)
{
    const vf__bulk_batch *b = op->arg;
    int j = 0;
    for (int i = 0; i < child->nvars && j < op->nvars; i++) {
        const vf__dep *cd = vf__op_dep(child, i);
        uintptr_t want = (uintptr_t)vf__dep_var(cd);
        while (j < op->nvars &&
               (uintptr_t)vf__dep_var(vf__op_dep(op, j)) < want)
            j++;
        if (j == op->nvars || (uintptr_t)vf__dep_var(vf__op_dep(op, j)) != want)
            continue;
        if (!b->released[j] &&
            (b->last_write[j] > running ||
             (vf__dep_write(cd) && b->last_use[j] > running)))
            return true;
    }
    return false;
}

/* Hold no more than the items from `running` on need: let go of each var
 * none of them uses, and make a write none of them makes a read (its
 * reads queued right behind run beside it, a child's among them). */
static void narrow(vf__op *op, int running)
{
    vf__bulk_batch *b = op->arg;
    b->released_before = running;
    vf__readylist ready;
    vf__readylist_init(&ready);
    uint64_t own = 0;
    for (int x = 0; x < b->nvars; x++) {
        if (b->released[x])
            continue;
        vf__dep *d = vf__op_dep(op, x);
        if (b->last_use[x] < running) {
            release_early(op, x, &own, &ready);
        } else if (vf__dep_write(d) && b->last_write[x] < running) {
            edges_from_item(op, b->last_write[x], &own);
            if (recorded(op) && b->last_write[x] >= 0) /* it has ended */
                vf__profiling_var_used(op, x);
            vf__var_downgrade(vf__dep_var(d), d, &ready);
        }
    }
    edges_from_fused(op, &own);
    if (ready.count != 0) {
        vf__engine_count_in(vf__op_engine(op),
                            (uint64_t)ready.count * VF__COUNT_ACTIVE);
        vf__exec_dispatch_ready(&ready);
    }
}

void vf__bulk_before_child(vf__op *op, const vf__op *child)
{
    vf__bulk_batch *b = op->arg;
    int running = atomic_load_explicit(&b->running, memory_order_relaxed);
    if (b->last_use == NULL && !note_last_uses(b))
        return; /* out of memory: the batch holds its vars to its end */
    int nitems = b->nitems;
    if (running + 1 < nitems &&
        (child == NULL || passes_later_items(op, child, running)))
        split_after(vf__op_engine(op), op, running);
    if (b->nitems != nitems)
        note_last_uses(b); /* of the items it kept (the block exists) */
    narrow(op, running);
}

uint64_t vf__bulk_item_record_id(const vf__op *op, uint64_t place)
{
    const vf__bulk_batch *b = op->arg;
    int n = __atomic_load_n(&b->nitems, __ATOMIC_RELAXED);
    for (int i = n - 1; i >= 0; i--) /* the running one is near the end */
        if (b->items[i].place == place)
            return item_id(op, i);
    return 0;
}

bool vf__bulk_let_go(const vf__op *op, int x)
{
    const vf__bulk_batch *b = op->arg;
    return b->released != NULL && b->released[x];
}

bool vf__bulk_released(const vf__op *op, const vf__var *v)
{
    for (int i = 0; i < op->nvars; i++)
        if (vf__dep_var(vf__op_dep(op, i)) == v)
            return vf__bulk_let_go(op, i);
    return false;
}

/* Its kind's release_vars (op.h): finish lets go of the vars not released
 * early. */
static void bulk_release_vars(vf__op *op, vf__readylist *ready)
{
    const vf__bulk_batch *b = op->arg;
    for (int v = 0; v < op->nvars; v++)
        if (b->released == NULL || !b->released[v])
            release_one(op, v, ready);
}

/* A fused batch of user ops: observed as one op, but profiled as its ops
 * (run_batch); each op in it is counted and bumps its versions as it runs
 * (run_batch), not at finish. */
const vf__op_kind vf__kind_bulk = {.name = "bulk",
                                   .run = bulk_run,
                                   .dropped = bulk_dropped,
                                   .free_arg = bulk_free_arg,
                                   .finished = bulk_finished,
                                   .records = batch_records,
                                   .release_vars = bulk_release_vars,
                                   .flags = VF__KIND_OBSERVED | VF__KIND_HELD |
                                            VF__KIND_OWN_RELEASE};
