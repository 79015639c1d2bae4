/*
 * profiling.c: the engine's side of the profiler: the public vf_profile_*
 * calls that take an engine, forwarded through the door (profile/hooks.h)
 * with what only the engine knows (its kind and its workers' pools), the
 * hooks byte that new ops copy at push, and what an op whose byte is set
 * tells the observers (the profiler, VF_ENGINE_INFO's log) as it starts,
 * ends and is finished.
 */
#include "core/profiling.h"

#include <stdio.h>

#include "core/engine.h"
#include "core/lifecycle.h"
#include "varflow_profile.h"

void vf__profiling_update_hooks(vf_engine *e)
{
    /* The state is read, the byte stored, and the state read again until
     * it stayed: a start, stop, pause or resume of another thread between
     * one read and its store had this store undo that thread's (stopped,
     * and every later push recorded, or the reverse: found by an auditor).
     * The state's accesses and this store are seq_cst: a change the read
     * after the store misses is followed by its own thread's store, which
     * comes after this one, so the last store is of the last state. No
     * lock: a fork would have to take it too. */
    bool on;
    do {
        on = vf__prof_recording(e->prof);
        atomic_store(&e->hooks, (uint8_t)((e->engine_info ? VF__HOOK_INFO : 0) |
                                          (on ? VF__HOOK_PROF : 0)));
    } while (vf__prof_recording(e->prof) != on);
}

void vf__profiling_describe(const vf_engine *e, vf__prof_engine_desc *d)
{
    d->kind = e->kind;
    d->npools = e->npools;
    for (int i = 0; i < e->npools; i++)
        d->pools[i] = (vf__prof_pool_desc){
            .name = e->pools[i].name,
            .first_worker = e->pools[i].nworkers > 0
                                ? e->pools[i].workers[0].index
                                : 0,
            .nworkers = e->pools[i].nworkers};
}

/* The profile's state changes (start, stop, pause, resume): every open
 * batch is pushed first. A batch's ops are recorded or not as it is, at
 * its push (its hooks byte): an op pushed before the change but still in
 * a batch would be taken for one pushed after it (with bulking, ops
 * pushed while paused were recorded, and an op pushed while recording
 * was not; found by the second reviewer of the profile's edges). */
static void before_state_change(vf_engine *e)
{
    vf__bulk_flush_all(e);
}

static int profile_start(vf_engine *e)
{
    before_state_change(e);
    int rc = vf__prof_start(e->prof);
    vf__profiling_update_hooks(e);
    return rc;
}

VF_API int vf_profile_start(vf_engine *e)
{
    return VF__GUARDED_LIVE(e, "vf_profile_start", profile_start(e));
}

static int set_state(vf_engine *e, const char *who, int from, int to)
{
    before_state_change(e);
    int rc = vf__prof_set_state(e->prof, who, from, to);
    vf__profiling_update_hooks(e);
    return rc;
}

VF_API int vf_profile_stop(vf_engine *e)
{
    static const char who[] = "vf_profile_stop";
    return VF__GUARDED_LIVE(e, who, set_state(e, who, -1, VF__PROF_OFF));
}

VF_API int vf_profile_pause(vf_engine *e)
{
    static const char who[] = "vf_profile_pause";
    return VF__GUARDED_LIVE(e, who,
                            set_state(e, who, VF__PROF_ON, VF__PROF_PAUSED));
}

VF_API int vf_profile_resume(vf_engine *e)
{
    static const char who[] = "vf_profile_resume";
    return VF__GUARDED_LIVE(e, who,
                            set_state(e, who, VF__PROF_PAUSED, VF__PROF_ON));
}

static int profile_take(vf_engine *e, vf_profile **out)
{
    if (out == NULL)
        return vf__fail(VF_EINVAL, "vf_profile_take: out is NULL");
    vf__prof_engine_desc d;
    vf__profiling_describe(e, &d);
    return vf__prof_take(e->prof, &d, out);
}

VF_API int vf_profile_take(vf_engine *e, vf_profile **out)
{
    return VF__GUARDED_LIVE(e, "vf_profile_take", profile_take(e, out));
}

/* --- an op's hooks ----------------------------------------------------- */

/* VF_ENGINE_INFO: log an op's step when it touches a var someone waited
 * on (MXNet's MXNET_ENGINE_INFO). */
static void info(const vf__op *op, const char *step, int worker)
{
    for (int i = 0; i < op->nvars; i++) {
        if (atomic_load_explicit(&vf__dep_var(vf__op_dep(op, i))->watched,
                                 memory_order_relaxed)) {
            fprintf(stderr,
                    "varflow: %s op \"%s\" on %s (worker %d, %d "
                    "vars, status %d)\n",
                    step, op->name,
                    vf_engine_type_name(vf__op_engine(op)->kind), worker,
                    op->nvars, op->status);
            return;
        }
    }
}

/* The observers' part of an op's start (out of line: rarely on). */
void vf__profiling_op_start(vf__op *op, int worker)
{
    if (op->hooks & VF__HOOK_PROF)
        vf__prof_op_started(vf__op_engine(op)->prof, op->prof, worker);
    if (op->hooks & VF__HOOK_INFO)
        info(op, "dispatch", worker);
}

/* A var's generation, as the profiler's table of the last ops to end on
 * each slot keys it (hooks.h: vf__prof_var_used). */
static uint32_t var_gen(const vf__var *v)
{
    return atomic_load_explicit(&v->gen, memory_order_relaxed);
}

/* The record of `op`, pushed from inside `parent`'s run (NULL: none),
 * names it (hooks.h: vf__prof_op_parent). Of the same engine (another's
 * has ids of another profile), and recorded (hooks set, its record made);
 * running, so its record is there until it ends. Not an async op: another
 * thread may finish it meanwhile and free its record (found by the
 * reviewer: TSan), and its record spans its whole completion, not its own
 * work (its children's time counted twice on the path). A fused op's
 * parent is the item whose run pushed it. */
static void note_parent(const vf__op *op, const vf__op *parent)
{
    if (parent == NULL || parent->def->async ||
        !(parent->hooks & VF__HOOK_PROF) || parent->prof == NULL ||
        vf__op_engine(parent) != vf__op_engine(op))
        return;
    if (parent->def->kind != &vf__kind_bulk) {
        vf__prof_op_parent(op->prof, parent->prof);
        return;
    }
    const vf__family *up = op->def->kind == &vf__kind_bulk
                               ? ((const vf__bulk_batch *)op->arg)->up
                               : op->up;
    if (up != NULL)
        vf__prof_op_parent_id(op->prof, parent->prof,
                              vf__bulk_item_record_id(parent, up->place));
}

void vf__profiling_held_at_push(const vf__op *op, int n, const vf__op *parent)
{
    vf__profiler *p = vf__op_engine(op)->prof;
    vf__prof_op_number(p, op->prof);
    note_parent(op, parent);
    for (int i = 0; i < n; i++) {
        const vf__dep *d = vf__op_dep(op, i);
        const vf__var *v = vf__dep_var(d);
        if (vf__var_free_for(v, vf__dep_write(d)))
            vf__prof_var_edge(p, op->prof, v->index, var_gen(v),
                              vf__dep_write(d));
    }
}

void vf__profiling_edge_past(vf__op *op, const vf__var *v, bool write)
{
    vf__prof_var_edge(vf__op_engine(op)->prof, op->prof, v->index, var_gen(v),
                      write);
}

void vf__profiling_var_used(const vf__op *op, int x)
{
    const vf__dep *d = vf__op_dep(op, x);
    const vf__var *v = vf__dep_var(d);
    vf__prof_var_used(vf__op_engine(op)->prof, op->prof, v->index, var_gen(v),
                      vf__dep_write(d));
}

/* The op ends, its vars not released yet (but those a fused op let go of
 * early, told then): it is the last to end on them. */
static void note_vars_used(vf__op *op)
{
    bool fused = op->def->kind == &vf__kind_bulk;
    for (int i = 0; i < op->nvars; i++)
        if (!fused || !vf__bulk_let_go(op, i))
            vf__profiling_var_used(op, i);
}

/* The observers' part of an op's end (before its done callback). */
void vf__profiling_op_end(vf__op *op)
{
    if (op->hooks & VF__HOOK_PROF) {
        vf__profiler *p = vf__op_engine(op)->prof;
        vf__prof_op_ended(p, op->prof, op->skipped);
        /* Recorded once its vars are released (their next ops' edges name
         * it), after its done callback, after the waits on its vars and
         * its parent's for its children returned: any of them may free the
         * name, which must stay valid only until the op has finished (kept
         * for a `done` alone, the others' garbled names: an auditor). */
        vf__prof_op_name(p, op->prof, op->name);
        note_vars_used(op);
    }
    if (op->hooks & VF__HOOK_INFO)
        info(op, "complete", vf__this_worker() ? vf__this_worker()->index : -1);
}

/* The op whose stretch (profiling.h) this thread counts innermost. */
static _Thread_local const vf__op *counting;

void vf__profiling_stretch_from(const vf__op *op, vf__prof_stretch *s)
{
    if (op->prof == NULL || op->def->async || counting == op)
        return;
    s->op = op;
    s->outer = counting;
    s->from = vf__prof_now(vf__op_engine(op)->prof);
    counting = op;
}

void vf__profiling_stretch_to(const vf__prof_stretch *s)
{
    uint64_t now = vf__prof_now(vf__op_engine(s->op)->prof);
    vf__prof_op_inside(s->op->prof, now > s->from ? now - s->from : 0);
    counting = s->outer;
}

/* The pool of the worker with index `worker`, -1 for none. */
static int pool_of_worker(vf_engine *e, int worker)
{
    int npools = atomic_load_explicit(&e->npools, memory_order_acquire);
    for (int i = 0; worker >= 0 && i < npools; i++) {
        const vf__pool *pool = &e->pools[i];
        if (pool->nworkers > 0 && worker >= pool->workers[0].index &&
            worker < pool->workers[0].index + pool->nworkers)
            return i;
    }
    return -1;
}

/* The profiler's record of a finished op (out of line: rarely on). */
void vf__profiling_op_record(vf__op *op)
{
    const vf__opdef *def = op->def;
    vf_engine *e = vf__op_engine(op);
    /* An op routed inline (async, or the naive engine's) runs where it
     * was made ready: on a worker (of that worker's pool), or on a thread
     * of the program (-1). */
    int pool = !def->inline_run && def->pool != NULL
                   ? (int)(def->pool - e->pools)
                   : pool_of_worker(e, op->prof->worker);
    vf__prof_op_finished(e->prof, op->prof,
                         &(vf__prof_op_desc){.name = op->name,
                                             .pool = pool,
                                             .device = def->device,
                                             .property = def->property,
                                             .async = def->async,
                                             .status = op->status});
    op->hooks &= (uint8_t)~VF__HOOK_PROF;
    op->prof = NULL; /* freed by the profiler */
}
