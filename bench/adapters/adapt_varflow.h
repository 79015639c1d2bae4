/*
 * What adapt_varflow.c shares with adapt_varflow_cxx.cpp, its C++ half:
 * the adapters "vf-naive-cxx", "vf-pooled-cxx" and "vf-pooled-cxx-heap"
 * (extras, for bench/callgrind.py and docs/CXX.md) push the same program
 * through include/varflow.hpp instead of vf_engine_push, so the two can be
 * compared in one binary: same engine, same kernel, same var lists.
 */
#ifndef VF_BENCH_ADAPT_VARFLOW_H
#define VF_BENCH_ADAPT_VARFLOW_H

#include <stddef.h>
#include <stdint.h>

#include <varflow.h>

#include "bench_op.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bench_state;
struct bench_prog;

/* What one op's function gets. */
typedef struct vf_bench_task {
    struct bench_state *s;
    size_t i;
} vf_bench_task;

/* workloads.h's kernel (declared here for the C++ half). */
int bench_op_run(struct bench_state *s, size_t i);

/* How the C++ half pushes each op's callable. */
typedef enum vf_bench_cxx_kind {
    VF_BENCH_CXX_INLINE = 1, /* captures the task pointer: fits in the op */
    VF_BENCH_CXX_HEAP = 2    /* captures (state, index): one new per push */
} vf_bench_cxx_kind;

/* Push ops [begin, end) through varflow.hpp, as adapt_varflow.c's timed
 * loop does through vf_engine_push. Returns 0, or -1 (a message on stderr). */
int vf_bench_cxx_push_range(vf_engine *e, const bench_op *ops,
                            const vf_var *refs, vf_bench_task *tasks,
                            size_t begin, size_t end, vf_bench_cxx_kind kind);

/* W10 (recursive.h; vf_recursive.c): run the program's recursion, each
 * call an op that pushes its children writing fresh vars and waits on
 * them; through varflow.hpp when `cxx`. Puts the time of the root's push
 * and wait in *seconds. Returns 0, or -1 (a message on stderr). */
int vf_bench_rec_run(vf_engine *e, struct bench_state *s, int cxx,
                     double *seconds);

/* W10 through varflow.hpp (adapt_varflow_cxx.cpp): the same recursion, each
 * call a lambda pushed with engine_ref::push writing a varflow::var made by
 * new_var(), joined with engine_ref::wait. Return 0, or -1 (said on
 * stderr). */
int vf_bench_cxx_fib(vf_engine *e, int n, int64_t *out);
int vf_bench_cxx_qsort(vf_engine *e, int32_t *a, size_t n);

/* The "-replay" engines (vf_replay.c): a program that repeats, captured
 * once into a graph and launched once per K of its periods. NULL when
 * the program can be replayed, else why not; prepare (before the clock:
 * the capture) and free return 0 or -1 (said on stderr); run pushes the
 * ops before the repeating part and after the last launch with
 * `push_range` (adapt_varflow.c's), [0, first) and what is left of
 * [first, nops). */
typedef struct vf_bench_replay vf_bench_replay;
const char *vf_bench_replay_unsupported(const struct bench_prog *p);
int vf_bench_replay_prepare(vf_engine *e, struct bench_state *s,
                            const vf_var *refs, vf_bench_replay **out);
int vf_bench_replay_run(vf_engine *e, vf_bench_replay *rp,
                        int (*push_range)(void *ctx, int pusher, size_t begin,
                                          size_t end),
                        void *ctx, size_t nops, size_t first);
void vf_bench_replay_free(vf_engine *e, vf_bench_replay *rp);

#ifdef __cplusplus
}
#endif

#endif /* VF_BENCH_ADAPT_VARFLOW_H */
