/*
 * test_cxx_api: the rest of varflow.hpp's surface, on every engine kind.
 *
 * - engine: made from a config (the kind and worker count asked for),
 *   moved (the moved-from one owns nothing), adopted from and released to
 *   the C API, destroyed explicitly;
 * - var_list from a braced list of vars and handles, a vector, an array;
 * - options reach the op: its name (vf_run_name), priority, no_skip; with
 *   C++20, designated initializers (options and vf_config);
 * - run: the op's context, and its engine for nested pushes and waits;
 * - stop/start, stats.
 */
#include <atomic>
#include <vector>

#include "cxx_check.hpp"

namespace
{

void engines(const cxx_test::kind &k)
{
    varflow::engine eng(k.cfg);
    CHECK(eng);
    CHECK_EQ(eng.kind(), k.cfg.type);
    CHECK_EQ(eng.num_workers() > 0, k.threaded);
    varflow::engine moved(std::move(eng));
    CHECK(!eng);
    CHECK(moved);
    varflow::engine assigned;
    assigned = std::move(moved); // destroys the default engine first
    CHECK(!moved);
    CHECK_EQ(assigned.kind(), k.cfg.type);
    vf_engine *raw = assigned.release();
    CHECK(!assigned);
    varflow::engine adopted(raw);
    CHECK(adopted.get() == raw);
    adopted.destroy();
    CHECK(!adopted);
}

void lists_and_options(const cxx_test::kind &k)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var(), b = eng.new_var(), c = eng.new_var();
    std::vector<vf_var> vec = {a, b};
    const vf_var arr[] = {a, b};
    int sum = 0;
    eng.push({}, vec, [&] { sum += 1; });
    eng.push(vec, arr, [&] { sum += 2; });
    eng.push(varflow::var_list(arr, 2), {c, a.handle()}, [&] { sum += 4; });
    eng.wait_all();
    CHECK_EQ(sum, 7);
    CHECK_EQ(a.version(), 3);
    CHECK_EQ(b.version(), 2);
    CHECK_EQ(c.version(), 1);

    // The name reaches the op; no_skip runs it after a failed input.
    std::string seen;
    eng.push({}, {a}, [] { throw std::runtime_error("input"); });
    eng.push(
        {a}, {b}, [&](varflow::run &r) { seen = r.name(); },
        varflow::options{}.set_name("named").set_no_skip().set_priority(3));
    CHECK_THROWS(eng.wait_all(), varflow::op_failed, VF_EOPFAILED, (void)e);
    CHECK_STR(seen, "named");
#if __cplusplus >= 202002L
    seen.clear();
    eng.push({}, {b}, [&](varflow::run &r) { seen = r.name(); },
             {.name = "designated", .priority = 1, .no_skip = true});
    eng.wait(b);
    CHECK_STR(seen, "designated");
    varflow::engine two({.type = VF_ENGINE_POOLED, .cpu_workers = 2});
    CHECK_EQ(two.num_workers(), 2);
#endif

    // Priority: with one worker held, the higher-priority op of two ready
    // ones runs first. The two are pushed once the holding op has started
    // (before that, the worker could take one of them first).
    if (k.threaded && k.workers == 1) {
        cxx_test::gate started, g;
        std::vector<int> order;
        varflow::var x = eng.new_var(), y = eng.new_var(), z = eng.new_var();
        eng.push({}, {x}, [&] {
            started.open();
            CHECK(g.wait());
        });
        CHECK(started.wait());
        eng.push(
            {}, {y}, [&] { order.push_back(1); },
            varflow::options{}.set_priority(1));
        eng.push(
            {}, {z}, [&] { order.push_back(9); },
            varflow::options{}.set_priority(9));
        g.open();
        eng.wait_all();
        CHECK(order == (std::vector<int>{9, 1}));
    }
}

void nested(const cxx_test::kind &k)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var(), b = eng.new_var();
    vf_var bh = b;
    int inner = 0;
    std::atomic<int> worker{-2};
    eng.push({}, {a}, [&inner, &worker, bh](varflow::run &r) {
        worker = r.worker();
        CHECK(r.device().type == VF_DEVICE_CPU);
        CHECK(r.stream() == nullptr);
        varflow::engine_ref e = r.engine();
        e.push({}, {bh}, [&inner] { inner = 5; });
        e.wait(bh); // runs other ops meanwhile: never hangs the pool
        CHECK_EQ(inner, 5);
    });
    eng.wait(a);
    CHECK_EQ(inner, 5);
    CHECK_EQ(worker.load() >= 0, k.threaded);
    vf_stats s = eng.stats();
    CHECK_EQ(s.ran, 2);
    CHECK_EQ(s.failed + s.skipped, 0);
}

void stop_start(const cxx_test::kind &k)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var();
    int ran = 0;
    eng.stop();
    eng.push({}, {a}, [&] { ran++; }); // held until start
    CHECK_THROWS(eng.wait(a), varflow::error, VF_ESTOPPED, (void)e);
    eng.start();
    eng.wait(a);
    CHECK_EQ(ran, 1);
}

// Bulk execution through the C++ layer: MXNet's bulk test.
void bulk(const cxx_test::kind &k)
{
    varflow::engine eng(k.cfg);
    varflow::var x = eng.new_var();
    CHECK_EQ(eng.set_bulk_size(10), 0);
    long value = 0;
    eng.push({}, {x}, [&value] { value = 1; });
    eng.push({}, {x}, [&value] { value *= 2; });
    eng.push({}, {x}, [&value] { value += 1; });
    eng.wait(x);
    CHECK_EQ(value, 3);
    for (int i = 0; i < 101; i++)
        eng.push({}, {x}, [&value] { value += 1; });
    eng.bulk_flush();
    eng.wait_all();
    CHECK_EQ(value, 104);
    CHECK_EQ(eng.stats().bulks > 0, k.threaded);
    CHECK_EQ(eng.set_bulk_size(0), 10);
    CHECK_THROWS(eng.set_bulk_size(-1), varflow::error, VF_EINVAL, (void)e);
}

} // namespace

int main()
{
    try {
        cxx_test::for_each_kind([](const cxx_test::kind &k) {
            engines(k);
            lists_and_options(k);
            nested(k);
            stop_start(k);
            bulk(k);
        });
    } catch (const std::exception &e) {
        cxx_test::fail(__FILE__, __LINE__, e.what());
    }
    return cxx_test::finish("test_cxx_api");
}
