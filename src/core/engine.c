/* engine.c: engine creation and destruction, counters, failure records. */
#include "core/engine.h"

#include <sched.h>
#include <string.h>

#include "base/alloc.h"
#include "base/deadline.h"
#include "base/engine_type.h"
#include "core/addr_vars.h"
#include "core/bulk.h"
#include "core/config.h"
#include "core/exec.h"
#include "core/freelist.h"
#include "core/graph.h"
#include "core/lifecycle.h"
#include "core/profiling.h"
#include "core/thread_exit.h"

/* Engines alive in the process: the free-list depot is trimmed when the
 * last one goes. Tags tell engines' var handles apart: no two live engines
 * share one (a bitmap of the tags in use, under tags_lock). */
static atomic_int live_engines;
static pthread_mutex_t tags_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tags_used[65536 / 64]; /* tags_lock */
static uint16_t last_tag;              /* tags_lock */
static pthread_once_t freelists_once = PTHREAD_ONCE_INIT;

static void init_freelists(void)
{
    for (int n = 0; n <= VF__OP_LISTED_VARS; n++)
        vf__fl_init(VF__FL_OP + n, vf__op_block_size(n));
    /* calloc'd, so aligned to max_align_t as a copied argument must be */
    vf__fl_init(VF__FL_ARG, VF_OP_ARG_INLINE);
    vf__fl_init(VF__FL_FAMILY, sizeof(vf__family));
    vf__fl_init(VF__FL_WAITER, sizeof(vf__waiter));
    vf__fl_init(VF__FL_COMPLETION, sizeof(vf__completion_slot));
}

/* A tag no live engine holds (0 when all 65535 are taken). Tags go round
 * so a destroyed engine's stale handles do not name the next engine. */
static uint16_t take_tag(void)
{
    uint16_t tag = 0;
    pthread_mutex_lock(&tags_lock);
    for (unsigned i = 1; i < 65536 && tag == 0; i++) {
        uint16_t t = (uint16_t)(last_tag + i);
        if (t != 0 && !(tags_used[t / 64] >> (t % 64) & 1))
            tag = t;
    }
    if (tag != 0) {
        tags_used[tag / 64] |= (uint64_t)1 << (tag % 64);
        last_tag = tag;
    }
    pthread_mutex_unlock(&tags_lock);
    return tag;
}

static void give_back_tag(uint16_t tag)
{
    pthread_mutex_lock(&tags_lock);
    tags_used[tag / 64] &= ~((uint64_t)1 << (tag % 64));
    pthread_mutex_unlock(&tags_lock);
}

bool vf__engine_tag_taken(uint16_t tag)
{
    pthread_mutex_lock(&tags_lock);
    bool taken = tags_used[tag / 64] >> (tag % 64) & 1;
    pthread_mutex_unlock(&tags_lock);
    return taken;
}

void vf__engine_tags_lock(bool lock)
{
    if (lock)
        pthread_mutex_lock(&tags_lock);
    else
        pthread_mutex_unlock(&tags_lock);
}

/* Make the CPU pools (not started): `workers` and `prio_workers` threads. */
static int make_cpu_pools(vf_engine *e, int workers, int prio_workers)
{
    if (e->kind == VF_ENGINE_NAIVE)
        return 0;
    int rc = vf__pool_init(&e->pools[0], e, &e->runner, "cpu", workers, 0);
    if (rc != 0)
        return rc;
    e->pools[0].count_inbox = e->run_at_push; /* exec.c: runs_at_top_push */
    e->npools = 1;
    e->cpu_pool = &e->pools[0];
    if (e->kind == VF_ENGINE_PERDEVICE) {
        rc = vf__pool_init(&e->pools[1], e, &e->runner, "prio", prio_workers,
                           workers);
        if (rc != 0)
            return rc;
        e->npools = 2;
        e->priority_pool = &e->pools[1];
    }
    e->dev.next_worker_index = vf__engine_count_workers(e);
    return 0;
}

static int start_pools(vf_engine *e, const vf__settings *s)
{
    int rc = make_cpu_pools(e, s->cpu_workers, s->cpu_priority_workers);
    for (int i = 0; i < e->npools && rc == 0; i++)
        rc = vf__pool_start(&e->pools[i]);
    return rc;
}

/* Move the counts of ops run by the workers of e's pools into the engine's
 * own (the child's pools are made anew: vf_stats keeps what the parent
 * ran). */
static void fold_worker_counts(vf_engine *e)
{
    for (int p = 0; p < e->npools; p++)
        for (int i = 0; i < e->pools[p].nworkers; i++) {
            vf__worker *w = &e->pools[p].workers[i];
            atomic_fetch_add(&e->ran, atomic_exchange(&w->ran, 0));
            atomic_fetch_add(&e->failed, atomic_exchange(&w->failed, 0));
            atomic_fetch_add(&e->skipped, atomic_exchange(&w->skipped, 0));
        }
}

void vf__engine_rebuild_for_child(vf_engine *e)
{
    /* The parent's threads do not exist here: the CPU pools are made anew
     * in place (ops point at them) with fork_child_workers each, then the
     * device pools after them. */
    fold_worker_counts(e);
    int npools = e->npools;
    int cpu = e->priority_pool ? 2 : e->cpu_pool ? 1 : 0;
    for (int i = 0; i < cpu; i++)
        vf__pool_destroy(&e->pools[i]);
    /* Other threads of the parent are gone: whatever they were counted for
     * (a push caught half way, a waiter, a blocked pusher, a foreign
     * completer) and whatever var lock one held are gone with them; the
     * wait condition forgets its waiters. Nothing was pending: the engine
     * was drained before the fork. */
    vf__counts_after_fork(&e->counts); /* the child's only thread */
    atomic_store(&e->waits.nwaiters, 0);
    atomic_store(&e->waits.watchers, 0);
    atomic_store(&e->waits.nnested, 0);
    atomic_store(&e->nblocked, 0);
    atomic_store(&e->completers, 0);
    atomic_store(&e->awake, 0); /* none of its threads is here */
    atomic_store(&e->waits.outside_asleep, 0);
    e->waits.nested = NULL; /* drained: no nested waiter */
    vf__sleeplock_init(&e->waits.nested_lock);
    vf__cond_init_monotonic(&e->waits.cond); /* timed waits */
    vf__var_table_after_fork(&e->vars);
    vf__prof_after_fork(e->prof);
    int n = e->life.fork_child_workers;
    if (make_cpu_pools(e, n, n) != 0) {
        /* No memory for pools in the child: the engine cannot run. */
        e->life.fork_dead = true;
        atomic_store(&e->state, VF__DRAINING);
        return;
    }
    e->npools = npools;
    vf__devices_rebuild_for_child(e);
}

void vf__engine_free(vf_engine *e, uint64_t *operators, uint64_t *vars)
{
    /* Join every pool's workers before freeing any pool: a worker of one
     * pool may still be waking another pool it just submitted to. */
    for (int i = 0; i < e->npools; i++)
        vf__pool_stop(&e->pools[i]);
    vf__devices_destroy(e); /* streams, after their workers */
    for (int i = 0; i < e->npools; i++)
        vf__pool_destroy(&e->pools[i]);
    /* No op is left to hold one: the graphs and operators the program
     * forgot (graphs first: they hold operators). */
    vf__graphs_free_all(e);
    uint64_t nopr = vf__operators_retire_all(&e->operators);
    uint64_t nvars = 0;
    if (e->vars.tag != 0) {
        nvars = vf__var_table_destroy(&e->vars);
        give_back_tag(e->vars.tag);
    }
    if (e->prof != NULL) /* creation failed: nothing to write */
        vf__prof_destroy(e->prof, NULL);
    vf__failure_log_destroy(&e->failures); /* after every var's unref */
    vf__defs_destroy(&e->defs);            /* no op is left to point at one */
    vf__counts_destroy(&e->counts);
    vf__async_destroy(&e->async);
    pthread_mutex_destroy(&e->waits.lock);
    pthread_cond_destroy(&e->waits.cond);
    pthread_mutex_destroy(&e->dev.lock);
    pthread_mutex_destroy(&e->life.lock);
    pthread_mutex_destroy(&e->life.op_lock);
    pthread_mutex_destroy(&e->operators.lock);
    pthread_mutex_destroy(&e->addr_vars_lock);
    pthread_mutex_destroy(&e->graphs.lock);
    vf__bulk_engine_destroy(e);
    vf__addr_vars_free(atomic_load(&e->addr_vars));
    free(e->cpu_pins);
    e->magic = 0;
    free(e);
    if (atomic_fetch_sub(&live_engines, 1) == 1)
        vf__fl_trim();
    if (operators != NULL)
        *operators = nopr;
    if (vars != NULL)
        *vars = nvars;
}

static void free_engine(vf_engine *e)
{
    vf__engine_free(e, NULL, NULL);
}

/* The library is unloaded (dlclose) or the process exits, which it cannot
 * tell apart: with no engine alive, its key goes and the calling thread's
 * state, with the depot's free blocks (thread_exit.h), so that no
 * thread's exit calls into unmapped code and a plugin loaded again and
 * again takes no key each time. Nothing another thread may still use is
 * freed: at a process's exit, other threads run on (a late completion, a
 * call with a destroyed engine's handle: found by the reviewer). With an
 * engine alive, its threads may be running: nothing. */
__attribute__((destructor)) static void lib_unload(void)
{
    if (atomic_load(&live_engines) != 0)
        return;
    vf__thread_exit_unload();
    vf__fl_trim();
}

VF_API int vf_engine_create(vf_engine **out, const vf_config *config)
{
    if (out == NULL)
        return vf__fail(VF_EINVAL, "vf_engine_create: out is NULL");
    *out = NULL;
    vf__settings s;
    int rc = vf__config_resolve(config, &s);
    if (rc != 0)
        return rc;
    pthread_once(&freelists_once, init_freelists);
    if ((rc = vf__thread_exit_init()) != 0)
        return rc; /* its detail names vf_engine_create's cause */

    vf_engine *e = vf__calloc(1, sizeof *e);
    if (e == NULL)
        return vf__fail(VF_ENOMEM, "vf_engine_create: out of memory");
    atomic_fetch_add(&live_engines, 1);
    vf__bulk_engine_init(e);
    e->kind = s.type;
    e->bulk.size = s.bulk_size;
    e->max_inflight = s.max_inflight;
    /* Blocked pushers wake as soon as there is room (pending falls under
     * the bound). Not later, at a low-water mark: ops held until the
     * blocked push goes through would then never let it. */
    e->unblock_at = s.max_inflight ? s.max_inflight - 1 : UINT32_MAX;
    atomic_init(&e->nblocked, 0);
    atomic_init(&e->state, VF__RUNNING);
    atomic_init(&e->waits.nwaiters, 0);
    atomic_init(&e->waits.outside_asleep, 0);
    atomic_init(&e->waits.watchers, 0);
    atomic_init(&e->waits.nnested, 0);
    atomic_init(&e->completers, 0);
    atomic_init(&e->async_unfinished, 0);
    atomic_init(&e->pushed, 0);
    atomic_init(&e->ran, 0);
    atomic_init(&e->failed, 0);
    atomic_init(&e->skipped, 0);
    pthread_mutex_init(&e->waits.lock, NULL);
    vf__sleeplock_init(&e->waits.nested_lock);
    vf__cond_init_monotonic(&e->waits.cond); /* timed waits */
    pthread_mutex_init(&e->dev.lock, NULL);
    pthread_mutex_init(&e->life.lock, NULL);
    pthread_mutex_init(&e->life.op_lock, NULL);
    pthread_mutex_init(&e->operators.lock, NULL);
    pthread_mutex_init(&e->addr_vars_lock, NULL);
    pthread_mutex_init(&e->graphs.lock, NULL);
    atomic_init(&e->life.holding, false);
    atomic_init(&e->slow, 0);
    atomic_init(&e->awake, 0);
    e->life.fork_child_workers = s.fork_child_workers;
    e->dev.params = (vf__device_params){
        .latency_ns = s.emulated_latency_ns,
        .bytes_per_sec = s.emulated_bytes_per_sec,
        .costs = s.emulated_costs,
        .run_work = vf__exec_device_work,
        .owner = e};
    e->dev.sync = s.device_sync;
    e->dev.workers = s.gpu_workers;
    e->dev.copy_workers = s.gpu_copy_workers;
    e->dev.priority_workers = s.gpu_priority_workers;
    e->engine_info = s.engine_info;
    e->help_on_wait = s.help_on_wait;
    e->run_at_push = s.run_at_push;
    e->runner = (vf__pool_runner){.execute = vf__exec_worker_execute,
                                  .run_deferred = vf__exec_run_deferred,
                                  .held_back = vf__bulk_held_back,
                                  .release_held_back = vf__bulk_release,
                                  .stack_size = (size_t)s.worker_stack_kib
                                                << 10,
                                  .spin_ns = (uint64_t)s.idle_spin_us * 1000u,
                                  .ncpus = s.usable_cpus,
                                  .awake = &e->awake,
                                  .program_asleep = &e->waits.outside_asleep};
    if (s.ncpu_pins > 0) {
        e->cpu_pins = vf__malloc((size_t)s.ncpu_pins * sizeof *e->cpu_pins);
        if (e->cpu_pins == NULL) {
            free_engine(e);
            return vf__fail(VF_ENOMEM, "vf_engine_create: out of memory");
        }
        memcpy(e->cpu_pins, s.cpu_pins,
               (size_t)s.ncpu_pins * sizeof *e->cpu_pins);
        e->cpu_usable = s.usable_set;
        e->runner.cpus = e->cpu_pins;
        e->runner.ncpus_pinned = s.ncpu_pins;
        e->runner.spare_cpus = &e->cpu_usable;
    }
    atomic_init(&e->hooks, s.engine_info ? VF__HOOK_INFO : 0);
    if (vf__defs_init(&e->defs) != 0 ||
        vf__counts_init(&e->counts, s.cpu_workers + s.cpu_priority_workers) !=
            0 ||
        vf__failure_log_init(&e->failures) != 0 ||
        vf__async_init(&e->async) != 0) {
        free_engine(e);
        return vf__fail(VF_ENOMEM, "vf_engine_create: out of memory");
    }
    if ((rc = vf__prof_create(&e->prof, (size_t)s.profile_max_records,
                              s.profile_path)) != 0) {
        free_engine(e);
        return vf__fail(rc, "vf_engine_create: cannot make the profiler");
    }
    uint16_t tag = take_tag();
    if (tag == 0) {
        free_engine(e);
        return vf__fail(VF_ENOMEM, "vf_engine_create: 65535 engines are "
                                   "alive already");
    }
    if ((rc = vf__var_table_init(&e->vars, tag)) != 0) {
        give_back_tag(tag);
        free_engine(e);
        return vf__fail(rc, "vf_engine_create: cannot make the var table");
    }
    e->magic = VF__ENGINE_MAGIC;
    if ((rc = start_pools(e, &s)) != 0) {
        char why[256]; /* quoted in ours (vf__fail rewrites it) */
        snprintf(why, sizeof why, "%s", vf_error_detail());
        free_engine(e);
        return vf__fail(rc, "vf_engine_create: cannot start the workers: %s",
                        why);
    }
    if (vf__guard_list(e) != 0) { /* its handle is good from here */
        free_engine(e);
        return vf__fail(VF_ENOMEM, "vf_engine_create: out of memory");
    }
    vf__profiling_update_hooks(e); /* recording from here with a path */
    vf__lifecycle_register(e);     /* fork handlers stop and restart it */
    *out = e;
    return 0;
}

VF_API vf_engine_type vf_engine_type_of(const vf_engine *e)
{
    vf__guard g;
    if (vf__guard_enter(e, &g, "vf_engine_type_of") != 0)
        return VF_ENGINE_INVALID; /* the detail says why */
    vf_engine_type kind = e->kind;
    vf__guard_leave(&g);
    return kind;
}

VF_API const char *vf_engine_type_name(vf_engine_type type)
{
    return vf__engine_type_name(type);
}

int vf__engine_count_workers(const vf_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->npools; i++)
        n += e->pools[i].nworkers;
    return n;
}

VF_API int vf_engine_num_workers(const vf_engine *e)
{
    vf__guard g;
    if (vf__guard_enter(e, &g, "vf_engine_num_workers") != 0)
        return 0;
    int n = vf__engine_count_workers(e);
    vf__guard_leave(&g);
    return n;
}

static int stats(vf_engine *e, vf_stats *out)
{
    if (out == NULL)
        return vf__fail(VF_EINVAL, "vf_engine_stats: out is NULL");
    memset(out, 0, sizeof *out);
    out->ran = atomic_load_explicit(&e->ran, memory_order_relaxed);
    out->failed = atomic_load_explicit(&e->failed, memory_order_relaxed);
    out->skipped = atomic_load_explicit(&e->skipped, memory_order_relaxed);
    for (int p = 0; p < e->npools; p++) {
        for (int i = 0; i < e->pools[p].nworkers; i++) {
            vf__worker *w = &e->pools[p].workers[i];
            out->ran += atomic_load_explicit(&w->ran, memory_order_relaxed);
            out->failed += atomic_load_explicit(&w->failed,
                                                memory_order_relaxed);
            out->skipped += atomic_load_explicit(&w->skipped,
                                                 memory_order_relaxed);
        }
    }
    out->completed = out->ran + out->failed + out->skipped;
    out->host_syncs = atomic_load_explicit(&e->dev.host_syncs,
                                           memory_order_relaxed);
    out->stream_waits = atomic_load_explicit(&e->dev.stream_waits,
                                             memory_order_relaxed);
    out->same_stream = atomic_load_explicit(&e->dev.same_stream,
                                            memory_order_relaxed);
    /* With a bound, its exact shared count; else the per-thread sum
     * (counts.h: exact when still, an upper bound at one instant when
     * not). */
    out->pending = (e->max_inflight != 0
                        ? atomic_load(&e->counts.inflight)
                        : vf__counts_pending(vf__engine_counts(e))) +
                   vf__lifecycle_held(e); /* held while stopped */
    out->bulks = atomic_load_explicit(&e->bulk.bulks, memory_order_relaxed);
    out->bulked = atomic_load_explicit(&e->bulk.bulked, memory_order_relaxed);
    out->launches = atomic_load_explicit(&e->graphs.launches,
                                         memory_order_relaxed);
    out->replays = atomic_load_explicit(&e->graphs.replays,
                                        memory_order_relaxed);
    out->async_in_flight = vf__async_count(&e->async);
    return 0;
}

VF_API int vf_engine_stats(vf_engine *e, vf_stats *out)
{
    return VF__GUARDED_LIVE(e, "vf_engine_stats", stats(e, out));
}

/* Active at zero with nested waiters watching: wake them where they sleep
 * (wait.h). Out of line: every finish that may lower a count calls
 * vf__engine_wake while a program waits, and this is for a deadlock. */
static __attribute__((noinline, cold)) void wake_nested(vf_engine *e)
{
    for (int i = 0; i < e->npools; i++)
        vf__pool_wake_all(&e->pools[i]);
    vf__wait_wake_alone(e);
}

void vf__engine_wake(vf_engine *e, unsigned wake)
{
    bool idle = false, stuck = false;
    if (wake & VF__WAKE_WATCHERS) {
        /* After the caller's lowering (counts.h): a zero seen here is a
         * state a watcher waits for. */
        uint64_t now = vf__engine_counts(e);
        idle = vf__counts_pending(now) == 0 &&
               atomic_load(&e->waits.nwaiters) > 0;
        stuck = vf__counts_active(now) == 0 &&
                atomic_load(&e->waits.nnested) > 0;
    }
    if ((wake & VF__WAKE_BLOCKED) && atomic_load(&e->nblocked) > 0)
        idle = true;
    if (idle) { /* the engine's cond: threads outside its ops (wait.h) */
        pthread_mutex_lock(&e->waits.lock);
        pthread_cond_broadcast(&e->waits.cond);
        pthread_mutex_unlock(&e->waits.lock);
    }
    if (VF__UNLIKELY(stuck))
        wake_nested(e);
}
