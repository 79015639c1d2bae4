/*
 * test_cxx_exceptions: errors through varflow.hpp, on every engine kind.
 *
 * - A callable that throws fails its op: a std::exception with
 *   VF_EOPFAILED and its what() as the message, a varflow::error with its
 *   own code, std::bad_alloc with VF_ENOMEM, anything else with
 *   "unknown exception"; the ops that depend on it are skipped; the wait
 *   throws op_failed (op name, code, message), or returns the same with
 *   std::nothrow; reporting clears the failure. The exception never leaves
 *   push (the naive engine runs ops inside it), nor any C frame.
 * - An int-returning callable fails with its return value and the message
 *   it set on the run.
 * - Async: a callable that throws before completing (completion taken by
 *   value, or by rvalue reference and left) fails with the exception's
 *   message; a dropped completion fails the op ("destroyed before it was
 *   called"), as it is destroyed when it is not the callable's own, also
 *   by an exception the callable catches: a wait of the callable on its
 *   own var then reports the failure, and a no_skip reader runs while the
 *   callable goes on; a completion used twice throws VF_EALREADY; one completed
 *   from another thread decides the outcome even if the callable throws
 *   after handing it over.
 * - API errors throw varflow::error with the code, its name and the
 *   detail: a bad config, a deleted var; wait(std::nothrow) returns them.
 * - what() of op_failed, exactly: each code once ("VF_EOPFAILED: op
 *   \"add\" failed: boom", "... failed with VF_ENODEV: ...", "... failed
 *   with code 5", an unnamed op), built from a vf_error and from real
 *   failures, a varflow::error thrown in an op included.
 */
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "cxx_check.hpp"

namespace
{

bool contains(const char *haystack, const char *needle)
{
    return std::strstr(haystack, needle) != nullptr;
}

/* Push `thrower` (writing a), an op that reads a (must be skipped), and
 * check what the wait on the reader's var reports. */
template <class F>
void expect_failure(varflow::engine &eng, F &&thrower, int code,
                    const char *message)
{
    varflow::var a = eng.new_var(), b = eng.new_var();
    bool dependent_ran = false;
    eng.push({}, {a}, std::forward<F>(thrower),
             varflow::options{}.set_name("thrower"));
    eng.push({a}, {b}, [&] { dependent_ran = true; });
    try {
        eng.wait(b);
        CHECK(!"wait(b) did not throw");
    } catch (const varflow::op_failed &e) {
        CHECK_EQ(e.code(), VF_EOPFAILED);
        CHECK_STR(e.name(), "VF_EOPFAILED");
        CHECK_EQ(e.op_code(), code);
        CHECK_STR(e.op_name(), "thrower");
        if (!contains(e.what(), message))
            cxx_test::fail(__FILE__, __LINE__,
                           std::string("\"") + message + "\" not in \"" +
                               e.what() + "\"");
        CHECK(contains(e.op_message(), message));
        CHECK(contains(e.what(), "thrower"));
    }
    CHECK(!dependent_ran);
    // Reported once: a wait on a finds it already cleared... by the wait on
    // b (the same failure chain), so it returns ok.
    CHECK(eng.wait(a, std::nothrow).ok());
    CHECK(eng.wait_all(std::nothrow).ok());
}

TEST_KIND_CASE(sync_throws, k)
{
    varflow::engine eng(k.cfg);
    expect_failure(
        eng, [] { throw std::runtime_error("boom"); }, VF_EOPFAILED, "boom");
    expect_failure(
        eng, [] { throw varflow::error(VF_ENODEV, "no such device"); },
        VF_ENODEV, "no such device");
    expect_failure(
        eng, [] { throw std::bad_alloc(); }, VF_ENOMEM, "bad_alloc");
    expect_failure(
        eng, [] { throw 42; }, VF_EOPFAILED, "unknown exception");
    expect_failure(
        eng,
        [](varflow::run &r) {
            r.set_error("returned 5");
            return 5;
        },
        5, "returned 5");
    // A nested call that throws inside an op: its error, its code.
    varflow::var gone = eng.new_var();
    vf_var stale = gone.release();
    vf_var_destroy(eng.get(), stale, nullptr, nullptr);
    expect_failure(
        eng, [stale](varflow::run &r) { r.engine().push({stale}, {}, [] {}); },
        VF_ESTALE, "was deleted");

    // wait(std::nothrow) returns what wait() throws.
    varflow::var c = eng.new_var();
    eng.push(
        {}, {c}, [] { throw std::logic_error("quiet"); },
        varflow::options{}.set_name("quiet"));
    varflow::wait_result r = eng.wait(c, std::nothrow);
    CHECK(!r.ok());
    CHECK_EQ(r.code(), VF_EOPFAILED);
    CHECK_EQ(r.op_code(), VF_EOPFAILED);
    CHECK_STR(r.op_name(), "quiet");
    CHECK_STR(r.message(), "quiet");
    CHECK(eng.wait(c, std::nothrow).ok()); // cleared by the report
    // ... and throw_if_failed() turns it into the exception.
    CHECK_THROWS(r.throw_if_failed(), varflow::op_failed, VF_EOPFAILED,
                 CHECK_STR(e.op_name(), "quiet"));

    // wait_all reports it too.
    eng.push({}, {c}, [] { throw std::runtime_error("to wait_all"); });
    CHECK_THROWS(eng.wait_all(), varflow::op_failed, VF_EOPFAILED,
                 CHECK(contains(e.op_message(), "to wait_all")));
}

template <class F>
void push_async_expect(const cxx_test::kind &k, F &&fn, int code,
                       const char *message)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var();
    eng.push_async({}, {a}, std::forward<F>(fn),
                   varflow::options{}.set_name("async"));
    varflow::wait_result r = eng.wait(a, std::nothrow);
    CHECK_EQ(r.code(), code);
    if (code != 0) {
        CHECK_EQ(r.op_code(), VF_EOPFAILED);
        CHECK(contains(r.message(), message));
        CHECK_STR(r.op_name(), "async");
    }
    eng.wait_all(std::nothrow);
}

TEST_KIND_CASE(async_ops, k)
{
    // Thrown with the completion taken by value: destroyed by the unwind.
    push_async_expect(
        k,
        [](varflow::completion done) {
            (void)done;
            throw std::runtime_error("by value");
        },
        VF_EOPFAILED, "by value");
    // Taken by rvalue reference and left where it was.
    push_async_expect(
        k,
        [](varflow::completion &&done) {
            (void)done;
            throw std::runtime_error("by reference");
        },
        VF_EOPFAILED, "by reference");
    // With the run context.
    push_async_expect(
        k,
        [](varflow::run &r, varflow::completion done) {
            CHECK_STR(r.name(), "async");
            done.fail(std::string("failed by ") + r.name());
        },
        VF_EOPFAILED, "failed by async");
    // Dropped without a call: fails, never hangs.
    push_async_expect(
        k, [](varflow::completion done) { (void)done; }, VF_EOPFAILED,
        "destroyed before it was called");
    push_async_expect(
        k, [](varflow::completion &&done) { (void)done; }, VF_EOPFAILED,
        "destroyed before it was called");
    // Destroyed by an exception the callable caught itself.
    push_async_expect(
        k,
        [](varflow::completion done) {
            try {
                varflow::completion inner = std::move(done);
                throw 1;
            } catch (int) {
            }
        },
        VF_EOPFAILED, "destroyed before it was called");
    // Used twice: the second throws VF_EALREADY (inside the op: caught
    // here, so the op's outcome is the first call's).
    push_async_expect(
        k,
        [](varflow::completion done) {
            done.complete();
            CHECK_THROWS(done.complete(), varflow::error, VF_EALREADY, (void)e);
        },
        0, "");
    // Completed from another thread; the callable then throws: too late
    // to matter, the completion decides.
    std::thread worker;
    push_async_expect(
        k,
        [&worker](varflow::completion done) {
            worker = std::thread([d = std::move(done)]() mutable { d(); });
            throw std::runtime_error("after handing over");
        },
        0, "");
    worker.join();
    // A reusable async op, pushed three times.
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var();
    std::atomic<int> runs{0};
    varflow::reusable_op op = eng.make_async_op(
        {}, {a}, [&runs](varflow::completion done) {
            runs++;
            done();
        });
    op.push();
    op.push();
    op.push();
    eng.wait(a);
    CHECK_EQ(runs.load(), 3);
}

// Takes the completion, then throws before using it (an I/O that cannot
// start).
void start_io(varflow::completion c)
{
    (void)c;
    throw std::runtime_error("could not start the I/O");
}

// A completion the callable moved elsewhere fails the op as it is
// destroyed, also while an exception unwinds that the callable catches
// itself: the op is over then, as after a plain drop. Left running until
// the callable returned, a wait of the callable on its own var got
// VF_EDEADLK, and a wait for a no_skip reader of it never ended (found by
// a user tester).
TEST_KIND_CASE(a_completion_dropped_in_a_caught_exception_fails_at_once, k)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var(), b = eng.new_var();
    vf_var ha = a;
    int waited = -1;
    std::string message;
    eng.push_async({}, {a}, [&](varflow::run &r, varflow::completion c) {
        try {
            start_io(std::move(c));
        } catch (const std::exception &) {
        }
        varflow::wait_result res = r.engine().wait_for(
            ha, std::chrono::seconds(30), std::nothrow);
        waited = res.code();
        message = res.message();
    });
    eng.wait_all(std::nothrow);
    CHECK_EQ(waited, VF_EOPFAILED);
    CHECK(contains(message.c_str(), "destroyed before it was called"));

    // Moved to a local that an escaping exception destroys: failed as it
    // is destroyed, with the drop's message (the exception's is lost).
    push_async_expect(
        k,
        [](varflow::completion done) {
            varflow::completion mine = std::move(done);
            throw std::runtime_error("escapes");
        },
        VF_EOPFAILED, "destroyed before it was called");

    // Stored in a std::function: by value it gets a moved one, the
    // drop's message; by rvalue reference the callable's own, the
    // exception's.
    push_async_expect(
        k, std::function<void(varflow::completion)>([](varflow::completion c) {
            (void)c;
            throw std::runtime_error("through a wrapper");
        }),
        VF_EOPFAILED, "destroyed before it was called");
    push_async_expect(k,
                      std::function<void(varflow::completion &&)>(
                          [](varflow::completion &&c) {
                              (void)c;
                              throw std::runtime_error("through a wrapper");
                          }),
                      VF_EOPFAILED, "through a wrapper");

    // A no_skip reader of its var runs while the callable goes on, on a
    // second worker (not on the naive engine: there the callable runs
    // inside its push, before the reader is pushed).
    if (k.cfg.type == VF_ENGINE_NAIVE)
        return;
    vf_config two = k.cfg;
    two.cpu_workers = 2;
    varflow::engine eng2(two);
    varflow::var a2 = eng2.new_var(), b2 = eng2.new_var();
    std::atomic<bool> reader_ran{false}, returned{false};
    std::atomic<bool> ran_before_return{false};
    // A worker, not this thread's push, starts the async op: after this.
    eng2.push({}, {b2}, [] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    });
    eng2.push_async({b2}, {a2}, [&](varflow::completion c) {
        try {
            start_io(std::move(c));
        } catch (const std::exception &) {
        }
        for (int i = 0; i < 30000 && !reader_ran; i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ran_before_return = reader_ran.load();
        returned = true;
    });
    eng2.push(
        {a2}, {}, [&] { reader_ran = true; }, varflow::options{}.set_no_skip());
    eng2.wait_all(std::nothrow); // the op is over before its callable
    while (!returned)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(ran_before_return.load());
    CHECK(reader_ran.load());
}

TEST_KIND_CASE(api_errors, k)
{
    vf_config bad = k.cfg;
    bad.cpu_workers = -1;
    CHECK_THROWS(varflow::engine eng(bad), varflow::error, VF_EINVAL, {
        CHECK_STR(e.name(), "VF_EINVAL");
        CHECK(contains(e.what(), "VF_EINVAL: "));
        CHECK(contains(e.detail(), "cpu_workers"));
    });
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var();
    vf_var stale = a.release();
    vf_var_destroy(eng.get(), stale, nullptr, nullptr);
    CHECK_THROWS(eng.wait(stale), varflow::error, VF_ESTALE,
                 CHECK_STR(e.name(), "VF_ESTALE"));
    varflow::wait_result r = eng.wait(stale, std::nothrow);
    CHECK_EQ(r.code(), VF_ESTALE);
    CHECK(contains(r.message(), "vf_var_wait"));
    CHECK_THROWS(r.throw_if_failed(), varflow::error, VF_ESTALE, (void)e);
    // A wait from inside an op on a var the op writes: VF_EDEADLK, thrown
    // in the op, which then fails with that code.
    varflow::var b = eng.new_var();
    vf_var bh = b;
    eng.push(
        {}, {b}, [bh](varflow::run &run) { run.engine().wait(bh); },
        varflow::options{}.set_name("self-wait"));
    CHECK_THROWS(eng.wait(b), varflow::op_failed, VF_EOPFAILED,
                 CHECK_EQ(e.op_code(), VF_EDEADLK));
}

vf_error make_error(int code, const char *name, const char *message)
{
    vf_error err{};
    err.code = code;
    std::snprintf(err.op_name, sizeof err.op_name, "%s", name);
    std::snprintf(err.message, sizeof err.message, "%s", message);
    return err;
}

/* The text of what() of the op_failed the wait on a var written by an op
 * named "add" running fn throws. */
template <class F> std::string what_of(varflow::engine &eng, F &&fn)
{
    varflow::var a = eng.new_var();
    eng.push({}, {a}, std::forward<F>(fn), varflow::options{}.set_name("add"));
    try {
        eng.wait(a);
    } catch (const varflow::op_failed &e) {
        return e.what();
    }
    return "(no exception)";
}

TEST_KIND_CASE(what_texts, k)
{
    using varflow::op_failed;
    CHECK_STR(op_failed(make_error(VF_EOPFAILED, "add", "boom")).what(),
              "VF_EOPFAILED: op \"add\" failed: boom");
    CHECK_STR(op_failed(make_error(VF_EOPFAILED, "add", "boom")).detail(),
              "op \"add\" failed: boom");
    CHECK_STR(op_failed(make_error(VF_EOPFAILED, "add", "")).what(),
              "VF_EOPFAILED: op \"add\" failed");
    CHECK_STR(op_failed(make_error(VF_ENODEV, "add", "no device")).what(),
              "VF_EOPFAILED: op \"add\" failed with VF_ENODEV: no device");
    CHECK_STR(op_failed(make_error(5, "add", "")).what(),
              "VF_EOPFAILED: op \"add\" failed with code 5");
    CHECK_STR(op_failed(make_error(-99, "add", "odd")).what(),
              "VF_EOPFAILED: op \"add\" failed with code -99: odd");
    CHECK_STR(op_failed(make_error(VF_EOPFAILED, "", "boom")).what(),
              "VF_EOPFAILED: an unnamed op failed: boom");

    varflow::engine eng(k.cfg);
    CHECK_STR(what_of(eng, [] { throw std::runtime_error("boom"); }),
              "VF_EOPFAILED: op \"add\" failed: boom");
    {
        /* An op pushed without a name: the wait names it by its place. */
        varflow::var a = eng.new_var();
        eng.push({}, {a}, [] { throw std::runtime_error("boom"); });
        std::string what = "(no exception)";
        try {
            eng.wait(a);
        } catch (const varflow::op_failed &e) {
            what = e.what();
        }
        CHECK(what.rfind("VF_EOPFAILED: op \"op #", 0) == 0);
        CHECK(what.find("\" failed: boom") != std::string::npos);
    }
    CHECK_STR(
        what_of(eng, [] { throw varflow::error(VF_ENODEV, "no device"); }),
        "VF_EOPFAILED: op \"add\" failed with VF_ENODEV: no device");
    CHECK_STR(what_of(eng,
                      [](varflow::run &r) {
                          r.set_error("returned 5");
                          return 5;
                      }),
              "VF_EOPFAILED: op \"add\" failed with code 5: returned 5");
    CHECK_STR(what_of(eng, [] { return 7; }),
              "VF_EOPFAILED: op \"add\" failed with code 7");
}

} // namespace

/* A level of a recursion `depth` deep whose leaf throws `leaf`; every
 * level waits for its child, which rethrows the child's failure
 * (op_failed). */
template <class E> void rethrowing_level(varflow::run &r, int depth, E leaf)
{
    if (depth == 0)
        throw leaf;
    r.engine().push({}, {}, [depth, leaf](varflow::run &c) {
        rethrowing_level(c, depth - 1, leaf);
    });
    r.wait_children();
}

/* An op_failed rethrown by an op fails it with the code of the op that
 * failed, down a chain of such waits (each level said VF_EOPFAILED); past
 * vf_error::message's size, the message keeps its end, the cause (20
 * levels hid it: found by a user tester). */
TEST_KIND_CASE(rethrown_failures_keep_their_cause, k)
{
    varflow::engine eng(k.cfg);
    for (int depth : {1, 3, 20}) {
        varflow::var top = eng.new_var();
        eng.push(
            {}, {top},
            [depth](varflow::run &r) {
                rethrowing_level(r, depth,
                                 varflow::error(VF_ENODEV, "no device 7"));
            },
            varflow::options{}.set_name("solve"));
        CHECK_THROWS(eng.wait(top), varflow::op_failed, VF_EOPFAILED, {
            CHECK_EQ(e.op_code(), VF_ENODEV);
            CHECK_STR(e.op_name(), "solve");
            std::string what = e.what();
            if (what.size() < 11 ||
                what.compare(what.size() - 11, 11, "no device 7") != 0)
                cxx_test::fail(__FILE__, __LINE__,
                               "depth " + std::to_string(depth) + ": " + what);
        });
        varflow::var other = eng.new_var();
        eng.push(
            {}, {other},
            [depth](varflow::run &r) {
                rethrowing_level(r, depth,
                                 std::runtime_error("disk full at block 42"));
            },
            varflow::options{}.set_name("solve"));
        CHECK_THROWS(eng.wait(other), varflow::op_failed, VF_EOPFAILED, {
            CHECK_EQ(e.op_code(), VF_EOPFAILED);
            CHECK(contains(e.op_message(), "disk full at block 42"));
        });
    }
}

TEST_MAIN("test_cxx_exceptions")
