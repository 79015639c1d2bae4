/* device_ops.c: pools per device, fences on vars, the completer (see
 * device_ops.h). */
#include "core/device_ops.h"

#include <sched.h>
#include <string.h>

#include "base/alloc.h"
#include "core/engine.h"
#include "core/exec.h"

/* --- fences ------------------------------------------------------------- */

void vf__fence_ref(vf__fence *f)
{
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

void vf__fence_unref(vf__fence *f)
{
    if (f == NULL ||
        atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1)
        return;
    f->cls->event_release(f->ev);
    vf__failure_unref(f->failure);
    free(f);
}

void vf__devrun_free(vf__devrun *d)
{
    if (d->start_ev != NULL)
        d->cls->event_release(d->start_ev);
    for (int i = 0; i < d->ninputs; i++)
        vf__fence_unref(d->inputs[i]);
    vf__fence_unref(d->fence);
    free(d);
}

/* The failure a resolved fence carries (no reference), or NULL. */
static vf__failure *fence_failure(vf__fence *f)
{
    return atomic_load_explicit(&f->resolved, memory_order_acquire)
               ? f->failure
               : NULL;
}

vf__failure *vf__fence_host_wait(vf_engine *e, vf__fence *f)
{
    if (!atomic_load_explicit(&f->resolved, memory_order_acquire)) {
        f->cls->event_wait(f->ev, NULL);
        atomic_fetch_add_explicit(&e->dev.host_syncs, 1, memory_order_relaxed);
        /* Complete: the completer resolves it as soon as it reaches it. */
        while (!atomic_load_explicit(&f->resolved, memory_order_acquire))
            sched_yield();
    }
    return f->failure;
}

/* The fences an op depends on through var v, copied (with references)
 * into out[] in one visit under the var's lock; returns how many. With
 * `write_fence`, the write fence: the work that wrote what the op uses,
 * whose failure the op inherits. With `reads`, for a var the op writes,
 * the read fences: work that only read v, which the op must follow (it
 * overwrites what they read) but whose failure is none of its business
 * (rule 9 puts a failure on what the failing op writes only). */
static int var_fences(vf__var *v, bool write_fence, bool reads,
                      vf__fence **out)
{
    int n = 0;
    vf__spin_lock(&v->lock);
    if (write_fence && v->wfence != NULL) {
        vf__fence_ref(v->wfence);
        out[n++] = v->wfence;
    }
    for (int i = 0; reads && i < v->nrfences; i++) {
        vf__fence_ref(v->rfences[i]);
        out[n++] = v->rfences[i];
    }
    vf__spin_unlock(&v->lock);
    return n;
}

void vf__fences_host_wait(vf__op *op)
{
    const vf__opdef *def = op->def;
    vf_engine *e = op->engine;
    vf__fence *fs[1 + VF__VAR_READ_FENCES];
    for (int i = 0; i < def->nvars; i++) {
        int n = var_fences(def->vars[i].var, true, def->vars[i].write, fs);
        for (int k = 0; k < n; k++) {
            vf__fence_host_wait(e, fs[k]);
            vf__fence_unref(fs[k]);
        }
    }
}

vf__failure *vf__var_failure(vf_engine *e, vf__var *v, uint64_t place)
{
    vf__failure *own = atomic_load_explicit(&v->failure, memory_order_acquire);
    /* No lock: the write fence changes only under an op that holds v
     * exclusively, and the caller holds v (the queue's hand-off orders
     * the last change before this read). */
    vf__fence *w = v->wfence;
    if (w == NULL)
        return own;
    /* The last write's work still in flight decides between its own
     * failure and v's, which it supersedes only by failing: the host
     * waits for it, when v's is one that matters. */
    if (!atomic_load_explicit(&w->resolved, memory_order_acquire) &&
        own != NULL && vf__failure_live_for(own, place))
        vf__fence_host_wait(e, w);
    vf__failure *f = fence_failure(w);
    return f != NULL ? f : own;
}

void vf__var_drop_fences(vf__var *v)
{
    vf__spin_lock(&v->lock);
    if (v->wfence == NULL && v->nrfences == 0) {
        vf__spin_unlock(&v->lock);
        return;
    }
    vf__fence *w = v->wfence;
    vf__fence *r[VF__VAR_READ_FENCES];
    int n = v->nrfences;
    memcpy(r, v->rfences, sizeof r);
    v->wfence = NULL;
    v->nrfences = 0;
    vf__spin_unlock(&v->lock);
    /* The last device write's work failed after it released v: the
     * failure is v's now (it sticks, rule 9), not the fence's, which goes.
     * Whoever drops holds v exclusively (or no op runs): no reader races. */
    vf__failure *f = w != NULL ? fence_failure(w) : NULL;
    if (f != NULL) {
        vf__failure_ref(f);
        vf__failure_unref(
            atomic_exchange_explicit(&v->failure, f, memory_order_acq_rel));
    }
    vf__fence_unref(w);
    for (int i = 0; i < n; i++)
        vf__fence_unref(r[i]);
}

void vf__fences_clear_written(const vf__op *op)
{
    const vf__opdef *def = op->def;
    for (int i = 0; i < def->nvars; i++) {
        if (!def->vars[i].write)
            continue;
        vf__var_drop_fences(def->vars[i].var);
    }
}

/* --- running a device op ------------------------------------------------ */

int vf__device_op_begin(vf__op *op, const vf__device_class *cls,
                        vf__stream *s)
{
    const vf__opdef *def = op->def;
    vf_engine *e = op->engine;
    int cap = def->nvars * (1 + VF__VAR_READ_FENCES);
    vf__devrun *d = vf__malloc(sizeof *d + (size_t)cap * sizeof d->inputs[0]);
    if (d == NULL)
        return vf__fail(VF_ENOMEM, "device op \"%s\": out of memory",
                        def->name);
    d->cls = cls;
    d->fence = NULL;
    d->start_ev = NULL;
    d->ninputs = 0;
    op->dev = d;
    if (VF__UNLIKELY(op->hooks & VF__HOOK_PROF) &&
        cls->record(s, &d->start_ev) != 0)
        d->start_ev = NULL; /* no span: the op itself is unaffected */
    /* The write fences first: they carry failures (d->ncarry of them);
     * then the read fences of what the op writes, which only order. */
    for (int i = 0; i < def->nvars; i++)
        d->ninputs += var_fences(def->vars[i].var, true, false,
                                 d->inputs + d->ninputs);
    d->ncarry = d->ninputs;
    for (int i = 0; i < def->nvars; i++)
        if (def->vars[i].write)
            d->ninputs += var_fences(def->vars[i].var, false, true,
                                     d->inputs + d->ninputs);
    for (int k = 0; k < d->ninputs; k++) {
        vf__fence *f = d->inputs[k];
        /* A no_skip op runs whatever its inputs went through: its waits
         * only order. */
        bool carry = k < d->ncarry && !def->no_skip;
        /* A resolved fence's work is complete: nothing to order. Unless it
         * failed and the op must inherit that (live for it): it may have
         * resolved after the op looked on the host (run_body), so the
         * stream still waits for its event, which carries the failure. */
        if (atomic_load_explicit(&f->resolved, memory_order_acquire) &&
            !(carry && f->failure != NULL &&
              vf__failure_live_for(f->failure, op->place)))
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
        int rc = cls->stream_wait(s, f->ev, carry);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Leave `f` on the op's vars: the write fence of what it writes (the read
 * fences are done with: `f` is ordered after them), a read fence of what
 * it reads. A var with no room left for a read fence waits on the host for
 * its oldest one. */
static void leave_fence(vf__op *op, vf__fence *f)
{
    const vf__opdef *def = op->def;
    for (int i = 0; i < def->nvars; i++) {
        vf__var *v = def->vars[i].var;
        vf__fence *drop[1 + VF__VAR_READ_FENCES];
        int ndrop = 0;
        vf__fence_ref(f);
        vf__spin_lock(&v->lock);
        if (def->vars[i].write) {
            if (v->wfence != NULL)
                drop[ndrop++] = v->wfence;
            for (int k = 0; k < v->nrfences; k++)
                drop[ndrop++] = v->rfences[k];
            v->nrfences = 0;
            v->wfence = f;
        } else {
            int k = 0; /* a newer read fence of the same stream replaces */
            while (k < v->nrfences && v->rfences[k]->stream != f->stream)
                k++;
            if (k == v->nrfences && k == VF__VAR_READ_FENCES)
                k = 0; /* full: the oldest goes (waited for below) */
            if (k < v->nrfences)
                drop[ndrop++] = v->rfences[k];
            else
                v->nrfences++;
            v->rfences[k] = f;
        }
        vf__spin_unlock(&v->lock);
        for (int k = 0; k < ndrop; k++) {
            /* A read fence pushed out by a full var, from another stream,
             * must still be met by the next writer: meet it now. */
            if (!def->vars[i].write && drop[k]->stream != f->stream)
                vf__fence_host_wait(op->engine, drop[k]);
            vf__fence_unref(drop[k]);
        }
    }
}

/* The outcome of a device op whose work completed with `st` (its function
 * returned 0): a new failure, or the one it inherited on the device from a
 * fence it waited for (resolved before it: device_ops.h). */
static void device_outcome(vf__op *op, const vf__event_status *st)
{
    if (op->failure != NULL || st->code == 0)
        return;
    vf__devrun *d = op->dev;
    vf__failure *fail = NULL;
    for (int k = 0; st->inherited && k < d->ncarry; k++) {
        vf__failure *f = fence_failure(d->inputs[k]);
        if (f != NULL && vf__failure_live_for(f, op->place) &&
            vf__failure_before(f, fail))
            fail = f;
    }
    if (fail != NULL) {
        vf__failure_ref(fail);
        op->failure = fail;
        op->status = VF_ESKIPPED;
        op->skipped = true;
        return;
    }
    op->failure = vf__engine_record_failure(op->engine, st->code, op->def->name,
                                            st->message, op->place, op->root);
    op->status = st->code;
}

bool vf__device_op_end(vf__op *op, const vf__device_class *cls,
                       vf__stream *s)
{
    vf_engine *e = op->engine;
    const vf__opdef *def = op->def;
    vf__event *ev = NULL;
    vf__fence *f = NULL;
    int rrc = cls->record(s, &ev);
    if (rrc == 0 && (f = vf__calloc(1, sizeof *f)) == NULL) {
        cls->event_release(ev);
        rrc = vf__fail(VF_ENOMEM, "device op \"%s\": out of memory",
                       def->name);
    }
    if (rrc != 0 || e->dev.sync || def->pool == NULL) {
        /* Synchronous: wait for the work here (or, when no event could be
         * recorded, for the whole stream) and finish like a CPU op. */
        vf__event_status st = {0};
        if (rrc != 0) {
            st.code = cls->stream_sync(s);
            if (st.code == 0)
                st.code = rrc;
            snprintf(st.message, sizeof st.message, "%s",
                     vf_last_error_detail());
        } else {
            cls->event_wait(ev, &st);
            vf__device_op_span(op, ev);
            cls->event_release(ev);
            free(f);
        }
        atomic_fetch_add_explicit(&e->dev.host_syncs, 1, memory_order_relaxed);
        device_outcome(op, &st);
        vf__fences_clear_written(op);
        return false;
    }
    atomic_init(&f->refs, 1); /* the op's */
    f->cls = cls;
    f->ev = ev;
    f->stream = s;
    atomic_init(&f->resolved, false);
    op->dev->fence = f;
    leave_fence(op, f);
    return true;
}

void vf__device_op_span(vf__op *op, vf__event *end_ev)
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
    if (start != 0 && end != 0)
        vf__prof_op_device_span(op->engine->prof, op->prof, start, end);
}

/* --- the completer ------------------------------------------------------ */

/* Resolve op's fence once its event completed (see device_ops.h). */
static void resolve(vf__op *op)
{
    vf__fence *f = op->dev->fence;
    vf__event_status st = {0};
    f->cls->event_wait(f->ev, &st);
    vf__device_op_span(op, f->ev);
    device_outcome(op, &st);
    /* Its writes complete now (rule 8): bumped unless the stream skipped
     * its work; before `resolved`, which whoever reads them next meets. */
    const vf__opdef *def = op->def;
    for (int i = 0; !op->skipped && i < def->nvars; i++)
        if (def->vars[i].write)
            atomic_fetch_add_explicit(&def->vars[i].var->version, 1,
                                      memory_order_relaxed);
    if (op->failure != NULL)
        vf__failure_ref(op->failure);
    f->failure = op->failure;
    atomic_store_explicit(&f->resolved, true, memory_order_release);
}

/* Events of one stream complete in order: wait for the newest of each
 * stream in a batch first, so that the device can answer for the older
 * ones without asking the hardware again (device.h's event_wait). */
static void wait_newest_per_stream(vf__op *batch)
{
    enum { MAX_STREAMS = 32 };
    vf__fence *newest[MAX_STREAMS];
    int n = 0;
    for (vf__op *op = batch; op != NULL; op = op->next) {
        vf__fence *f = op->dev->fence;
        int k = 0;
        while (k < n && newest[k]->stream != f->stream)
            k++;
        if (k < n)
            newest[k] = f;
        else if (n < MAX_STREAMS)
            newest[n++] = f;
    }
    for (int k = n - 1; k >= 0; k--)
        newest[k]->cls->event_wait(newest[k]->ev, NULL);
}

static void *completer_main(void *arg)
{
    vf_engine *e = arg;
    vf__completer *c = &e->dev.completer;
    pthread_setname_np(pthread_self(), "vf-completer");
    pthread_mutex_lock(&c->lock);
    for (;;) {
        vf__op *op = c->head;
        if (op == NULL) {
            if (c->stop)
                break;
            c->sleeping = true;
            pthread_cond_wait(&c->cond, &c->lock);
            c->sleeping = false;
            continue;
        }
        c->head = c->tail = NULL; /* take them all: one lock per batch */
        pthread_mutex_unlock(&c->lock);
        wait_newest_per_stream(op);
        while (op != NULL) {
            vf__op *next = op->next; /* op may be freed by its completion */
            resolve(op);
            vf__device_op_complete(op);
            op = next;
        }
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

void vf__completer_add(vf_engine *e, vf__op *op)
{
    vf__completer *c = &e->dev.completer;
    op->next = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->tail != NULL)
        c->tail->next = op;
    else
        c->head = op;
    c->tail = op;
    if (c->sleeping)
        pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* Start the completer (dev.lock held). */
static int completer_start(vf_engine *e)
{
    vf__completer *c = &e->dev.completer;
    if (c->started)
        return 0;
    c->head = c->tail = NULL;
    c->stop = false;
    if (pthread_mutex_init(&c->lock, NULL) != 0)
        return VF_ESYSTEM;
    if (pthread_cond_init(&c->cond, NULL) != 0) {
        pthread_mutex_destroy(&c->lock);
        return VF_ESYSTEM;
    }
    if (pthread_create(&c->thread, NULL, completer_main, e) != 0) {
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->lock);
        return VF_ESYSTEM;
    }
    c->started = true;
    return 0;
}

static void completer_stop(vf_engine *e)
{
    vf__completer *c = &e->dev.completer;
    if (!c->started)
        return;
    pthread_mutex_lock(&c->lock);
    c->stop = true;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    VF__ASSERT(c->head == NULL);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    c->started = false;
}

/* Device slot k of the engine (k < VF__DEVICE_SLOTS: every type and id),
 * or NULL when that device was never used. */
#define VF__DEVICE_SLOTS (2 * VF__MAX_DEVICE_IDS)
static vf__devctx *device_at(vf_engine *e, int k)
{
    return atomic_load_explicit(
        &e->dev.ctx[k / VF__MAX_DEVICE_IDS][k % VF__MAX_DEVICE_IDS],
        memory_order_relaxed);
}

/* Stop (or start) the host threads of every stream of the engine. */
static int streams_stop_start(vf_engine *e, bool stop)
{
    int rc = 0;
    for (int i = 0; i < e->npools; i++) {
        vf__pool *p = &e->pools[i];
        for (int w = 0; p->workers != NULL && w < p->nworkers; w++) {
            vf__worker *wk = &p->workers[w];
            if (wk->stream == NULL)
                continue;
            if (stop)
                wk->dev_cls->stream_stop(wk->stream);
            else if (rc == 0)
                rc = wk->dev_cls->stream_start(wk->stream);
        }
    }
    for (int k = 0; k < VF__DEVICE_SLOTS; k++) {
        vf__devctx *d = device_at(e, k);
        for (vf__thread_stream *ts = d ? d->inline_streams : NULL; ts != NULL;
             ts = ts->next) {
            if (stop)
                d->cls->stream_stop(ts->stream);
            else if (rc == 0)
                rc = d->cls->stream_start(ts->stream);
        }
    }
    return rc;
}

void vf__devices_stop(vf_engine *e)
{
    completer_stop(e);
    streams_stop_start(e, true);
}

int vf__devices_start(vf_engine *e)
{
    bool any = false;
    for (int k = 0; k < VF__DEVICE_SLOTS && !any; k++)
        any = device_at(e, k) != NULL;
    int rc = streams_stop_start(e, false);
    if (rc == 0 && any && e->cpu_pool != NULL)
        rc = completer_start(e);
    return rc;
}

/* In the child: a device pool anew, same place, one worker, with a stream
 * of its own when the device can be used here. */
static void rebuild_pool(vf_engine *e, vf__devctx *d, vf__pool *p)
{
    const char *name = p->name;
    for (int w = 0; w < p->nworkers; w++)
        p->workers[w].stream = NULL; /* the parent's: not ours to destroy */
    vf__pool_destroy(p);
    if (vf__pool_init(p, e, name, 1, e->dev.next_worker_index) != 0) {
        d->forked_away = true;
        return;
    }
    e->dev.next_worker_index += 1;
    p->spread = true;
    p->workers[0].dev_cls = d->cls;
    if (d->forked_away || d->cls->stream_create(d->dev.id, &e->dev.params,
                                                &p->workers[0].stream) != 0)
        d->forked_away = true;
    else
        d->cls->stream_stop(p->workers[0].stream); /* start runs it */
}

void vf__devices_rebuild_for_child(vf_engine *e)
{
    e->dev.completer.started = false; /* its thread is the parent's */
    e->dev.completer.head = e->dev.completer.tail = NULL;
    for (int k = 0; k < VF__DEVICE_SLOTS; k++) {
        vf__devctx *d = device_at(e, k);
        if (d == NULL)
            continue;
        /* CUDA cannot be used after fork; the emulated device can. */
        d->forked_away = d->cls->type != VF_DEVICE_EMULATED;
        d->inline_streams = NULL; /* the parent's threads' */
        pthread_mutex_init(&d->inline_lock, NULL);
        vf__pool *pools[] = {d->normal, d->copy, d->prio};
        for (int i = 0; i < 3; i++)
            if (pools[i] != NULL)
                rebuild_pool(e, d, pools[i]);
    }
}

/* --- devices and their pools -------------------------------------------- */

static const char *pool_name(vf_device_type t, int kind)
{
    static const char *const names[2][3] = {
        {"cuda", "cuda-copy", "cuda-prio"},
        {"emu", "emu-copy", "emu-prio"}};
    return names[t == VF_DEVICE_EMULATED][kind];
}

/* Make one pool of a device with a stream per worker (dev.lock held). */
static int make_pool(vf_engine *e, vf__devctx *d, int kind, int n,
                     vf__pool **out)
{
    int slot = e->npools;
    if (slot >= VF__MAX_POOLS)
        return vf__fail(VF_ENOTSUP, "too many device pools");
    vf__pool *p = &e->pools[slot];
    int rc = vf__pool_init(p, e, pool_name(d->dev.type, kind), n,
                           e->dev.next_worker_index);
    p->spread = true;
    for (int i = 0; i < n && rc == 0; i++) {
        p->workers[i].dev_cls = d->cls;
        rc = d->cls->stream_create(d->dev.id, &e->dev.params,
                                   &p->workers[i].stream);
        if (rc == 0 && e->dev.threads_down) /* stopped: start runs it */
            d->cls->stream_stop(p->workers[i].stream);
    }
    if (rc == 0 && !e->dev.threads_down) /* stopped: start runs them */
        rc = vf__pool_start(p);
    if (rc != 0) {
        vf__pool_stop(p);
        for (int i = 0; p->workers != NULL && i < n; i++)
            if (p->workers[i].stream != NULL)
                d->cls->stream_destroy(p->workers[i].stream);
        vf__pool_destroy(p);
        return rc;
    }
    e->dev.next_worker_index += n;
    atomic_store_explicit(&e->npools, slot + 1, memory_order_release);
    *out = p;
    return 0;
}

/* Make device `dev` of class `cls` (dev.lock held). */
static int make_device(vf_engine *e, const vf__device_class *cls,
                       vf_device dev, vf__devctx **out)
{
    vf__devctx *d = vf__calloc(1, sizeof *d);
    if (d == NULL)
        return vf__fail(VF_ENOMEM, "out of memory");
    d->cls = cls;
    d->dev = dev;
    int rc = pthread_mutex_init(&d->inline_lock, NULL) == 0 ? 0 : VF_ESYSTEM;
    if (rc != 0) {
        free(d);
        return rc;
    }
    if (e->cpu_pool != NULL) {
        rc = e->dev.threads_down ? 0 : completer_start(e);
        if (rc == 0)
            rc = make_pool(e, d, 0, e->dev.workers, &d->normal);
        if (rc == 0)
            rc = make_pool(e, d, 1, e->dev.copy_workers, &d->copy);
        if (rc == 0)
            rc = make_pool(e, d, 2, e->dev.priority_workers, &d->prio);
        /* A pool made stays (the engine frees it): the device is kept with
         * what it has, and a later push tries the rest again. */
    }
    if (rc != 0 && d->normal == NULL) {
        pthread_mutex_destroy(&d->inline_lock);
        free(d);
        return rc;
    }
    atomic_fetch_or_explicit(&e->slow, VF__SLOW_DEVICES, memory_order_relaxed);
    *out = d;
    return rc;
}

int vf__device_thread_stream(vf_engine *e, vf__devctx *d, vf__stream **out)
{
    pthread_t self = pthread_self();
    pthread_mutex_lock(&d->inline_lock);
    vf__thread_stream *ts = d->inline_streams;
    while (ts != NULL && !pthread_equal(ts->thread, self))
        ts = ts->next;
    pthread_mutex_unlock(&d->inline_lock);
    if (ts != NULL) { /* entries are only added while the engine lives */
        *out = ts->stream;
        return 0;
    }
    ts = vf__calloc(1, sizeof *ts);
    if (ts == NULL)
        return vf__fail(VF_ENOMEM, "out of memory");
    int rc = d->cls->stream_create(d->dev.id, &e->dev.params, &ts->stream);
    if (rc != 0) {
        free(ts);
        return rc;
    }
    ts->thread = self;
    pthread_mutex_lock(&d->inline_lock);
    ts->next = d->inline_streams;
    d->inline_streams = ts;
    pthread_mutex_unlock(&d->inline_lock);
    *out = ts->stream;
    return 0;
}

vf__devctx *vf__device_of(vf_engine *e, vf_device dev)
{
    return atomic_load_explicit(&e->dev.ctx[dev.type - 1][dev.id],
                                memory_order_acquire);
}

int vf__device_route(vf_engine *e, const char *who, vf_device dev,
                     vf_property prop, vf__pool **pool)
{
    if (dev.type != VF_DEVICE_CUDA && dev.type != VF_DEVICE_EMULATED)
        return vf__fail(VF_ENODEV, "%s: device type %d is not a "
                                   "vf_device_type", who, (int)dev.type);
    char why[256]; /* a detail quoted in ours (vf__fail rewrites it) */
    const vf__device_class *cls = vf__device_class_of(dev.type);
    if (cls == NULL) {
        snprintf(why, sizeof why, "%s", vf_last_error_detail());
        return vf__fail(VF_ENODEV, "%s: %s", who, why);
    }
    if (dev.id < 0 || dev.id >= VF__MAX_DEVICE_IDS)
        return vf__fail(VF_ENODEV, "%s: %s device id %d (ids are 0..%d)",
                        who, cls->name, dev.id, VF__MAX_DEVICE_IDS - 1);
    vf__devctx *d = vf__device_of(e, dev);
    if (d != NULL && d->forked_away)
        return vf__fail(VF_ENODEV, "%s: %s device %d cannot be used in this "
                                   "forked child",
                        who, cls->name, dev.id);
    if (d == NULL) {
        int n = cls->count();
        snprintf(why, sizeof why, "%s", n ? "" : vf_last_error_detail());
        if (dev.id >= n)
            return vf__fail(VF_ENODEV, "%s: no %s device %d (%d found%s%s)",
                            who, cls->name, dev.id, n, n ? "" : ": ", why);
        pthread_mutex_lock(&e->dev.lock);
        d = vf__device_of(e, dev);
        int rc = 0;
        if (d == NULL) {
            rc = make_device(e, cls, dev, &d);
            if (d != NULL)
                atomic_store_explicit(&e->dev.ctx[dev.type - 1][dev.id], d,
                                      memory_order_release);
        }
        pthread_mutex_unlock(&e->dev.lock);
        if (rc != 0) {
            snprintf(why, sizeof why, "%s", vf_last_error_detail());
            return vf__fail(rc, "%s: cannot start %s device %d: %s", who,
                            cls->name, dev.id, why);
        }
    }
    switch (prop) {
    case VF_PROP_COPY_TO_DEVICE:
    case VF_PROP_COPY_FROM_DEVICE:
        *pool = d->copy;
        break;
    case VF_PROP_DEVICE_PRIORITIZED:
        *pool = d->prio;
        break;
    case VF_PROP_NORMAL:
    case VF_PROP_DELETE_VAR:
    case VF_PROP_CPU_PRIORITIZED: /* MXNet: a device op runs on the device */
        *pool = d->normal;
        break;
    default:
        return vf__fail(VF_EINVAL, "%s: unknown property %d", who,
                        (int)prop);
    }
    if (*pool == NULL && e->cpu_pool != NULL)
        return vf__fail(VF_ENODEV, "%s: %s device %d could not start all "
                                   "its pools", who, cls->name, dev.id);
    return 0;
}

void vf__devices_destroy(vf_engine *e)
{
    completer_stop(e);
    /* Vars' fences hold events of the streams: gone first. */
    vf__var_table_drop_fences(&e->vars);
    for (int i = 0; i < e->npools; i++) {
        vf__pool *p = &e->pools[i];
        for (int w = 0; p->workers != NULL && w < p->nworkers; w++) {
            if (p->workers[w].stream != NULL)
                p->workers[w].dev_cls->stream_destroy(p->workers[w].stream);
            p->workers[w].stream = NULL;
        }
    }
    for (int k = 0; k < VF__DEVICE_SLOTS; k++) {
        vf__devctx *d = device_at(e, k);
        if (d == NULL)
            continue;
        while (d->inline_streams != NULL) {
            vf__thread_stream *ts = d->inline_streams;
            d->inline_streams = ts->next;
            d->cls->stream_destroy(ts->stream);
            free(ts);
        }
        pthread_mutex_destroy(&d->inline_lock);
        free(d);
        atomic_store_explicit(
            &e->dev.ctx[k / VF__MAX_DEVICE_IDS][k % VF__MAX_DEVICE_IDS], NULL,
            memory_order_relaxed);
    }
}

VF_API int vf_device_count(vf_device_type type)
{
    if (type == VF_DEVICE_CPU)
        return 1;
    const vf__device_class *cls = vf__device_class_of(type);
    if (cls == NULL)
        return 0; /* vf__device_class_of left the detail */
    return cls->count();
}
