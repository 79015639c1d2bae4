/*
 * adapt_varflow.c's timed loop through include/varflow.hpp: each op is a
 * lambda pushed with engine_ref::push, reading and writing the same var
 * lists, running the same kernel. VF_BENCH_CXX_INLINE captures one pointer
 * (the op's task, as the C loop passes it in `arg`), so the callable rides
 * in the op and nothing is allocated; VF_BENCH_CXX_HEAP captures the state
 * and the index, 16 bytes, in a type that is not trivially copyable (a
 * user-written copy constructor, as a capture of a std::string or a
 * shared_ptr would have), which varflow.hpp moves into one `new` per push
 * (and deletes in the op's done callback): the cost of a callable the
 * engine cannot copy into the op (a trivially copyable one of 16 bytes
 * would take vf_op.arg_size's copy instead).
 */
#include <cstdio>

#include <varflow.hpp>

#include "adapt_varflow.h"
#include "recursive.h"

namespace
{
/* The heap row's capture: 16 bytes that only a copy constructor may copy. */
struct heap_capture {
    bench_state *s;
    size_t i;
    heap_capture(bench_state *s_, size_t i_) : s(s_), i(i_)
    {
    }
    heap_capture(const heap_capture &o) : s(o.s), i(o.i)
    {
    }
};
} // namespace

int vf_bench_cxx_push_range(vf_engine *e, const bench_op *ops,
                            const vf_var *refs, vf_bench_task *tasks,
                            size_t begin, size_t end, vf_bench_cxx_kind kind)
{
    varflow::engine_ref eng(e);
    try {
        for (size_t i = begin; i < end; i++) {
            const bench_op *o = &ops[i];
            const vf_var *v = refs + o->first;
            varflow::var_list reads(v, o->nreads);
            varflow::var_list writes(v + o->nreads, o->nwrites + o->naccs);
            if (kind == VF_BENCH_CXX_INLINE) {
                vf_bench_task *t = &tasks[i];
                eng.push(reads, writes,
                         [t] { return bench_op_run(t->s, t->i); });
            } else {
                eng.push(reads, writes, [c = heap_capture(tasks[i].s, i)] {
                    return bench_op_run(c.s, c.i);
                });
            }
        }
    } catch (const varflow::error &err) {
        std::fprintf(stderr, "bench: varflow.hpp: push: %s\n", err.what());
        return -1;
    } catch (const std::bad_alloc &) {
        std::fprintf(stderr, "bench: varflow.hpp: push: out of memory\n");
        return -1;
    }
    return 0;
}

/* ---- W10 through varflow.hpp (adapt_varflow.h) ----------------------------
 */

namespace
{
/* One call of the recursion: each child a lambda (24 bytes, trivially
 * copyable: copied into the op) writing a var of its own, both joined with
 * wait(); the vars are deleted when they go out of scope. */
void fib_call(varflow::engine_ref eng, int n, int64_t *out)
{
    if (n < 2) {
        *out = n;
        return;
    }
    int64_t x = 0, y = 0;
    varflow::var vx = eng.new_var(), vy = eng.new_var();
    eng.push({}, {vx.handle()}, [eng, n, &x] { fib_call(eng, n - 1, &x); });
    eng.push({}, {vy.handle()}, [eng, n, &y] { fib_call(eng, n - 2, &y); });
    eng.wait(vx);
    eng.wait(vy);
    *out = x + y;
}

void qsort_call(varflow::engine_ref eng, int32_t *a, size_t n)
{
    if (n <= BENCH_QSORT_CUTOFF) {
        bench_qsort_leaf(a, n);
        return;
    }
    size_t k = bench_qsort_partition(a, n);
    varflow::var v0 = eng.new_var(), v1 = eng.new_var();
    eng.push({}, {v0.handle()}, [eng, a, k] { qsort_call(eng, a, k); });
    eng.push({}, {v1.handle()},
             [eng, a, k, n] { qsort_call(eng, a + k, n - k); });
    eng.wait(v0);
    eng.wait(v1);
}

/* The root call from the program's thread, pushed and joined the same way. */
template <class F> int root(vf_engine *e, F &&fn)
{
    varflow::engine_ref eng(e);
    try {
        varflow::var v = eng.new_var();
        eng.push({}, {v.handle()}, [eng, &fn] { fn(eng); });
        eng.wait(v);
    } catch (const varflow::error &err) {
        std::fprintf(stderr, "bench: varflow.hpp W10: %s\n", err.what());
        return -1;
    }
    return 0;
}
} // namespace

int vf_bench_cxx_fib(vf_engine *e, int n, int64_t *out)
{
    return root(e,
                [n, out](varflow::engine_ref eng) { fib_call(eng, n, out); });
}

int vf_bench_cxx_qsort(vf_engine *e, int32_t *a, size_t n)
{
    return root(e, [a, n](varflow::engine_ref eng) { qsort_call(eng, a, n); });
}
