/*
 * destroy.c: vf_engine_destroy and vf_engine_destroy_timed (rule 14).
 *
 * A destroy must finish every pushed op, let every call that raced it
 * return, and free nothing a thread may still read. Its steps, in order:
 *   1. Enter a guard on the handle (guard.h), so a destroyed engine is
 *      VF_EINVAL; refuse a call from the engine's own code, or from inside
 *      another call on it on this thread (VF_EDEADLK: it would wait for
 *      itself), and a second destroy (VF_ESHUTDOWN); set the state to
 *      DRAINING. From then on this thread owns the engine's end, and
 *      leaves its guard.
 *   2. Wait until no thread is in a call on the engine. A call that read
 *      the state before DRAINING (a push about to enqueue) is seen here
 *      and finishes; every later one sees DRAINING (guard.h's Dekker pair)
 *      and refuses new work from outside the engine's ops. A slot seen not
 *      naming the engine once is done with: its next call sees DRAINING.
 *   3. Start a stopped engine (its held ops must run), then drain: every
 *      pushed op, and every op those push, finishes.
 *   4. Let a foreign thread finishing the last async op leave
 *      vf_completion_finish.
 *   5. Unlist it from the fork handlers', then the handle (a call from
 *      now on is VF_EINVAL), wait again until no thread is in a call on it
 *      (calls that entered meanwhile return without blocking: nothing is
 *      pending and nothing can be pushed), then free it, and the operators
 *      the program forgot.
 * From step 1 to step 5 a fork leaves the engine dead in the child, where
 * the thread destroying it is not (lifecycle.h: destroy_begins). A fork
 * that drained and restarted it as any other (a first fix) deadlocked
 * where its drain waited for the destroying thread, which waited for the
 * fork's registry at its end (found by the fix's reviewer).
 * Steps 2 and 3 can wait for ever on an async op nobody completes: after a
 * grace period, and periodically while it waits, destroy names the async
 * ops in flight on stderr (name, place in push order, age). A timed
 * destroy gives up in step 2 or 3 with VF_ETIMEDOUT: the state goes back
 * to what it was (RUNNING, or SHUTDOWN after vf_engine_shutdown), the
 * fork handlers list it again, and the engine is usable (a stopped one
 * was started in step 3).
 */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "base/cancel.h"
#include "base/deadline.h"
#include "core/cross_wait.h"
#include "core/engine.h"
#include "core/exec.h"
#include "core/graph.h"
#include "core/lifecycle.h"
#include "core/profiling.h"
#include "core/stall_report.h"
#include "core/wait.h"

/* A destroy's waiting: its limit and its reports. */
typedef struct destroy_wait {
    vf_engine *e;
    int64_t timeout_ms; /* negative: none */
    vf__stall_report report;
} destroy_wait;

/* Whether the caller's limit has passed (0: at once). */
static bool past_limit(const destroy_wait *w, int64_t now)
{
    return w->timeout_ms >= 0 && now - w->report.start_ms >= w->timeout_ms;
}

/* Report on stderr when it is time; VF_ETIMEDOUT once the caller's limit
 * has passed. `what`: what it waits for. */
static int pace(destroy_wait *w, const char *what)
{
    vf__stall_report_pace(&w->report, w->e, what);
    return past_limit(w, vf__stall_now_ms()) ? VF_ETIMEDOUT : 0;
}

/* Steps 2 and 5: until every call on the engine in progress when the
 * scan reached its thread's slot has returned (guard.h). */
static int await_calls(destroy_wait *w)
{
    vf__call_scan sc;
    vf__guard_scan_start(&sc);
    /* A worker of another engine destroying this one counts stuck in its
     * pool once it sleeps (sched.h: vf__pool_of_blocked_thread): a call
     * in progress may wait for an op queued there (found trying destroy
     * from inside an op as a user: the pool's only worker waited here). */
    vf__pool *stuck = NULL;
    int rc = 0;
    for (unsigned spins = 0; vf__guard_scan_busy(&sc, w->e); spins++) {
        /* The limit holds from the first look: 0 is "nobody in a call
         * now". Checked only past the spins, a call that returned within
         * them (128 yields: milliseconds on a busy machine) was waited
         * for, and an engine with an op running destroyed (found by a
         * user tester using destroy_timed(e, 0) as "destroy if idle"). */
        if (w->timeout_ms >= 0 /* (untimed: no clock read) */ &&
            past_limit(w, vf__stall_now_ms())) {
            rc = VF_ETIMEDOUT;
            break;
        }
        if (spins < 256) { /* most calls return within microseconds */
            if (spins >= 128)
                sched_yield();
            continue;
        }
        if (spins == 256 && (stuck = vf__pool_of_blocked_thread()) != NULL)
            vf__pool_stuck_enter(stuck);
        else if (stuck != NULL && spins % (VF__SPARE_RETRY_MS * 10) == 0 &&
                 vf__pool_spare_failing(stuck))
            vf__pool_stuck_again(stuck); /* the spare could not start */
        if ((rc = pace(w, "calls in progress on other threads")) != 0)
            break;
        nanosleep(&(struct timespec){0, 100000}, NULL); /* 0.1 ms */
    }
    if (stuck != NULL)
        vf__pool_stuck_leave(stuck);
    return rc;
}

/* Step 3: drain, waking to report and to check the limit. */
static int drain(destroy_wait *w)
{
    for (;;) {
        int64_t now = vf__stall_now_ms(), until = w->report.next_ms;
        /* As a difference: start + INT64_MAX overflowed (UBSan; a plain
         * build polled, its deadline wrapped: found by a user tester). */
        if (w->timeout_ms >= 0 && w->timeout_ms < until - w->report.start_ms)
            until = w->report.start_ms + w->timeout_ms;
        vf__deadline step = vf__deadline_in_ms(until > now ? until - now : 0);
        if (vf__wait_drain(w->e, &step) == 0)
            return 0;
        int rc = pace(w, "its pushed ops to finish");
        if (rc != 0)
            return rc;
    }
}

/* A timed destroy gives up: the engine as it was (see the top). */
static int give_up(destroy_wait *w, int state)
{
    vf_engine *e = w->e;
    atomic_store(&e->state, state);
    vf__lifecycle_destroy_gives_up(e);
    return vf__stall_fail(e, VF_ETIMEDOUT,
                          "%s: gave up after %" PRId64 " ms, the engine was "
                          "left usable; ",
                          w->report.who, w->timeout_ms);
}

/* Step 1 (inside the call's guard): the state it had, or a negative
 * code. */
static int begin(vf_engine *e, const char *who)
{
    int rc = vf__exec_refuse_in_device_work(who);
    if (rc != 0)
        return rc;
    if (vf__exec_in_engine(e) || vf__lifecycle_releasing_held(e))
        return vf__fail(VF_EDEADLK,
                        "%s: called from the engine's own code "
                        "(an op, a done callback, a worker) or "
                        "from inside another call on it",
                        who);
    if ((rc = vf__lifecycle_refuse_fork_dead(e, who)) != 0)
        return rc;
    int state = atomic_load(&e->state);
    do {
        if (state == VF__DRAINING)
            return vf__fail(VF_ESHUTDOWN, "%s: already being destroyed", who);
    } while (!atomic_compare_exchange_weak(&e->state, &state, VF__DRAINING));
    return state;
}

/* Steps 4 and 5. */
static int finish(vf_engine *e, const destroy_wait *w)
{
    vf__lifecycle_destroy_ends(e); /* no fork handler touches it now */
    /* A foreign thread that finished the last op may still be on its way
     * out of vf_completion_finish: let it leave (rare and brief). */
    while (atomic_load(&e->completers) != 0)
        sched_yield();
    vf__guard_unlist(e);
    destroy_wait late = *w;
    late.timeout_ms = -1; /* nothing left to give up on */
    await_calls(&late);
    bool info = e->engine_info;
    /* VF_PROFILE / config.profile_path: the profiler writes the profile
     * as it goes (it reports a failure on stderr too). */
    vf__prof_engine_desc d;
    vf__profiling_describe(e, &d);
    int rc = vf__prof_destroy(e->prof, &d);
    e->prof = NULL;
    if (VF__UNLIKELY(rc != 0)) {
        /* Said by the call, with the engine's fate: it said only the
         * write's, and a caller could take the engine for alive (a user
         * tester). */
        char why[256];
        snprintf(why, sizeof why, "%s", vf_error_detail());
        /* VF_ESYSTEM whatever the cause: a profile taken out of memory
         * returned VF_ENOMEM, which a caller reads as a destroy that did
         * not happen (found trying memory limits as a user). */
        rc = vf__fail(VF_ESYSTEM,
                      "%s: the engine is destroyed (its handle is dead), but "
                      "its profile was not written: %s",
                      w->report.who, why);
    }
    uint64_t operators, vars;
    vf__engine_free(e, &operators, &vars);
    if (info)
        fprintf(stderr,
                "varflow: %s freed %" PRIu64 " operator%s and %" PRIu64
                " var%s the program did not destroy\n",
                w->report.who, operators, operators == 1 ? "" : "s", vars,
                vars == 1 ? "" : "s");
    return rc;
}

static int destroy(vf_engine *e, int64_t timeout_ms, const char *who)
{
    if (vf__guard_in_call(e)) /* reads nothing of e */
        return vf__fail(VF_EDEADLK,
                        "%s: called from the engine's own code (an op run "
                        "inline, inside another call on the engine)",
                        who);
    vf__cross_wait cross;
    vf__cross_wait_calls(&cross); /* before the guard */
    vf__guard g;
    int rc = vf__guard_enter(e, &g, who);
    if (rc != 0)
        return rc;
    /* Its drain waits for every op of e, as vf_engine_wait_all does: from
     * inside an op of another engine, refused where it never could end
     * (cross_wait.h; found trying destroy across engines as a user). */
    /* From an op of e itself, begin refuses it as the engine's own code
     * (the cross-engine check said "inside op X which runs inside an op of
     * this engine", of a top-level op: found by a user tester). */
    const vf__op *cur = vf__current_op();
    bool crossing = cur != NULL && !vf__exec_in_engine(e);
    if (crossing && (rc = vf__cross_wait_enter(&cross, e, NULL, cur,
                                               timeout_ms < 0, who)) != 0) {
        vf__guard_leave(&g);
        return rc;
    }
    int state = begin(e, who);
    vf__guard_leave(&g); /* ours now: no other destroy frees it */
    if (state < 0 && crossing)
        vf__cross_wait_leave(&cross);
    if (state < 0)
        return state;
    /* This thread's capture on it (never ended) goes with it. */
    if (vf__capture_now.engine == e)
        vf__capture_now = (vf__capture){0};
    vf__lifecycle_destroy_begins(e);
    destroy_wait w = {.e = e, .timeout_ms = timeout_ms};
    vf__stall_report_start(&w.report, who);
    vf__stall_sample(e, true);
    /* A stopped engine runs its held ops. A timed destroy that gave up
     * waiting for calls leaves it started too, as the header says (it
     * left it stopped, its ops held: found by the reviewer), unless
     * another thread's stop or start is under way: waiting for that one
     * blocked destroy_timed(e, 0) for as long (its next reviewer). */
    if ((rc = await_calls(&w)) == 0)
        vf__lifecycle_unstop(e);
    else
        (void)vf__lifecycle_try_unstop(e);
    if (rc == 0)
        rc = drain(&w);
    if (crossing)
        vf__cross_wait_leave(&cross);
    if (rc != 0)
        return give_up(&w, state);
    return finish(e, &w);
}

VF_API int vf_engine_destroy(vf_engine *e)
{
    return VF__UNCANCELLED(destroy(e, -1, "vf_engine_destroy"));
}

VF_API int vf_engine_destroy_timed(vf_engine *e, int64_t timeout_ms)
{
    return VF__UNCANCELLED(destroy(e, timeout_ms, "vf_engine_destroy_timed"));
}
