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

#include <varflow.h>

#include "bench_op.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bench_state;

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

#ifdef __cplusplus
}
#endif

#endif /* VF_BENCH_ADAPT_VARFLOW_H */
