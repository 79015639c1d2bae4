/*
 * cxx_check.hpp: what the C++ tests (test_cxx_*.cpp) share.
 *
 * - CHECK / CHECK_EQ / CHECK_THROWS: a failure prints file:line, the
 *   expression, the values and the engine kind being tested, counts, and
 *   the test goes on; finish() turns the count into the exit status;
 * - the engine kinds every test runs on (as tests/util.h's tu_kinds);
 * - a rendezvous with a timeout, so that concurrency is proven by two ops
 *   meeting, never by timings;
 * - a gate: ops wait on it until the test opens it.
 */
#ifndef VF_TEST_CXX_CHECK_HPP
#define VF_TEST_CXX_CHECK_HPP

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>

#include <varflow.hpp>

namespace cxx_test
{

inline std::atomic<int> failures{0};
inline const char *context = nullptr; // the engine kind, set between runs

inline void fail(const char *file, int line, const std::string &what)
{
    std::fprintf(stderr, "%s:%d: check failed: %s [%s]\n", file, line,
                 what.c_str(), context ? context : "-");
    failures++;
}

inline int finish(const char *test)
{
    int n = failures.load();
    std::printf("%s: %s (%d failed checks)\n", test, n ? "FAILED" : "ok", n);
    return n ? 1 : 0;
}

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            cxx_test::fail(__FILE__, __LINE__, #cond);                         \
    } while (0)

#define CHECK_EQ(a, b)                                                         \
    do {                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                    \
        if (a_ != b_)                                                          \
            cxx_test::fail(__FILE__, __LINE__,                                 \
                           std::string(#a " == " #b ": ") +                    \
                               std::to_string(a_) +                            \
                               " != " + std::to_string(b_));                   \
    } while (0)

#define CHECK_STR(a, b)                                                        \
    do {                                                                       \
        std::string a_ = (a), b_ = (b);                                        \
        if (a_ != b_)                                                          \
            cxx_test::fail(__FILE__, __LINE__,                                 \
                           std::string(#a " == " #b ": \"") + a_ +             \
                               "\" != \"" + b_ + "\"");                        \
    } while (0)

/* expr must throw Exc whose code() is `code`; then `then` runs with the
 * exception as `e`. */
#define CHECK_THROWS(expr, Exc, code_, then)                                   \
    do {                                                                       \
        try {                                                                  \
            expr;                                                              \
            cxx_test::fail(__FILE__, __LINE__, #expr " did not throw");        \
        } catch (const Exc &e) {                                               \
            if (e.code() != (code_))                                           \
                cxx_test::fail(__FILE__, __LINE__,                             \
                               std::string(#expr " threw ") + e.what());       \
            then;                                                              \
        }                                                                      \
    } while (0)

/* Every engine kind, with 1 and 2 workers. */
struct kind {
    const char *name;
    vf_config cfg;
    bool threaded; // ops run on workers, not inside push
    int workers;
};

inline vf_config config_of(vf_engine_type type, int workers)
{
    vf_config c{};
    c.type = type;
    c.cpu_workers = workers;
    c.cpu_priority_workers = workers;
    return c;
}

inline const kind kinds[] = {
    {"naive", config_of(VF_ENGINE_NAIVE, 0), false, 0},
    {"pooled/1", config_of(VF_ENGINE_POOLED, 1), true, 1},
    {"pooled/2", config_of(VF_ENGINE_POOLED, 2), true, 2},
    {"perdevice/1", config_of(VF_ENGINE_PERDEVICE, 1), true, 1},
    {"perdevice/2", config_of(VF_ENGINE_PERDEVICE, 2), true, 2},
};

/* Run body(kind) on every kind, with the kind as the checks' context. */
template <class Body> void for_each_kind(Body &&body)
{
    for (const kind &k : kinds) {
        context = k.name;
        body(k);
    }
    context = nullptr;
}

constexpr std::chrono::seconds timeout{10}; // generous: sanitizer builds

/* n parties meet: meet() returns true once all n arrived, false after the
 * timeout (then the check that needed them fails instead of hanging). */
class rendezvous
{
  public:
    explicit rendezvous(int n) : n_(n)
    {
    }
    bool meet()
    {
        std::unique_lock<std::mutex> lock(m_);
        if (++arrived_ >= n_)
            cv_.notify_all();
        return cv_.wait_for(lock, timeout, [&] { return arrived_ >= n_; });
    }

  private:
    std::mutex m_;
    std::condition_variable cv_;
    int n_;
    int arrived_ = 0;
};

/* One-shot event: wait() returns once open() was called (or the timeout). */
class gate
{
  public:
    void open()
    {
        std::lock_guard<std::mutex> lock(m_);
        open_ = true;
        cv_.notify_all();
    }
    bool wait()
    {
        std::unique_lock<std::mutex> lock(m_);
        return cv_.wait_for(lock, timeout, [&] { return open_; });
    }

  private:
    std::mutex m_;
    std::condition_variable cv_;
    bool open_ = false;
};

} // namespace cxx_test

#endif /* VF_TEST_CXX_CHECK_HPP */
