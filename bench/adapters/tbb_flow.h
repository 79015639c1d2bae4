/*
 * A C interface to oneTBB's flow graph, just wide enough for the tbb-flow
 * adapter (adapt_tbb.c): a graph of continue_nodes numbered 0, 1, 2, ... in
 * the order they are added, each running fn(arg, its number) once every
 * node with an edge into it has run.
 *
 * Why a C interface: the adapter reads the shared workload headers, and
 * examples/cholesky_tiles.h (which they include) is C that does not compile
 * as C++. So the adapter stays C and only this thin layer is C++
 * (tbb_flow.cpp). A call across it is an ordinary function call; the cost
 * that matters (node creation, make_edge, scheduling) is TBB's own.
 *
 * None of these functions may be called from inside a node's fn.
 */
#ifndef VF_BENCH_TBB_FLOW_H
#define VF_BENCH_TBB_FLOW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tbb_flow_limit tbb_flow_limit;
typedef struct tbb_flow tbb_flow;
typedef void (*tbb_flow_fn)(void *arg, size_t node);

/*
 * Limit TBB to `threads` threads in all, the calling thread included (a
 * process-wide tbb::global_control), and start them. Writes the runtime's
 * version to `version`. Returns NULL when out of memory.
 */
tbb_flow_limit *tbb_flow_limit_new(int threads, char *version, size_t len);
void tbb_flow_limit_free(tbb_flow_limit *l);

/* An empty graph whose nodes run fn(arg, node). NULL when out of memory. */
tbb_flow *tbb_flow_new(tbb_flow_fn fn, void *arg);

/* Add node number tbb_flow_size() (before the call). Returns 0 or -1 (out
 * of memory). */
int tbb_flow_add_node(tbb_flow *g);

/* The number of nodes added so far. */
size_t tbb_flow_size(const tbb_flow *g);

/* An edge: node `to` waits for node `from` (both already added, from != to;
 * one edge per pair: a second one would make `to` wait for two messages
 * from `from`). Returns 0 or -1 (out of memory). */
int tbb_flow_edge(tbb_flow *g, size_t from, size_t to);

/* Start a node that has no edge into it. Once the first node is started no
 * node or edge may be added: one that had already run would never signal a
 * new successor. Returns 0 or -1. */
int tbb_flow_start(tbb_flow *g, size_t node);

/* Wait until every started node and all it leads to has run; the calling
 * thread runs nodes meanwhile. */
void tbb_flow_wait(tbb_flow *g);

/* Destroy a graph that is not running (never started, or waited for). */
void tbb_flow_free(tbb_flow *g);

/* W10 (recursive.h) with tbb::task_group (tbb_tasks.cpp): each call runs
 * its children in a task_group of its own and waits for it. The calling
 * thread makes the root call and works in every wait. Return 0, or -1 when
 * TBB threw (said on stderr). */
int tbb_rec_fib(int n, int64_t *out);
int tbb_rec_qsort(int32_t *a, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* VF_BENCH_TBB_FLOW_H */
