/* device_pools.c: an engine's devices, made on first use with their pools,
 * and what stop, start, fork and destroy do to them (see device_pools.h). */
#include "core/device_pools.h"

#include "base/alloc.h"
#include "core/engine.h"

/* --- devices and their pools -------------------------------------------- */

static const char *pool_name(vf_device_type t, int kind)
{
    static const char *const names[2][3] = {{"cuda", "cuda-copy", "cuda-prio"},
                                            {"emu", "emu-copy", "emu-prio"}};
    return names[t == VF_DEVICE_EMULATED][kind];
}

/* Make one pool of a device with a stream per worker (dev.lock held). */
static int make_pool(vf_engine *e, vf__devctx *d, int kind, int n,
                     _Atomic(vf__pool *) *out)
{
    int slot = e->npools;
    if (slot >= VF__MAX_POOLS)
        return vf__fail(VF_ENOTSUP, "too many device pools");
    vf__pool *p = &e->pools[slot];
    int rc = vf__pool_init(p, e, &e->runner, pool_name(d->dev.type, kind), n,
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
    atomic_store_explicit(out, p, memory_order_release);
    return 0;
}

/* Make the pools of device d that are missing (dev.lock held): all of a
 * new device's, or those its first start could not make (a thread quota,
 * say), which a later push tries again. The ones made stay (the engine
 * frees them). 0, or the first failure. */
static int make_missing_pools(vf_engine *e, vf__devctx *d)
{
    int rc = 0;
    if (atomic_load_explicit(&d->normal, memory_order_relaxed) == NULL)
        rc = make_pool(e, d, 0, e->dev.workers, &d->normal);
    if (rc == 0 && atomic_load_explicit(&d->copy, memory_order_relaxed) == NULL)
        rc = make_pool(e, d, 1, e->dev.copy_workers, &d->copy);
    if (rc == 0 && atomic_load_explicit(&d->prio, memory_order_relaxed) == NULL)
        rc = make_pool(e, d, 2, e->dev.priority_workers, &d->prio);
    return rc;
}

/* Make device `dev` of class `cls` (dev.lock held). */
static int make_device(vf_engine *e, const vf__device_class *cls, vf_device dev,
                       vf__devctx **out)
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
        rc = e->dev.threads_down ? 0 : vf__completer_start(&e->dev.completer);
        /* A pool made stays (the engine frees it): the device is kept with
         * what it has, and a later push tries the rest again. */
        if (rc == 0)
            rc = make_missing_pools(e, d);
    }
    if (rc != 0 &&
        atomic_load_explicit(&d->normal, memory_order_relaxed) == NULL) {
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

/* Which of a device's pools runs its ops of a property. */
typedef enum device_pool {
    NO_POOL = -1, /* not a property */
    COMPUTE_POOL,
    COPY_POOL,
    PRIO_POOL
} device_pool;

static device_pool pool_of_property(vf_property prop)
{
    switch (prop) {
    case VF_PROP_COPY_TO_DEVICE:
    case VF_PROP_COPY_FROM_DEVICE:
        return COPY_POOL;
    case VF_PROP_DEVICE_PRIORITIZED:
        return PRIO_POOL;
    case VF_PROP_NORMAL:
    case VF_PROP_DELETE_VAR:
    case VF_PROP_CPU_PRIORITIZED: /* MXNet: a device op runs on the device */
        return COMPUTE_POOL;
    }
    return NO_POOL;
}

int vf__device_check(vf_engine *e, const char *who, vf_device dev,
                     vf_property prop, vf__devctx **made)
{
    *made = NULL;
    if (dev.type != VF_DEVICE_CUDA && dev.type != VF_DEVICE_EMULATED)
        return vf__fail(VF_ENODEV,
                        "%s: device type %d is not a "
                        "vf_device_type",
                        who, (int)dev.type);
    char why[256]; /* a detail quoted in ours (vf__fail rewrites it) */
    const vf__device_class *cls = vf__device_class_of(dev.type);
    if (cls == NULL) {
        snprintf(why, sizeof why, "%s", vf_error_detail());
        return vf__fail(VF_ENODEV, "%s: %s", who, why);
    }
    if (dev.id < 0 || dev.id >= VF__MAX_DEVICE_IDS)
        return vf__fail(VF_ENODEV, "%s: %s device id %d (ids are 0..%d)", who,
                        cls->name, dev.id, VF__MAX_DEVICE_IDS - 1);
    vf__devctx *d = vf__device_of(e, dev);
    if (d != NULL && d->forked_away)
        return vf__fail(VF_ENODEV,
                        "%s: %s device %d cannot be used in this "
                        "forked child",
                        who, cls->name, dev.id);
    if (d == NULL) {
        int n = cls->count();
        snprintf(why, sizeof why, "%s", n ? "" : vf_error_detail());
        if (dev.id >= n)
            return vf__fail(VF_ENODEV, "%s: no %s device %d (%d found%s%s)",
                            who, cls->name, dev.id, n, n ? "" : ": ", why);
    }
    if (pool_of_property(prop) == NO_POOL)
        return vf__fail(VF_EINVAL, "%s: unknown property %d", who, (int)prop);
    *made = d;
    return 0;
}

int vf__device_route(vf_engine *e, const char *who, vf_device dev,
                     vf_property prop, vf__devctx *d, vf__pool **pool)
{
    const vf__device_class *cls = vf__device_class_of(dev.type);
    char why[256]; /* a detail quoted in ours (vf__fail rewrites it) */
    if (d == NULL) {
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
            snprintf(why, sizeof why, "%s", vf_error_detail());
            return vf__fail(rc, "%s: cannot start %s device %d: %s", who,
                            cls->name, dev.id, why);
        }
    }
    device_pool k = pool_of_property(prop);
    _Atomic(vf__pool *) *slot = k == COPY_POOL   ? &d->copy
                                : k == PRIO_POOL ? &d->prio
                                                 : &d->normal;
    *pool = atomic_load_explicit(slot, memory_order_acquire);
    if (VF__UNLIKELY(*pool == NULL) && e->cpu_pool != NULL) {
        /* Its first start could not make this pool: tried again now (it
         * refused the pool for good: found by a user tester). */
        pthread_mutex_lock(&e->dev.lock);
        int rc = make_missing_pools(e, d);
        pthread_mutex_unlock(&e->dev.lock);
        *pool = atomic_load_explicit(slot, memory_order_acquire);
        if (*pool == NULL) {
            snprintf(why, sizeof why, "%s", vf_error_detail());
            return vf__fail(rc != 0 ? rc : VF_ENODEV,
                            "%s: cannot start %s device %d's pools: %s", who,
                            cls->name, dev.id, why);
        }
    }
    return 0;
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

/* --- stop, start, fork and destroy ------------------------------------ */

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
    vf__completer_stop(&e->dev.completer);
    streams_stop_start(e, true);
}

int vf__devices_start(vf_engine *e)
{
    bool any = false;
    for (int k = 0; k < VF__DEVICE_SLOTS && !any; k++)
        any = device_at(e, k) != NULL;
    int rc = streams_stop_start(e, false);
    if (rc == 0 && any && e->cpu_pool != NULL)
        rc = vf__completer_start(&e->dev.completer);
    return rc;
}

/* In the child: a stream of the parent's. The fork stopped it first (every
 * engine's stop joins its streams' threads, fork_prepare), so a device
 * usable here frees it as destroy would; CUDA's is left as it is. */
static void drop_parents_stream(const vf__devctx *d, vf__stream *s)
{
    if (s != NULL && d->cls->usable_after_fork)
        d->cls->stream_destroy(s);
}

/* In the child: a device pool anew, same place, one worker, with a stream
 * of its own when the device can be used here. */
static void rebuild_pool(vf_engine *e, vf__devctx *d, vf__pool *p)
{
    const char *name = p->name;
    for (int w = 0; w < p->nworkers; w++) {
        drop_parents_stream(d, p->workers[w].stream);
        p->workers[w].stream = NULL;
    }
    vf__pool_destroy(p);
    if (vf__pool_init(p, e, &e->runner, name, 1, e->dev.next_worker_index) !=
        0) {
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
    vf__completer_forget(&e->dev.completer);
    for (int k = 0; k < VF__DEVICE_SLOTS; k++) {
        vf__devctx *d = device_at(e, k);
        if (d == NULL)
            continue;
        d->forked_away = !d->cls->usable_after_fork;
        while (d->inline_streams != NULL) { /* the parent's threads' */
            vf__thread_stream *ts = d->inline_streams;
            d->inline_streams = ts->next;
            drop_parents_stream(d, ts->stream);
            free(ts);
        }
        pthread_mutex_init(&d->inline_lock, NULL);
        vf__pool *pools[] = {
            atomic_load_explicit(&d->normal, memory_order_relaxed),
            atomic_load_explicit(&d->copy, memory_order_relaxed),
            atomic_load_explicit(&d->prio, memory_order_relaxed)};
        for (int i = 0; i < 3; i++)
            if (pools[i] != NULL)
                rebuild_pool(e, d, pools[i]);
    }
}

void vf__devices_destroy(vf_engine *e)
{
    vf__completer_stop(&e->dev.completer);
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
