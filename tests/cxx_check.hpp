/*
 * cxx_check.hpp: what the C++ tests (test_cxx_*.cpp) share.
 *
 * - CHECK / CHECK_EQ / CHECK_THROWS: a failure prints file:line, the
 *   expression, the values and the engine kind being tested, counts, and
 *   the test goes on; finish() turns the count into the exit status;
 * - the engine kinds every test runs on (as tests/util.h's tu_kinds);
 * - a rendezvous with a timeout, so that concurrency is proven by two ops
 *   meeting, never by timings;
 * - a gate: ops wait on it until the test opens it;
 * - named cases, each runnable alone, as tests/runner.h gives the C tests
 *   (see "cases" below).
 */
#ifndef VF_TEST_CXX_CHECK_HPP
#define VF_TEST_CXX_CHECK_HPP

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>

#include <fnmatch.h>

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

/* ------------------------------------------------------------ cases
 *
 * A test program defines its cases once, and main runs them (the C++
 * side of tests/runner.h):
 *
 *   TEST_KIND_CASE(engines, k) { ... }   a case run once per engine kind
 *                                        (kinds above): `k` is the kind,
 *                                        context its name
 *   TEST_MAIN("test_cxx_api")            main
 *
 *   test_cxx_api                every case, in the order of the file
 *   test_cxx_api NAME...        only the cases these name; a NAME may be a
 *                               shell pattern ("moved_*", fnmatch)
 *   VF_TEST_FILTER=NAME         the same as one NAME argument
 *   test_cxx_api --list         the case names, one a line
 *
 * A NAME that matches no case is an error (exit 2). tests/CMakeLists.txt
 * reads the TEST_KIND_CASE lines (each must start a line and name its
 * case) and CTest runs each case as PROGRAM.CASE. An exception that
 * escapes a case is a failed check; the next kind and case still run. The
 * last line printed is finish()'s verdict.
 */
struct test_case {
    const char *name;
    void (*fn)(const kind &);
};

constexpr int max_cases = 64;
inline test_case cases[max_cases];
inline int ncases = 0;

inline bool add_case(const char *name, void (*fn)(const kind &))
{
    if (ncases == max_cases) {
        std::fprintf(stderr, "cxx_check.hpp: more than %d cases\n", max_cases);
        std::abort();
    }
    cases[ncases++] = {name, fn};
    return true;
}

/* A case registers itself from a namespace-scope initializer: before main,
 * and in the order of the file (the order of a file's initializers). */
#define TEST_KIND_CASE(name, k)                                                \
    static void test_case_##name(const cxx_test::kind &k);                     \
    [[maybe_unused]] static const bool test_registered_##name =                \
        cxx_test::add_case(#name, test_case_##name);                           \
    static void test_case_##name(const cxx_test::kind &k)

/* The whole main of a test program: --list, or run the cases `argv` (and
 * VF_TEST_FILTER) name, or all of them, on every kind. */
inline int run_cases(int argc, char **argv, const char *test)
{
    if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < ncases; i++)
            std::printf("%s\n", cases[i].name);
        return 0;
    }
    const char *filters[64];
    int nfilters = 0;
    const char *env = std::getenv("VF_TEST_FILTER");
    if (env != nullptr && *env != '\0')
        filters[nfilters++] = env;
    for (int i = 1; i < argc && nfilters < 64; i++) {
        if (argv[i][0] == '-') {
            std::fprintf(stderr,
                         "usage: %s [--list] [CASE...] (a CASE may be a "
                         "shell pattern)\n",
                         test);
            return 2;
        }
        filters[nfilters++] = argv[i];
    }
    bool selected[max_cases] = {};
    for (int f = 0; f < nfilters; f++) {
        bool any = false;
        for (int i = 0; i < ncases; i++) {
            if (fnmatch(filters[f], cases[i].name, 0) == 0) {
                selected[i] = true;
                any = true;
            }
        }
        if (!any) {
            std::fprintf(stderr,
                         "%s: no case named \"%s\" (--list shows them)\n", test,
                         filters[f]);
            return 2;
        }
    }
    int ran = 0;
    for (int i = 0; i < ncases; i++) {
        if (nfilters > 0 && !selected[i])
            continue;
        for (const kind &k : kinds) {
            context = k.name;
            try {
                cases[i].fn(k);
            } catch (const std::exception &e) {
                fail(__FILE__, __LINE__,
                     std::string(cases[i].name) + " threw: " + e.what());
            }
        }
        context = nullptr;
        ran++;
    }
    if (nfilters > 0)
        std::printf("%s: ran %d of %d cases\n", test, ran, ncases);
    return finish(test);
}

#define TEST_MAIN(test)                                                        \
    int main(int argc, char **argv)                                            \
    {                                                                          \
        return cxx_test::run_cases(argc, argv, test);                          \
    }

} // namespace cxx_test

#endif /* VF_TEST_CXX_CHECK_HPP */
