/*
 * test_cxx_copied: varflow.hpp over copied arguments and vf_var_of, on
 * every engine kind.
 *
 * - push / push_async of a trivially copyable callable larger than a
 *   pointer: the engine's copy runs, with the values captured at the push
 *   (the caller's copy is changed right after it);
 * - make_op_with<Arg>: each run gets its own argument, fn(Arg &) and
 *   fn(run &, Arg &), in push order on a var it writes; moved from, its
 *   push throws VF_EINVAL; a throwing callable fails its run;
 * - var_of: the same vf_var for the same address, usable in var_lists;
 *   var_of(nullptr) throws VF_EINVAL;
 * - a random program by address (var_of) with copied callables and
 *   indexed runs gives the serial program's values.
 */
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "cxx_check.hpp"

namespace
{

TEST_KIND_CASE(copied_callables, k)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var();
    long out[4] = {0, 0, 0, 0};
    long *p = out;
    for (long i = 0; i < 4; i++) {
        struct {
            long *p;
            long i, v;
        } cap{p, i, 10 * i + 1};
        eng.push({}, {a}, [cap] { cap.p[cap.i] = cap.v; });
        cap.v = -1; // the op has its own copy
    }
    long got = 0;
    long *pg = &got;
    eng.push_async({}, {a}, [pg, v = 7L, w = 8L](varflow::completion c) {
        *pg = v * w;
        c();
    });
    eng.wait(a);
    for (long i = 0; i < 4; i++)
        CHECK_EQ(out[i], 10 * i + 1);
    CHECK_EQ(got, 56);
}

struct idx {
    long i;
    long *out;
    long *counter;
};

TEST_KIND_CASE(op_with_argument, k)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var();
    std::vector<long> out(200, 0);
    long counter = 0;
    auto op = eng.make_op_with<idx>({}, {a},
                                    [](idx &x) { x.out[x.i] = ++*x.counter; });
    auto op2 = eng.make_op_with<idx>({}, {a},
                                     [](varflow::run &r, idx &x) -> int {
                                         x.out[x.i] = ++*x.counter;
                                         return r.engine() ? 0 : 1;
                                     });
    for (long i = 0; i < 200; i++)
        (i % 2 ? op2 : op).push(idx{i, out.data(), &counter});
    eng.wait(a);
    for (long i = 0; i < 200; i++)
        if (out[i] != i + 1) {
            CHECK_EQ(out[i], i + 1);
            break;
        }
    auto moved = std::move(op);
    CHECK(!op);
    CHECK_THROWS(op.push(idx{0, out.data(), &counter}), varflow::error,
                 VF_EINVAL, (void)e);
    moved.push(idx{0, out.data(), &counter});
    eng.wait(a);
    CHECK_EQ(out[0], 201);
}

TEST_KIND_CASE(op_with_argument_throws, k)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var();
    auto op = eng.make_op_with<int>({}, {a}, [](int &i) {
        if (i == 3)
            throw std::runtime_error("three");
    });
    op.push(1);
    eng.wait(a);
    op.push(3);
    CHECK_THROWS(eng.wait(a), varflow::op_failed, VF_EOPFAILED,
                 CHECK(std::strstr(e.what(), "three") != nullptr));
}

TEST_KIND_CASE(var_of, k)
{
    varflow::engine eng(k.cfg);
    double d[3] = {1, 2, 3};
    vf_var v0 = eng.var_of(&d[0]);
    CHECK_EQ(eng.var_of(&d[0]).id, v0.id);
    CHECK(eng.var_of(&d[1]).id != v0.id);
    double *pd = d;
    eng.push({eng.var_of(&d[0])}, {eng.var_of(&d[1])},
             [pd] { pd[1] += pd[0]; });
    eng.push({eng.var_of(&d[1])}, {eng.var_of(&d[2])},
             [pd] { pd[2] *= pd[1]; });
    eng.wait(eng.var_of(&d[2]));
    CHECK_EQ(d[2], 9.0);
    CHECK_THROWS(eng.var_of(nullptr), varflow::error, VF_EINVAL, (void)e);
}

/* A random program by address, against the serial one. */
struct upd {
    std::uint64_t *x;
    int w, r;
    std::uint64_t salt;
    void apply() const
    {
        x[w] = x[w] * 31 + salt + (r >= 0 ? x[r] : 0);
    }
};

TEST_KIND_CASE(random_program_matches_serial, k)
{
    varflow::engine eng(k.cfg);
    constexpr int N = 12;
    std::uint64_t x[N], ref[N];
    for (int i = 0; i < N; i++)
        x[i] = ref[i] = std::uint64_t(i) + 3;
    std::vector<varflow::reusable_arg_op<upd>> writers;
    for (int i = 0; i < N; i++)
        writers.push_back(eng.make_op_with<upd>({}, {eng.var_of(&x[i])},
                                                [](upd &u) { u.apply(); }));
    std::uint64_t s = 12345;
    auto next = [&s] {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        return s >> 33;
    };
    for (int j = 0; j < 5000; j++) {
        upd u{x, int(next() % N), -1, next()};
        if (next() % 3 == 0) {
            writers[std::size_t(u.w)].push(u);
        } else {
            u.r = int(next() % N);
            eng.push({eng.var_of(&x[u.r])}, {eng.var_of(&x[u.w])},
                     [u] { u.apply(); });
        }
        u.x = ref;
        u.apply();
    }
    eng.wait_all();
    for (int i = 0; i < N; i++)
        if (x[i] != ref[i]) {
            CHECK_EQ(x[i], ref[i]);
            break;
        }
}

} // namespace

TEST_MAIN("test_cxx_copied")
