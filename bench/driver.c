/*
 * The benchmark driver: runs one engine at one worker count over a list of
 * workloads and work sizes, checks every run against the serial reference,
 * and prints one JSON record per line on stdout (bench/run.py collects them
 * into tables and results JSON). Each binary (vfbench-varflow, vfbench-omp-*,
 * vfbench-starpu, vfbench-tbb) is this file plus its adapters; see
 * adapter.h.
 *
 *   vfbench-X --list
 *   vfbench-X --calibrate
 *   vfbench-X --engine NAME [--threads T] [--workloads W1,W5,...]
 *             [--work 0,1234,12345 --work-labels 0,10us,100us]
 *             [--ns-per-iter X] [--budget-ms B] [--scale S] [--chol-n N]
 * [--lu-n N]
 *             [--reps R] [--warmup W] [--max-run-s S] [--row-timeout-s S]
 *             [--skip KEY@WORK,...] [--ref-dir DIR] [--progress] [--callgrind]
 *             [--flop-ns-per-iter X] [--w9-threads T] [--w9-steps S]
 *             [--w9-run-ms M] [--w9-max-tasks N]
 *   vfbench-X --engine NAME [--threads T] --pending N
 *   vfbench-X --engine NAME [--threads T] [--reps R] --wide N
 *   vfbench-X -h | --help
 *
 * Options are read by getopt_long (so --name=value works too, as does any
 * unambiguous prefix of a name); a number must be whole and in range.
 *
 * --pending N runs the pending-ops row instead of the workloads (pending.h):
 * N ops held behind a gate, the resident set before and after, the peak;
 * one "pending" record. Run it in a process of its own so the peak is its.
 *
 * --wide N runs the wide-op row instead (adapter.h): one op that writes N
 * distinct vars, pushed and run R times; one "wide" record.
 *
 * --max-run-s bounds the suite: once one run of a row has taken longer than
 * S seconds, the row is not repeated (if that was the warm-up, it counts as
 * the only sample) and its record says "capped". Some peers are quadratic
 * on some shapes (e.g. libgomp with a team of one on W3), and a 5-run
 * median of a 100-second run tells nothing the first run did not.
 *
 * --row-timeout-s bounds a single run (which cannot be interrupted: the
 * engine is mid-flight): a watchdog thread prints a "timeout" record for the
 * row and ends the process with status 4; bench/run.py then starts the
 * engine again with --skip naming the rows already done. An engine that
 * hangs costs one timeout, not the suite.
 *
 * W9's rows (--workloads W9-x1,W9-x4; bench/w9_run.py runs them) take
 * their work sizes as iterations of the FLOP loop of stencil.h, timed by
 * --flop-ns-per-iter (--calibrate prints it); the program is built for
 * --w9-threads workers (default --threads; the serial loop runs the
 * program of a T-worker row with --threads 1 --w9-threads T), with
 * --w9-steps steps (default 1000), more where needed for the ideal run to
 * take --w9-run-ms, but at most --w9-max-tasks tasks (workloads.h).
 *
 * Exit status: 0; 1 on a usage error (said on stderr, with the usage) or a
 * setup error; 3 when a run's final state differed from the serial run (the
 * loudest failure there is); 4 when a run timed out (--row-timeout-s).
 */
#define _POSIX_C_SOURCE 200809L
#define _GNU_SOURCE /* pthread_setaffinity_np, CPU_SET */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "adapters/adapter.h"
#include "workloads.h"

#ifdef BENCH_HAVE_CALLGRIND_H
#include <valgrind/callgrind.h>
#endif

/* ---- the adapters of this binary ------------------------------------------
 */

#ifdef BENCH_WITH_SERIAL
extern const bench_adapter bench_serial;
#endif
#ifdef BENCH_WITH_VARFLOW
extern const bench_adapter bench_vf_naive, bench_vf_pooled, bench_vf_perdevice,
    bench_vf_bulk64, bench_vf_pooled_opr, bench_vf_naive_replay,
    bench_vf_pooled_replay, bench_vf_perdevice_replay;
#endif
#ifdef BENCH_WITH_VARFLOW_CXX
extern const bench_adapter bench_vf_naive_cxx, bench_vf_pooled_cxx,
    bench_vf_pooled_cxx_heap;
#endif
#ifdef BENCH_WITH_OPENMP
extern const bench_adapter bench_omp;
#endif
#ifdef BENCH_WITH_STARPU
extern const bench_adapter bench_starpu_eager, bench_starpu_lws;
#endif
#ifdef BENCH_WITH_TBB
extern const bench_adapter bench_tbb_flow, bench_tbb_tg;
#endif

const bench_adapter *const bench_adapters[] = {
#ifdef BENCH_WITH_SERIAL
    &bench_serial,
#endif
#ifdef BENCH_WITH_VARFLOW
    &bench_vf_naive,
    &bench_vf_pooled,
    &bench_vf_perdevice,
    &bench_vf_bulk64,
    &bench_vf_pooled_opr,
    &bench_vf_naive_replay,
    &bench_vf_pooled_replay,
    &bench_vf_perdevice_replay,
#endif
#ifdef BENCH_WITH_VARFLOW_CXX
    &bench_vf_naive_cxx,
    &bench_vf_pooled_cxx,
    &bench_vf_pooled_cxx_heap,
#endif
#ifdef BENCH_WITH_OPENMP
    &bench_omp,
#endif
#ifdef BENCH_WITH_STARPU
    &bench_starpu_eager,
    &bench_starpu_lws,
#endif
#ifdef BENCH_WITH_TBB
    &bench_tbb_flow,
    &bench_tbb_tg,
#endif
    NULL,
};

/* ---- many pushers -----------------------------------------------------------
 */

typedef struct pusher_group {
    atomic_int ready; /* pushers waiting for the start */
    atomic_int go;    /* set once the clock has started */
} pusher_group;

typedef struct pusher {
    pthread_t thread;
    const bench_prog *p;
    int index;
    int (*push)(void *ctx, int pusher, size_t begin, size_t end);
    void *ctx;
    pusher_group *group;
    int rc;
} pusher;

static void *pusher_main(void *arg)
{
    pusher *ps = arg;
    atomic_fetch_add(&ps->group->ready, 1);
    while (!atomic_load(&ps->group->go))
        sched_yield();
    ps->rc = ps->push(ps->ctx, ps->index, ps->p->push_begin[ps->index],
                      ps->p->push_end[ps->index]);
    return NULL;
}

int bench_run_pushers(const bench_prog *p,
                      int (*push)(void *ctx, int pusher, size_t begin,
                                  size_t end),
                      void *ctx, double *t0)
{
    pusher ps[BENCH_MAX_PUSHERS];
    pusher_group group;
    int n = p->npushers, rc = 0;
    atomic_init(&group.ready, 0);
    atomic_init(&group.go, 0);
    for (int i = 0; i < n; i++) {
        ps[i] = (pusher){
            .p = p, .index = i, .push = push, .ctx = ctx, .group = &group};
        if (pthread_create(&ps[i].thread, NULL, pusher_main, &ps[i]) != 0) {
            /* The started ones wait for `go` for good: give up. */
            fprintf(stderr, "bench: could not start pusher thread %d\n", i);
            exit(1);
        }
    }
    /* Start the clock only once every pusher is up and waiting, so thread
     * creation is not timed and no pusher starts early. */
    while (atomic_load(&group.ready) < n)
        sched_yield();
    *t0 = bench_now();
    atomic_store(&group.go, 1);
    for (int i = 0; i < n; i++) {
        pthread_join(ps[i].thread, NULL);
        if (ps[i].rc != 0)
            rc = -1;
    }
    return rc;
}

/* ---- the watchdog
 * ------------------------------------------------------------- */

typedef struct watchdog {
    _Atomic double deadline; /* 0: no run in progress */
    char row[96];            /* the JSON fields naming the running row */
    pthread_mutex_t lock;    /* guards row */
} watchdog;

static watchdog dog = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *watchdog_main(void *arg)
{
    double limit = *(double *)arg;
    for (;;) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        double d = atomic_load(&dog.deadline);
        if (d > 0 && bench_now() > d) {
            pthread_mutex_lock(&dog.lock);
            printf("{\"type\":\"timeout\",%s,\"limit_s\":%.1f}\n", dog.row,
                   limit);
            fflush(stdout);
            fprintf(stderr,
                    "bench: a run took longer than %.1f s: giving up on it\n",
                    limit);
            _exit(4);
        }
    }
    return NULL;
}

static void watchdog_arm(double limit, const char *engine, int threads,
                         const char *key, const char *work_label)
{
    if (limit <= 0)
        return;
    pthread_mutex_lock(&dog.lock);
    snprintf(
        dog.row, sizeof dog.row,
        "\"engine\":\"%s\",\"threads\":%d,\"key\":\"%s\",\"work_label\":\"%s\"",
        engine, threads, key, work_label);
    pthread_mutex_unlock(&dog.lock);
    atomic_store(&dog.deadline, bench_now() + limit);
}

static void watchdog_disarm(void)
{
    atomic_store(&dog.deadline, 0.0);
}

/* ---- options
 * ----------------------------------------------------------------- */

enum { MAX_LIST = 32 };

typedef struct options {
    const char *engine;
    int threads;
    const char *workloads[MAX_LIST];
    int nworkloads;
    uint64_t work[MAX_LIST];
    const char *work_labels[MAX_LIST];
    int nwork;
    double ns_per_iter;
    double budget_ms;
    double scale;
    int chol_n;
    int lu_n;
    int reps, warmup;
    const char *ref_dir;
    int progress;
    int callgrind;
    double
        max_run_s; /* stop repeating a row after a run this long (0: no cap) */
    double row_timeout_s; /* give up on a run this long: exit 4 (0: never) */
    const char *skip[MAX_LIST * 4]; /* rows "KEY@WORKLABEL" not to run */
    int nskip;
    size_t pending; /* > 0: run the pending-ops row with this many ops */
    size_t wide;    /* > 0: run the wide-op row with this many vars */
    double flop_ns_per_iter; /* W9: ns per iteration of the FLOP loop */
    int w9_threads;          /* W9: the workers its programs are for */
    long w9_steps;
    double w9_run_ms;
    double w9_max_tasks;
} options;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: vfbench --list | --calibrate |\n"
        "       --engine NAME [--threads T] [--workloads W1,W5,...]\n"
        "       [--work I1,I2,... --work-labels L1,L2,...] [--ns-per-iter X]\n"
        "       [--budget-ms B] [--scale S] [--chol-n N] [--lu-n N] [--reps "
        "R]\n"
        "       [--warmup W] [--max-run-s S] [--row-timeout-s S]\n"
        "       [--skip KEY@WORK,...] [--ref-dir DIR] [--progress] "
        "[--callgrind]\n"
        "       [--flop-ns-per-iter X] [--w9-threads T] [--w9-steps S]\n"
        "       [--w9-run-ms M] [--w9-max-tasks N]\n"
        "       --engine NAME [--threads T] --pending N\n"
        "       --engine NAME [--threads T] [--reps R] --wide N\n"
        "       -h, --help\n");
}

/* A usage error: what was wrong, then the usage; exit status 1. */
static void bad_usage(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

static void bad_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    usage(stderr);
    exit(1);
}

/* Numbers given to an option: the whole argument, in range. */
static long long arg_int(const char *opt, const char *v, long long min,
                         long long max)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end != '\0' || errno != 0 || x < min || x > max)
        bad_usage("--%s: '%s' is not a whole number from %lld to %lld", opt, v,
                  min, max);
    return x;
}

static uint64_t arg_u64(const char *opt, const char *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end != '\0' || errno != 0 || v[0] == '-')
        bad_usage("--%s: '%s' is not a whole number from 0", opt, v);
    return x;
}

static double arg_double(const char *opt, const char *v, double min)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || errno != 0 || !(x >= min))
        bad_usage("--%s: '%s' is not a number from %g", opt, v, min);
    return x;
}

/* Split a comma list in place into out[]; returns the count. */
static int split(char *s, const char **out)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < MAX_LIST;
         tok = strtok(NULL, ","))
        out[n++] = tok;
    return n;
}

/* What the command line asks for besides a run. */
enum mode { RUN, LIST, CALIBRATE };

/* The options (getopt_long): all long ones but -h, each returning its
 * O_* value. */
enum {
    O_LIST = 256,
    O_CALIBRATE,
    O_ENGINE,
    O_THREADS,
    O_WORKLOADS,
    O_WORK,
    O_WORK_LABELS,
    O_NS_PER_ITER,
    O_BUDGET_MS,
    O_SCALE,
    O_CHOL_N,
    O_LU_N,
    O_REPS,
    O_WARMUP,
    O_MAX_RUN_S,
    O_ROW_TIMEOUT_S,
    O_SKIP,
    O_PENDING,
    O_WIDE,
    O_REF_DIR,
    O_PROGRESS,
    O_CALLGRIND,
    O_FLOP_NS_PER_ITER,
    O_W9_THREADS,
    O_W9_STEPS,
    O_W9_RUN_MS,
    O_W9_MAX_TASKS,
};

static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"list", no_argument, NULL, O_LIST},
    {"calibrate", no_argument, NULL, O_CALIBRATE},
    {"engine", required_argument, NULL, O_ENGINE},
    {"threads", required_argument, NULL, O_THREADS},
    {"workloads", required_argument, NULL, O_WORKLOADS},
    {"work", required_argument, NULL, O_WORK},
    {"work-labels", required_argument, NULL, O_WORK_LABELS},
    {"ns-per-iter", required_argument, NULL, O_NS_PER_ITER},
    {"budget-ms", required_argument, NULL, O_BUDGET_MS},
    {"scale", required_argument, NULL, O_SCALE},
    {"chol-n", required_argument, NULL, O_CHOL_N},
    {"lu-n", required_argument, NULL, O_LU_N},
    {"reps", required_argument, NULL, O_REPS},
    {"warmup", required_argument, NULL, O_WARMUP},
    {"max-run-s", required_argument, NULL, O_MAX_RUN_S},
    {"row-timeout-s", required_argument, NULL, O_ROW_TIMEOUT_S},
    {"skip", required_argument, NULL, O_SKIP},
    {"pending", required_argument, NULL, O_PENDING},
    {"wide", required_argument, NULL, O_WIDE},
    {"ref-dir", required_argument, NULL, O_REF_DIR},
    {"progress", no_argument, NULL, O_PROGRESS},
    {"callgrind", no_argument, NULL, O_CALLGRIND},
    {"flop-ns-per-iter", required_argument, NULL, O_FLOP_NS_PER_ITER},
    {"w9-threads", required_argument, NULL, O_W9_THREADS},
    {"w9-steps", required_argument, NULL, O_W9_STEPS},
    {"w9-run-ms", required_argument, NULL, O_W9_RUN_MS},
    {"w9-max-tasks", required_argument, NULL, O_W9_MAX_TASKS},
    {NULL, 0, NULL, 0},
};

static enum mode parse(int argc, char **argv, options *o)
{
    static const char *no_labels[MAX_LIST];
    const char *works[MAX_LIST] = {"0"};
    int nlabels = 0;
    enum mode mode = RUN;
    *o = (options){.threads = 1,
                   .scale = 1.0,
                   .reps = 5,
                   .warmup = 1,
                   .chol_n = 2048,
                   .lu_n = 2560};
    o->work[0] = 0;
    o->work_labels[0] = "0";
    o->nwork = 1;
    int c, at;
    while ((c = getopt_long(argc, argv, "h", long_options, &at)) != -1) {
        const char *name = c >= O_LIST ? long_options[at].name : "h";
        switch (c) {
        case 'h':
            usage(stdout);
            exit(0);
        case O_LIST:
            mode = LIST;
            break;
        case O_CALIBRATE:
            mode = CALIBRATE;
            break;
        case O_ENGINE:
            o->engine = optarg;
            break;
        case O_THREADS:
            o->threads = (int)arg_int(name, optarg, 1, 4096);
            break;
        case O_WORKLOADS:
            o->nworkloads = split(optarg, o->workloads);
            break;
        case O_WORK:
            o->nwork = split(optarg, works);
            for (int k = 0; k < o->nwork; k++)
                o->work[k] = arg_u64(name, works[k]);
            break;
        case O_WORK_LABELS:
            nlabels = split(optarg, no_labels);
            break;
        case O_NS_PER_ITER:
            o->ns_per_iter = arg_double(name, optarg, 0);
            break;
        case O_BUDGET_MS:
            o->budget_ms = arg_double(name, optarg, 0);
            break;
        case O_SCALE:
            o->scale = arg_double(name, optarg, 0);
            break;
        case O_CHOL_N:
            o->chol_n = (int)arg_int(name, optarg, 0, 1 << 20);
            break;
        case O_LU_N:
            o->lu_n = (int)arg_int(name, optarg, 0, 1 << 16);
            break;
        case O_REPS:
            o->reps = (int)arg_int(name, optarg, 1, 1 << 20);
            break;
        case O_WARMUP:
            o->warmup = (int)arg_int(name, optarg, 0, 1 << 20);
            break;
        case O_MAX_RUN_S:
            o->max_run_s = arg_double(name, optarg, 0);
            break;
        case O_ROW_TIMEOUT_S:
            o->row_timeout_s = arg_double(name, optarg, 0);
            break;
        case O_SKIP:
            for (char *tok = strtok(optarg, ",");
                 tok && o->nskip < MAX_LIST * 4; tok = strtok(NULL, ","))
                o->skip[o->nskip++] = tok;
            break;
        case O_PENDING:
            o->pending = (size_t)arg_u64(name, optarg);
            break;
        case O_WIDE:
            o->wide = (size_t)arg_u64(name, optarg);
            break;
        case O_REF_DIR:
            o->ref_dir = optarg;
            break;
        case O_PROGRESS:
            o->progress = 1;
            break;
        case O_CALLGRIND:
            o->callgrind = 1;
            break;
        case O_FLOP_NS_PER_ITER:
            o->flop_ns_per_iter = arg_double(name, optarg, 0);
            break;
        case O_W9_THREADS:
            o->w9_threads = (int)arg_int(name, optarg, 1, 4096);
            break;
        case O_W9_STEPS:
            o->w9_steps = (long)arg_int(name, optarg, 1, 1L << 30);
            break;
        case O_W9_RUN_MS:
            o->w9_run_ms = arg_double(name, optarg, 0);
            break;
        case O_W9_MAX_TASKS:
            o->w9_max_tasks = arg_double(name, optarg, 0);
            break;
        default: /* getopt_long said what was wrong */
            usage(stderr);
            exit(1);
        }
    }
    if (optind < argc)
        bad_usage("unexpected argument '%s'", argv[optind]);
    for (int k = 0; k < o->nwork; k++)
        o->work_labels[k] = k < nlabels ? no_labels[k] : works[k];
    if (o->nworkloads == 0)
        for (; bench_workload_keys[o->nworkloads]; o->nworkloads++)
            o->workloads[o->nworkloads] = bench_workload_keys[o->nworkloads];
    return mode;
}

/* ---- output ----------------------------------------------------------------
 */

/* Print a JSON string (the names here are plain; quote and backslash are
 * escaped, control characters dropped). */
static void json_str(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s >= 0x20)
            putchar(*s);
    }
    putchar('"');
}

static void progress(const options *o, int step, int nsteps, const char *fmt,
                     ...) __attribute__((format(printf, 4, 5)));

static void progress(const options *o, int step, int nsteps, const char *fmt,
                     ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (o->progress)
        fprintf(stderr, "PROGRESS\t%d\t%d\t", step, nsteps);
    else
        fprintf(stderr, "[%d/%d] ", step + 1, nsteps);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- calibration ----------------------------------------------------------
 */

/* The machine's floor for handing a result between two cores: a cache
 * line's round trip, one thread writing a flag the other waits for and
 * answers, on CPUs 0 and 1 (where pinning works). A step of W9-x1 hands
 * each worker's result to the other worker: one way for the engine's
 * signal, one for the value, whatever the engine. */
enum { PINGS = 200000 };
static _Alignas(64) atomic_long ping_flag;

static void pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *pong(void *arg)
{
    (void)arg;
    pin_to(1);
    for (long i = 0; i < PINGS; i++) {
        while (atomic_load_explicit(&ping_flag, memory_order_acquire) !=
               2 * i + 1)
            ;
        atomic_store_explicit(&ping_flag, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

/* Nanoseconds a round trip, the fastest of 5 passes; 0 on one CPU. */
static double line_round_trip(void)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return 0;
    cpu_set_t before;
    bool pinned = pthread_getaffinity_np(pthread_self(), sizeof before,
                                         &before) == 0;
    pin_to(0);
    double best = 1e30;
    for (int pass = 0; pass < 5; pass++) {
        atomic_store(&ping_flag, 0);
        pthread_t t;
        if (pthread_create(&t, NULL, pong, NULL) != 0)
            return 0;
        double t0 = bench_now();
        for (long i = 0; i < PINGS; i++) {
            atomic_store_explicit(&ping_flag, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&ping_flag, memory_order_acquire) !=
                   2 * i + 2)
                ;
        }
        double dt = bench_now() - t0;
        pthread_join(t, NULL);
        if (dt < best)
            best = dt;
    }
    if (pinned)
        (void)pthread_setaffinity_np(pthread_self(), sizeof before, &before);
    return best * 1e9 / PINGS;
}

/* Nanoseconds per iteration of the work loop: the fastest of several timed
 * passes (the least disturbed by other processes); and of W9's FLOP loop
 * (stencil.h); and the line's round trip between two cores. */
static double calibrate(void)
{
    uint64_t iters = 1000000, sink = 0;
    double best = 1e30;
    for (int pass = 0; pass < 15; pass++) {
        double t0 = bench_now();
        sink += bench_work_loop(sink + (uint64_t)pass, iters);
        double dt = bench_now() - t0;
        if (dt < best)
            best = dt;
    }
    printf("{\"type\":\"calibration\",\"ns_per_iter\":%.6f,\"flop_ns_per_"
           "iter\":%.6f,\"flops_per_iter\":%d,\"line_round_trip_ns\":%.1f,"
           "\"sink\":%" PRIu64 "}\n",
           best * 1e9 / (double)iters, bench_flop_calibrate(),
           BENCH_FLOPS_PER_ITER, line_round_trip(), sink & 1);
    return best * 1e9 / (double)iters;
}

/* ---- one row ---------------------------------------------------------------
 */

/* Run one program `reps` times (after `warmup` untimed runs), check each
 * run, print the result record. Returns 0, 1 (setup error) or 3 (mismatch). */
static int run_row(const options *o, const bench_adapter *ad, void *engine,
                   const char *key, uint64_t work, const char *work_label,
                   int step, int nsteps)
{
    bool stencil = bench_workload_stencil(key);
    bench_sizing sz = {
        .scale = o->scale,
        .op_ns = (double)work *
                 (stencil ? o->flop_ns_per_iter : o->ns_per_iter),
        .budget_ns = o->budget_ms * 1e6,
        .chol_n = o->chol_n,
        .lu_n = o->lu_n,
        .w9_threads = o->w9_threads > 0 ? o->w9_threads : o->threads,
        .w9_steps = o->w9_steps,
        .w9_run_ns = o->w9_run_ms * 1e6,
        .w9_max_tasks = o->w9_max_tasks,
        .work = work,
    };
    bench_prog *p = bench_prog_build(key, &sz);
    if (!p)
        return 1;
    const char *why = ad->unsupported ? ad->unsupported(p) : NULL;
    if (why) {
        printf("{\"type\":\"skip\",\"engine\":");
        json_str(ad->name);
        printf(",\"threads\":%d,\"key\":", o->threads);
        json_str(key);
        printf(",\"work_label\":");
        json_str(work_label);
        printf(",\"reason\":");
        json_str(why);
        printf("}\n");
        fflush(stdout);
        bench_prog_free(p);
        return 0;
    }
    progress(o, step, nsteps, "%s %s (%s) work=%s: serial reference", key,
             p->name, p->size, work_label);
    bench_ref ref;
    if (bench_reference(p, work, o->ref_dir, &ref) != 0) {
        bench_prog_free(p);
        return 1;
    }
    bench_state s;
    void *run = NULL;
    if (bench_state_init(&s, p, work) != 0 ||
        ad->prepare(engine, &s, &run) != 0) {
        fprintf(stderr, "bench: %s: could not prepare %s\n", ad->name, key);
        bench_prog_free(p);
        return 1;
    }
    int total = o->warmup + o->reps, status = 0, mismatches = 0, capped = 0;
    double *times = calloc((size_t)o->reps + 1, sizeof *times);
    int nt = 0;
    for (int r = 0; r < total && times; r++) {
        progress(o, step, nsteps, "%s %s (%s) work=%s: %s %d/%d", key, p->name,
                 p->size, work_label, r < o->warmup ? "warm-up" : "run",
                 r < o->warmup ? r + 1 : r - o->warmup + 1,
                 r < o->warmup ? o->warmup : o->reps);
        bench_state_reset(&s);
        double secs = 0;
#ifdef BENCH_HAVE_CALLGRIND_H
        if (o->callgrind && r >= o->warmup)
            CALLGRIND_ZERO_STATS;
#endif
        watchdog_arm(o->row_timeout_s, ad->name, o->threads, key, work_label);
        int rc = ad->run(run, &secs);
        watchdog_disarm();
#ifdef BENCH_HAVE_CALLGRIND_H
        if (o->callgrind && r >= o->warmup) {
            char label[128];
            snprintf(label, sizeof label, "%s ops=%zu", key, p->nops);
            CALLGRIND_DUMP_STATS_AT(label);
        }
#endif
        if (rc != 0 || s.failed) {
            fprintf(stderr, "bench: %s T=%d: %s: the run failed\n", ad->name,
                    o->threads, key);
            status = 1;
            break;
        }
        if (bench_state_hash(&s) != ref.hash) {
            bench_report_mismatch(&s, ad->name, o->threads);
            mismatches++;
            status = 3;
        }
        if (r >= o->warmup)
            times[nt++] = secs;
        if (o->max_run_s > 0 && secs > o->max_run_s && r + 1 < total) {
            if (nt == 0)
                times[nt++] = secs; /* the warm-up is the only sample */
            capped = 1;
            fprintf(stderr,
                    "bench: %s T=%d %s work=%s: a run took %.1f s (> %.1f s): "
                    "not repeated\n",
                    ad->name, o->threads, key, work_label, secs, o->max_run_s);
            break;
        }
    }
    printf("{\"type\":\"result\",\"engine\":");
    json_str(ad->name);
    printf(",\"family\":");
    json_str(ad->family);
    printf(",\"threads\":%d,\"key\":", o->threads);
    json_str(key);
    printf(",\"id\":");
    json_str(p->id);
    printf(",\"name\":");
    json_str(p->name);
    printf(",\"size\":");
    json_str(p->size);
    printf(",\"ops\":%zu,\"work_label\":", p->nops);
    json_str(work_label);
    printf(",\"work_iters\":%" PRIu64 ",\"times_s\":[",
           bench_workload_tiled(key) ? 0 : work);
    for (int k = 0; k < nt; k++)
        printf("%s%.9g", k ? "," : "", times[k]);
    printf("],\"check\":\"%s\"", status == 3 ? "MISMATCH"
                                 : status    ? "FAILED"
                                             : "ok");
    if (capped)
        printf(",\"capped\":true");
    if (p->w9_width > 0)
        printf(",\"w9_threads\":%d,\"w9_width\":%d,\"w9_steps\":%ld,"
               "\"flops\":%.17g",
               sz.w9_threads, p->w9_width, p->w9_steps, p->flops);
    else if (p->flops > 0)
        printf(",\"flops\":%.6g,\"residual\":%.3g", p->flops, ref.residual);
    printf("}\n");
    fflush(stdout);
    if (mismatches)
        fprintf(stderr, "!!! %s T=%d %s: %d of %d runs differed from serial\n",
                ad->name, o->threads, key, mismatches, total);
    free(times);
    ad->release(run);
    bench_state_destroy(&s);
    bench_prog_free(p);
    return status;
}

/* The pending-ops row (pending.h): one record, then the engine stops.
 * Returns the exit status. */
static int run_pending(const options *o, const bench_adapter *ad, void *engine)
{
    bench_pending m = {0};
    int rc = -1;
    if (!ad->pending)
        fprintf(stderr,
                "bench: %s: the pending-ops row is not measured for it\n",
                ad->name);
    else
        rc = ad->pending(engine, o->pending, &m);
    long long peak = bench_peak_rss_bytes();
    if (ad->stop(engine) != 0)
        rc = -1;
    if (rc != 0)
        return 1;
    printf("{\"type\":\"pending\",\"engine\":");
    json_str(ad->name);
    printf(",\"family\":");
    json_str(ad->family);
    printf(",\"threads\":%d,\"n\":%zu,\"deps_per_op\":2,\"rss_before\":%lld,"
           "\"rss_after\":%lld,\"bytes_per_op\":%.1f,\"peak_rss\":%lld,\"push_"
           "s\":%.6f,"
           "\"drain_s\":%.6f}\n",
           o->threads, o->pending, m.rss_before, m.rss_after,
           (double)(m.rss_after - m.rss_before) / (double)o->pending, peak,
           m.push_s, m.drain_s);
    fflush(stdout);
    return 0;
}

/* The wide-op row (adapter.h): one record, then the engine stops. Returns
 * the exit status. */
static int run_wide(const options *o, const bench_adapter *ad, void *engine)
{
    static bench_wide m;
    int reps = o->reps < BENCH_WIDE_MAX_REPS ? o->reps : BENCH_WIDE_MAX_REPS;
    int rc = -1;
    if (!ad->wide)
        fprintf(stderr, "bench: %s: the wide-op row is not measured for it\n",
                ad->name);
    else
        rc = ad->wide(engine, o->wide, reps, &m);
    if (ad->stop(engine) != 0)
        rc = -1;
    if (rc != 0)
        return 1;
    printf("{\"type\":\"wide\",\"engine\":");
    json_str(ad->name);
    printf(",\"family\":");
    json_str(ad->family);
    printf(",\"threads\":%d,\"n\":%zu,\"order\":\"shuffled\",\"new_s\":%.6f,"
           "\"delete_s\":%.6f",
           o->threads, o->wide, m.new_s, m.delete_s);
    const char *names[3] = {"times_s", "push_s", "run_s"};
    for (int k = 0; k < 3; k++) {
        printf(",\"%s\":[", names[k]);
        for (int r = 0; r < reps; r++)
            printf("%s%.6f", r ? "," : "",
                   k == 0   ? m.push_s[r] + m.run_s[r]
                   : k == 1 ? m.push_s[r]
                            : m.run_s[r]);
        printf("]");
    }
    printf("}\n");
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    setvbuf(stderr, NULL, _IOLBF, 0);
    enum mode mode = parse(argc, argv, &o);
    chol_init();
    if (mode == CALIBRATE) {
        calibrate();
        return 0;
    }
    if (mode == LIST) {
        for (int i = 0; bench_adapters[i]; i++) {
            const bench_adapter *ad = bench_adapters[i];
            const char *why = ad->unavailable ? ad->unavailable() : NULL;
            printf("{\"type\":\"engine\",\"engine\":");
            json_str(ad->name);
            printf(",\"family\":");
            json_str(ad->family);
            printf(",\"threaded\":%d,\"extra\":%d,\"pending\":%d,\"wide\":%d,"
                   "\"unavailable\":",
                   ad->threaded, ad->extra, ad->pending != NULL,
                   ad->wide != NULL);
            if (why)
                json_str(why);
            else
                printf("null");
            printf("}\n");
        }
        return 0;
    }
    const bench_adapter *ad = NULL;
    for (int i = 0; bench_adapters[i]; i++)
        if (o.engine && strcmp(bench_adapters[i]->name, o.engine) == 0)
            ad = bench_adapters[i];
    if (!ad) {
        fprintf(stderr, "bench: no engine '%s' in this binary (see --list)\n",
                o.engine ? o.engine : "");
        return 1;
    }
    const char *why = ad->unavailable ? ad->unavailable() : NULL;
    if (why) {
        printf("{\"type\":\"unavailable\",\"engine\":");
        json_str(ad->name);
        printf(",\"reason\":");
        json_str(why);
        printf("}\n");
        return 0;
    }

    char version[256] = "";
    void *engine = NULL;
    double t0 = bench_now();
    if (ad->start(&engine, o.threads, version, sizeof version) != 0) {
        fprintf(stderr, "bench: %s: could not start with %d workers\n",
                ad->name, o.threads);
        return 1;
    }
    double startup = bench_now() - t0;
    if (o.pending > 0)
        return run_pending(&o, ad, engine);
    if (o.wide > 0)
        return run_wide(&o, ad, engine);
    if (o.row_timeout_s > 0) {
        static double limit;
        pthread_t tid;
        limit = o.row_timeout_s;
        if (pthread_create(&tid, NULL, watchdog_main, &limit) == 0)
            pthread_detach(tid);
    }

    int nsteps = 0;
    for (int w = 0; w < o.nworkloads; w++)
        nsteps += bench_workload_fixed_label(o.workloads[w]) ? 1 : o.nwork;
    int step = 0, status = 0;
    for (int k = 0; k < o.nwork && status != 1; k++) {
        for (int w = 0; w < o.nworkloads && status != 1; w++) {
            const char *key = o.workloads[w];
            /* W6, W8 ("tiles") and W10 ("rec"): no work sizes, run once */
            const char *fixed = bench_workload_fixed_label(key);
            if (fixed && k > 0)
                continue;
            const char *wl = fixed ? fixed : o.work_labels[k];
            int skipped = 0;
            for (int i = 0; i < o.nskip; i++) {
                size_t kl = strlen(key);
                if (strncmp(o.skip[i], key, kl) == 0 && o.skip[i][kl] == '@' &&
                    strcmp(o.skip[i] + kl + 1, wl) == 0)
                    skipped = 1;
            }
            if (skipped) {
                step++;
                continue;
            }
            int rc = run_row(&o, ad, engine, key, fixed ? 0 : o.work[k], wl,
                             step++, nsteps);
            if (rc > status)
                status = rc;
        }
    }

    t0 = bench_now();
    if (ad->stop(engine) != 0 && status == 0)
        status = 1;
    double shutdown = bench_now() - t0;
    printf("{\"type\":\"engine\",\"engine\":");
    json_str(ad->name);
    printf(",\"family\":");
    json_str(ad->family);
    printf(",\"threads\":%d,\"version\":", o.threads);
    json_str(version);
    printf(",\"startup_s\":%.9g,\"shutdown_s\":%.9g}\n", startup, shutdown);
    return status;
}
