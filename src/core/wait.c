/*
 * wait.c: wait_var and wait_all, from outside ops and from inside them.
 *
 * wait_var(v) pushes a wait marker that reads v (MXNet's WaitForVar): it
 * becomes ready once every write pushed before it has finished, and then
 * wakes the waiter (inline, on the thread that released it). When v has no
 * write queued or running, the wait returns at once without a push.
 *
 * A wait from inside an op must neither hang the pool nor hang forever:
 * - the waiting worker keeps running ready ops of its pool (and a thread
 *   running inline ops runs its deferred ones) until its marker fires;
 * - it stops counting as active while it waits. If active reaches zero with
 *   its marker still pending, every unfinished op waits for a var or for a
 *   nested wait, so nothing can ever move (see engine.h). One such waiter
 *   (whoever wins a compare-and-swap that makes itself active again) gives
 *   up with VF_EDEADLK; the others go on waiting, since the giver-up's op
 *   finishing may well unblock them.
 * Waiting on a var the running op itself writes is refused at once.
 */
#include <string.h>

#include "base/alloc.h"
#include "core/bulk.h"
#include "core/engine.h"
#include "core/exec.h"
#include "core/lifecycle.h"

void vf__waiter_unref(vf__waiter *w)
{
    if (atomic_fetch_sub(&w->refs, 1) == 1) {
        vf__failure_unref(w->claimed);
        free(w);
    }
}

static void report(vf__failure *f, vf_error *err)
{
    if (err != NULL)
        *err = f->info;
}

static void clear_error(vf_error *err)
{
    if (err != NULL)
        memset(err, 0, sizeof *err);
}

static bool is_done(vf__waiter *w)
{
    return atomic_load(&w->state) == VF__W_DONE;
}

struct nested_pred {
    vf_engine *e;
    vf__waiter *w;
};

static bool nested_should_wake(void *arg)
{
    const struct nested_pred *p = arg;
    return is_done(p->w) || (uint32_t)atomic_load(&p->e->counts) == 0;
}

/* Sleep on the engine's condition until `w` is done or, when `nested`, until
 * active may be zero. Spurious returns are fine: callers loop. */
static void sleep_on_engine(vf_engine *e, vf__waiter *w, bool nested)
{
    atomic_fetch_add(&e->nwaiters, 1);
    pthread_mutex_lock(&e->wait_lock);
    if (!is_done(w) && !(nested && (uint32_t)atomic_load(&e->counts) == 0))
        pthread_cond_wait(&e->wait_cond, &e->wait_lock);
    pthread_mutex_unlock(&e->wait_lock);
    atomic_fetch_sub(&e->nwaiters, 1);
}

/* Run ready ops while waiting inside an op; see the file comment.
 * Returns 0 when the marker fired, VF_EDEADLK when this waiter gave up.
 * Either way the caller is counted active again on return: by the marker
 * (or the op that ran above the wait) when it fired, by the waiter's own
 * CAS when it gave up. */
static int nested_wait(vf_engine *e, vf__waiter *w, vf__worker *me)
{
    atomic_fetch_add(&e->nnested_waiters, 1);
    uint64_t now = atomic_fetch_sub(&e->counts, VF__COUNT_ACTIVE) -
                   VF__COUNT_ACTIVE;
    if ((uint32_t)now == 0)
        vf__engine_counts_changed(e, now);
    vf__loop_frame saved;
    vf__loop_enter(w, &saved);
    int rc = 0;
    struct nested_pred pred = {e, w};
    for (;;) {
        int s = atomic_load(&w->state);
        if (s == VF__W_DONE)
            break;
        if (s == VF__W_SIGNALING) {
            vf__cpu_relax();
            continue;
        }
        VF__ASSERT(s == VF__W_IDLE);
        if (vf__loop_run_one(w, me))
            continue;
        uint64_t c = atomic_load(&e->counts);
        if ((uint32_t)c == 0) {
            if (!atomic_compare_exchange_strong(&e->counts, &c,
                                                c + VF__COUNT_ACTIVE))
                continue;
            int expected = VF__W_IDLE;
            if (atomic_compare_exchange_strong(&w->state, &expected,
                                               VF__W_ABANDONED)) {
                rc = VF_EDEADLK;
                break;
            }
            /* A marker is active while it signals, so active == 0 means it
             * already finished: it counted us back too, undo our own. */
            VF__ASSERT(expected == VF__W_DONE);
            atomic_fetch_sub(&e->counts, VF__COUNT_ACTIVE);
            break;
        }
        if (me != NULL)
            vf__pool_idle_wait(me->pool, nested_should_wake, &pred);
        else
            sleep_on_engine(e, w, true);
    }
    vf__loop_leave(&saved);
    atomic_fetch_sub(&e->nnested_waiters, 1);
    return rc;
}

static bool op_writes(const vf__op *op, const vf__var *v)
{
    for (int i = 0; i < op->def->nvars; i++)
        if (op->def->vars[i].var == v)
            return op->def->vars[i].write;
    return false;
}

VF_API int vf_wait_var(vf_engine *e, vf_var h, vf_error *err)
{
    static const char who[] = "vf_wait_var";
    clear_error(err);
    if (!vf__engine_ok(e))
        return vf__fail(VF_EINVAL, "%s: not an engine", who);
    vf__var *v;
    int rc = vf__var_lookup(&e->vars, h, &v);
    if (rc != 0)
        return vf__fail(rc, "%s: variable (id %#llx) %s", who,
                        (unsigned long long)h.id, vf_strerror(rc));
    if (VF__UNLIKELY(e->engine_info)) {
        atomic_store_explicit(&v->watched, true, memory_order_relaxed);
        fprintf(stderr, "varflow: wait on var %#llx\n",
                (unsigned long long)h.id);
    }
    vf__bulk_flush_all(e); /* the ops it waits for may sit in a batch */
    vf__op *cur = vf__current_op();
    bool nested = cur != NULL && cur->engine == e;
    if (nested && op_writes(cur, v))
        return vf__fail(VF_EDEADLK, "%s: op \"%s\" waits on a variable it "
                                    "writes itself", who, cur->def->name);
    if (!nested && (rc = vf__engine_check_waitable(e, who)) != 0)
        return rc;

    /* Fast path: no write queued or running, so all earlier writes are done
     * and the failure (if any) is final. */
    uint32_t gen = vf__var_handle_gen(h);
    vf__spin_lock(&v->lock);
    if (!vf__var_usable(v, gen)) {
        vf__spin_unlock(&v->lock);
        return vf__fail(VF_ESTALE, "%s: variable was deleted", who);
    }
    if (v->pending_write == NULL && v->nreaders != VF__WRITE_RUNNING) {
        /* No write queued or running; a device write's work may still be
         * in flight (its fence): the host waits for it. */
        vf__fence *fence = v->wfence;
        if (fence != NULL)
            vf__fence_ref(fence);
        vf__failure *f = atomic_load_explicit(&v->failure,
                                              memory_order_acquire);
        if (f != NULL)
            vf__failure_ref(f);
        vf__spin_unlock(&v->lock);
        uint32_t epoch = atomic_load(&e->fail_epoch);
        if (fence != NULL) {
            vf__failure *ff = vf__fence_host_wait(e, fence);
            if (ff != NULL && (f == NULL || !vf__failure_active(f, epoch))) {
                vf__failure_ref(ff);
                vf__failure_unref(f);
                f = ff;
            }
            vf__fence_unref(fence);
        }
        bool claimed = f != NULL && vf__failure_active(f, epoch) &&
                       vf__failure_claim(f);
        if (claimed)
            report(f, err);
        vf__failure_unref(f);
        return claimed ? VF_EOPFAILED : 0;
    }
    vf__spin_unlock(&v->lock);

    vf__waiter *w = vf__malloc(sizeof *w);
    vf__op *op = vf__op_alloc();
    if (w == NULL || op == NULL) {
        free(w);
        if (op)
            vf__op_free(op);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    vf__worker *me = vf__this_worker();
    if (me != NULL && me->pool->engine != e)
        me = NULL;
    atomic_init(&w->state, VF__W_IDLE);
    atomic_init(&w->refs, 2); /* the waiter and the wait op */
    w->claimed = NULL;
    w->sleep_pool = nested && me ? me->pool : NULL;
    w->nested = nested;

    vf__opdef *def = &op->own;
    memset(def, 0, sizeof *def);
    def->kind = VF__OP_WAIT;
    def->inline_run = true;
    def->name = "vf_wait_var";
    def->nvars = 1;
    def->vars = op->inline_vars;
    op->inline_vars[0] = (vf__varref){.var = v, .gen = gen, .write = false};
    op->def = def;
    op->waiter = w;
    if ((rc = vf__engine_enqueue(e, op, who)) != 0) {
        vf__op_free(op);
        free(w);
        return rc;
    }

    if (nested) {
        rc = nested_wait(e, w, me);
    } else {
        /* This thread may be running an inline op of another engine, whose
         * trampoline holds our marker: run it rather than sleep on it. */
        while (!is_done(w))
            if (!vf__run_deferred())
                sleep_on_engine(e, w, false);
    }
    if (rc == 0 && w->claimed != NULL) {
        report(w->claimed, err);
        rc = VF_EOPFAILED;
    } else if (rc == VF_EDEADLK) {
        vf__fail(rc, "%s: the wait can never finish (op \"%s\" would wait "
                     "for ops that wait for it)", who, cur->def->name);
    }
    vf__waiter_unref(w);
    return rc;
}

/* Block until no op is pending and no batch is open (outside ops only):
 * ops running meanwhile may push into their threads' batches, so the
 * batches are flushed again until none is left. With `help`, the thread
 * runs queued ops of the CPU pool itself while there are any, and sleeps
 * only when there are none (every pending op then runs or waits
 * elsewhere); a pending op it wakes for later is still the workers'. */
static void wait_idle(vf_engine *e, bool help)
{
    do {
        vf__bulk_flush_all(e);
        while (help && (atomic_load(&e->counts) >> 32) != 0 &&
               vf__help_run(e)) {
        }
        atomic_fetch_add(&e->nwaiters, 1);
        pthread_mutex_lock(&e->wait_lock);
        while ((atomic_load(&e->counts) >> 32) != 0)
            pthread_cond_wait(&e->wait_cond, &e->wait_lock);
        pthread_mutex_unlock(&e->wait_lock);
        atomic_fetch_sub(&e->nwaiters, 1);
    } while (vf__bulk_any_open(e));
}

/* Stop, destroy and fork drain without helping: a fork handler, above all,
 * must not run user code. */
void vf__engine_drain(vf_engine *e)
{
    wait_idle(e, false);
}

VF_API int vf_wait_all(vf_engine *e, vf_error *err)
{
    static const char who[] = "vf_wait_all";
    clear_error(err);
    if (!vf__engine_ok(e))
        return vf__fail(VF_EINVAL, "%s: not an engine", who);
    vf__op *cur = vf__current_op();
    if (cur != NULL && cur->engine == e)
        return vf__fail(VF_EDEADLK, "%s: called inside op \"%s\", which "
                                    "would wait for itself", who,
                        cur->def->name);
    int held = vf__engine_check_waitable(e, who);
    if (held != 0)
        return held;
    wait_idle(e, e->help_on_wait);

    /* Report the oldest failure nobody reported yet, then clear them all:
     * the new epoch makes every older record inert. */
    int rc = 0;
    pthread_mutex_lock(&e->fail_lock);
    vf__failure *f = e->fail_head;
    e->fail_head = e->fail_tail = NULL;
    atomic_fetch_add(&e->fail_epoch, 1);
    pthread_mutex_unlock(&e->fail_lock);
    while (f != NULL) {
        vf__failure *next = f->next;
        if (rc == 0 && vf__failure_claim(f)) {
            report(f, err);
            rc = VF_EOPFAILED;
        }
        vf__failure_unref(f);
        f = next;
    }
    return rc;
}
