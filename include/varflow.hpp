/**
 * @file varflow.hpp
 * @brief A thin, header-only C++17 layer over varflow.h (the @ref cxx "C++"
 * module).
 */

/**
 * @defgroup cxx C++
 * @brief varflow.hpp: ops as callables, handles that clean up, errors as
 * exceptions.
 *
 * varflow.hpp: a thin, header-only C++17 layer over varflow.h.
 *
 * The C API takes a function pointer, a void * and a done callback for
 * every op; here an op is any callable, and handles clean up after
 * themselves:
 *
 *     varflow::engine eng;                        // vf_engine_create
 *     varflow::var a = eng.new_var(), b = eng.new_var();
 *     eng.push({a}, {b}, [&] { y = f(x); });      // reads a, writes b
 *     eng.wait(b);                                // throws on an op failure
 *                                                 // ~var: vf_var_destroy,
 *                                                 // ~engine: vf_engine_destroy
 *
 * What it promises:
 * - Errors: a failing call throws varflow::error (the VF_E* code, its name,
 *   vf_error_detail()); a wait that reports an op's failure throws
 *   varflow::op_failed, or returns it when called with std::nothrow.
 * - A callable that throws fails its op with the exception's message (a
 *   varflow::op_failed, a wait's rethrown: the failed op's code,
 *   op_code(), and its detail(); another varflow::error: its code and its
 *   detail(); std::bad_alloc: VF_ENOMEM; else VF_EOPFAILED). A message
 *   longer than vf_error::message keeps its beginning and its end, where
 *   a chain of such failures names its cause. No exception ever crosses a C
 * frame: every entry point the engine calls is noexcept and catches what the
 * callable's call throws. A callable's destructor (a capture's) that throws is
 * a bug like any throwing destructor: std::terminate, as for a free callable
 * (var::remove).
 * - A pushed callable is moved (or copied) into the op and destroyed
 *   exactly once, whether the op ran, failed or was skipped; if the push
 *   itself fails, it is destroyed before the exception leaves push.
 * - Cost: a callable that is trivially copyable and fits in a pointer (a
 *   lambda capturing nothing, one reference or one pointer; a function
 *   pointer) travels in the op's `arg` itself when it is a sync op on the
 *   CPU: the push allocates nothing beyond what vf_engine_push does and
 *   sets no done callback. A larger trivially copyable one, up to
 *   VF_OP_ARG_INLINE bytes, and any such callable of an async op or a
 *   device op (whose work may use its captures after it returned), is
 *   copied into the op by the engine (vf_op.arg_size): no allocation
 *   either. Any other
 *   callable is moved into one `new` per push, deleted by the op's done
 *   callback: that is the callable's own storage. A reusable_op allocates
 *   once, when it is made, and nothing per push; a reusable_arg_op
 *   (make_op_with) the same, each push copying its own argument.
 *   docs/CXX.md has the measured cost.
 *
 * Handles (engine, var, reusable_op) are movable, not copyable, and must
 * not outlive the engine they came from (their destructors call it). A
 * handle moved from (like a completion) tests false, and using it throws
 * varflow::error VF_EINVAL saying it was moved from: it never acts on the
 * handle it was moved to.
 * engine_ref and run are non-owning views, cheap to copy into lambdas.
 */
#ifndef VARFLOW_HPP
#define VARFLOW_HPP

/* What it needs, said at once rather than by errors deep inside it: C++17
 * (if constexpr, inline variables, class template argument deduction)
 * and exceptions (every failure throws). varflow.h's C API works from any
 * C++ without them. */
#if __cplusplus < 201703L && !(defined(_MSVC_LANG) && _MSVC_LANG >= 201703L)
#error "varflow.hpp needs C++17 (-std=c++17); varflow.h works from any C++"
#elif !defined(__cpp_exceptions) && !defined(_CPPUNWIND)
#error "varflow.hpp needs exceptions; varflow.h works without them"
#else /* the rest only then: the compiler says nothing more (it went on) */

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <ratio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <varflow.h>

/** The C++ layer over varflow.h (varflow.hpp). */
namespace varflow
{

/** @addtogroup cxx
 * @{ */

class engine_ref;

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/**
 * A varflow call failed: code() is the VF_E* code, name() its symbolic name
 * ("VF_ESTALE"), detail() what vf_error_detail() said on the failing
 * thread. what() is "NAME: detail". Copying never throws (the strings are
 * held by std::runtime_error's shared buffer).
 */
class error : public std::runtime_error
{
  public:
    /** The error of code `code` (a `VF_E*` code) with `detail`. */
    error(int code, const std::string &detail)
        : std::runtime_error(describe(code, detail)), code_(code),
          detail_(detail)
    {
    }
    /** The `VF_E*` code. */
    int code() const noexcept
    {
        return code_;
    }
    /** The code's symbolic name ("VF_ESTALE"). */
    const char *name() const noexcept
    {
        return vf_error_name(code_);
    }
    /** What vf_error_detail() said on the failing thread. */
    const char *detail() const noexcept
    {
        return detail_.what();
    }

  private:
    static std::string describe(int code, const std::string &detail)
    {
        return std::string(vf_error_name(code)) + ": " +
               (detail.empty() ? vf_error_string(code) : detail);
    }
    int code_;
    std::runtime_error detail_;
};

/**
 * A wait saw an op's failure (VF_EOPFAILED): op_code() is what the op
 * returned or threw, op_name() the op that failed first in the chain,
 * op_message() what it said. what() names each code once:
 * "VF_EOPFAILED: op \"add\" failed: boom" when the op's code is
 * VF_EOPFAILED itself, "VF_EOPFAILED: op \"add\" failed with VF_ENODEV:
 * boom" for another VF_E* code, "... failed with code 5" for any other
 * value (an op pushed without a name is named "op #N", its place in push
 * order, as vf_error::op_name says; "... an unnamed op failed ..." only
 * for a vf_error with no name at all); ": message" only when there is
 * one. detail() is the same without "VF_EOPFAILED: ".
 */
class op_failed : public error
{
  public:
    /** The failure a wait filled in. */
    explicit op_failed(const vf_error &err)
        : error(VF_EOPFAILED, describe(err)), err_(err)
    {
    }
    /** What the op returned or threw (vf_error::code). */
    int op_code() const noexcept
    {
        return err_.code;
    }
    /** The op that failed first in the chain (vf_error::op_name). */
    const char *op_name() const noexcept
    {
        return err_.op_name;
    }
    /** What it said (vf_error::message). */
    const char *op_message() const noexcept
    {
        return err_.message;
    }

  private:
    static std::string describe(const vf_error &err)
    {
        std::string s = err.op_name[0] != '\0'
                            ? std::string("op \"") + err.op_name + "\" failed"
                            : std::string("an unnamed op failed");
        const char *code = vf_error_name(err.code);
        if (std::strcmp(code, "VF_UNKNOWN") == 0)
            s += " with code " + std::to_string(err.code);
        else if (err.code != VF_EOPFAILED) // what() starts with that one
            s += std::string(" with ") + code;
        if (err.message[0] != '\0')
            s += std::string(": ") + err.message;
        return s;
    }
    vf_error err_;
};

namespace detail
{

/* Throw the error of the call that just failed on this thread. */
[[noreturn]] inline void throw_error(int rc)
{
    throw error(rc, vf_error_detail());
}

inline void check(int rc)
{
    if (rc != 0)
        throw_error(rc);
}

/* A graph's launch calls each op's done again (vf_graph_begin()): an op
 * whose done frees what it runs (`what`) cannot be recorded into one. */
inline void refuse_capture(vf_engine *e, const char *what)
{
    if (vf_graph_capturing(e))
        throw error(VF_EINVAL,
                    std::string("varflow: ") + what +
                        " cannot be captured into a graph: each launch calls "
                        "its done again, which frees it");
}

/*
 * A std::chrono duration as the C calls' timeout: whole milliseconds,
 * rounded up (a positive timeout never becomes 0, "only look"), and
 * saturated at INT64_MAX (292 million years) where the product would
 * overflow (hours::max(), a float's infinity); negative or NaN is 0, a
 * deadline already past, as std::chrono's waits take it (it was the C
 * calls' -1, "never give up": a user tester's `deadline - now()` past its
 * deadline waited for ever). Any Rep and Period.
 */
template <class Rep, class Period>
inline int64_t timeout_ms(std::chrono::duration<Rep, Period> t) noexcept
{
    using to_ms = std::ratio_divide<Period, std::milli>; // ms = n * num / den
    constexpr int64_t most = std::numeric_limits<int64_t>::max();
    if (!(t.count() >= t.zero().count())) // NaN too (duration's >= is !<)
        return 0;
    // A first look in long double, which no count overflows: the
    // integer arithmetic below runs only on what fits.
    long double m = static_cast<long double>(t.count()) * to_ms::num /
                    to_ms::den;
    if (!(m < 0x1p63L))
        return most;
    using u = std::uintmax_t;
    if constexpr (std::is_integral<Rep>::value &&
                  to_ms::num <= most / to_ms::den) {
        // Exact: n = q * den + r, so ms = q * num + ceil(r * num / den),
        // each term below 2^64 (unsigned, so never undefined). Only for a
        // count that fits: a wider integer (GNU C++'s __int128) counting
        // past 2^64 lost its high bits to the cast (2^64 ns + 50 ms gave
        // 50 ms: found by a user tester).
        bool fits = true;
        if constexpr (std::numeric_limits<Rep>::digits >
                      std::numeric_limits<u>::digits)
            fits = t.count() <= static_cast<Rep>(std::numeric_limits<u>::max());
        if (fits) {
            const u n = static_cast<u>(t.count()), num = to_ms::num,
                    den = to_ms::den;
            const u ms = n / den * num + (n % den * num + den - 1) / den;
            return ms > static_cast<u>(most) ? most : static_cast<int64_t>(ms);
        }
    }
    const long double up = std::ceil(m);
    return up >= 0x1p63L ? most : static_cast<int64_t>(up);
}

/* What a call on an engine_ref holding no engine throws (VF_EINVAL). */
inline const char no_engine[] =
    "varflow::engine: no engine (used after it was moved from, released "
    "or destroyed; or a default engine_ref)";

/*
 * Turn the exception being handled into an op failure: call
 * report(code, message) with the code and message it maps to. Only from
 * inside a catch block.
 */
template <class Report> void report_current(Report &&report) noexcept
{
    try {
        throw;
    } catch (const op_failed &e) {
        // A wait's, rethrown: the code of the op that failed, so that a
        // chain of waits keeps its cause's (every level said VF_EOPFAILED:
        // found by a user tester), and the detail, which names it.
        report(e.op_code() != 0 ? e.op_code() : VF_EOPFAILED, e.detail());
    } catch (const error &e) {
        // The detail alone: the code travels as the op's code (what()
        // would name it twice in the wait's op_failed).
        int code = e.code() != 0 ? e.code() : VF_EOPFAILED;
        report(code,
               e.detail()[0] != '\0' ? e.detail() : vf_error_string(code));
    } catch (const std::bad_alloc &e) {
        report(VF_ENOMEM, e.what());
    } catch (const std::exception &e) {
        report(VF_EOPFAILED, e.what());
    } catch (...) {
        report(VF_EOPFAILED, "unknown exception (not a std::exception)");
    }
}

} // namespace detail

/**
 * What a wait called with std::nothrow returns: ok(), or code() (
 * VF_EOPFAILED when an op's failure reached the wait, or the wait's own
 * error) and, for an op failure, the op's code, name and message. For the
 * wait's own errors message() is vf_error_detail(). No allocation.
 */
class wait_result
{
  public:
    wait_result() noexcept = default;
    /** What a wait returned (`code`) and the failure it filled in. */
    wait_result(int code, const vf_error &err) noexcept : code_(code), err_(err)
    {
    }
    /** The wait returned 0. */
    bool ok() const noexcept
    {
        return code_ == 0;
    }
    /** What the wait returned: 0, VF_EOPFAILED or the wait's own error. */
    int code() const noexcept
    {
        return code_;
    }
    /** The code's symbolic name ("VF_EOPFAILED"). */
    const char *name() const noexcept
    {
        return vf_error_name(code_);
    }
    /** An op failure: what the op returned or threw. */
    int op_code() const noexcept
    {
        return err_.code;
    }
    /** An op failure: the op that failed first in the chain. */
    const char *op_name() const noexcept
    {
        return err_.op_name;
    }
    /** An op failure: what the op said; the wait's own error:
     * vf_error_detail(). */
    const char *message() const noexcept
    {
        return err_.message;
    }
    /** Throw what the throwing wait would have thrown (nothing when ok). */
    void throw_if_failed() const
    {
        if (code_ == VF_EOPFAILED)
            throw op_failed(err_);
        if (code_ != 0)
            throw error(code_, err_.message);
    }

  private:
    int code_ = 0;
    vf_error err_{};
};

/* ------------------------------------------------------------------------ */
/* Var lists and op options                                                  */
/* ------------------------------------------------------------------------ */

/**
 * The vars an op reads or writes: a view, valid for the push it is given
 * to (vf_engine_push() copies it). From a braced list of vars ({a, b}:
 * varflow::var or vf_var), a std::vector<vf_var>, an array, or a pointer and a
 * count. A braced list's array lives until the end of the full-expression
 * that wrote it: write it in the call (`eng.push({a, b}, ...)`); a var_list
 * variable made from one (`var_list w{a, b};`) is left dangling (clang
 * warns, -Wdangling; keep such lists in a named array or vector).
 */
class var_list
{
  public:
    var_list() noexcept = default;
    /** From a braced list of vars: `{a, b}`. */
    var_list(std::initializer_list<vf_var> vars VF_LIFETIMEBOUND_) noexcept
        : list_{vars.size() ? vars.begin() : nullptr, int(vars.size())}
    {
    }
    /** From `count` handles at `vars`. */
    var_list(const vf_var *vars, std::size_t count) noexcept
        : list_{
              count ? vars : nullptr,
              // Past INT_MAX, a count the C API refuses (VF_EINVAL: more
              // than VF_MAX_OP_VARS) rather than one truncated to a few.
              count > static_cast<std::size_t>(std::numeric_limits<int>::max())
                  ? std::numeric_limits<int>::max()
                  : int(count)}
    {
    }
    /** From an array. */
    template <std::size_t N>
    var_list(const vf_var (&vars)[N]) noexcept : list_{vars, int(N)}
    {
    }
    /** From a vector. */
    var_list(const std::vector<vf_var> &vars VF_LIFETIMEBOUND_) noexcept
        : var_list(vars.data(), vars.size())
    {
    }
    /** The C list. */
    const vf_var_list &get() const noexcept
    {
        return list_;
    }

  private:
    vf_var_list list_{nullptr, 0};
};

/**
 * How an op is scheduled (vf_op's fields other than the function and the
 * vars). An aggregate: with C++20, eng.push(r, w, fn, {.name = "add",
 * .priority = 2}); with C++17, the setters chain:
 * varflow::options{}.set_name("add").set_priority(2). `name` must stay
 * valid until the op has finished (a string literal, typically).
 */
struct options {
    const char *name = nullptr;            /**< vf_op::name */
    int priority = 0;                      /**< vf_op::priority */
    vf_property property = VF_PROP_NORMAL; /**< vf_op::property */
    vf_device device = {VF_DEVICE_CPU, 0}; /**< vf_op::device */
    bool no_skip = false;                  /**< run even when an input has
                                                failed */
    bool nonblocking = false;              /**< at the in-flight limit:
                                                VF_EAGAIN */

    /** @name Setters, for C++17
     * @{ */
    /** Sets name; returns *this. */
    options &set_name(const char *n) noexcept
    {
        name = n;
        return *this;
    }
    /** Sets priority; returns *this. */
    options &set_priority(int p) noexcept
    {
        priority = p;
        return *this;
    }
    /** Sets property; returns *this. */
    options &set_property(vf_property p) noexcept
    {
        property = p;
        return *this;
    }
    /** Sets device; returns *this. */
    options &set_device(vf_device d) noexcept
    {
        device = d;
        return *this;
    }
    /** Sets no_skip; returns *this. */
    options &set_no_skip(bool on = true) noexcept
    {
        no_skip = on;
        return *this;
    }
    /** Sets nonblocking; returns *this. */
    options &set_nonblocking(bool on = true) noexcept
    {
        nonblocking = on;
        return *this;
    }
    /** @} */

    /** The vf_op these options describe, with no function yet. */
    vf_op to_op(const var_list &reads, const var_list &writes) const noexcept
    {
        vf_op op{};
        op.reads = reads.get();
        op.writes = writes.get();
        op.device = device;
        op.property = property;
        op.priority = priority;
        op.no_skip = no_skip;
        op.nonblocking = nonblocking;
        op.name = name;
        return op;
    }
};

/* ------------------------------------------------------------------------ */
/* What a running op sees                                                    */
/* ------------------------------------------------------------------------ */

/** The running op's context (vf_run): valid only during the call. */
class run
{
  public:
    /** A view of the C context. */
    explicit run(vf_run *r) noexcept : r_(r)
    {
    }
    /** The C context. */
    vf_run *get() const noexcept
    {
        return r_;
    }
    /** The engine running the op, for nested pushes and waits. */
    engine_ref engine() const noexcept;
    /** The worker running the op (vf_run_worker()). */
    int worker() const noexcept
    {
        return vf_run_worker(r_);
    }
    /** The device the op was pushed for (vf_run_device()). */
    vf_device device() const noexcept
    {
        return vf_run_device(r_);
    }
    /** The worker's device stream (vf_run_stream()). */
    void *stream() const noexcept
    {
        return vf_run_stream(r_);
    }
    /** The op's name (vf_run_name()). */
    const char *name() const noexcept
    {
        return vf_run_name(r_);
    }
    /** @name set_error
     * @{ */
    /** The message a failing op reports (return non-zero, or throw). */
    void set_error(const char *message) const noexcept
    {
        vf_run_set_error(r_, "%s", message);
    }
    void set_error(const std::string &message) const noexcept
    {
        set_error(message.c_str());
    }
    /** @} */
    /** vf_run_submit(): put fn(arg) on the op's device stream. */
    void submit(vf_device_fn fn, void *arg, std::size_t bytes = 0) const
    {
        detail::check(vf_run_submit(r_, fn, arg, bytes));
    }
    /** vf_run_wait_children(): wait for every op this op pushed (OpenMP's
     * taskwait). Throws op_failed when one failed with a failure no
     * earlier wait reported, error for anything else. */
    void wait_children() const
    {
        vf_error err{};
        int rc = vf_run_wait_children(r_, &err);
        if (rc == VF_EOPFAILED)
            throw op_failed(err);
        detail::check(rc);
    }

  private:
    vf_run *r_;
};

namespace detail
{

/* An async op's callable being called on this thread (see completion). */
struct async_frame {
    vf_completion done;
    int uncaught; /* std::uncaught_exceptions() as it was called */
    bool dropped; /* the completion given to it was destroyed by an
                     exception leaving it */
    async_frame *outer;
};

/* The completion an async op's callable is given: run_async makes it, the
 * callable's parameter itself (or what its reference binds to). */
struct given_to_callable_t {
};
inline thread_local async_frame *current_async_frame = nullptr;

inline bool same_completion(vf_completion a, vf_completion b) noexcept
{
    return a.op_ == b.op_ && a.ticket_ == b.ticket_;
}

inline const char dropped_message[] =
    "varflow::completion destroyed before it was called";

} // namespace detail

/**
 * What an async op's callable gets: call it (complete(), or fail()) exactly
 * once, from any thread; the op's vars stay held until then. Move-only;
 * calling one moved from throws VF_EINVAL.
 * Destroyed uncalled, it fails the op as it is destroyed
 * ("varflow::completion destroyed before it was called"), so a forgotten
 * completion cannot hang a wait; the one the callable was given (its
 * parameter, or what its reference binds to) destroyed by an exception
 * that leaves the callable fails the op with that exception's message
 * instead. One it moved elsewhere (another function's parameter, a local)
 * fails the op when it is destroyed, an exception unwinding or not: the
 * callable may catch that exception and go on, waiting for what the op's
 * end allows. So does one a wrapper passed on by value: a callable
 * stored in a std::function<void(varflow::completion)> gets a moved one,
 * and its escaping exception's message is lost (the op fails with the
 * drop's); with std::function<void(varflow::completion &&)> it is kept.
 * One kept beyond the op must be called or
 * destroyed before its engine is: the engine's destructor waits for every
 * async op, so a completion declared before the engine (destroyed after
 * it) leaves that destructor waiting for ever (vf_engine_destroy() says on
 * stderr after 2 s, and every 10 s after, which op it waits for).
 */
class completion
{
  public:
    completion() noexcept = default;
    /** Owns the C completion `done` (its op's). */
    explicit completion(vf_completion done) noexcept
        : done_(done), pending_(true)
    {
    }
    /** The one an async op's callable is given (the library's entry point
     * makes it). */
    completion(vf_completion done, detail::given_to_callable_t) noexcept
        : done_(done), pending_(true), given_(true)
    {
    }
    /** Takes `o`'s completion; `o` is then moved from. */
    completion(completion &&o) noexcept
        : done_(o.done_), pending_(std::exchange(o.pending_, false)),
          moved_from_(std::exchange(o.moved_from_, true))
    {
    }
    /** Fails this one's op if it is still pending (as the destructor
     * does), then takes `o`'s completion. */
    completion &operator=(completion &&o) noexcept
    {
        if (this != &o) {
            drop();
            done_ = o.done_;
            pending_ = std::exchange(o.pending_, false);
            moved_from_ = std::exchange(o.moved_from_, true);
        }
        return *this;
    }
    completion(const completion &) = delete;
    completion &operator=(const completion &) = delete;
    ~completion()
    {
        drop();
    }

    /** @name complete
     * @{ */
    /** Finish the op: success. VF_EALREADY (thrown) if already used;
     * VF_EINVAL on a completion moved from. */
    void complete()
    {
        finish(0, nullptr);
    }
    void operator()()
    {
        complete();
    }
    /** @} */
    /** Finish the op: failed with `code` (VF_EOPFAILED if 0) and message. */
    void fail(int code, const char *message)
    {
        finish(code != 0 ? code : VF_EOPFAILED, message);
    }
    /** Finish the op: failed with VF_EOPFAILED and `message`. */
    void fail(const std::string &message)
    {
        fail(VF_EOPFAILED, message.c_str());
    }
    /** Whether it still has to be called: false once called, released or
     * moved from, and for a default-constructed one. */
    bool pending() const noexcept
    {
        return pending_;
    }
    /** As pending(): a completion moved from tests false. */
    explicit operator bool() const noexcept
    {
        return pending_;
    }
    /** Give up ownership: the caller must call vf_completion_finish() on
     * it. VF_EINVAL (thrown) on a completion moved from: it never hands out
     * the handle it was moved to (it did: found trying the C++ API as a
     * user). */
    vf_completion release()
    {
        if (moved_from_)
            throw error(VF_EINVAL, "varflow::completion: release() after it "
                                   "was moved from");
        pending_ = false;
        return done_;
    }

  private:
    void finish(int status, const char *message)
    {
        if (!pending_ && moved_from_)
            throw error(VF_EINVAL, "varflow::completion: used after it was "
                                   "moved from");
        if (!pending_)
            throw error(VF_EALREADY,
                        "varflow::completion: already used, or empty");
        pending_ = false;
        detail::check(vf_completion_finish(done_, status, message));
    }
    void drop() noexcept
    {
        if (!pending_)
            return;
        pending_ = false;
        // The callable's own, unwound by an exception that left it: its
        // entry point, which catches it right after, has the message. Any
        // other finishes now: an exception unwinding through the callable
        // may be caught there, and the op, left running until the callable
        // returned, made a wait of the callable on its var VF_EDEADLK, and
        // one on what its end allows hang (found by a user tester).
        detail::async_frame *f = detail::current_async_frame;
        if (given_ && f != nullptr && detail::same_completion(f->done, done_) &&
            std::uncaught_exceptions() > f->uncaught) {
            f->dropped = true;
            return;
        }
        vf_completion_finish(done_, VF_EOPFAILED, detail::dropped_message);
    }

    vf_completion done_{};
    bool pending_ = false;
    bool moved_from_ = false;
    bool given_ = false; /* the callable's own (never moved: a move's
                            target is not) */
};

/* ------------------------------------------------------------------------ */
/* Callables inside ops: storage and entry points                            */
/* ------------------------------------------------------------------------ */

namespace detail
{

/* Callables that travel in the op's void *arg itself (no allocation). */
template <class Fn>
inline constexpr bool fits_inline =
    sizeof(Fn) <= sizeof(void *) &&
    alignof(Fn) <= alignof(void *) && std::is_trivially_copyable_v<Fn>;

/* Callables the engine copies into the op (vf_op.arg_size): trivially
 * copyable (so trivially destructible too), larger than a pointer, up to
 * VF_OP_ARG_INLINE bytes and max_align_t's alignment. No allocation and
 * no done callback: the op's copy is the callable, called in place. */
template <class Fn>
inline constexpr bool fits_copied = !fits_inline<Fn> &&
                                    std::is_trivially_copyable_v<Fn> &&
                                    sizeof(Fn) <= VF_OP_ARG_INLINE &&
                                    alignof(Fn) <= alignof(std::max_align_t);

/* The arg of an op running callable Fn: its bytes, or a new Fn (or, for
 * push and push_async, the engine's copy: fits_copied). */
template <class Fn> class stored
{
  public:
    template <class F> explicit stored(F &&f)
    {
        if constexpr (fits_inline<Fn>) {
            // Made in zeroed bytes: the pointer's bytes an empty callable
            // or padding leaves are zero, not indeterminate (a capture's
            // test of arg read them: valgrind, found trying the C++ API
            // as a user).
            alignas(Fn) unsigned char bytes[sizeof(Fn)] = {};
            Fn *tmp = ::new (static_cast<void *>(bytes)) Fn(std::forward<F>(f));
            std::memcpy(&arg_, bytes, sizeof(Fn));
            tmp->~Fn();
        } else {
            arg_ = new Fn(std::forward<F>(f));
        }
    }
    ~stored()
    {
        if constexpr (!fits_inline<Fn>)
            delete static_cast<Fn *>(arg_);
    }
    stored(const stored &) = delete;
    stored &operator=(const stored &) = delete;

    void *arg() const noexcept
    {
        return arg_;
    }
    /* The op owns it now (the push succeeded). */
    void release() noexcept
    {
        arg_ = nullptr;
    }
    /* Calls fn(callable) on the callable stored in arg; an inline one is
     * copied out of the pointer's bytes first. */
    template <class Call> static decltype(auto) with(void *arg, Call &&fn)
    {
        if constexpr (fits_inline<Fn>) {
            alignas(Fn) unsigned char bytes[sizeof(Fn)];
            std::memcpy(bytes, &arg, sizeof(Fn));
            return fn(*std::launder(reinterpret_cast<Fn *>(bytes)));
        } else {
            return fn(*static_cast<Fn *>(arg));
        }
    }
    /* The op's done callback: deletes a heap callable; none for inline. */
    static void destroy(void *arg, int status) noexcept
    {
        (void)status;
        delete static_cast<Fn *>(arg);
    }
    static constexpr vf_done_fn done = fits_inline<Fn> ? nullptr : &destroy;

  private:
    void *arg_ = nullptr; // an inline callable may not fill every byte
};

template <class> inline constexpr bool always_false = false;

/* An int status from what a sync callable returned: void is success. */
template <class R, class Call> int status_of(Call &&call)
{
    if constexpr (std::is_void_v<R>) {
        call();
        return 0;
    } else {
        static_assert(std::is_same_v<R, int>,
                      "an op's callable returns void or int (non-zero "
                      "fails the op)");
        return call();
    }
}

/* Call a sync op's callable, with the run context when it takes one. */
template <class Fn> int call_sync(Fn &f, vf_run *r)
{
    if constexpr (std::is_invocable_v<Fn &, run &>) {
        run ctx(r);
        return status_of<std::invoke_result_t<Fn &, run &>>(
            [&]() -> decltype(auto) { return f(ctx); });
    } else if constexpr (std::is_invocable_v<Fn &>) {
        return status_of<std::invoke_result_t<Fn &>>(
            [&]() -> decltype(auto) { return f(); });
    } else {
        static_assert(always_false<Fn>,
                      "an op's callable takes () or (varflow::run &); an "
                      "async op's goes to push_async");
        return VF_EINVAL;
    }
}

template <class Fn>
inline constexpr bool is_async_callable =
    std::is_invocable_v<Fn &, run &, completion &&> ||
    std::is_invocable_v<Fn &, completion &&>;

/* Run a sync op's callable; what it throws fails the op. */
template <class Fn> int run_sync(Fn &f, vf_run *r) noexcept
{
    try {
        return call_sync(f, r);
    } catch (...) {
        int code = VF_EOPFAILED;
        report_current([&](int c, const char *message) {
            vf_run_set_error(r, "%s", message);
            code = c;
        });
        return code;
    }
}

/*
 * Run an async op's callable, handing it the completion: a prvalue, so it
 * is the callable's parameter itself (or what its reference binds to),
 * destroyed once the callable is over. An exception the callable throws
 * fails the op with its message, provided that completion was still
 * pending (destroyed by the exception: see completion::drop); once
 * called, the op's outcome is what it said. Left pending by a callable
 * that returned, it fails the op as it is destroyed.
 */
template <class Fn>
void run_async(Fn &f, vf_run *r, vf_completion done) noexcept
{
    async_frame frame{done, std::uncaught_exceptions(), false,
                      current_async_frame};
    current_async_frame = &frame;
    try {
        if constexpr (std::is_invocable_v<Fn &, run &, completion &&>) {
            run ctx(r);
            f(ctx, completion(done, given_to_callable_t{}));
        } else {
            f(completion(done, given_to_callable_t{}));
        }
    } catch (...) {
        if (frame.dropped)
            report_current([&](int code, const char *message) {
                vf_completion_finish(done, code, message);
            });
    }
    current_async_frame = frame.outer;
}

/* The C entry point of a sync CPU op whose callable is stored as
 * stored<Fn>: an inline one is copied out of the pointer's bytes, and so
 * lives only as long as the call. */
template <class Fn> int sync_entry(vf_run *r, void *arg) noexcept
{
    return stored<Fn>::with(arg, [r](Fn &f) { return run_sync(f, r); });
}

/* The C entry points of an op whose callable the engine copied into it
 * (vf_op.arg_size), called in place: it lives until the op's end, past
 * the call, as an async op's work and a device op's stream work need (an
 * inline callable, copied out for the call, was gone when a thread it
 * started read its captures: found by a user tester). */
template <class Fn> int copied_sync_entry(vf_run *r, void *arg) noexcept
{
    return run_sync(*static_cast<Fn *>(arg), r);
}

template <class Fn>
void copied_async_entry(vf_run *r, void *arg, vf_completion done) noexcept
{
    run_async(*static_cast<Fn *>(arg), r, done);
}

/* A var's free callback: called once, then destroyed. A throwing free
 * callable is a bug like a throwing destructor: std::terminate. */
template <class Fn> void free_entry(void *arg) noexcept
{
    stored<Fn>::with(arg, [](Fn &f) { f(); });
    if constexpr (!fits_inline<Fn>)
        delete static_cast<Fn *>(arg);
}

/*
 * A reusable op's callable: one heap block shared by the reusable_op
 * handle and its runs in flight (each push takes a reference, its done
 * callback gives it back), so the callable lives until the handle is gone
 * and the last run has finished: the C API frees the operator then but
 * tells no one.
 */
struct op_block {
    std::atomic<long> refs{1};
    void (*destroy)(op_block *) noexcept;

    void ref() noexcept
    {
        refs.fetch_add(1, std::memory_order_relaxed); // a holder exists
    }
    void unref() noexcept
    {
        // acq_rel: the last one out sees every run's writes to the callable.
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
            destroy(this);
    }
    static void done(void *arg, int status) noexcept
    {
        (void)status;
        static_cast<op_block *>(arg)->unref();
    }
};

/* One run of a reusable_arg_op: the copy vf_operator_push_arg makes is
 * the block (given back by the run's done callback) and the argument. */
template <class Arg> struct arg_run {
    op_block *block;
    Arg arg;
};

/* A reusable_arg_op's callable, called with each run's own argument. */
template <class Fn, class Arg> struct arg_block_of : op_block {
    Fn fn;

    template <class F> explicit arg_block_of(F &&f) : fn(std::forward<F>(f))
    {
        destroy = [](op_block *b) noexcept {
            delete static_cast<arg_block_of *>(b);
        };
    }
    static int sync_entry(vf_run *r, void *arg) noexcept
    {
        auto *a = static_cast<arg_run<Arg> *>(arg);
        Fn &f = static_cast<arg_block_of *>(a->block)->fn;
        Arg &x = a->arg;
        // fn(x) or fn(run &, x), as run_sync calls fn() or fn(run &).
        auto bound = [&f, &x](auto &...ctx) -> decltype(f(ctx..., x)) {
            return f(ctx..., x);
        };
        return run_sync(bound, r);
    }
    static void done(void *arg, int status) noexcept
    {
        (void)status;
        static_cast<arg_run<Arg> *>(arg)->block->unref();
    }
};

template <class Fn> struct op_block_of : op_block {
    Fn fn;

    template <class F> explicit op_block_of(F &&f) : fn(std::forward<F>(f))
    {
        destroy = [](op_block *b) noexcept {
            delete static_cast<op_block_of *>(b);
        };
    }
    static Fn &of(void *arg) noexcept
    {
        return static_cast<op_block_of *>(static_cast<op_block *>(arg))->fn;
    }
    static int sync_entry(vf_run *r, void *arg) noexcept
    {
        return run_sync(of(arg), r);
    }
    /* The call holds the block too: the completion may come, and the
     * run's done let go of it (and, the handle gone, free it), before the
     * callable returns. */
    static void async_entry(vf_run *r, void *arg, vf_completion done) noexcept
    {
        op_block *b = static_cast<op_block *>(arg);
        b->ref();
        run_async(of(arg), r, done);
        b->unref();
    }
};

} // namespace detail

/* ------------------------------------------------------------------------ */
/* Vars                                                                      */
/* ------------------------------------------------------------------------ */

/**
 * An owned variable: deleted (vf_var_destroy(), no free callback) by its
 * destructor, after every op already pushed on it; or explicitly with
 * remove(). Converts to vf_var, so it goes straight into a var_list.
 * Destructor errors (a var already deleted through its vf_var, an engine
 * shutting down) are ignored. One of them: a var destroyed on a thread
 * that captures a graph on its engine (inside engine_ref::capture's
 * record()) is not deleted, since a capture may not contain a delete
 * (vf_graph_begin()): its variable lives until the engine is destroyed.
 * Keep the vars a capture uses alive past it.
 *
 * A var that names no variable (moved from, released, or
 * default-constructed) tests false, and every use of it (in a push's reads
 * or writes, a wait, remove, version, handle, release) throws
 * varflow::error VF_EINVAL saying which: "varflow::var: used after it was
 * moved from". Assigning a var to it makes it usable again. A removed var
 * tests false too, but still names its deleted variable, so the engine
 * refuses it (VF_ESTALE).
 */
class var
{
  public:
    var() noexcept = default;
    /** Adopt a handle made with vf_var_create(). */
    var(vf_engine *e, vf_var v) noexcept
        : e_(e), v_(v), state_(e != nullptr ? state::owned : state::empty)
    {
    }
    /** Takes `o`'s variable; `o` then names none (moved from). */
    var(var &&o) noexcept
        : e_(std::exchange(o.e_, nullptr)), v_(std::exchange(o.v_, vf_var{})),
          state_(std::exchange(o.state_, state::moved_from))
    {
    }
    /** Deletes this one's variable if it owns one (as the destructor does),
     * then takes `o`'s. */
    var &operator=(var &&o) noexcept
    {
        if (this != &o) {
            reset();
            e_ = std::exchange(o.e_, nullptr);
            v_ = std::exchange(o.v_, vf_var{});
            state_ = std::exchange(o.state_, state::moved_from);
        }
        return *this;
    }
    var(const var &) = delete;
    var &operator=(const var &) = delete;
    ~var()
    {
        reset();
    }

    /** The handle; throws when the var names none (see above). */
    vf_var handle() const
    {
        if (unusable() != nullptr)
            throw_unusable();
        return v_;
    }
    /** handle(): a var goes where a vf_var does. */
    operator vf_var() const
    {
        return handle();
    }
    /** Whether it owns a variable (not empty, moved from, released or
     * removed). */
    explicit operator bool() const noexcept
    {
        return state_ == state::owned;
    }
    /** Writes to it that have run (vf_var_version()). */
    std::uint64_t version() const
    {
        vf_var h = handle();
        std::uint64_t v = 0;
        detail::check(vf_var_version(e_, h, &v));
        return v;
    }
    /** Delete it now (an op after every op pushed on it); the var then
     * tests false. Throws, keeping the handle, when the delete fails. */
    void remove()
    {
        detail::check(vf_var_destroy(e_, handle(), nullptr, nullptr));
        state_ = state::removed;
    }
    /**
     * Delete it, calling free_fn() as the delete op's body: once, after
     * every op already pushed on it. free_fn must not throw. When the
     * delete fails, free_fn is destroyed uncalled and the error thrown.
     */
    template <class F> void remove(F &&free_fn)
    {
        using Fn = std::decay_t<F>;
        static_assert(std::is_invocable_v<Fn &>,
                      "a free callback takes no argument");
        vf_var h = handle();
        detail::stored<Fn> s(std::forward<F>(free_fn));
        detail::check(vf_var_destroy(e_, h, &detail::free_entry<Fn>, s.arg()));
        s.release();
        state_ = state::removed;
    }
    /** Stop owning it: the caller deletes it (or not); the var then names
     * nothing. */
    vf_var release()
    {
        vf_var h = handle();
        e_ = nullptr;
        v_ = vf_var{};
        state_ = state::released;
        return h;
    }

  private:
    friend class engine_ref; /* the std::nothrow waits */
    enum class state : unsigned char {
        empty,      /**< default-constructed */
        owned,      /**< deleted by the destructor */
        removed,    /**< remove() pushed its delete; e_ and v_ kept */
        moved_from, /**< its handle went to another var */
        released    /* its handle went to the caller */
    };
    /* Why handle() throws, or nullptr when it names a variable. */
    const char *unusable() const noexcept
    {
        return state_ == state::owned || state_ == state::removed ? nullptr
               : state_ == state::moved_from
                   ? "varflow::var: used after it was moved from"
               : state_ == state::released
                   ? "varflow::var: used after release() gave its "
                     "handle away"
                   : "varflow::var: empty (default-constructed: it "
                     "names no variable)";
    }
    [[noreturn]] void throw_unusable() const
    {
        throw error(VF_EINVAL, unusable());
    }
    void reset() noexcept
    {
        if (state_ == state::owned)
            vf_var_destroy(e_, v_, nullptr, nullptr);
        e_ = nullptr;
        state_ = state::empty;
    }

    vf_engine *e_ = nullptr;
    vf_var v_{};
    state state_ = state::empty;
};

/* ------------------------------------------------------------------------ */
/* Reusable ops                                                              */
/* ------------------------------------------------------------------------ */

template <class Arg> class reusable_arg_op;

/**
 * An op made once and pushed many times (vf_operator): the var sets are
 * checked once and a push allocates nothing. The callable is allocated
 * once, at make_op, and destroyed after the handle is gone and its last
 * run has finished. Runs of an op that writes no var may run at the same
 * time, so such a callable must be safe to call concurrently. push() on
 * one moved from (or default-constructed) throws varflow::error VF_EINVAL
 * ("varflow::reusable_op: used after it was moved from").
 */
class reusable_op
{
  public:
    reusable_op() noexcept = default;
    /** Takes `o`'s operator; `o` is then moved from. */
    reusable_op(reusable_op &&o) noexcept
        : e_(std::exchange(o.e_, nullptr)), op_(std::exchange(o.op_, nullptr)),
          block_(std::exchange(o.block_, nullptr)),
          moved_from_(std::exchange(o.moved_from_, true))
    {
    }
    /** Deletes this one's operator if it has one (as the destructor does),
     * then takes `o`'s. */
    reusable_op &operator=(reusable_op &&o) noexcept
    {
        if (this != &o) {
            reset();
            e_ = std::exchange(o.e_, nullptr);
            op_ = std::exchange(o.op_, nullptr);
            block_ = std::exchange(o.block_, nullptr);
            moved_from_ = std::exchange(o.moved_from_, true);
        }
        return *this;
    }
    reusable_op(const reusable_op &) = delete;
    reusable_op &operator=(const reusable_op &) = delete;
    ~reusable_op()
    {
        reset();
    }

    /** Push one run (vf_operator_push()). */
    void push(int priority = 0) const
    {
        if (op_ == nullptr)
            throw error(VF_EINVAL, moved_from_
                                       ? "varflow::reusable_op: used after it "
                                         "was moved from"
                                       : "varflow::reusable_op: empty "
                                         "(default-constructed)");
        detail::refuse_capture(e_, "a reusable_op's run");
        block_->ref(); // given back by this run's done callback
        int rc = vf_operator_push(e_, op_, priority);
        if (rc != 0) {
            error err(rc, vf_error_detail());
            block_->unref();
            throw err;
        }
    }
    /** The C operator (NULL when none). */
    vf_operator *get() const noexcept
    {
        return op_;
    }
    /** Whether it has an operator (not moved from or default-constructed).
     */
    explicit operator bool() const noexcept
    {
        return op_ != nullptr;
    }

  private:
    friend class engine_ref;
    template <class Arg> friend class reusable_arg_op;
    [[noreturn]] void throw_unusable() const
    {
        throw error(VF_EINVAL, moved_from_ ? "varflow::reusable_op: used "
                                             "after it was moved from"
                                           : "varflow::reusable_op: empty "
                                             "(default-constructed)");
    }
    reusable_op(vf_engine *e, vf_operator *op, detail::op_block *b) noexcept
        : e_(e), op_(op), block_(b)
    {
    }
    void reset() noexcept
    {
        if (op_ == nullptr)
            return;
        vf_operator_destroy(e_, std::exchange(op_, nullptr));
        std::exchange(block_, nullptr)->unref();
    }

    vf_engine *e_ = nullptr;
    vf_operator *op_ = nullptr;
    detail::op_block *block_ = nullptr;
    bool moved_from_ = false;
};

/**
 * A reusable op whose runs each take an argument (engine_ref::make_op_with):
 * push(arg, priority) is vf_operator_push_arg() with a copy of `arg`. Moves,
 * destruction and errors as reusable_op's.
 */
template <class Arg> class reusable_arg_op
{
  public:
    reusable_arg_op() noexcept = default;

    /** Push one run with its own copy of `arg`. */
    void push(const Arg &arg, int priority = 0) const
    {
        if (op_.op_ == nullptr)
            op_.throw_unusable();
        detail::refuse_capture(op_.e_, "a reusable_arg_op's run");
        detail::arg_run<Arg> r{op_.block_, arg};
        op_.block_->ref(); // given back by this run's done callback
        int rc = vf_operator_push_arg(op_.e_, op_.op_, priority, &r, sizeof r);
        if (rc != 0) {
            error err(rc, vf_error_detail());
            op_.block_->unref();
            throw err;
        }
    }
    /** The C operator (NULL when none). */
    vf_operator *get() const noexcept
    {
        return op_.get();
    }
    /** Whether it has an operator (not moved from or default-constructed).
     */
    explicit operator bool() const noexcept
    {
        return static_cast<bool>(op_);
    }

  private:
    friend class engine_ref;
    explicit reusable_arg_op(reusable_op op) noexcept : op_(std::move(op))
    {
    }

    reusable_op op_;
};

/* ------------------------------------------------------------------------ */
/* Graphs                                                                    */
/* ------------------------------------------------------------------------ */

/**
 * An owned graph (vf_graph: varflow.h, "Graphs"), made by
 * engine_ref::capture: launch() pushes its recorded ops again, as a whole.
 * Destroyed (vf_graph_destroy()) by its destructor, or explicitly with
 * destroy(); launches still running finish first. Moves only. A graph
 * that holds none (moved from, destroyed, default-constructed) tests
 * false, and launch() throws varflow::error VF_EINVAL saying so. One whose
 * engine was destroyed first (which retired the graph) still holds its
 * handle and tests true: launch() then throws VF_EINVAL from the C call,
 * and the destructor does nothing more. Destroy graphs before their
 * engine.
 */
class graph
{
  public:
    graph() noexcept = default;
    /** Take o's graph (o then holds none, and says it was moved from). */
    graph(graph &&o) noexcept
        : e_(o.e_), g_(std::exchange(o.g_, nullptr)),
          moved_from_(std::exchange(o.moved_from_, false))
    {
        o.moved_from_ = true;
    }
    /** Destroy this one's graph (if any) and take o's. */
    graph &operator=(graph &&o) noexcept
    {
        if (this != &o) {
            destroy();
            e_ = o.e_;
            g_ = std::exchange(o.g_, nullptr);
            moved_from_ = false;
            o.moved_from_ = true;
        }
        return *this;
    }
    graph(const graph &) = delete;
    graph &operator=(const graph &) = delete;
    ~graph()
    {
        destroy();
    }

    /** Push the recorded ops again, as a whole (vf_graph_launch()). */
    void launch() const
    {
        detail::check(vf_graph_launch(e_, handle()));
    }
    /** Replay a graph of one device's ops as one device graph, or stop
     * (vf_graph_device_replay(): its launches then call the ops' functions
     * only when it is recorded). Throws VF_ENOTSUP for a graph that does
     * not qualify. */
    void device_replay(bool on = true) const
    {
        detail::check(vf_graph_device_replay(e_, handle(), on));
    }
    /** How many ops it holds (vf_graph_ops()). */
    std::size_t size() const noexcept
    {
        return vf_graph_ops(g_);
    }
    /** The C graph (NULL when none). */
    vf_graph *get() const noexcept
    {
        return g_;
    }
    /** Whether it holds a graph. */
    explicit operator bool() const noexcept
    {
        return g_ != nullptr;
    }
    /** The C graph, or a throw for a moved-from or empty one. */
    vf_graph *handle() const
    {
        if (g_ == nullptr)
            throw error(VF_EINVAL, moved_from_
                                       ? "varflow::graph: used after it was "
                                         "moved from"
                                       : "varflow::graph: empty (destroyed or "
                                         "default-constructed)");
        return g_;
    }
    /** Destroy it now (vf_graph_destroy(); errors ignored, as in the
     * destructor). */
    void destroy() noexcept
    {
        if (g_ != nullptr)
            (void)vf_graph_destroy(e_, std::exchange(g_, nullptr));
    }

  private:
    friend class engine_ref;
    graph(vf_engine *e, vf_graph *g) noexcept : e_(e), g_(g)
    {
    }

    vf_engine *e_ = nullptr;
    vf_graph *g_ = nullptr;
    bool moved_from_ = false;
};

/* ------------------------------------------------------------------------ */
/* Engines                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * A non-owning handle to an engine: every operation of the engine, none of
 * its lifetime. Copy it freely (into an op's lambda, for a nested push).
 * Every operation of one that holds no engine (an engine moved from,
 * released or destroyed; a default engine_ref) throws varflow::error
 * VF_EINVAL saying so (detail::no_engine); the check costs nothing until
 * a call fails.
 */
class engine_ref
{
  public:
    engine_ref() noexcept = default;
    /** A view of the engine `e`. */
    explicit engine_ref(vf_engine *e) noexcept : e_(e)
    {
    }
    /** The C engine (NULL when none). */
    vf_engine *get() const noexcept
    {
        return e_;
    }
    /** Whether it holds an engine. */
    explicit operator bool() const noexcept
    {
        return e_ != nullptr;
    }

    /** A new variable, deleted when the returned var is destroyed. */
    var new_var() const
    {
        vf_var v;
        check(vf_var_create(e_, &v));
        return var(e_, v);
    }

    /**
     * Push an op that reads `reads`, writes `writes` and runs fn() or
     * fn(varflow::run &). fn returns void (success) or int (non-zero fails
     * the op, like a C op); a throw fails the op with its message. fn is
     * moved or copied into the op and destroyed exactly once: after the op
     * ran, failed or was skipped, or before push throws.
     */
    template <class F>
    void push(var_list reads, var_list writes, F &&fn,
              const options &opts = {}) const
    {
        using Fn = std::decay_t<F>;
        vf_op op = opts.to_op(reads, writes);
        if constexpr (detail::fits_copied<Fn> || detail::fits_inline<Fn>) {
            // A device op's stream work runs after its function returned,
            // and may use the callable's captures: it lives in the op.
            if (detail::fits_copied<Fn> || op.device.type != VF_DEVICE_CPU) {
                op.fn = &detail::copied_sync_entry<Fn>;
                push_copied<Fn>(op, std::forward<F>(fn));
                return;
            }
        }
        op.fn = &detail::sync_entry<Fn>;
        push_stored<Fn>(op, std::forward<F>(fn));
    }

    /**
     * Push an async op: fn(varflow::completion) or fn(varflow::run &,
     * varflow::completion) starts the work and returns; the op finishes
     * when the completion is called (from any thread). Runs inline on the
     * thread that dispatches it. Storage and errors as push(), but fn is
     * destroyed once the op finished and fn returned: a completion called
     * before fn returns (by fn, or a thread fn waits for) finishes the op
     * at once, and fn still has its captures.
     */
    template <class F>
    void push_async(var_list reads, var_list writes, F &&fn,
                    const options &opts = {}) const
    {
        using Fn = std::decay_t<F>;
        static_assert(detail::is_async_callable<Fn>,
                      "an async op's callable takes (varflow::completion) "
                      "or (varflow::run &, varflow::completion)");
        vf_op op = opts.to_op(reads, writes);
        if constexpr (detail::fits_copied<Fn> || detail::fits_inline<Fn>) {
            // In the op, even one that fits a pointer: the work it starts
            // may use its captures after it returned.
            op.async_fn = &detail::copied_async_entry<Fn>;
            push_copied<Fn>(op, std::forward<F>(fn));
        } else {
            // Stored beside the op and counted: its completion may come,
            // and the op's done let go of it, before it returns.
            detail::refuse_capture(e_, stored_beside);
            using Block = detail::op_block_of<Fn>;
            std::unique_ptr<Block> b(new Block(std::forward<F>(fn)));
            op.arg = static_cast<detail::op_block *>(b.get());
            op.done = &detail::op_block::done;
            op.async_fn = &Block::async_entry;
            check(vf_engine_push(e_, &op));
            b.release();
        }
    }

    /**
     * Capture the pushes `record()` makes from this thread into a graph
     * (vf_graph_begin() ... vf_graph_end()): they are checked and recorded,
     * not run. Only callables that travel in their op can be recorded (a
     * lambda capturing references or pointers, up to VF_OP_ARG_INLINE
     * bytes, trivially copyable): each launch calls an op's done again, so
     * one stored beside its op, or a reusable op's run, throws VF_EINVAL.
     * If record() throws, the capture ends, its graph is destroyed, and the
     * exception goes on.
     */
    template <class Record> graph capture(Record &&record) const
    {
        check(vf_graph_begin(e_));
        try {
            std::forward<Record>(record)();
        } catch (...) {
            vf_graph *g = nullptr;
            if (vf_graph_end(e_, &g) == 0)
                (void)vf_graph_destroy(e_, g);
            throw;
        }
        vf_graph *g = nullptr;
        check(vf_graph_end(e_, &g));
        return graph(e_, g);
    }

    /** A reusable op running fn like push() does (opts.priority unused:
     * each push gives its own). */
    template <class F>
    reusable_op make_op(var_list reads, var_list writes, F &&fn,
                        const options &opts = {}) const
    {
        using Block = detail::op_block_of<std::decay_t<F>>;
        vf_op def = opts.to_op(reads, writes);
        def.fn = &Block::sync_entry;
        return make_op_from<Block>(def, std::forward<F>(fn));
    }

    /** A reusable async op (the callable as push_async's). */
    template <class F>
    reusable_op make_async_op(var_list reads, var_list writes, F &&fn,
                              const options &opts = {}) const
    {
        using Block = detail::op_block_of<std::decay_t<F>>;
        static_assert(detail::is_async_callable<std::decay_t<F>>,
                      "an async op's callable takes (varflow::completion) "
                      "or (varflow::run &, varflow::completion)");
        vf_op def = opts.to_op(reads, writes);
        def.async_fn = &Block::async_entry;
        return make_op_from<Block>(def, std::forward<F>(fn));
    }

    /**
     * A reusable op whose runs each take an argument of their own:
     * fn(Arg &) or fn(varflow::run &, Arg &), returning void or int as
     * push()'s; op.push(arg, priority) copies `arg` into the run
     * (vf_operator_push_arg()), so ops that differ only in an index share
     * one var set checked once. Arg must be trivially copyable; up to
     * VF_OP_ARG_INLINE bytes (less a pointer) a push allocates nothing.
     */
    template <class Arg, class F>
    reusable_arg_op<Arg> make_op_with(var_list reads, var_list writes, F &&fn,
                                      const options &opts = {}) const
    {
        static_assert(std::is_trivially_copyable_v<Arg>,
                      "a run's argument is copied as bytes: it must be "
                      "trivially copyable");
        static_assert(sizeof(detail::arg_run<Arg>) <= VF_MAX_OP_ARG_SIZE &&
                          alignof(Arg) <= alignof(std::max_align_t),
                      "a run's argument is at most VF_MAX_OP_ARG_SIZE bytes "
                      "(less a pointer), aligned at most as max_align_t");
        using Block = detail::arg_block_of<std::decay_t<F>, Arg>;
        vf_op def = opts.to_op(reads, writes);
        def.fn = &Block::sync_entry;
        std::unique_ptr<Block> b(new Block(std::forward<F>(fn)));
        def.arg = static_cast<detail::op_block *>(b.get()); // unused: each
        def.done = &Block::done;                            // run has its own
        vf_operator *op = nullptr;
        check(vf_operator_create(e_, &def, &op));
        return reusable_arg_op<Arg>(reusable_op(e_, op, b.release()));
    }

    /**
     * The variable of an address (vf_var_of()): made on first use, owned by
     * the engine (it lives until the engine is destroyed, or until
     * vf_var_destroy() on it); the same handle for the same address, from
     * any thread. A plain vf_var, so it goes straight into a var_list:
     * eng.push({eng.var_of(&a)}, {eng.var_of(&b)}, fn).
     */
    vf_var var_of(const void *addr) const
    {
        vf_var v;
        check(vf_var_of(e_, addr, &v));
        return v;
    }

    /** Wait for every op pushed before that writes v. Throws op_failed when
     * an op's failure reached v (clearing it), error for anything else. */
    void wait(vf_var v) const
    {
        vf_error err{};
        throw_wait(vf_var_wait(e_, v, &err), err);
    }
    /** The same, returning what happened instead of throwing. */
    wait_result wait(vf_var v, const std::nothrow_t &) const noexcept
    {
        vf_error err{};
        return wait_result_of(vf_var_wait(e_, v, &err), err);
    }
    /** The same for a varflow::var: one that names no variable (moved from,
     * released, default-constructed) is reported as VF_EINVAL in the
     * result, as every error of a std::nothrow wait is, not thrown (the
     * conversion to vf_var would throw before the call). */
    wait_result wait(const var &v, const std::nothrow_t &nt) const noexcept
    {
        if (const char *why = v.unusable())
            return refused(why);
        return wait(v.v_, nt);
    }
    /** Wait for every pushed op (vf_engine_wait_all()); errors as wait(). */
    void wait_all() const
    {
        vf_error err{};
        throw_wait(vf_engine_wait_all(e_, &err), err);
    }
    /** The same, returning what happened instead of throwing. */
    wait_result wait_all(const std::nothrow_t &) const noexcept
    {
        vf_error err{};
        return wait_result_of(vf_engine_wait_all(e_, &err), err);
    }
    /** @name Timed waits
     * @{ */
    /** wait() and wait_all() giving up after `timeout` (vf_var_wait_timed(),
     * vf_engine_wait_all_timed(); rounded up to whole milliseconds, any
     * duration: one too long for int64_t milliseconds, hours::max() or an
     * infinity, waits as long as INT64_MAX ms, and a negative one or NaN,
     * a deadline already past, only looks, as std::chrono's waits do;
     * wait() and wait_all() never give up): they throw
     * varflow::error VF_ETIMEDOUT, whose detail names the async ops nobody
     * completed, or return it with std::nothrow. A wait that timed out
     * reports and clears no failure. */
    template <class Rep, class Period>
    void wait_for(vf_var v, std::chrono::duration<Rep, Period> timeout) const
    {
        vf_error err{};
        throw_wait(vf_var_wait_timed(e_, v, detail::timeout_ms(timeout), &err),
                   err);
    }
    template <class Rep, class Period>
    wait_result wait_for(vf_var v, std::chrono::duration<Rep, Period> timeout,
                         const std::nothrow_t &) const noexcept
    {
        vf_error err{};
        return wait_result_of(
            vf_var_wait_timed(e_, v, detail::timeout_ms(timeout), &err), err);
    }
    template <class Rep, class Period>
    wait_result wait_for(const var &v,
                         std::chrono::duration<Rep, Period> timeout,
                         const std::nothrow_t &nt) const noexcept
    {
        if (const char *why = v.unusable())
            return refused(why);
        return wait_for(v.v_, timeout, nt);
    }
    template <class Rep, class Period>
    void wait_all_for(std::chrono::duration<Rep, Period> timeout) const
    {
        vf_error err{};
        throw_wait(
            vf_engine_wait_all_timed(e_, detail::timeout_ms(timeout), &err),
            err);
    }
    template <class Rep, class Period>
    wait_result wait_all_for(std::chrono::duration<Rep, Period> timeout,
                             const std::nothrow_t &) const noexcept
    {
        vf_error err{};
        return wait_result_of(
            vf_engine_wait_all_timed(e_, detail::timeout_ms(timeout), &err),
            err);
    }
    /** @} */

    /** vf_engine_stop(): complete every pushed op and join the workers. */
    void stop() const
    {
        check(vf_engine_stop(e_));
    }
    /** vf_engine_start(): start a stopped engine again. */
    void start() const
    {
        check(vf_engine_start(e_));
    }
    /** vf_engine_shutdown(): the shutdown notice. */
    void shutdown() const
    {
        check(vf_engine_shutdown(e_));
    }
    /** The kind of engine running (vf_engine_type_of()). */
    vf_engine_type kind() const
    {
        if (e_ == nullptr)
            throw error(VF_EINVAL, detail::no_engine);
        return vf_engine_type_of(e_);
    }
    /** Worker threads in total (vf_engine_num_workers()). */
    int num_workers() const
    {
        if (e_ == nullptr)
            throw error(VF_EINVAL, detail::no_engine);
        return vf_engine_num_workers(e_);
    }
    /** A snapshot of the engine's counters (vf_engine_stats()). */
    vf_stats stats() const
    {
        vf_stats s{};
        check(vf_engine_stats(e_, &s));
        return s;
    }
    /** Bulk execution for the calling thread (vf_bulk_set_size()): returns the
     * previous size. */
    int set_bulk_size(int size) const
    {
        int previous = vf_bulk_set_size(e_, size);
        check(previous < 0 ? previous : 0);
        return previous;
    }
    /** Push the calling thread's open batch now (vf_bulk_flush()). */
    void bulk_flush() const
    {
        check(vf_bulk_flush(e_));
    }

  protected:
    vf_engine *e_ = nullptr; /**< the engine (NULL when none) */

    /** Throw what the call that returned rc != 0 failed with; for a handle
     * holding no engine, that it holds none (the C call said only "not an
     * engine"). */
    void check(int rc) const
    {
        if (rc == 0)
            return;
        if (e_ == nullptr)
            throw error(VF_EINVAL, detail::no_engine);
        detail::throw_error(rc);
    }

  private:
    static constexpr const char *stored_beside =
        "a callable stored beside its op (not trivially copyable, or over "
        "VF_OP_ARG_INLINE bytes)";

    /** Push `op`, whose entry (fn or async_fn) runs a trivially copyable
     * callable Fn of at most VF_OP_ARG_INLINE bytes in place, with fn as
     * its argument, copied into the op by the engine (no allocation, no
     * done). */
    template <class Fn, class F> void push_copied(vf_op &op, F &&fn) const
    {
        Fn f(std::forward<F>(fn)); // the engine copies it into the op
        op.arg = static_cast<void *>(&f);
        op.arg_size = sizeof(Fn);
        check(vf_engine_push(e_, &op));
    }

    /** Push `op`, whose entry runs a callable Fn stored as
     * detail::stored<Fn>: in the pointer's bytes when it fits (no done),
     * else beside the op and freed by its done. */
    template <class Fn, class F> void push_stored(vf_op &op, F &&fn) const
    {
        if constexpr (!detail::fits_inline<Fn>)
            detail::refuse_capture(e_, stored_beside);
        detail::stored<Fn> s(std::forward<F>(fn));
        op.arg = s.arg();
        op.done = detail::stored<Fn>::done;
        check(vf_engine_push(e_, &op));
        s.release();
    }

    template <class Block, class F>
    reusable_op make_op_from(vf_op &def, F &&fn) const
    {
        std::unique_ptr<Block> b(new Block(std::forward<F>(fn)));
        def.arg = static_cast<detail::op_block *>(b.get());
        def.done = &detail::op_block::done;
        vf_operator *op = nullptr;
        check(vf_operator_create(e_, &def, &op));
        return reusable_op(e_, op, b.release());
    }
    void throw_wait(int rc, const vf_error &err) const
    {
        if (rc == VF_EOPFAILED)
            throw op_failed(err);
        check(rc);
    }
    /* A std::nothrow wait refused before the call: VF_EINVAL, `why`. */
    static wait_result refused(const char *why) noexcept
    {
        vf_error err{};
        err.code = VF_EINVAL;
        std::snprintf(err.message, sizeof err.message, "%s", why);
        return wait_result(VF_EINVAL, err);
    }
    wait_result wait_result_of(int rc, vf_error &err) const noexcept
    {
        if (rc != 0 && rc != VF_EOPFAILED) {
            err = vf_error{};
            err.code = rc;
            std::snprintf(err.message, sizeof err.message, "%s",
                          e_ != nullptr ? vf_error_detail()
                                        : detail::no_engine);
        }
        return wait_result(rc, err);
    }
};

/**
 * An engine: created by the constructor (config as vf_engine_create(): zero
 * fields are defaults, from VF_* environment variables when set), destroyed
 * by the destructor after every pushed op has completed (errors not yet
 * reported are dropped, as vf_engine_destroy() does). Movable, not copyable.
 * Destroy an engine only after every var and reusable_op made from it.
 */
class engine : public engine_ref
{
  public:
    /** Create an engine (vf_engine_create()); throws what it returns. */
    explicit engine(const vf_config &config = vf_config{})
    {
        detail::check(vf_engine_create(&e_, &config));
    }
    /** Adopt an engine made with vf_engine_create(). */
    explicit engine(vf_engine *e) noexcept : engine_ref(e)
    {
    }
    /** Takes `o`'s engine; `o` then holds none. */
    engine(engine &&o) noexcept : engine_ref(std::exchange(o.e_, nullptr))
    {
    }
    /** Destroys this one's engine if it has one (as the destructor does),
     * then takes `o`'s. */
    engine &operator=(engine &&o) noexcept
    {
        if (this != &o) {
            drop();
            e_ = std::exchange(o.e_, nullptr);
        }
        return *this;
    }
    engine(const engine &) = delete;
    engine &operator=(const engine &) = delete;
    ~engine()
    {
        drop();
    }

    /** Destroy it now, throwing what vf_engine_destroy() returns; on an
     * engine moved from, released or destroyed, VF_EINVAL as every call.
     * Only a destroy refused from the engine's own code (VF_EDEADLK) leaves
     * the engine this one's; after any other code it holds none, since the
     * engine is gone (VF_ESYSTEM: freed, its profile not written) or going
     * (VF_ESHUTDOWN: another destroy frees it). */
    void destroy()
    {
        if (e_ == nullptr)
            throw error(VF_EINVAL, detail::no_engine);
        int rc = vf_engine_destroy(e_);
        if (rc != VF_EDEADLK)
            e_ = nullptr;
        detail::check(rc);
    }
    /** Stop owning it: the caller destroys it. */
    vf_engine *release() noexcept
    {
        return std::exchange(e_, nullptr);
    }

  private:
    /* The destructor's destroy (and a move assignment's): its errors are
     * dropped, but one from the engine's own code (an op's last reference
     * to the engine) cannot destroy it, which is left running with its
     * threads: said on stderr, where it was silent (found trying the C++
     * API as a user). */
    void drop() noexcept
    {
        if (e_ != nullptr && vf_engine_destroy(e_) == VF_EDEADLK)
            std::fprintf(stderr,
                         "varflow: ~engine from the engine's own code: it is "
                         "left running (%s)\n",
                         vf_error_detail());
    }
};

inline engine_ref run::engine() const noexcept
{
    return engine_ref(vf_run_engine(r_));
}

/** @} */

} // namespace varflow

#endif /* C++17 and exceptions */
#endif /* VARFLOW_HPP */
