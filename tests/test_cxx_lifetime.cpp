/*
 * test_cxx_lifetime: what varflow.hpp does with the callables it is given,
 * on every engine kind.
 *
 * - A pushed callable is destroyed exactly once, and by the time a wait on
 *   the op's var returns, whether the op ran, failed, was skipped (an
 *   input failed), was skipped by a shutdown, or the push threw: every
 *   copy or move of it made is destroyed once (counted), and it is called
 *   once when the op runs, never when it is skipped.
 * - Move-only callables (a captured std::unique_ptr) can be pushed, and are
 *   freed on every path too.
 * - Allocation: pushing a trivially copyable callable that fits in a
 *   pointer (no capture, one reference, a function pointer) or in
 *   VF_OP_ARG_INLINE bytes (the engine copies it: two references), or
 *   pushing a reusable_op, calls operator new zero times; any other
 *   callable (one capturing a std::shared_ptr) exactly once (counted by
 *   replacing the global operator new).
 * - reusable_op: its callable outlives the handle until the last run ends.
 * - An async callable whose completion comes before it returns (from a
 *   thread it joins): the op has finished (a reader of its var ran), and
 *   the callable is still alive until it returns, pushed (stored beside
 *   the op) or a reusable op's run whose handle is gone.
 * - var: the destructor deletes; remove(callable) calls it once, after the
 *   ops pushed on the var, and destroys it; the moved-from var owns nothing.
 * - engine: its last reference dropped inside one of its ops leaves it
 *   running (VF_EDEADLK there) and says so on stderr.
 */
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include <unistd.h>

#include "cxx_check.hpp"

/*
 * operator new calls made by this thread (the pushing one), counted by
 * replacing the global operator new. Not under a sanitizer: its runtime
 * has its own (clang links it statically, and the two definitions clash),
 * so the allocation checks run in plain builds only.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CXX_COUNT_NEW 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CXX_COUNT_NEW 0
#endif
#endif
#ifndef CXX_COUNT_NEW
#define CXX_COUNT_NEW 1
#endif

static thread_local long news_here = 0;

#if CXX_COUNT_NEW
/* Not inlined: g++ 12 would then see std::malloc's memory reach operator
 * delete, or a new-expression's reach std::free, and warn
 * (-Wmismatched-new-delete), although the two are a matching pair. */
#if defined(__GNUC__) && !defined(__clang__)
#define CXX_NOINLINE __attribute__((noinline))
#else
#define CXX_NOINLINE
#endif
CXX_NOINLINE void *operator new(std::size_t n)
{
    news_here++;
    if (void *p = std::malloc(n ? n : 1))
        return p;
    throw std::bad_alloc();
}
CXX_NOINLINE void operator delete(void *p) noexcept
{
    std::free(p);
}
CXX_NOINLINE void operator delete(void *p, std::size_t) noexcept
{
    std::free(p);
}
#endif

namespace
{

/* Counts constructions (of any kind), destructions and calls. */
struct tally {
    std::atomic<int> made{0}, destroyed{0}, calls{0};
    bool balanced() const
    {
        return made.load() == destroyed.load();
    }
};

struct counted {
    tally *t;
    int status; // what a call returns
    explicit counted(tally *t_, int status_ = 0) : t(t_), status(status_)
    {
        t->made++;
    }
    counted(const counted &o) : t(o.t), status(o.status)
    {
        t->made++;
    }
    counted(counted &&o) noexcept : t(o.t), status(o.status)
    {
        t->made++;
    }
    ~counted()
    {
        t->destroyed++;
    }
    int operator()()
    {
        t->calls++;
        return status;
    }
};

TEST_KIND_CASE(ran_failed_skipped, k)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var(), b = eng.new_var();
    tally ok, failing, skipped, nonskipped;
    eng.push({}, {a}, counted(&ok));
    eng.wait(a);
    CHECK_EQ(ok.calls.load(), 1);
    CHECK(ok.balanced());

    eng.push({}, {a}, counted(&failing, 7));
    eng.push({a}, {b}, counted(&skipped));
    eng.push({a}, {}, counted(&nonskipped), varflow::options{}.set_no_skip());
    CHECK_THROWS(eng.wait(b), varflow::op_failed, VF_EOPFAILED,
                 CHECK_EQ(e.op_code(), 7));
    eng.wait_all(std::nothrow);
    CHECK_EQ(failing.calls.load(), 1);
    CHECK_EQ(skipped.calls.load(), 0);
    CHECK_EQ(nonskipped.calls.load(), 1);
    CHECK(failing.balanced());
    CHECK(skipped.balanced());
    CHECK(nonskipped.balanced());
}

TEST_KIND_CASE(push_throws, k)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var();
    vf_var stale = a.release();
    vf_var_destroy(eng.get(), stale, nullptr, nullptr);
    tally t;
    CHECK_THROWS(eng.push({stale}, {}, counted(&t)), varflow::error, VF_ESTALE,
                 CHECK(std::string(e.detail()).find("vf_engine_push") !=
                       std::string::npos));
    CHECK_EQ(t.calls.load(), 0);
    CHECK(t.balanced());
    // A move-only callable, on the same path.
    auto owned = std::make_unique<int>(1);
    CHECK_THROWS(eng.push({stale}, {}, [p = std::move(owned)] { *p = 2; }),
                 varflow::error, VF_ESTALE, (void)e);
    CHECK(owned == nullptr); // moved into the op, freed with it
}

TEST_KIND_CASE(shutdown_skips, k)
{
    tally t;
    {
        varflow::engine eng(k.cfg);
        varflow::var a = eng.new_var();
        eng.stop(); // the push below is held until the engine starts
        eng.push({}, {a}, counted(&t));
        eng.shutdown();
    } // ~var: refused (VF_ESHUTDOWN), ignored; ~engine: starts it, the
      // held op is skipped, its callable destroyed
    CHECK_EQ(t.calls.load(), 0);
    CHECK(t.balanced());
}

TEST_KIND_CASE(move_only, k)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var(), b = eng.new_var();
    std::atomic<int> freed{0};
    auto deleter = [&freed](int *p) {
        freed++;
        delete p;
    };
    using owned = std::unique_ptr<int, decltype(deleter)>;
    int out = 0;
    eng.push({}, {a}, [p = owned(new int(5), deleter), &out] { out = *p; });
    eng.wait(a);
    CHECK_EQ(out, 5);
    CHECK_EQ(freed.load(), 1);
    // Skipped: freed all the same.
    eng.push({}, {a}, [] { throw std::runtime_error("input fails"); });
    eng.push({a}, {b}, [p = owned(new int(6), deleter), &out] { out = *p; });
    CHECK(!eng.wait(b, std::nothrow).ok());
    CHECK_EQ(out, 5);
    CHECK_EQ(freed.load(), 2);
    eng.wait_all(std::nothrow);
}

std::atomic<int> plain_function_calls{0};
void plain_function()
{
    plain_function_calls++;
}

TEST_KIND_CASE(allocations, k)
{
    if (!CXX_COUNT_NEW) {
        if (&k == &cxx_test::kinds[0])
            std::printf("test_cxx_lifetime: allocation counts not checked "
                        "under a sanitizer\n");
        return;
    }
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var();
    int x = 0, y = 0;
    struct pair {
        int *p, *q;
    } two{&x, &y};
    int calls_before = plain_function_calls.load();
    auto news = [](auto &&push) {
        long before = news_here;
        push();
        return news_here - before;
    };
    CHECK_EQ(news([&] { eng.push({}, {a}, [] {}); }), 0);
    CHECK_EQ(news([&] { eng.push({}, {a}, [&x] { x++; }); }), 0);
    CHECK_EQ(news([&] { eng.push({}, {a}, [p = &x] { ++*p; }); }), 0);
    CHECK_EQ(news([&] { eng.push({}, {a}, &plain_function); }), 0);
    CHECK_EQ(news([&] {
                 eng.push({}, {a},
                          [&x](varflow::run &r) { x += r.worker() >= -1; });
             }),
             0);
    CHECK_EQ(news([&] {
                 eng.push_async({}, {a}, [](varflow::completion d) { d(); });
             }),
             0);
    // Two pointers: no longer fits in one, but trivially copyable and
    // small: the engine copies it into the op (vf_op.arg_size).
    CHECK_EQ(news([&] {
                 eng.push({}, {a}, [two] {
                     ++*two.p;
                     ++*two.q;
                 });
             }),
             0);
    CHECK_EQ(news([&] {
                 eng.push({}, {a}, [&x, &y] {
                     ++x;
                     ++y;
                 });
             }),
             0);
    // Not trivially copyable: the callable's own storage, once.
    auto sp = std::make_shared<int>(0);
    CHECK_EQ(news([&] {
                 eng.push({}, {a}, [sp, &x] {
                     ++*sp;
                     ++x;
                 });
             }),
             1);
    // A reusable op allocates when made, never when pushed.
    varflow::reusable_op op = eng.make_op({}, {a}, [&x, &y] {
        ++x;
        ++y;
    });
    CHECK_EQ(news([&] {
                 for (int i = 0; i < 10; i++)
                     op.push();
             }),
             0);
    eng.wait(a);
    CHECK_EQ(x, 1 + 1 + 1 + 1 + 1 + 1 + 10);
    CHECK_EQ(y, 1 + 1 + 10);
    CHECK_EQ(plain_function_calls.load(), calls_before + 1);
}

TEST_KIND_CASE(reusable, k)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var();
    tally t;
    cxx_test::gate g;
    {
        varflow::reusable_op op = eng.make_op({}, {a}, counted(&t));
        // Held back by a gate on threaded engines, so the handle goes
        // before its runs do.
        if (k.threaded)
            eng.push({}, {a}, [&g] { CHECK(g.wait()); });
        for (int i = 0; i < 3; i++)
            op.push(i);
    }
    if (k.threaded)
        CHECK_EQ(t.calls.load(), 0);
    CHECK(t.destroyed.load() < t.made.load() || !k.threaded);
    g.open();
    eng.wait(a);
    eng.wait_all();
    CHECK_EQ(t.calls.load(), 3);
    CHECK(t.balanced());

    // A moved reusable_op owns it; the moved-from one nothing.
    varflow::reusable_op first = eng.make_op({}, {a}, [] {});
    varflow::reusable_op second = std::move(first);
    CHECK(!first);
    CHECK(second);
    second.push();
    eng.wait(a);
}

/* An async callable stored beside its op (it owns a std::string): it
 * hands its completion to a thread, joins it, and then records how many
 * copies of it are alive (through the tally it read before). */
struct completes_inside {
    counted c;
    std::string owned;
    std::atomic<int> *alive_after;

    void operator()(varflow::completion done) const
    {
        tally *t = c.t;
        std::atomic<int> *alive = alive_after;
        std::thread th([&done] { done(); });
        th.join();
        int n = t->made.load() - t->destroyed.load();
        alive->store(n);
        if (n == 2) // its own captures, read after its op finished
            CHECK(owned == std::string(40, 'x'));
    }
};

/* The completion may come before the callable returns; the op's done
 * then lets go of the callable, and the call holds it still. Before, done
 * destroyed it at once: a lambda that joined its completing thread and
 * read its capture read freed memory (found trying async ops from C++ as
 * a user: SIGSEGV 8 runs in 8). */
TEST_KIND_CASE(async_completed_inside, k)
{
    for (int reusable = 0; reusable < 2; reusable++) {
        tally t;
        std::atomic<int> alive{-1};
        {
            completes_inside fn{counted(&t), std::string(40, 'x'), &alive};
            {
                varflow::engine eng(k.cfg);
                varflow::var a = eng.new_var(), b = eng.new_var();
                cxx_test::gate g;
                std::atomic<int> ran{0};
                if (reusable) {
                    // The handle goes before its run starts (held back by
                    // a gate on threaded engines).
                    varflow::reusable_op op = eng.make_async_op({}, {a}, fn);
                    if (k.threaded)
                        eng.push({}, {a}, [&g] { CHECK(g.wait()); });
                    op.push();
                } else {
                    eng.push_async({}, {a}, fn);
                }
                g.open();
                eng.push({a}, {b}, [&ran] { ran++; });
                eng.wait(b); // the op has finished; its callable may run
                CHECK_EQ(ran.load(), 1);
            } // the engine's destructor joins its workers: it returned
            // `fn` and the op's copy were alive past the completion.
            CHECK_EQ(alive.load(), 2);
        }
        CHECK(t.balanced());
    }
}

/* A callable that fits a pointer, pushed as an async op or a device op:
 * what it starts reads its captures after it returned (a thread that
 * completes the async op later; the device op's stream work), while its
 * op runs on. It ran as a copy on its entry's stack, gone by then: the
 * reads saw whatever the worker's next ops left there (a user tester: 20
 * runs in 20 read a wrong value, ASan: stack-use-after-return). The engine
 * copies it into the op now, where it lives until the op's end. */
static std::atomic<int> capture_seen{0};
static std::thread capture_reader;

static int read_capture_later(void *p)
{
    usleep(5000); // past the callable's return; the worker runs on
    capture_seen.store(*static_cast<const int *>(p));
    return 0;
}

static void scribble_on_workers(varflow::engine &eng)
{
    for (int i = 0; i < 20; i++) // reuse the stack the op's call used
        eng.push({}, {}, [] {
            volatile unsigned char junk[512];
            for (auto &c : junk)
                c = 0x55;
        });
}

TEST_KIND_CASE(captures_outlive_the_call, k)
{
    varflow::engine eng(k.cfg);
    varflow::var a = eng.new_var();
    auto async_fn = [x = 1234](varflow::completion done) {
        capture_reader = std::thread([p = &x, d = std::move(done)]() mutable {
            read_capture_later(const_cast<int *>(p));
            d();
        });
    };
    static_assert(sizeof(async_fn) <= sizeof(void *), "it fits a pointer");
    capture_seen.store(0);
    eng.push_async({}, {a}, async_fn);
    scribble_on_workers(eng);
    eng.wait(a);
    capture_reader.join();
    CHECK_EQ(capture_seen.load(), 1234);

    auto device_fn = [x = 1234](varflow::run &r) {
        r.submit(read_capture_later, const_cast<int *>(&x));
    };
    static_assert(sizeof(device_fn) <= sizeof(void *), "it fits a pointer");
    capture_seen.store(0);
    eng.push({}, {a}, device_fn,
             varflow::options{}.set_device({VF_DEVICE_EMULATED, 0}));
    scribble_on_workers(eng);
    eng.wait(a);
    CHECK_EQ(capture_seen.load(), 1234);
}

TEST_KIND_CASE(vars, k)
{
    varflow::engine eng(k.cfg);
    vf_var handle;
    std::uint64_t v = 0;
    {
        varflow::var a = eng.new_var();
        handle = a;
        eng.push({}, {a}, [] {});
        eng.wait(a);
        CHECK_EQ(a.version(), 1);
        varflow::var moved = std::move(a);
        CHECK(!a);
        CHECK(moved);
        CHECK_EQ(moved.version(), 1);
    } // ~var: deleted
    CHECK_EQ(vf_var_version(eng.get(), handle, &v), VF_ESTALE);

    // remove(free callable): called once, after the ops on the var, then
    // destroyed; a second remove is refused.
    tally t;
    std::atomic<int> order{0};
    int op_done_at = 0, freed_at = 0;
    varflow::var b = eng.new_var();
    eng.push({b}, {}, [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        op_done_at = ++order;
    });
    vf_var b_handle = b;
    b.remove([c = counted(&t), &freed_at, &order]() mutable {
        c();
        freed_at = ++order;
    });
    CHECK(!b);
    eng.wait_all();
    CHECK_EQ(t.calls.load(), 1);
    CHECK(t.balanced());
    CHECK(op_done_at < freed_at);
    varflow::var again(eng.get(), b_handle); // adopt a stale handle
    CHECK_THROWS(again.remove(), varflow::error, VF_ESTALE, (void)e);
    tally u;
    CHECK_THROWS(again.remove(counted(&u)), varflow::error, VF_ESTALE, (void)e);
    CHECK_EQ(u.calls.load(), 0);
    CHECK(u.balanced());
    again.release();
}

// The last reference to an engine dropped inside one of its ops: ~engine
// cannot destroy it there (VF_EDEADLK), leaves it running, and says so on
// stderr, where it was silent (found trying the C++ API as a user). The
// naive engine would run the op inside its push, before the program's
// reference goes.
TEST_KIND_CASE(engine_dropped_in_its_own_op, k)
{
    if (k.cfg.type == VF_ENGINE_NAIVE)
        return;
    auto eng = std::make_shared<varflow::engine>(k.cfg);
    vf_engine *c = eng->get();
    std::atomic<bool> go{false}, dropped{false};
    eng->push({}, {}, [holder = eng, &go, &dropped]() mutable {
        while (!go)
            std::this_thread::yield();
        holder.reset(); // the last reference: ~engine here
        dropped = true;
    });
    std::fflush(stderr);
    std::FILE *tmp = std::tmpfile();
    CHECK(tmp != nullptr);
    if (tmp == nullptr)
        return;
    int saved = dup(2);
    CHECK(saved >= 0 && dup2(fileno(tmp), 2) >= 0);
    eng.reset();
    go = true;
    while (!dropped)
        std::this_thread::yield();
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[512] = {0};
    std::rewind(tmp);
    size_t got = std::fread(text, 1, sizeof text - 1, tmp);
    text[got] = '\0';
    std::fclose(tmp);
    CHECK(std::strstr(text, "~engine from the engine's own code") != nullptr);
    CHECK(std::strstr(text, "left running") != nullptr);
    // Left running, it is still the program's to destroy.
    CHECK_EQ(vf_engine_wait_all(c, nullptr), 0);
    CHECK_EQ(vf_engine_destroy(c), 0);
}

} // namespace

TEST_MAIN("test_cxx_lifetime")
