/*
 * The pending-ops row: how much memory an engine holds for each op that has
 * been pushed and cannot run yet, and the peak resident set of holding
 * millions of them.
 *
 * Shape, the same for every engine: three vars A, B0, B1. Op 0, the gate,
 * writes all three and does not finish until the pushing thread opens the
 * gate. Then n ops: op i (1..n) reads A and writes B[i % 2]. Each of the n
 * waits on exactly two dependencies: its read of A on the gate's write, its
 * write of B[i % 2] on op i - 2's write (on the gate's, for ops 1 and 2).
 * Nothing can run before the gate opens, so once the n are pushed all n are
 * pending at once.
 *
 * The resident set is read just before the first of the n pushes (engine,
 * vars and gate already there) and just after the last; (after - before) / n
 * is the bytes per pending op. The gate then opens and the engine drains.
 * The peak (getrusage's ru_maxrss) is the whole process's, which runs this
 * row alone (`vfbench-X --pending N`, one process per engine).
 */
#ifndef VF_BENCH_PENDING_H
#define VF_BENCH_PENDING_H

#include <pthread.h>
#include <stddef.h>

/* What one engine's run of the row measured. */
typedef struct bench_pending {
    long long rss_before; /* bytes resident before the n pushes */
    long long rss_after;  /* and after them, all n pending */
    double push_s;        /* the n pushes (or the graph built) */
    double drain_s;       /* gate opened to all done */
} bench_pending;

/* The gate op's barrier: the op blocks in bench_gate_wait (without spinning,
 * so the pushing thread keeps its core) until bench_gate_open. */
typedef struct bench_gate {
    pthread_mutex_t lock;
    pthread_cond_t opened;
    int open; /* guarded by lock */
} bench_gate;

void bench_gate_init(bench_gate *g);
void bench_gate_wait(bench_gate *g);
void bench_gate_open(bench_gate *g);
void bench_gate_destroy(bench_gate *g);

/* Bytes resident now (/proc/self/statm), or -1 when it cannot be read. */
long long bench_rss_bytes(void);

/* The process's peak resident set so far, in bytes (ru_maxrss). */
long long bench_peak_rss_bytes(void);

#endif /* VF_BENCH_PENDING_H */
