/*
 * W10, the recursive workload (shared/bench/WORKLOADS.md): fib(n) with no
 * cutoff, each call a task that spawns fib(n-1) and fib(n-2) and waits for
 * both (n = 25 and 30), and a parallel quicksort of 10M ints whose every
 * call on a range over the cutoff (1000) partitions it, spawns a task per
 * half and waits for both; at or below the cutoff a range is sorted
 * serially.
 *
 * Unlike W1-W8, W10 is not a list of ops pushed from one thread: the tasks
 * are made by the tasks, so every adapter has a recursive function of its
 * own (varflow: an op that pushes two ops writing fresh vars and waits on
 * the vars; OpenMP: task + taskwait; oneTBB: task_group; serial: the plain
 * recursion). What they share is here: the sizes, the input, the
 * partition and the serial leaf sort (one library built by the C compiler,
 * linked into every binary, like W8's kernels, so that every engine runs
 * the same code between its spawns), and the checks: fib against the
 * closed form, the sorted array against qsort(3)'s output of the same
 * input. A program's `nops` is its number of tasks (calls), from which the
 * tables' us/op and ops/s come.
 */
#ifndef VF_BENCH_RECURSIVE_H
#define VF_BENCH_RECURSIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct bench_prog;
struct bench_state;
struct bench_sizing;

enum bench_rec_kind {
    BENCH_REC_NONE = 0,
    BENCH_REC_FIB = 1,
    BENCH_REC_QSORT = 2
};

/* Ranges of at most this many ints are sorted serially (WORKLOADS.md). */
#define BENCH_QSORT_CUTOFF 1000

/* Whether a row is W10's. */
bool bench_workload_recursive(const char *key);

/* Fill a W10 program (key, name and id already set): kind, size, input and
 * task count. Returns 0, or -1 (out of memory, said on stderr). */
int bench_rec_build(struct bench_prog *p, const char *key,
                    const struct bench_sizing *sz);

/* fib(n) by the closed form (Binet's, rounded: exact up to n = 70). */
int64_t bench_fib_closed(int n);

/* The serial recursion: what each engine's tasks compute, on one thread. */
int64_t bench_fib_serial(int n);

/* Partition a[0..n) (n > BENCH_QSORT_CUTOFF) around the median of its first,
 * middle and last ints (Hoare's scheme): returns k, 0 < k < n, with every
 * int of a[0..k) <= every int of a[k..n). */
size_t bench_qsort_partition(int32_t *a, size_t n);

/* Sort a range at or below the cutoff, serially. */
void bench_qsort_leaf(int32_t *a, size_t n);

/* The whole recursion on one thread; returns the number of calls (tasks). */
size_t bench_qsort_serial(int32_t *a, size_t n);

/* Run a W10 program serially on its state (the serial adapter). */
void bench_rec_run_serial(struct bench_state *s);

/* The state's hash, the reference's, and how a run differs (workloads.h's
 * bench_state_hash, bench_reference and bench_report_mismatch for W10). */
uint64_t bench_rec_hash(const struct bench_state *s);
int bench_rec_reference(const struct bench_prog *p, uint64_t *hash);
void bench_rec_mismatch(const struct bench_state *s);

#ifdef __cplusplus
}
#endif

#endif /* VF_BENCH_RECURSIVE_H */
