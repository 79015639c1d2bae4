/*
 * test_cxx_seed: the two seed programs of the design, written with
 * varflow.hpp (lambdas, RAII vars), on every engine kind; the C++
 * counterpart of test_seed.c, checking the same things.
 *
 * Program 1: A=2; B=A+1; C=A+2; D=B*C. D must be 12, and on engines with
 * two workers B and C (both only read A) must run at the same time: each
 * waits at a rendezvous until the other has started (10 s timeout).
 *
 * Program 2: A=2; B=2; B=A+B; C=A+2; delete A with a free callable.
 * Values B=4, C=4; B=A+B starts after both A=2 and B=2 ended; C=A+2 after
 * A=2; the free callable runs exactly once, after every op that used A;
 * versions: A 1 before its delete (and VF_ESTALE after), B 2, C 1.
 */
#include <atomic>
#include <chrono>
#include <thread>

#include "cxx_check.hpp"

namespace
{

// A global sequence number: the order of events across threads.
std::atomic<unsigned long> clock_{0};
unsigned long stamp()
{
    return ++clock_;
}

TEST_KIND_CASE(program1, k)
{
    varflow::engine eng(k.cfg);
    double a = 0, b = 0, c = 0, d = 0;
    bool both = k.threaded && k.workers >= 2; // B and C must meet
    cxx_test::rendezvous rv(2);
    std::atomic<int> met{0}, worker_b{-2}, worker_c{-2};

    varflow::var A = eng.new_var(), B = eng.new_var(), C = eng.new_var(),
                 D = eng.new_var();
    eng.push(
        {}, {A}, [&] { a = 2; }, varflow::options{}.set_name("A=2"));
    eng.push(
        {A}, {B},
        [&](varflow::run &r) {
            worker_b = r.worker();
            if (both && rv.meet())
                met++;
            b = a + 1;
        },
        varflow::options{}.set_name("B=A+1"));
    eng.push(
        {A}, {C},
        [&](varflow::run &r) {
            worker_c = r.worker();
            if (both && rv.meet())
                met++;
            c = a + 2;
        },
        varflow::options{}.set_name("C=A+2"));
    eng.push(
        {B, C}, {D}, [&] { d = b * c; }, varflow::options{}.set_name("D=B*C"));
    eng.wait(D);
    CHECK(d == 12.0);
    CHECK(b == 3.0 && c == 4.0);
    if (both) {
        CHECK_EQ(met.load(), 2); // both saw the other running
        CHECK(worker_b.load() != worker_c.load());
        CHECK(worker_b.load() >= 0 && worker_c.load() >= 0);
    }
    CHECK_EQ(D.version(), 1);
    CHECK_EQ(A.version(), 1);
}

struct stamps {
    unsigned long start = 0, end = 0;
};

TEST_KIND_CASE(program2, k)
{
    varflow::engine eng(k.cfg);
    double a = 0, b = 0, c = 0;
    stamps set_a, set_b, b_ab, c_a2, freed;
    std::atomic<int> free_calls{0};
    bool a_alive = true; // the "buffer" behind A: the free callable clears it

    varflow::var A = eng.new_var(), B = eng.new_var(), C = eng.new_var();
    vf_var a_handle = A;
    // Each op records when it started and ended; the readers of A are slow
    // so that an early free would show.
    auto timed = [](stamps &s, auto &&body) {
        s.start = stamp();
        body();
        s.end = stamp();
    };
    eng.push({}, {A}, [&] {
        timed(set_a, [&] {
            std::this_thread::sleep_for(std::chrono::microseconds(300));
            a = 2;
        });
    });
    eng.push({}, {B}, [&] {
        timed(set_b, [&] {
            std::this_thread::sleep_for(std::chrono::microseconds(300));
            b = 2;
        });
    });
    eng.push({A, B}, {B}, [&] {
        timed(b_ab, [&] {
            CHECK(a_alive);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            b = a + b;
            CHECK(a_alive);
        });
    });
    eng.push({A}, {C}, [&] {
        timed(c_a2, [&] {
            CHECK(a_alive);
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            c = a + 2;
            CHECK(a_alive);
        });
    });
    eng.wait(A);
    CHECK_EQ(A.version(), 1);
    A.remove([&] {
        timed(freed, [&] {
            a_alive = false;
            free_calls++;
        });
    });
    CHECK(!A);
    std::uint64_t ver = 0;
    CHECK_EQ(vf_var_version(eng.get(), a_handle, &ver), VF_ESTALE);

    eng.wait(B);
    eng.wait(C);
    CHECK(b == 4.0);
    CHECK(c == 4.0);
    CHECK_EQ(B.version(), 2);
    CHECK_EQ(C.version(), 1);

    eng.wait_all();
    CHECK_EQ(free_calls.load(), 1);
    CHECK(set_a.end < b_ab.start); // B=A+B after A=2 and B=2
    CHECK(set_b.end < b_ab.start);
    CHECK(set_a.end < c_a2.start);  // C=A+2 after A=2
    CHECK(set_a.end < freed.start); // the free after every op that used A
    CHECK(b_ab.end < freed.start);
    CHECK(c_a2.end < freed.start);
}

} // namespace

TEST_MAIN("test_cxx_seed")
