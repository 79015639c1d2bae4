/* device_ops.c: a device op's trip, top to bottom: its kind's body (the
 * fences met on the host where it must, or its skip), its run on a stream
 * between the fences it waits for and the one it leaves, the release of its
 * vars while its work is in flight, and its completion (see
 * device_ops.h). */
#include "core/device_ops.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/deadline.h"
#include "core/completer.h"
#include "core/engine.h"
#include "core/exec.h"
#include "core/graph.h"
#include "core/profiling.h"
#include "core/wait.h"

vf__devrun *vf__devrun_new(const vf__device_class *cls, int cap)
{
    vf__devrun *d = vf__malloc(sizeof *d + (size_t)cap * sizeof d->inputs[0]);
    if (d == NULL)
        return NULL;
    *d = (vf__devrun){.cls = cls};
    return d;
}

/* Its kind's free_side (op.h): the run state made at its start. */
void vf__devrun_free(vf__op *op)
{
    vf__devrun *d = op->dev;
    if (d == NULL)
        return;
    op->dev = NULL;
    if (d->start_ev != NULL)
        d->cls->event_release(d->start_ev);
    free(d->message);
    for (int i = 0; i < d->nseals; i++)
        d->cls->event_release(d->seals[i]);
    free(d->seals);
    for (int i = 0; i < d->ninputs; i++)
        vf__fence_unref(d->inputs[i]);
    vf__fence_unref(d->fence);
    vf__fence_unref(d->graph_end);
    free(d);
}

/* --- running a device op on its stream ---------------------------------- */

/* Before a device op's function: make `s` wait on the device for the
 * fences of its vars, keeping them as the op's inputs. VF_ENOMEM. */
static int device_op_begin(vf__op *op, const vf__device_class *cls,
                           vf__stream *s)
{
    char label[VF__OP_LABEL_MAX];
    const vf__opdef *def = op->def;
    vf_engine *e = vf__op_engine(op);
    int cap = op->nvars * (1 + VF__VAR_READ_FENCES);
    vf__devrun *d = vf__devrun_new(cls, cap);
    if (d == NULL)
        return vf__fail(VF_ENOMEM, "device %s: out of memory",
                        vf__op_label(op->name, op->place, label));
    d->claims = vf__failure_claims_now(); /* before anything is looked at */
    op->dev = d;
    if (VF__UNLIKELY(op->hooks & VF__HOOK_PROF) &&
        cls->record(s, &d->start_ev) != 0)
        d->start_ev = NULL; /* no span: the op itself is unaffected */
    /* The write fences first: they carry failures (d->ncarry of them);
     * then the read fences of what the op writes, which only order. */
    for (int i = 0; i < op->nvars; i++)
        d->ninputs += vf__fences_of_var(vf__dep_var(vf__op_dep(op, i)), true,
                                        false, d->inputs + d->ninputs);
    d->ncarry = d->ninputs;
    for (int i = 0; i < op->nvars; i++) {
        const vf__dep *dep = vf__op_dep(op, i);
        if (vf__dep_write(dep))
            d->ninputs += vf__fences_of_var(vf__dep_var(dep), false, true,
                                            d->inputs + d->ninputs);
    }
    bool claimed = false; /* it carries a failure a wait claimed */
    for (int k = 0; k < d->ninputs; k++) {
        vf__fence *f = d->inputs[k];
        /* A no_skip op runs whatever its inputs went through: its waits
         * only order. */
        bool carry = k < d->ncarry && !def->no_skip;
        if (carry)
            vf__fence_meet_if_claimed(e, f, d->claims);
        /* A resolved fence's work is complete: nothing to order. Unless it
         * failed and the op must inherit that (live for it): it may have
         * resolved after the op looked on the host (run_body), or been met
         * there just now, so the stream still waits for its event, which
         * carries the failure. */
        bool resolved = atomic_load_explicit(&f->resolved,
                                             memory_order_acquire);
        if (resolved && !(carry && f->failure != NULL &&
                          vf__failure_live_for(f->failure, op->up, op->place)))
            continue;
        if (f->cls != cls) { /* another kind of device: the host orders */
            vf__fence_host_wait(e, f);
            continue;
        }
        /* On the same stream the order is there already; the wait only
         * carries a failure into this op's segment (device.h). */
        if (f->stream == s && !carry) {
            atomic_fetch_add_explicit(&e->dev.same_stream, 1,
                                      memory_order_relaxed);
            continue;
        }
        atomic_fetch_add_explicit(f->stream == s ? &e->dev.same_stream
                                                 : &e->dev.stream_waits,
                                  1, memory_order_relaxed);
        if (resolved) /* it carries that failure: a wait may have claimed it */
            claimed |= vf__failure_claimed(f->failure);
        int rc = cls->stream_wait(s, f->ev, carry);
        if (rc != 0)
            return rc;
    }
    /* Its work inherits, on the device, a failure that a wait after it
     * claimed before it began (live for it, not for what follows the
     * wait): its fence must not pass for one from after that claim, or an
     * op pushed after the wait would carry it without meeting it on the
     * host. It stands as from before the claim (device_ops.h). */
    if (claimed)
        d->claims--;
    return 0;
}

void vf__device_op_work_begins(vf__op *op)
{
    vf__devrun *d = op->dev;
    if (VF__UNLIKELY(op->hooks & VF__HOOK_PROF) && d != NULL && d->put_ns == 0)
        d->put_ns = vf__now_ns();
}

/* Profiling: tell the profiler when the op's work ran on the device, its
 * last event being `end_ev` (complete). */
static void device_span(vf__op *op, vf__event *end_ev)
{
    vf__devrun *d = op->dev;
    if (d == NULL || d->start_ev == NULL || !(op->hooks & VF__HOOK_PROF))
        return;
    const vf__device_class *cls = d->cls;
    uint64_t start = cls->event_time_ns(d->start_ev);
    for (int k = 0; k < d->ninputs; k++) {
        uint64_t t = d->inputs[k]->cls == cls
                         ? cls->event_time_ns(d->inputs[k]->ev)
                         : 0;
        if (t > start)
            start = t;
    }
    uint64_t end = cls->event_time_ns(end_ev);
    if (start != 0 && d->put_ns > start)
        start = d->put_ns < end ? d->put_ns : end; /* empty: no work put */
    if (start != 0 && end != 0)
        vf__prof_op_device_span(vf__op_engine(op)->prof, op->prof, start, end);
}

/* The outcome of a device op whose work completed with `st` (its function
 * returned 0): a new failure, or the one it inherited on the device from a
 * fence it waited for (resolved before it: see the story in device_ops.h). */
static void device_outcome(vf__op *op, const vf__event_status *st)
{
    if (op->failure != NULL || st->code == 0)
        return;
    vf__devrun *d = op->dev;
    vf__failure *fail = NULL, *claimed = NULL;
    for (int k = 0; st->inherited && k < d->ncarry; k++) {
        vf__failure *f = vf__fence_failure(d->inputs[k]);
        if (f == NULL)
            continue;
        if (!vf__failure_live_for(f, op->up, op->place))
            claimed = vf__failure_before(f, claimed) ? f : claimed;
        else if (vf__failure_before(f, fail))
            fail = f;
    }
    /* Inherited, but every failure it could have inherited is inert for
     * it now: a wait claimed it after the op began (its work skipped
     * then). It stays skipped with that failure, as it would had it
     * started before the wait: not a failure of its own. */
    if (fail == NULL)
        fail = claimed;
    if (fail != NULL) {
        vf__failure_ref(fail);
        op->failure = fail;
        op->status = VF_ESKIPPED;
        op->skipped = true;
        return;
    }
    op->failure = vf__engine_record_failure(
        vf__op_engine(op), st->code, op->name,
        d->message != NULL ? d->message : st->message, op->place, op->up);
    op->status = st->code;
}

/* The device ops whose functions run on this thread, innermost first
 * (`up` links each to the one it runs above: run_on_stream keeps the
 * chain on its frames), with their streams; op NULL when none. */
typedef struct device_running {
    vf__op *op;
    vf__stream *stream;
    const struct device_running *up; /* the one it runs above, or NULL */
} device_running;

static _Thread_local device_running running_on;

/* An op is about to run on stream `s` above the device op `outer`, whose
 * function puts work on `s` too (a child run at its push, or above a wait
 * of its function): close `outer`'s segment first, so that a failure of
 * the work it put there so far is its own, and the other op's work starts
 * a segment of its own. Its work after that goes on in a later segment.
 * The serial program runs the other op inside `outer`'s function, but a
 * failure of work is its op's, not whoever's work came next on the stream
 * (a failing op's child on its device was charged with the failure, and
 * the op ran clean: found trying devices as a user). True when sealed;
 * out of memory, or when the device cannot record, the segment stays open
 * as before. */
static bool seal(vf__op *outer, vf__stream *s)
{
    vf__devrun *d = outer->dev;
    vf__event **grown = vf__realloc(d->seals,
                                    (size_t)(d->nseals + 1) * sizeof *grown);
    if (grown == NULL)
        return false;
    d->seals = grown;
    if (d->cls->record(s, &d->seals[d->nseals]) != 0)
        return false;
    d->nseals++;
    return true;
}

/* The op that ran above `outer` (seal) is over on the stream: `outer`'s
 * work from here on carries the failure of what it put there before, as
 * one segment would have (work after a failure in it is skipped), so that
 * its own event, which the ops that depend on it wait for, carries it too
 * (an op reading what it wrote ran clean on the device: the second
 * reviewer). A failure to wait leaves it as before the seals. */
static void unseal(vf__op *outer, vf__stream *s)
{
    vf__devrun *d = outer->dev;
    (void)d->cls->stream_wait(s, d->seals[d->nseals - 1], true);
}

/* The outcome of `op`'s work whose last event completed with `*st`: the
 * first of its segments that failed (its seals come first, complete too:
 * they are earlier on the same stream), else `*st`. */
static void sealed_outcome(vf__op *op, vf__event_status *st)
{
    vf__devrun *d = op->dev;
    for (int i = 0; i < d->nseals; i++) {
        vf__event_status early = {0};
        d->cls->event_wait(d->seals[i], &early);
        if (early.code != 0) {
            *st = early;
            return;
        }
    }
}

/* After its function returned (a failure it returned is already in
 * op->failure): record its event and leave the fence on its vars (or, with
 * device_sync or a naive engine, wait for it here). Returns true when the
 * op is in flight (the completer will finish it: the caller releases its
 * vars now, release_in_flight), false when it is done (op->status and
 * op->failure set). */
static bool device_op_end(vf__op *op, const vf__device_class *cls,
                          vf__stream *s)
{
    char label[VF__OP_LABEL_MAX];
    vf_engine *e = vf__op_engine(op);
    const vf__opdef *def = op->def;
    vf__event *ev = NULL;
    vf__fence *f = NULL;
    vf__device_op_work_begins(op); /* put none: its span is empty */
    int rrc = cls->record(s, &ev);
    if (rrc == 0 && (f = vf__calloc(1, sizeof *f)) == NULL) {
        cls->event_release(ev);
        rrc = vf__fail(VF_ENOMEM, "device %s: out of memory",
                       vf__op_label(op->name, op->place, label));
    }
    if (rrc != 0 || e->dev.sync || def->pool == NULL) {
        /* Synchronous: wait for the work here (or, when no event could be
         * recorded, for the whole stream) and finish like a CPU op. */
        vf__event_status st = {0};
        if (rrc != 0) {
            /* The work's outcome is the stream's: the event or fence that
             * could not be made only makes this end wait for it here. It
             * failed the op with VF_ENOMEM though its work had run (found
             * by a user tester), where the call that met the shortage
             * (none of the program's) should say so and nothing change. */
            st.code = cls->stream_sync(s);
            if (st.code != 0)
                snprintf(st.message, sizeof st.message, "%s",
                         vf_error_detail());
        } else {
            cls->event_wait(ev, &st);
            sealed_outcome(op, &st);
        }
        atomic_fetch_add_explicit(&e->dev.host_syncs, 1, memory_order_relaxed);
        bool host_skipped = op->skipped; /* its vars know (exec.c) */
        device_outcome(op, &st);
        if (op->skipped && !host_skipped) /* its stream skipped the work */
            vf__exec_writes_skipped(op, op->failure);
        if (rrc == 0) {
            if (!op->skipped) /* as resolve: skipped work has no span */
                device_span(op, ev);
            cls->event_release(ev);
            free(f);
        }
        vf__fences_clear_written(op);
        return false;
    }
    atomic_init(&f->refs, 1); /* the op's */
    f->cls = cls;
    f->ev = ev;
    f->stream = s;
    atomic_init(&f->resolved, false);
    f->claims = op->dev->claims;
    op->dev->fence = f;
    vf__fences_leave(op, f);
    return true;
}

/* The failure the op inherits once the host met the device work its vars
 * wait for (work still in flight when it looked may have failed since;
 * of the failures, the first in push order: rule 9), or NULL. */
static vf__failure *inherited_after_host_wait(vf__op *op)
{
    vf__fences_host_wait(op);
    return vf__exec_inherited_failure(op, NULL, 0, op->up, op->place, true);
}

/* Its function returned a failure (op->failure, just recorded) while work
 * it follows may still be on a device: had that work failed, the serial
 * program would have skipped the op, never called it (rule 9). The host
 * meets that work now (a failing op only: the common path never waits),
 * and a failure the op inherits replaces its own, which is cleared as if
 * reported (nobody saw it: it is not the op's). */
static void own_failure_or_skip(vf__op *op)
{
    if (op->def->no_skip || op->nvars == 0)
        return;
    vf__failure *f = inherited_after_host_wait(op);
    if (f == NULL)
        return;
    vf__failure_log_retract(&vf__op_engine(op)->failures, op->failure,
                            op->place);
    vf__exec_op_skipped(op, f);
}

/* Its function on its stream (its worker's, or in the naive engine the
 * pushing thread's stream of its device), between the fences it waits for
 * and the one it leaves. True when it is done now (op->status and
 * op->failure set), false when its work is in flight (release_in_flight
 * follows). */
static bool run_on_stream(vf__op *op, int worker)
{
    char label[VF__OP_LABEL_MAX];
    const vf__opdef *def = op->def;
    vf__devctx *d = def->devctx;
    vf__stream *s = NULL;
    int rc = def->pool != NULL
                 ? (s = vf__this_worker()->stream, 0)
                 : vf__device_thread_stream(vf__op_engine(op), d, &s);
    if (rc == 0 && s == NULL) /* in a forked child, a device it lost */
        rc = vf__fail(VF_ENODEV,
                      "device %s: %s device %d cannot be "
                      "used in this forked child",
                      vf__op_label(op->name, op->place, label), d->cls->name,
                      d->dev.id);
    else if (rc == 0 && VF__UNLIKELY(s == vf__devgraph_recording))
        rc = vf__fail(VF_EINVAL,
                      "device %s: pushed from inside a function "
                      "being recorded for a device replay, it would run "
                      "on the stream being recorded (vf_graph_device_replay: "
                      "a recorded function only submits work)",
                      vf__op_label(op->name, op->place, label));
    /* The device op below this one on this thread nearest to it that puts
     * work on `s`: not always the innermost (a device op on another
     * device may run between them). Its segment this one closes. */
    vf__op *sealed = NULL;
    for (const device_running *r = &running_on;
         rc == 0 && VF__UNLIKELY(r != NULL && r->op != NULL); r = r->up)
        if (r->stream == s) {
            sealed = seal(r->op, s) ? r->op : NULL;
            break;
        }
    if (rc == 0)
        rc = device_op_begin(op, d->cls, s);
    bool in_flight = false;
    if (rc != 0) {
        vf__exec_op_failed(op, rc, vf_error_detail());
    } else {
        vf_run run; /* not zero-initialized: the message is 256 bytes */
        run.op = op;
        run.name = op->name;
        run.worker = worker;
        run.cls = d->cls;
        run.stream = s;
        run.item_refs = NULL;
        device_running outer = running_on;
        running_on.op = op;
        running_on.stream = s;
        running_on.up = &outer;
        int fn_rc = vf__exec_call_fn(op, &run);
        running_on = outer;
        if (VF__UNLIKELY(fn_rc != 0))
            own_failure_or_skip(op);
        else if (VF__UNLIKELY(run.message[0] != '\0'))
            op->dev->message = vf__strdup(run.message); /* NULL: the device's */
        in_flight = device_op_end(op, d->cls, s);
    }
    if (VF__UNLIKELY(sealed != NULL))
        unseal(sealed, s);
    return !in_flight;
}

/* --- in flight: released, then completed -------------------------------- */

/* The last of a device op's two owners (the worker that released its vars,
 * the completer that finished it) counts it out and frees it. */
static void device_op_drop(vf__op *op)
{
    if (atomic_fetch_sub_explicit(&op->wait, 1, memory_order_acq_rel) != 1)
        return;
    vf_engine *e = vf__op_engine(op);
    if (VF__UNLIKELY(op->hooks & VF__HOOK_PROF))
        vf__profiling_op_record(op);
    unsigned wake = vf__engine_count_out(
        e, VF__COUNT_PENDING | VF__COUNT_ACTIVE, true);
    vf__op_free(op);
    if (VF__UNLIKELY(wake != 0))
        vf__engine_wake(e, wake);
}

/* Its kind's released_in_flight (op.h): hand it to the completer, then
 * release its vars now (ops they make ready go to `ready`, counted active);
 * the op itself stays pending and active until it completes. */
static void release_in_flight(vf__op *op, vf__readylist *ready)
{
    vf_engine *e = vf__op_engine(op);
    vf__failure *failure = op->failure; /* before the completer may see */
    if (VF__UNLIKELY(op->hooks))
        vf__profiling_op_end(op);
    atomic_store_explicit(&op->wait, 2, memory_order_relaxed);
    vf__completer_add(&e->dev.completer, op);
    vf__device_release_vars(op, failure, ready);
    device_op_drop(op); /* after the count in: it may lower active */
}

void vf__device_release_vars(vf__op *op, vf__failure *failure,
                             vf__readylist *ready)
{
    int before = ready->count;
    for (int i = 0; i < op->nvars; i++) {
        const vf__dep *d = vf__op_dep(op, i);
        if (vf__dep_write(d)) {
            /* Its versions, and its mark if its stream skips the work:
             * when its work resolves (its fence's); v's own goes. */
            vf__var_recomputed(vf__dep_var(d));
            vf__var_complete_write(vf__dep_var(d), op, failure, false, ready);
        } else
            vf__var_complete_read(vf__dep_var(d), op, ready);
    }
    uint64_t delta = (uint64_t)(ready->count - before) * VF__COUNT_ACTIVE;
    delta += vf__exec_loop_op_released(op); /* in the same step */
    if (delta != 0)
        vf__engine_count_in(vf__op_engine(op), delta);
}

/* Resolve op's fence once its event completed (see device_ops.h). */
static void resolve(vf__op *op)
{
    vf__fence *f = op->dev->fence;
    vf__event_status st = {0};
    f->cls->event_wait(f->ev, &st);
    sealed_outcome(op, &st);
    device_outcome(op, &st);
    /* Work the stream skipped (an input's failed) never ran: no span
     * (found trying the profiler as a user: a skipped op had one). */
    if (!op->skipped)
        device_span(op, f->ev);
    /* Its writes complete now (rule 8): bumped unless the stream skipped
     * its work; before `resolved`, which whoever reads them next meets. */
    for (int i = 0; !op->skipped && i < op->nvars; i++) {
        const vf__dep *d = vf__op_dep(op, i);
        if (vf__dep_write(d)) /* its mark went at release */
            atomic_fetch_add_explicit(&vf__dep_var(d)->version, 1,
                                      memory_order_relaxed);
    }
    if (op->failure != NULL)
        vf__failure_ref(op->failure);
    f->failure = op->failure;
    f->mark = op->skipped ? vf__skip_mark_make(op->failure, op->up, op->place)
                          : NULL;
    atomic_store_explicit(&f->resolved, true, memory_order_release);
    vf__fence *end = op->dev->graph_end; /* reads only order: no failure */
    if (end != NULL) {
        end->cls->event_wait(end->ev, NULL);
        atomic_store_explicit(&end->resolved, true, memory_order_release);
    }
}

void vf__device_op_completed(vf__op *op)
{
    resolve(op);
    if (op->done != NULL)
        vf__exec_call_done(vf__op_engine(op), op->done, op->arg, op->status);
    vf__exec_count_op(vf__op_engine(op), op);
    /* A child (pushed from inside an op): its parent's wait for its
     * children ends with its work, and reports its failure; before the op
     * is counted out (device_op_drop), as finish does, so no count
     * reaches zero while the waiter is about to be woken. */
    if (VF__UNLIKELY(op->up != NULL))
        vf__wait_child_finished(vf__op_engine(op), op);
    if (VF__UNLIKELY(op->dev->graph != NULL))
        vf__graph_devnode_over(op); /* its block is its graph's */
    else
        device_op_drop(op);
}

/* --- the kind ------------------------------------------------------------ */

/* Its kind's run (op.h), for an op that holds its vars: the shutdown notice
 * skips it, an inherited failure skips it, else it runs on its stream. */
static bool run_device_op(vf__op *op, int worker, bool shutdown)
{
    /* A no_skip device op, the one device op that runs over a failed
     * input, meets its fences on the host first: a failure of the work
     * before it then sticks to the vars it writes (rule 9) rather than
     * leave with the fence its own work replaces. */
    if (op->def->no_skip) {
        vf__fences_host_wait(op);
        vf__fences_clear_written(op);
    }
    if (VF__UNLIKELY(shutdown)) {
        vf__exec_op_skipped(op, NULL); /* no failure to pass on (lifecycle.h) */
        return true;
    }
    if (!op->def->no_skip &&
        vf__exec_inherited_failure(op, NULL, 0, op->up, op->place, true) !=
            NULL) {
        /* Skipped before it starts, it writes its vars on the host: the
         * device work it would have followed is met there, as a host op
         * meets it. Then the failure it inherits is looked for again:
         * work still in flight when it looked may have failed, and of
         * the failures the first in push order is the one (rule 9). A
         * wait of another thread may have claimed the one it found
         * meanwhile: it then runs. */
        vf__failure *f = inherited_after_host_wait(op);
        if (f != NULL) {
            /* Done here, unlike a skip after its function ran (which
             * leaves its own fence): the vars it writes take over. */
            vf__fences_clear_written(op);
            vf__exec_op_skipped(op, f);
            return true;
        }
    }
    return run_on_stream(op, worker);
}

bool vf__device_op_run(vf__op *op, int worker, bool shutdown)
{
    return run_device_op(op, worker, shutdown);
}

/* A user op pushed for a device (vf_op.device): counted, observed and held
 * as a CPU user op is. */
const vf__op_kind vf__kind_device = {
    .name = "device",
    .run = run_device_op,
    .released_in_flight = release_in_flight,
    .free_side = vf__devrun_free,
    .flags = VF__KIND_OBSERVED | VF__KIND_COUNTED | VF__KIND_NUMBERED |
             VF__KIND_HELD | VF__KIND_BUMPS | VF__KIND_OWN_FENCES};
