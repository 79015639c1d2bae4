/*
 * The interface between the benchmark driver and an engine (varflow, a
 * peer, or the serial loop). An adapter translates a program (workloads.h)
 * into the engine's own calls and nothing else: the kernel, the state, the
 * sizes and the checks are shared.
 *
 * Life of an adapter in one process:
 *   start(threads)           engine start-up, timed and reported apart
 *   for each program:
 *       prepare(program)     create the engine's vars/handles (not timed)
 *       run() x reps         push every op, wait for all; timed inside
 *       release()
 *   stop()                   engine shutdown, timed and reported apart
 * or, for the pending-ops row (pending.h), in a process of its own:
 *   start(threads); pending(n); stop()
 * or, for the wide-op row (bench_wide below), in a process of its own:
 *   start(threads); wide(n, reps); stop()
 */
#ifndef VF_BENCH_ADAPTER_H
#define VF_BENCH_ADAPTER_H

#include <stddef.h>

#include "pending.h"
#include "workloads.h"

/*
 * The wide-op row: one op that writes n distinct vars (varflow's limit,
 * 2^20, in the suite), named in a shuffled order (a fixed seed), pushed and
 * run `reps` times over the same vars: the cost of an op's var set in
 * normal form (sorted, each var once) and of holding and releasing every
 * var, which must grow as n log n at most, not n^2.
 */
#define BENCH_WIDE_MAX_REPS 32
typedef struct bench_wide {
    double new_s;                       /* the n vars made (not in the row) */
    double push_s[BENCH_WIDE_MAX_REPS]; /* each rep's push */
    double run_s[BENCH_WIDE_MAX_REPS];  /* and its wait for all: the op run */
    double delete_s;                    /* the n vars deleted, waited for */
} bench_wide;

typedef struct bench_adapter {
    const char *name;   /* column name, e.g. "vf-pooled" */
    const char *family; /* "varflow", "serial", "openmp", "starpu", "tbb" */
    int threaded;       /* 0: the worker count means nothing (run at T=1) */
    int extra;          /* 1: not in the default suite (bench/run.py
                           --engines names it; bench/callgrind.py runs it) */

    /* NULL when the engine can run here, else why not (a skip note). */
    const char *(*unavailable)(void);

    /* NULL when the engine can run the program, else why not. */
    const char *(*unsupported)(const bench_prog *p);

    /* Start the engine with `threads` workers; fill `version` (may be left
     * empty) with what runs. Returns 0, or -1 with a message on stderr. */
    int (*start)(void **engine, int threads, char *version, size_t version_len);

    /* Stop it. Returns 0 or -1. */
    int (*stop)(void *engine);

    /* Create what the engine needs to run programs over s (vars). */
    int (*prepare)(void *engine, bench_state *s, void **run);

    /* Push every op of the program and wait for all; put the time of
     * exactly that in *seconds. Returns 0, or -1 (a message on stderr). */
    int (*run)(void *run, double *seconds);

    void (*release)(void *run);

    /* The pending-ops row (NULL: not measured for this engine): push the
     * gate and the n ops of pending.h's shape, read the resident set before
     * and after the n, open the gate, wait for all. Returns 0 or -1. */
    int (*pending)(void *engine, size_t n, bench_pending *out);

    /* The wide-op row (NULL: not measured for this engine): make n vars,
     * push the op over all of them and wait for all `reps` times (reps <=
     * BENCH_WIDE_MAX_REPS), check every var was written `reps` times,
     * delete the vars. Returns 0 or -1 (a message on stderr). */
    int (*wide)(void *engine, size_t n, int reps, bench_wide *out);
} bench_adapter;

/*
 * Run a multi-pusher program (W7): one thread per pusher, created before the
 * clock starts; each calls push(ctx, p, begin, end) for its range of ops.
 * Sets *t0 to when the pushers were released. Returns 0, or -1 when a pusher
 * failed or a thread could not be started.
 */
int bench_run_pushers(const bench_prog *p,
                      int (*push)(void *ctx, int pusher, size_t begin,
                                  size_t end),
                      void *ctx, double *t0);

/* The adapters each binary is built with (NULL-terminated). */
extern const bench_adapter *const bench_adapters[];

#endif /* VF_BENCH_ADAPTER_H */
