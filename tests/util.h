/*
 * util.h: helpers shared by the varflow test programs.
 *
 * Include it first in a test (it sets the feature macros the POSIX calls
 * need). It gives:
 * - tu_init(): seed, spin calibration and a watchdog that aborts a hung test
 *   with the phase it was in (set with tu_phase) instead of letting CTest
 *   time out in silence;
 * - tu_scale(): how much to shrink big workloads (VF_TEST_SCALE, or smaller
 *   by default under ThreadSanitizer);
 * - a gate (one-shot event) and a rendezvous, both waiting with a timeout,
 *   so that concurrency is proven by two ops meeting, never by timings;
 * - a splitmix64 PRNG seeded from check_seed();
 * - tu_spin_us(): busy work from a calibrated loop (not a sleep);
 * - tu_stamp(): a global atomic sequence number to record the order of
 *   events (an op's start and end) across threads;
 * - tu_read_file(): a whole file as a string;
 * - the list of engine configurations every test runs on (tu_kinds).
 */
#ifndef VF_TEST_UTIL_H
#define VF_TEST_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif

/* How long a gate or rendezvous waits before declaring failure (seconds):
 * generous, so that a slow sanitizer build never fails by accident. */
#define TU_TIMEOUT 10.0

/* ---------------------------------------------------------------- time */

static inline double tu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline struct timespec tu_deadline_(double timeout_s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double whole = (double)(long)timeout_s;
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((timeout_s - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static inline void tu_cond_init_(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

/* ---------------------------------------------------------------- scale */

/* Multiplier for workload sizes: VF_TEST_SCALE when set, else 1 (0.2 under
 * ThreadSanitizer, whose slowdown is ~10x). */
static inline double tu_scale(void)
{
    const char *s = getenv("VF_TEST_SCALE");
    if (s && *s) {
        double v = atof(s);
        if (v > 0)
            return v;
    }
#ifdef TU_TSAN
    return 0.2;
#else
    return 1.0;
#endif
}

/* n scaled by tu_scale(), at least `min`. */
static inline long tu_scaled(long n, long min)
{
    long v = (long)((double)n * tu_scale());
    return v < min ? min : v;
}

/* ---------------------------------------------------------------- PRNG */

typedef struct tu_rng {
    uint64_t s;
} tu_rng;

static inline uint64_t tu_next(tu_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A generator for stream `k` of this run's seed. */
static inline tu_rng tu_rng_make(uint64_t k)
{
    tu_rng r = {check_seed() * 0x2545f4914f6cdd1dULL + k};
    (void)tu_next(&r);
    return r;
}

/* Uniform in [0, n). */
static inline int tu_below(tu_rng *r, int n)
{
    return (int)(tu_next(r) % (uint64_t)n);
}

/* Uniform in [lo, hi]. */
static inline int tu_range(tu_rng *r, int lo, int hi)
{
    return lo + tu_below(r, hi - lo + 1);
}

static inline uint64_t tu_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

/* ---------------------------------------------------------------- spin */

static double tu_iters_per_us_ = 100.0;

static inline void tu_spin_iters(uint64_t n)
{
    volatile uint64_t x = 0;
    for (uint64_t i = 0; i < n; i++)
        x = x + i;
}

/* Measure the spin loop once (main thread, before any engine exists). */
static inline void tu_calibrate(void)
{
    const uint64_t n = 200000;
    double best = 1e9;
    for (int k = 0; k < 5; k++) {
        double t0 = tu_now();
        tu_spin_iters(n);
        double dt = tu_now() - t0;
        if (dt < best)
            best = dt;
    }
    if (best <= 0)
        best = 1e-6;
    tu_iters_per_us_ = (double)n / (best * 1e6);
}

/* About `us` microseconds of busy work (never a sleep). */
static inline void tu_spin_us(double us)
{
    tu_spin_iters((uint64_t)(us * tu_iters_per_us_));
}

/* ---------------------------------------------------------------- order */

static _Atomic uint64_t tu_clock_ = 1;

/* A number larger than every stamp taken before (on any thread). */
static inline uint64_t tu_stamp(void)
{
    return atomic_fetch_add(&tu_clock_, 1);
}

/* ---------------------------------------------------------------- gate */

/* A one-shot event: wait blocks until open was called (or timeout). */
typedef struct tu_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
} tu_gate;

static inline void tu_gate_init(tu_gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    tu_cond_init_(&g->cv);
    g->open = false;
}

static inline void tu_gate_destroy(tu_gate *g)
{
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

static inline void tu_gate_open(tu_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static inline bool tu_gate_is_open(tu_gate *g)
{
    pthread_mutex_lock(&g->mu);
    bool o = g->open;
    pthread_mutex_unlock(&g->mu);
    return o;
}

/* True when the gate opened, false after `timeout_s` seconds. */
static inline bool tu_gate_wait(tu_gate *g, double timeout_s)
{
    struct timespec dl = tu_deadline_(timeout_s);
    pthread_mutex_lock(&g->mu);
    while (!g->open) {
        if (pthread_cond_timedwait(&g->cv, &g->mu, &dl) == ETIMEDOUT)
            break;
    }
    bool o = g->open;
    pthread_mutex_unlock(&g->mu);
    return o;
}

/* ---------------------------------------------------------------- rendezvous
 */

/* n parties meet: each arrives and waits until all n have arrived. */
typedef struct tu_rv {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
} tu_rv;

static inline void tu_rv_init(tu_rv *r)
{
    pthread_mutex_init(&r->mu, NULL);
    tu_cond_init_(&r->cv);
    r->arrived = 0;
}

static inline void tu_rv_destroy(tu_rv *r)
{
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

/* Arrive, then wait until `n` parties have arrived: true when they did,
 * false after `timeout_s` seconds (the others never came: no concurrency). */
static inline bool tu_rv_meet(tu_rv *r, int n, double timeout_s)
{
    struct timespec dl = tu_deadline_(timeout_s);
    pthread_mutex_lock(&r->mu);
    r->arrived++;
    pthread_cond_broadcast(&r->cv);
    while (r->arrived < n) {
        if (pthread_cond_timedwait(&r->cv, &r->mu, &dl) == ETIMEDOUT)
            break;
    }
    bool ok = r->arrived >= n;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

/* ---------------------------------------------------------------- polling */

/* Wait (yielding) until *flag >= want: true when it got there, false after
 * `timeout_s` seconds. For a flag set by another thread. */
static inline bool tu_wait_flag(atomic_int *flag, int want, double timeout_s)
{
    double end = tu_now() + timeout_s;
    while (atomic_load(flag) < want) {
        if (tu_now() > end)
            return false;
        sched_yield();
    }
    return true;
}

/* ---------------------------------------------------------------- watchdog */

static _Atomic(const char *) tu_phase_ = "start";
static _Atomic double tu_phase_deadline_; /* 0: none */
static const char *tu_test_name_ = "test";
static double tu_watchdog_scale_ = 1.0;

/* Name what the test is doing, for the watchdog's message. */
static inline void tu_phase(const char *phase)
{
    atomic_store(&tu_phase_deadline_, 0.0);
    atomic_store(&tu_phase_, phase);
}

/* The same, for a phase that must end within `secs` seconds (scaled up
 * under sanitizers): one that can hang when the engine is wrong, so that the
 * hang is reported at once rather than after the whole test's limit. */
static inline void tu_phase_limit(const char *phase, double secs)
{
    atomic_store(&tu_phase_, phase);
    atomic_store(&tu_phase_deadline_, tu_now() + secs * tu_watchdog_scale_);
}

static atomic_bool tu_watchdog_started_;

static void *tu_watchdog_(void *arg)
{
    double secs = *(double *)arg;
    free(arg);
    double end = tu_now() + secs;
    tu_gate never;
    tu_gate_init(&never);
    atomic_store(&tu_watchdog_started_, true);
    for (;;) {
        (void)tu_gate_wait(&never, 0.1);
        double now = tu_now();
        double pd = atomic_load(&tu_phase_deadline_);
        if (now > end || (pd > 0 && now > pd))
            break;
    }
    fprintf(stderr,
            "%s: watchdog: hung in phase '%s' (seed %" PRIu64 "); "
            "aborting\n",
            tu_test_name_, atomic_load(&tu_phase_), check_seed_);
    fflush(stderr);
    abort();
    return NULL;
}

/* Start-of-main setup: seed, spin calibration, watchdog of `watchdog_s`
 * seconds for the whole test (scaled up under sanitizers). A `watchdog_s`
 * of 0 starts none: the test starts its own (tu_watchdog_), for a run
 * longer than CTest's timeout. */
static inline void tu_init(const char *test_name, double watchdog_s)
{
    tu_test_name_ = test_name;
    (void)check_seed();
    tu_calibrate();
#if defined(TU_TSAN) || defined(TU_ASAN)
    tu_watchdog_scale_ = 2;
#endif
    if (watchdog_s <= 0)
        return;
    watchdog_s *= tu_watchdog_scale_;
    if (watchdog_s > 280)
        watchdog_s = 280; /* fire before CTest's 300 s timeout */
    double *arg = malloc(sizeof *arg);
    if (!arg)
        abort();
    *arg = watchdog_s;
    pthread_t t;
    if (pthread_create(&t, NULL, tu_watchdog_, arg) != 0)
        abort();
    pthread_detach(t);
    /* Return once the watchdog is in its loop, where it allocates nothing:
     * a thread's start allocates (under ASan, the stack bounds it looks up
     * take an allocator lock), and a case that forks at once would leave
     * its child that lock held for good (seen: a forked child's first
     * worker hung in the allocator, 1 run in 40 on a loaded machine). */
    while (!atomic_load(&tu_watchdog_started_))
        sched_yield();
}

/* ---------------------------------------------------------------- threads */

static inline pthread_t tu_thread_start(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, fn, arg);
    REQUIRE(rc == 0);
    return t;
}

static inline void tu_thread_join(pthread_t t)
{
    pthread_join(t, NULL);
}

/* Whether thread `tid` (gettid) of this process is asleep (state S, from
 * /proc): blocked in the kernel, where it stays until woken. Linux. */
static inline bool tu_thread_asleep(long tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *paren = strrchr(buf, ')'); /* "pid (comm) S ..." */
    return paren != NULL && paren[1] == ' ' && paren[2] == 'S';
}

/* ---------------------------------------------------------------- files */

/* A whole file as a NUL-terminated string (NULL when it cannot be read);
 * free() it. */
static inline char *tu_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf != NULL && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *more = realloc(buf, cap *= 2);
            if (more == NULL)
                free(buf);
            buf = more;
        }
    }
    fclose(f);
    if (buf != NULL)
        buf[n] = '\0';
    return buf;
}

/* ---------------------------------------------------------------- engines */

typedef struct tu_kind {
    const char *name;
    vf_config cfg;
    bool threaded; /* ops run on worker threads (not inside push) */
    int workers;   /* workers that run normal ops */
} tu_kind;

/* An op that does nothing and succeeds. */
static inline int tu_nop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

/* An async op whose completion another op or thread finishes later: its
 * function keeps the handle in the vf_completion `arg` points to. */
static inline void tu_keep_completion(vf_run *run, void *arg, vf_completion c)
{
    (void)run;
    *(vf_completion *)arg = c;
}

/* Every engine kind, with 1 and 2 workers. */
static const tu_kind tu_kinds[] = {
    {"naive", {.type = VF_ENGINE_NAIVE}, false, 0},
    {"pooled/1", {.type = VF_ENGINE_POOLED, .cpu_workers = 1}, true, 1},
    {"pooled/2", {.type = VF_ENGINE_POOLED, .cpu_workers = 2}, true, 2},
    {"perdevice/1",
     {.type = VF_ENGINE_PERDEVICE, .cpu_workers = 1, .cpu_priority_workers = 1},
     true,
     1},
    {"perdevice/2",
     {.type = VF_ENGINE_PERDEVICE, .cpu_workers = 2, .cpu_priority_workers = 2},
     true,
     2},
};
#define TU_NKINDS ((int)(sizeof tu_kinds / sizeof tu_kinds[0]))

/* Create an engine with `cfg` (kind k's, with settings of the test's own)
 * or stop the test. */
static inline vf_engine *tu_engine_cfg(const tu_kind *k, const vf_config *cfg)
{
    vf_engine *e = NULL;
    int rc = vf_engine_create(&e, cfg);
    if (rc != 0)
        CHECK_REPORT_("vf_engine_create(%s) returned %s (%s)", k->name,
                      vf_error_name(rc), vf_error_detail());
    REQUIRE(rc == 0 && e != NULL);
    return e;
}

/* Create an engine of kind k or stop the test. */
static inline vf_engine *tu_engine(const tu_kind *k)
{
    return tu_engine_cfg(k, &k->cfg);
}

static inline vf_var tu_var(vf_engine *e)
{
    vf_var v = {0};
    int rc = vf_var_create(e, &v);
    if (rc != 0)
        CHECK_REPORT_("vf_var_create returned %s (%s)", vf_error_name(rc),
                      vf_error_detail());
    REQUIRE(rc == 0);
    return v;
}

/* Wait for everything and destroy the engine, checking both succeed. */
static inline void tu_finish_engine(vf_engine *e)
{
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_engine_destroy(e));
}

/* A var list from an array. */
static inline vf_var_list tu_list(const vf_var *vars, int n)
{
    vf_var_list l = {n ? vars : NULL, n};
    return l;
}

#endif /* VF_TEST_UTIL_H */
