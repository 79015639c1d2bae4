/*
 * tbb_flow.h over oneTBB: a tbb::flow::graph and a std::deque of
 * continue_nodes (a deque, so adding a node never moves the ones before it:
 * the graph holds pointers to them, and a node cannot be moved). Every entry
 * point catches what TBB or the allocator may throw, since the caller is C.
 */
#include "tbb_flow.h"

#include <cstdio>
#include <deque>
#include <new>

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/version.h>

namespace flow = tbb::flow;
using node_t = flow::continue_node<flow::continue_msg>;

struct tbb_flow_limit {
    tbb::global_control control;
    explicit tbb_flow_limit(int threads)
        : control(tbb::global_control::max_allowed_parallelism, (size_t)threads)
    {
    }
};

struct tbb_flow {
    flow::graph graph;
    std::deque<node_t> nodes; /* destroyed before the graph */
    tbb_flow_fn fn;
    void *arg;
};

extern "C" tbb_flow_limit *tbb_flow_limit_new(int threads, char *version,
                                              size_t len)
{
    try {
        tbb_flow_limit *l = new tbb_flow_limit(threads);
        /* Start the workers now, so start-up is not charged to the first run.
         */
        tbb::parallel_for(0, 64 * threads, [](int) {});
        std::snprintf(version, len, "oneTBB %s flow graph, %zu threads in all",
                      TBB_runtime_version(),
                      tbb::global_control::active_value(
                          tbb::global_control::max_allowed_parallelism));
        return l;
    } catch (...) {
        return nullptr;
    }
}

extern "C" void tbb_flow_limit_free(tbb_flow_limit *l)
{
    delete l;
}

extern "C" tbb_flow *tbb_flow_new(tbb_flow_fn fn, void *arg)
{
    try {
        tbb_flow *g = new tbb_flow;
        g->fn = fn;
        g->arg = arg;
        return g;
    } catch (...) {
        return nullptr;
    }
}

extern "C" int tbb_flow_add_node(tbb_flow *g)
{
    try {
        size_t i = g->nodes.size();
        g->nodes.emplace_back(g->graph, [g, i](const flow::continue_msg &) {
            g->fn(g->arg, i);
            return flow::continue_msg();
        });
        return 0;
    } catch (...) {
        return -1;
    }
}

extern "C" size_t tbb_flow_size(const tbb_flow *g)
{
    return g->nodes.size();
}

extern "C" int tbb_flow_edge(tbb_flow *g, size_t from, size_t to)
{
    try {
        flow::make_edge(g->nodes[from], g->nodes[to]);
        return 0;
    } catch (...) {
        return -1;
    }
}

extern "C" int tbb_flow_start(tbb_flow *g, size_t node)
{
    try {
        g->nodes[node].try_put(flow::continue_msg());
        return 0;
    } catch (...) {
        return -1;
    }
}

extern "C" void tbb_flow_wait(tbb_flow *g)
{
    g->graph.wait_for_all();
}

extern "C" void tbb_flow_free(tbb_flow *g)
{
    delete g;
}
