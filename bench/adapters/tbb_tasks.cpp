/*
 * W10 on oneTBB (tbb_flow.h): the recursion with tbb::task_group, as
 * oneTBB's own fib example and a parallel quicksort write it: a call runs
 * one child with task_group::run, the other too, then task_group::wait.
 * Every entry point catches what TBB may throw, since the caller is C.
 */
#include "tbb_flow.h"

#include <cstdio>

#include <oneapi/tbb/task_group.h>

#include "recursive.h"

namespace
{
int64_t fib(int n)
{
    if (n < 2)
        return n;
    int64_t x = 0, y = 0;
    tbb::task_group g;
    g.run([&] { x = fib(n - 1); });
    g.run([&] { y = fib(n - 2); });
    g.wait();
    return x + y;
}

void sort(int32_t *a, size_t n)
{
    if (n <= BENCH_QSORT_CUTOFF) {
        bench_qsort_leaf(a, n);
        return;
    }
    size_t k = bench_qsort_partition(a, n);
    tbb::task_group g;
    g.run([=] { sort(a, k); });
    g.run([=] { sort(a + k, n - k); });
    g.wait();
}
} // namespace

extern "C" int tbb_rec_fib(int n, int64_t *out)
{
    try {
        *out = fib(n);
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench: tbb task_group: %s\n", e.what());
        return -1;
    }
}

extern "C" int tbb_rec_qsort(int32_t *a, size_t n)
{
    try {
        sort(a, n);
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench: tbb task_group: %s\n", e.what());
        return -1;
    }
}
