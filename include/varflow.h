/**
 * @file varflow.h
 * @brief varflow: a dependency engine in C11.
 *
 * A program pushes operations in order; each names the variables it reads
 * and the variables it writes. varflow runs every operation as soon as the
 * operations it depends on have finished, on a pool of worker threads, and
 * the result is exactly what the serial program would have computed.
 *
 * Conventions of this header:
 * - One naming rule: `vf_<object>_<verb>`, the object a call acts on, then
 *   what it does: vf_engine_push(), vf_var_wait(), vf_engine_wait_all(),
 *   vf_bulk_flush(), vf_run_set_error(), vf_error_set_detail(). A call that
 *   only answers a question is named by its answer: vf_engine_stats(),
 *   vf_var_version(), vf_run_worker(), vf_engine_type_of(). One lifetime pair:
 *   what a call gives you to own (engine, var, operator, profile snapshot,
 *   summary, path) ends with its type's `_destroy`; a handle is made by
 *   `_create`, or by the query that returns it (vf_profile_take()). Types are
 *   `vf_<noun>`, constants `VF_<NOUN>`; internal names have two underscores
 *   (`vf__*`) and are in no installed header. Every rename since 0.1.0 is
 *   listed in CHANGELOG.md.
 * - Every handle is opaque. Variables are small value handles (vf_var) that
 *   the engine can check: a deleted variable or one from another engine is
 *   reported as an error, never dereferenced. (A handle names its engine
 *   by a 16-bit tag, which goes round: one kept past its engine's destroy
 *   and 65,535 engine creations after may name a variable of a new
 *   engine.)
 * - Every call that can fail returns 0 or a negative `VF_E*` code;
 *   vf_error_string() names it and vf_error_detail() says, for the calling
 *   thread, what exactly was wrong with the last failing call.
 * - Configuration structs are read with designated initializers: a zero field
 *   means "default" (taken from the environment when a `VF_*` variable is
 *   set).
 * - C++ includes this header as it is (varflow.hpp is the C++ layer over
 *   it): vf_config and vf_op fields start at zero there, so braces that
 *   give some of them compile without missing-initializer warnings, and
 *   VF_VARS works, with a shorter life (see VF_VARS and the end of this
 *   file).
 * - User code (op functions, callbacks) never runs while the engine holds one
 *   of its locks.
 * - Calls nest across engines (an op one engine runs inside a call on
 *   another, as the naive engine runs ops inside its push, calling back into
 *   the first, and so on) to a depth of 32 calls on other engines; a call
 *   deeper than that returns VF_ENOTSUP.
 * - pthread_cancel() of a thread inside a call that may block (a wait, a
 *   push at the in-flight bound, stop, start, destroy, a fork's drain)
 *   acts once the call has returned, at the thread's next cancellation
 *   point: the call ends as it would have, and the engine goes on. Op code
 *   a call runs on the calling thread is the program's: inside a wait it
 *   runs with cancellation held off, inside a push (the naive engine's,
 *   run_at_push) with the thread's own state, and a thread cancelled inside
 *   an op leaves it unfinished, what waits for it waiting for ever.
 * - What varflow says on stderr while a call waits (destroy, stop, a fork,
 *   a push at the bound) never blocks it: a report stderr cannot take at
 *   once (a pipe nobody reads, full) is dropped.
 */
#ifndef VARFLOW_H
#define VARFLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The major version of this header (0.x: the API may still change between
 * minor versions; CHANGELOG.md lists every change). */
#define VF_VERSION_MAJOR 0
/** The minor version of this header. */
#define VF_VERSION_MINOR 1
/** The patch version of this header. */
#define VF_VERSION_PATCH 0

/** Marks the symbols the shared library exports (it hides everything else).
 */
#if defined(VF_BUILDING) && (defined(__GNUC__) || defined(__clang__))
#define VF_API __attribute__((visibility("default")))
#else
#define VF_API
#endif

/** Lets GCC and Clang check a printf-like function's format against its
 * arguments (`fmt`: the format's position, `args`: the first argument's);
 * nothing with other compilers. */
#if defined(__GNUC__) || defined(__clang__)
#define VF_PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define VF_PRINTF_LIKE(fmt, args)
#endif

/** After a field of vf_config and vf_op: in C++14 and later a default
 * member initializer, zero, so `vf_config c{VF_ENGINE_POOLED, 2}` and
 * C++20's `vf_op{.fn = f, .name = "f"}` leave the rest zero without
 * -Wmissing-field-initializers warnings (the structs stay aggregates,
 * standard-layout and trivially copyable); nothing in C. */
#if defined(__cplusplus) && __cplusplus >= 201402L
#define VF_ZERO_ = {}
#else
#define VF_ZERO_
#endif

/* C++11 or later: the C++ helpers at the end of this file (VF_VARS,
 * vf_var_list_of, the vf_op overloads) need std::initializer_list; C++98
 * gets the C API without them. MSVC says its language in _MSVC_LANG. */
#if defined(__cplusplus) &&                                                    \
    (__cplusplus >= 201103L || (defined(_MSVC_LANG) && _MSVC_LANG >= 201103L))
#define VF_CXX11_ 1
#endif

/* ------------------------------------------------------------------------ */
/* Error codes                                                               */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup errors Errors
 * @brief Error codes, and what exactly went wrong in the last failing call.
 *
 * Every call that can fail returns 0 or a negative code of vf_errno;
 * vf_error_string() and vf_error_name() name a code, and vf_error_detail()
 * says, for the calling thread, what was wrong with the last failing call.
 * @{
 */

/** The error codes as a list of X(name, value, message), from which
 * vf_errno, vf_error_string() and vf_error_name() are made. Values are
 * stable; new codes are only appended. */
#define VF_ERRNO_MAP(X)                                                        \
    X(EINVAL, -1, "invalid argument")                                          \
    X(ENOMEM, -2, "out of memory")                                             \
    X(ESTALE, -3, "variable was deleted")                                      \
    X(EXDEV, -4, "variable or operator belongs to another engine")             \
    X(ESHUTDOWN, -5, "engine is shutting down")                                \
    X(EDEADLK, -6, "wait can never finish (it would deadlock)")                \
    X(EALREADY, -7, "async completion was already called")                     \
    X(EOPFAILED, -8, "an operation failed")                                    \
    X(ENODEV, -9, "device is not available")                                   \
    X(ENOTSUP, -10, "operation not supported by this engine")                  \
    X(EAGAIN, -11, "resource temporarily unavailable")                         \
    X(ESKIPPED, -12, "operation was skipped because an input had failed")      \
    X(ESYSTEM, -13, "system call failed")                                      \
    X(EDEVICE, -14, "device error")                                            \
    X(ESTOPPED, -15, "engine is stopped")                                      \
    X(ETIMEDOUT, -16, "wait timed out")

/** The codes varflow's calls return, negated: `VF_EINVAL` is -1 (the
 * values and messages are VF_ERRNO_MAP's). */
typedef enum vf_errno {
#define VF_ERRNO_ENUM_(name, value, message) VF_##name = (value),
    VF_ERRNO_MAP(VF_ERRNO_ENUM_)
#undef VF_ERRNO_ENUM_
} vf_errno;
/** @var VF_EINVAL
 * Invalid argument. */
/** @var VF_ENOMEM
 * Out of memory. */
/** @var VF_ESTALE
 * Variable was deleted. */
/** @var VF_EXDEV
 * Variable or operator belongs to another engine. */
/** @var VF_ESHUTDOWN
 * Engine is shutting down. */
/** @var VF_EDEADLK
 * Wait can never finish (it would deadlock). */
/** @var VF_EALREADY
 * Async completion was already called. */
/** @var VF_EOPFAILED
 * An operation failed. */
/** @var VF_ENODEV
 * Device is not available. */
/** @var VF_ENOTSUP
 * Operation not supported by this engine. */
/** @var VF_EAGAIN
 * Resource temporarily unavailable. */
/** @var VF_ESKIPPED
 * Operation was skipped because an input had failed (a `done` callback's
 * status; a wait's, when an op it waited for was skipped for a later op's
 * failure: vf_var_wait()). */
/** @var VF_ESYSTEM
 * System call failed. */
/** @var VF_EDEVICE
 * Device error. */
/** @var VF_ESTOPPED
 * Engine is stopped. */
/** @var VF_ETIMEDOUT
 * Wait timed out. */

/** Human-readable message for a `VF_E*` code (or "unknown error"). Never NULL.
 */
VF_API const char *vf_error_string(int code);

/** The code's symbolic name, "VF_EINVAL" for example ("0" for 0,
 * "VF_UNKNOWN" for a code that is none of vf_errno's). Never NULL. */
VF_API const char *vf_error_name(int code);

/**
 * Detail of the last call that failed on the calling thread, such as
 * "vf_engine_push: reads[1] (id 0x3000002000005) is not a variable
 * handle". Empty string when no call has failed on this thread. Valid until
 * the next failing call on this thread.
 */
VF_API const char *vf_error_detail(void);

/**
 * For libraries over varflow (libvarflow-mpi, bindings): set the calling
 * thread's detail, so one vf_error_detail() serves the whole stack; an
 * argument may be vf_error_detail() itself, to prefix it. Returns `code`.
 */
VF_API int vf_error_set_detail(int code, const char *fmt, ...)
    VF_PRINTF_LIKE(2, 3);

/**
 * What an operation's failure left behind. vf_var_wait() and
 * vf_engine_wait_all() fill it when
 * they return VF_EOPFAILED: `code` is what the failing op returned (sync) or
 * passed to vf_completion_finish() (async), `op_name` names the op that failed
 * first in the chain, `message` is what it set with vf_run_set_error() /
 * vf_completion_finish().
 */
typedef struct vf_error {
    int code;          /**< what the failing op returned or passed */
    char op_name[64];  /**< the name of the op that failed first (a longer
                            one cut between UTF-8 characters, as are the
                            names that details quote; unnamed: "op
                            #" and its place in push order; an op pushed
                            from inside an op takes its place when its
                            parent runs, so its number, and the later
                            ones', may differ between engines and from
                            a launch's: name the ops whose failures you
                            tell apart) */
    char message[256]; /**< what it said ("" when nothing; a longer one
                            keeps its beginning and its end, " [...] "
                            between: where a failure's message quotes the
                            message of the one that caused it, the end
                            names the cause; quote this, not
                            vf_error_detail(), which keeps its beginning
                            only) */
} vf_error;

/** @} */

/* ------------------------------------------------------------------------ */
/* Engine                                                                    */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup engine Engine
 * @brief Create, configure, stop and destroy an engine; its counters.
 *
 * An engine runs the ops pushed to it on its worker threads. There is no
 * global engine: a process may run several, each with its own threads.
 * @{
 */

/** An engine: opaque, made by vf_engine_create(), freed by vf_engine_destroy().
 */
typedef struct vf_engine vf_engine;

/** The kinds of engine (vf_config.type). */
typedef enum vf_engine_type {
    VF_ENGINE_INVALID = -1, /**< what vf_engine_type_of() says of a non-engine;
                                 refused as config.type */
    VF_ENGINE_DEFAULT = 0,  /**< VF_ENGINE_TYPE, else VF_ENGINE_PERDEVICE */
    VF_ENGINE_NAIVE,        /**< runs each op inside push (for debugging) */
    VF_ENGINE_POOLED,       /**< one shared pool of workers */
    VF_ENGINE_PERDEVICE     /**< a pool per device and per kind of work */
} vf_engine_type;

/**
 * Engine configuration. Zero means default; a default is taken from the
 * environment variable named beside the field when it is set (an empty one
 * counts as unset), otherwise from the value given, unless `ignore_env`
 * says not to read the environment at all. The struct always wins over the
 * environment where it sets a field. A count from the environment must be
 * decimal digits only (no sign, space, suffix or base prefix) within the
 * field's range, a flag 0 or 1, an engine type one of the names beside `type`
 * exactly (lower case: "POOLED" is refused); vf_engine_create() refuses
 * anything else (VF_EINVAL, the detail naming the variable and its value).
 */
typedef struct vf_config {
    vf_engine_type type VF_ZERO_;      /**< VF_ENGINE_TYPE=naive|pooled|
                                            perdevice */
    int cpu_workers VF_ZERO_;          /**< VF_CPU_WORKER_NTHREADS, else online
                                            cores */
    int cpu_priority_workers VF_ZERO_; /**< VF_CPU_PRIORITY_NTHREADS, else
                                            min(4, cores) (per-device engine
                                            only) */
    int max_inflight VF_ZERO_;         /**< VF_MAX_INFLIGHT, else unlimited:
                                            most ops pushed and not finished; a
                                            push beyond it waits for room (see
                                            vf_engine_push(): some go over) */
    const char *profile_path VF_ZERO_; /**< VF_PROFILE: record from creation and
                                            write the profile here at destroy
                                            (format by extension, see
                                            vf_profile_write(); "-" is standard
                                            output). Checked at create: "", a
                                            directory, or a file that could not
                                            be written (its directory missing or
                                            not writable: a new file is made
                                            there and removed to find out) is
                                            refused (VF_EINVAL). A relative
                                            path names a file in the working
                                            directory of the create, where
                                            destroy writes it after a chdir
                                            too (refused where the two are
                                            longer than PATH_MAX together).
                                            VF_PROFILE
                                            names it for every engine: each
                                            destroy replaces the file whole,
                                            the last one stays ("-": each
                                            whole, in turn); a write that fails
                                            there is destroy's VF_ESYSTEM */
    int profile_max_records VF_ZERO_;  /**< VF_PROFILE_MAX_RECORDS, else
                                            1048576: ops recorded per profile,
                                            the first pushed (whenever they
                                            finish); later ones are counted as
                                            dropped */
    bool engine_info VF_ZERO_;         /**< VF_ENGINE_INFO=1: log to stderr when
                                            ops touching a waited-on var run and
                                            finish */
    /** @name Devices
     * Devices (VF_DEVICE_CUDA, VF_DEVICE_EMULATED): each device gets its
     * pools on first use, every worker owning a stream of its own.
     * @{ */
    int gpu_workers VF_ZERO_;          /**< VF_GPU_WORKER_NTHREADS, else 2:
                                            compute workers per device */
    int gpu_copy_workers VF_ZERO_;     /**< VF_GPU_COPY_NTHREADS, else 2:
                                            workers per device for
                                            VF_PROP_COPY_TO/FROM_DEVICE */
    int gpu_priority_workers VF_ZERO_; /**< VF_GPU_PRIORITY_NTHREADS, else 2:
                                            workers per device for
                                            VF_PROP_DEVICE_PRIORITIZED */
    bool device_sync VF_ZERO_;         /**< VF_DEVICE_SYNC=1: the host waits for
                                            each device op's work before its
                                            vars are released (MXNet 1.x),
                                            instead of ordering the streams with
                                            events */
    int emulated_latency_us VF_ZERO_;  /**< VF_EMULATED_LATENCY_US, else 0:
                                            every piece of work on an emulated
                                            stream takes at least this long,
                                            in microseconds, at most 10000000
                                            (10 s) */
    int emulated_mb_per_s VF_ZERO_;    /**< VF_EMULATED_MB_PER_S, else (or 0
                                            there) unlimited: copy bandwidth
                                            of an emulated stream (bytes given
                                            to vf_run_submit()), in MB/s, at
                                            most 1000000000 */
    /** @} */
    int fork_child_workers VF_ZERO_;   /**< VF_FORK_CHILD_NTHREADS, else 1:
                                            workers per CPU pool of the engine
                                            in a forked child; each device
                                            pool gets one worker there (with
                                            a new emulated stream; a CUDA
                                            device cannot be used after fork:
                                            its ops fail with VF_ENODEV) */
    int bulk_size VF_ZERO_;            /**< VF_BULK_SIZE, else 0 (off): the bulk
                                            size each pushing thread starts with
                                            (see vf_bulk_set_size()); at most
                                            4096 */
    bool help_on_wait VF_ZERO_;        /**< VF_HELP_ON_WAIT=1: a thread in
                                            vf_engine_wait_all() runs queued CPU
                                            ops itself while there are any,
                                            instead of sleeping (as OpenMP's and
                                            TBB's waiting threads do); such an
                                            op sees vf_run_worker() -1 (not
                                            vf_engine_wait_all_timed() on an
                                            engine with devices: vf_var_wait_
                                            timed()). Off by default: with it a
                                            pool of n workers may run n + 1 ops
                                            at once */
    int worker_stack_kib VF_ZERO_;     /**< VF_WORKER_STACK_KIB, else the
                                            system's default for a thread
                                            (RLIMIT_STACK: 8 MiB on most Linux;
                                            128 KiB when it is less): each
                                            worker's stack, in KiB, at least
                                            128, at most 1 GiB. Besides
                                            the program's own frames it bounds
                                            how deep a worker waiting inside an
                                            op stacks other ops above the wait
                                            (see vf_var_wait()) */
    int idle_spin_us VF_ZERO_;         /**< VF_IDLE_SPIN_US, else 50: how long,
                                            in microseconds (at most 100000),
                                            an idle worker keeps looking for
                                            work before it sleeps (as
                                            OMP_WAIT_POLICY / KMP_BLOCKTIME),
                                            so the next op of a chain of
                                            dependent steps does not pay a
                                            wake-up; -1 (VF_IDLE_SPIN_US=0):
                                            not at all. A worker spins only
                                            while a thread of the program
                                            sleeps in one of the engine's
                                            waits (a pushing thread does
                                            better with workers that sleep
                                            and catch up in bursts) and the
                                            engine's threads that are not
                                            asleep fit the CPUs the process
                                            may run on: it never takes a core
                                            a thread with work needs */
    const char *cpu_affinity VF_ZERO_; /**< VF_CPU_AFFINITY, else "none":
                                          where workers run (as
                                          OMP_PROC_BIND / OMP_PLACES).
                                          "none": wherever the system puts
                                          them; "cores": worker i on the
                                          i-th CPU the process may run on;
                                          a list such as "0,2,4-7": worker
                                          i on its i-th CPU. Every pool's
                                          workers count, in the order of
                                          vf_run_worker(), wrapping round;
                                          spare threads and the program's
                                          own are not pinned. Off by
                                          default: on a shared machine a
                                          pinned worker cannot move off a
                                          busy core */
    bool run_at_push VF_ZERO_;         /**< VF_RUN_AT_PUSH=1: a push from
                                            outside the engine's ops and
                                            threads may run ops on the
                                            pushing thread (vf_run_worker()
                                            -1, no engine lock held), as
                                            OpenMP runtimes run tasks at
                                            their creation: its own op, sync
                                            and ready at its push, when the
                                            CPU pool is of one worker and
                                            holds nothing to run (libomp's
                                            team of one), or when the worker
                                            it would go to already holds 64
                                            ops, none ranked above it (the
                                            pusher is ahead: libgomp's rule);
                                            and queued ops rather than sleep
                                            at the in-flight bound (not
                                            while bulk is in use). Off by
                                            default: a push may then return
                                            only once an op has run, and an
                                            op that waits for something its
                                            pusher does after the push never
                                            ends */
    bool ignore_env VF_ZERO_;          /**< true: no VF_* variable is read
                                            for this engine; every field left
                                            0 takes the default given beside
                                            it. For code whose ops rely on a
                                            setting (run_at_push off, no
                                            in-flight bound, no profile):
                                            a field of 0 cannot say "off"
                                            against VF_RUN_AT_PUSH=1 or
                                            VF_MAX_INFLIGHT=1 */
} vf_config;

/**
 * Create an engine. `config` may be NULL (all defaults). Starts the worker
 * threads. Returns VF_EINVAL for a bad field or environment value (the detail
 * names it), VF_ENOMEM, or VF_ESYSTEM when a thread cannot be started or
 * the process has no thread-specific data key left for the one varflow
 * takes (pthread_key_create; a process has 1024).
 * Loaded in a plugin (dlopen()): destroy every engine before dlclose();
 * the library then gives its key back, so the plugin may be loaded again
 * any number of times (each thread that called it keeps a few hundred
 * bytes of it at each load: its call slot and cached blocks, about 430
 * bytes a load for a thread that made an engine). Its engines' threads run
 * its code: one left alive when it is unloaded crashes the process.
 */
VF_API int vf_engine_create(vf_engine **out, const vf_config *config);

/**
 * Complete every pushed op (including ops those ops push), then stop the
 * workers and free the engine, with the operators (vf_operator) and vars
 * the program did not destroy (VF_ENGINE_INFO=1 logs how many on stderr).
 * Pushes, var creates and deletes, stop and start from outside the
 * engine's ops (a `done` callback is outside: its op has finished; in C++,
 * so is a callable's destructor run by it) fail with VF_ESHUTDOWN once
 * destroy has begun; every other
 * call racing it returns as usual (a call that begins once destroy is
 * freeing the engine, with nothing left pending, gets VF_EINVAL as after
 * destroy); destroy returns after the last of them has returned. Must not be
 * called from the engine's own code: one of its ops, a done callback, a worker,
 * or from inside another call on the engine (VF_EDEADLK). A stopped engine is
 * started first. Errors not yet reported are dropped. A second destroy racing
 * the first gets VF_ESHUTDOWN. A profile to write at destroy
 * (vf_config.profile_path, VF_PROFILE) that cannot be written then (its
 * directory removed since the create, the disk full, no memory to take
 * it) is VF_ESYSTEM, whatever the cause, its
 * detail (and a line on stderr) saying why: the engine is destroyed all
 * the same.
 *
 * After it returned, the handle is dead: every call that takes it (a
 * second destroy included) returns VF_EINVAL, "not an engine (NULL or
 * destroyed)" (vf_engine_type_of(): VF_ENGINE_INVALID, vf_engine_num_workers():
 * 0), and never reads the freed engine; until a new engine happens to get
 * the same address, which the handle then names.
 *
 * An async op whose completion never comes makes destroy wait for ever:
 * after 2 s, and every 10 s while it waits, destroy names on stderr the
 * async ops started and never completed (name, place in push order, age),
 * and the ops the engine's threads run (place in push order and worker,
 * and for at least how long once an earlier look saw it running): a sync
 * op that never returns, say. A var's delete, a wait's marker and a
 * fused batch of bulk ops are not named.
 *
 * A fork() while another thread destroys the engine leaves it dead in
 * the child, without that thread: every call on it there that can fail
 * returns VF_ESHUTDOWN (VF_EINVAL once the destroy unlisted it); it is
 * never freed there, and the destroy goes on in the parent.
 */
VF_API int vf_engine_destroy(vf_engine *e);

/**
 * vf_engine_destroy() giving up after `timeout_ms` milliseconds (negative:
 * never; 0: only if nothing is pending or in a call now) with
 * VF_ETIMEDOUT, whose detail names the async ops started and never
 * completed and the ops its threads run (vf_var_wait_timed()). The engine is
 * then usable as before the call (a stopped engine has been started, unless
 * another thread's vf_engine_stop() or vf_engine_start() was under way), and
 * may be destroyed again; calls other threads made meanwhile got what they get
 * during a destroy. The naive engine runs a stopped engine's held ops inside
 * the start (on the calling thread, as it runs every op), so the timeout cannot
 * cut one of them short: it counts from when they have run.
 */
VF_API int vf_engine_destroy_timed(vf_engine *e, int64_t timeout_ms);

/** @name Stop and start
 * @{ */
/**
 * Stop: complete every pushed op (and the ops they push), then join every
 * worker thread (CPU and device pools); the engine then runs no thread.
 * Pushes while stopped are accepted and held, in order, until
 * vf_engine_start(), which starts the threads again and runs them; but
 * while the stop drains, a push from a service thread
 * (vf_thread_set_service()) goes through when its op names no variable
 * or nothing is held yet, and the stop waits for it too: an async op that
 * the program completes by pushing an op (one that calls
 * vf_completion_finish()) must have that op pushed from a service thread,
 * or the stop waits for ever. A stop (and a fork's drain) that waits names
 * on stderr the async ops it waits for, after 2 s and every 10 s, as
 * destroy does: a fork from the thread that would complete one of them
 * never returns. While ops
 * are held, vf_var_wait() and vf_engine_wait_all() return VF_ESTOPPED at once
 * (they could never finish; a wait on a deleted handle, its delete held
 * too, returns VF_ESTALE); during the start that pushes them they wait for
 * it. A push from another thread during that start waits for it to end, 10
 * ms at most, then is held as while stopped: threads that push without
 * pause cannot keep a start going for ever. A held op that cannot be pushed
 * at start fails with that push's code
 * (a push that returned 0 always can: one racing vf_var_destroy() of its
 * variable from another thread is either held before the destroy or
 * refused with VF_ESTALE at once, as on a running engine; but the start
 * runs each held op as it goes, on the naive engine at once, so a held
 * push on a variable that a held op before it destroys may fail so, as
 * the naive engine refuses it on a running one). A vf_var_destroy() from
 * a held op, or from an op a stop waits for, of a variable whose destroy
 * is held too is refused with VF_ESTALE: the held one goes first.
 * Stopping a stopped engine and starting a running one do nothing. A
 * start that cannot start a worker's thread (a thread quota) returns
 * VF_ESYSTEM, its detail saying which, and the engine stays stopped. Both
 * block; both (and destroy) refuse with VF_EDEADLK when called from the
 * engine's own code (an op, a done callback, a worker; an op of another
 * engine run inline inside one of its ops too), and with VF_ESHUTDOWN
 * once destroy began. Stop and destroy from inside an op of another engine
 * wait for every op of this one, as vf_engine_wait_all() does, and are
 * refused with VF_EDEADLK where it would be (an op of this engine waits
 * for a var the calling op writes, say).
 * Destroying a stopped engine starts it first. Fork needs none of this:
 * varflow stops and restarts every engine around fork() itself, draining
 * them together (an async op of one completed by a service thread's op
 * pushed to another comes through as above). The drain completes every
 * pushed op: one that needs what the forking thread holds across fork()
 * (a lock; Python's GIL, which os.fork holds) never finishes, and neither
 * does the fork (stderr says so after 2 s): stop such an engine before
 * the fork, from a call that lets go of that lock, and start it after, in
 * the parent and in the child (held ops then run in both). When the
 * restart cannot start the threads (a thread quota, say), the engine stays
 * stopped: a wait that finds ops held tries to start it again, and returns
 * VF_ESYSTEM, its detail naming the fork, while it cannot. While it does,
 * the engine is stopped for the other threads too: their pushes are
 * held (the child inherits them as well, and runs them at its start), and
 * a wait that finds ops held returns VF_ESTOPPED, its detail naming the
 * fork (wait again; it is not waited out, as the fork's drain may need
 * that thread). Held ops are outside the max_inflight bound, with none of
 * their own (vf_stats.pending counts them). A fork from inside an op of the
 * engine (its function, a done callback) cannot wait for that op, which runs on
 * in the parent only: in the child the engine runs nothing (once that op's
 * function returns there, neither its `done` nor any other op runs, and a
 * worker's thread ends with it, its pool gone in the child), and every
 * call on it there that can fail (a push, a var's, a wait, a completion,
 * stats, bulk, the profiler, a graph's) returns VF_ESHUTDOWN, its detail
 * saying so (other engines work; a stop, start or destroy from inside that
 * op is VF_EDEADLK: leave the engine, or exec).
 */
VF_API int vf_engine_stop(vf_engine *e);
VF_API int vf_engine_start(vf_engine *e);
/** @} */

/**
 * The shutdown notice: pushes from outside the engine's ops fail with
 * VF_ESHUTDOWN from now on, and every op that has not started yet skips
 * its function (its `done` gets VF_ESKIPPED; a delete still frees), while
 * dependencies are released as usual, so the engine drains fast. Then
 * vf_engine_destroy(). Returns at once.
 */
VF_API int vf_engine_shutdown(vf_engine *e);

/** The kind of engine actually running: VF_ENGINE_NAIVE, VF_ENGINE_POOLED
 * or VF_ENGINE_PERDEVICE, never VF_ENGINE_DEFAULT. For NULL or a destroyed
 * engine, VF_ENGINE_INVALID (and vf_error_detail() says so). */
VF_API vf_engine_type vf_engine_type_of(const vf_engine *e);

/** "naive", "pooled" or "perdevice"; "default" and "invalid" for those two
 * values, "unknown" for any other. */
VF_API const char *vf_engine_type_name(vf_engine_type type);

/** Worker threads of the engine's pools in total, CPU and device (0 for the
 * naive engine): the number it has, also while it is stopped
 * (vf_engine_stop() joined them; vf_engine_start() starts as many again).
 * A device's pools come with its first op (pushed, captured in a graph or
 * made an operator), and count from then on. Spare
 * threads a pool lends to waits inside ops are not counted. */
VF_API int vf_engine_num_workers(const vf_engine *e);

/** Counts of what happened to pushed ops, for accounting. */
typedef struct vf_stats {
    uint64_t completed; /**< ops finished: ran ok + failed + skipped */
    uint64_t ran;       /**< user function ran and succeeded */
    uint64_t failed;    /**< user function ran and failed */
    uint64_t skipped;   /**< not run because an input had failed, or
                             skipped by the shutdown notice
                             (vf_engine_shutdown()) */
    uint64_t pending;   /**< pushed and not yet finished (var deletes, the
                             ops a stopped engine holds and the
                             markers of waits in progress included; a child
                             with no vars running inside its push counts
                             within its parent); exact with max_inflight set
                             or when nothing moves, else between what was
                             pending at one instant of the call and that plus
                             what moved during it. An op counts until its
                             finish ends, which may be just after a wait on
                             its vars returned (vf_engine_wait_all returns
                             only once it has ended). Bulked pushes count
                             as their fused op: one, from the batch's push
                             (vf_bulk_flush() or a full batch) until its
                             last op ends; none while their batch is open */
    /** @name Device ordering
     * A dependency on a device op's work was met by:
     * @{ */
    uint64_t host_syncs;   /**< the host waiting for its event (a CPU op, a
                                wait, a delete, or device_sync) */
    uint64_t stream_waits; /**< another stream waiting for its event on the
                                device: a host synchronization avoided */
    uint64_t same_stream;  /**< nothing: both ops on one stream (avoided) */
    /** @} */
    /** @name Bulk execution (vf_bulk_set_size())
     * @{ */
    uint64_t bulks;  /**< fused ops pushed */
    uint64_t bulked; /**< pushes that went into them */
    /** @} */
    /** Async ops whose function was called and that nobody completed yet
     * (vf_completion_finish()): the ops a wait that never ends may be waiting
     * for; the timed waits name them. */
    uint64_t async_in_flight;
    /** @name Graphs (vf_graph_launch())
     * @{ */
    uint64_t launches; /**< graph launches (each also counts its ops above) */
    uint64_t replays;  /**< of them, those replayed from the graph's own
                            edges, not pushed op by op */
    /** @} */
} vf_stats;

/** A snapshot of the engine's counters (internal wait ops are not counted). */
VF_API int vf_engine_stats(vf_engine *e, vf_stats *out);

/** @} */

/* ------------------------------------------------------------------------ */
/* Variables                                                                 */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup vars Variables
 * @brief Tags for the resources ops read and write.
 *
 * A variable holds no data: it orders the ops that touch its resource. An
 * op lists the variables it reads and those it writes; ops that share a
 * variable, one of them writing it, run in the order they were pushed.
 * @{
 */

/**
 * A tag for a resource. It holds no data; it orders the ops that touch the
 * resource. A value handle: copy it freely. The zero handle is never valid.
 */
typedef struct vf_var {
    uint64_t id; /**< the engine's handle (opaque; 0: none) */
} vf_var;

/** A list of variables: `count` handles at `vars` (NULL when count is 0).
 * A handle the engine never made is refused with VF_EINVAL, or with
 * VF_ESTALE / VF_EXDEV when it looks like a deleted or a foreign one (the
 * detail says "belongs to another engine" only while one holds its tag,
 * else that it is no live engine's). */
typedef struct vf_var_list {
    const vf_var *vars; /**< the handles (NULL when count is 0) */
    int count;          /**< how many */
} vf_var_list;

/**
 * VF_VARS(a, b, c): a vf_var_list of the handles given.
 *
 * In C, a compound literal: it lives until the end of the enclosing block,
 * so `op.reads = VF_VARS(a, b);` then `vf_engine_push(e, &op);` is fine.
 *
 * In C++ (no compound literals), a list over a temporary array that lives
 * only until the end of the full-expression it is in: use it inside the
 * call that takes the op, `vf_engine_push(e, {...})` or
 * `vf_operator_create(e, {...}, &out)` (the C++ overloads at the end of
 * this file), for example in C++20
 * @code
 * vf_engine_push(e, {.fn = add, .reads = VF_VARS(a, b),
 *                    .writes = VF_VARS(c)});
 * @endcode
 * Kept in a vf_op variable it dangles once the statement ends: list a
 * named array there, `op.reads = vf_var_list_of(arr);` (clang warns,
 * -Wdangling, when VF_VARS initializes a variable, not when it is
 * assigned; g++ does not).
 */
#ifndef __cplusplus
#define VF_VARS(...)                                                           \
    ((vf_var_list){(const vf_var[]){__VA_ARGS__},                              \
                   (int)(sizeof((vf_var[]){__VA_ARGS__}) / sizeof(vf_var))})
#elif defined(VF_CXX11_)
#define VF_VARS(...) vf_var_list_of({__VA_ARGS__})
#endif

/** Create a variable. VF_ENOMEM when out of memory or handles;
 * VF_ESHUTDOWN from outside the engine's ops after vf_engine_shutdown() or
 * once destroy has begun. */
VF_API int vf_var_create(vf_engine *e, vf_var *out);

/**
 * Delete a variable. Deletion is an op that writes the variable: it runs
 * after every op already pushed on it; `free_fn(free_arg)` (may be NULL) runs
 * as its body, so the resource is freed once nothing uses it. Once deleted,
 * the handle is refused (VF_ESTALE) by every call, including a second delete
 * (its detail: "vf_var_destroy: variable (id 0x...) was already deleted").
 * But an op pushed before the delete runs before it, as in the serial
 * program, and so do the ops it pushes on the variable that go ahead of the
 * ops pushed after it (vf_engine_push(), nested pushes): they are taken,
 * whatever vf_var_of() made of its address meanwhile (below), but for one
 * pushed once the delete holds the variable (its op does not name it),
 * which is refused; other calls on the handle from inside it
 * (vf_var_wait(), vf_var_version()) are refused once the delete is pushed,
 * where the naive engine, which runs that op inside its push, answers
 * them. A delete pushed from inside an op takes its place at its push,
 * after the ops the program's thread pushed on the variable meanwhile
 * (which the serial program refuses); it stands within that op's run,
 * and what comes after it in the serial program is refused (VF_ESTALE):
 * what the op pushes on the handle after it, itself or through ops it
 * pushes after it, and what its parent pushes there once the op
 * returned, or a later sibling; ops on the handle vf_var_of() gives its
 * address then run after it. Where the op is more than 127 levels of
 * nested pushes down, the order in time of the pushes around it decides
 * what comes after it. The delete op jumps to the front of its pool's
 * ready queue. A delete refused (any error: VF_ESHUTDOWN from outside
 * the engine's ops after vf_engine_shutdown() or once destroy has begun,
 * as for vf_var_create(), say) never calls `free_fn`: the resource is
 * still the caller's to free.
 */
VF_API int vf_var_destroy(vf_engine *e, vf_var v, void (*free_fn)(void *),
                          void *free_arg);

/**
 * The variable's version: the number of writes to it that have run (a write
 * skipped because of an earlier failure does not count; a device op's write
 * counts once its work on the stream has completed, not when its function
 * returns, and not when its stream skipped the work).
 * Reads never change it. VF_ESTALE once the delete op has been pushed.
 */
VF_API int vf_var_version(vf_engine *e, vf_var v, uint64_t *out);

/**
 * The variable of an address, as OpenMP names a dependence by its address:
 * the engine keeps a table from addresses to variables, and the first call
 * with an address creates its variable (as vf_var_create()), every later one
 * returns the same handle. Thread-safe: any number of threads may call it
 * at once (the table is striped: one hash lookup under one of 64 locks).
 * The address is only a key: it is never dereferenced, and any non-NULL
 * pointer will do. Lifetime: the variable lives until the engine is
 * destroyed, or until vf_var_destroy() on it; the entry goes once that
 * delete has run. The address keeps the serial order across the destroy:
 * the next vf_var_of() of it returns a new handle (the destroyed one
 * stays refused, VF_ESTALE) whose ops run after every op of the destroyed
 * variable, its delete included, on every engine, running or stopped. It
 * is a fresh variable to the program (version 0, no failure of the old
 * one); until the delete has run it is the same queue under the new
 * handle. On a stopped engine, whose delete is still held, it is the
 * same handle instead, accepted again from then on (the held delete runs
 * at start, in order, and leaves the variable live). A call racing
 * with that destroy from another thread may return the destroyed handle.
 * Memory freed and reused at the same address keeps the address's
 * variable: ops on the new data come after those on the old (more order
 * than needed, never a wrong result unnoticed: two ops' children on one
 * local's address take their places by time, and one placed behind the
 * other's failing child is skipped, its parent's wait saying VF_ESKIPPED:
 * see vf_var_wait()); destroy the variable to forget it.
 * VF_EINVAL for a NULL engine, addr or out, and while this thread captures
 * a graph on the engine; VF_ENOMEM; for an address with no variable yet,
 * what vf_var_create() returns (VF_ESHUTDOWN after the shutdown notice).
 */
VF_API int vf_var_of(vf_engine *e, const void *addr, vf_var *out);

/** @} */

/* ------------------------------------------------------------------------ */
/* Operations                                                                */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup ops Operations
 * @brief Push ops, and what a running op sees.
 *
 * An op is a function and the variables it reads and writes (vf_op).
 * vf_engine_push() queues it; it runs once every op pushed before it that
 * conflicts with it has finished. A sync op returns its status; an async
 * op starts its work and calls vf_completion_finish() later, from any thread.
 * @{
 */

/** What the engine tells a running op; valid only during the call. */
typedef struct vf_run vf_run;

/** Handle an async op calls exactly once, from any thread, when it is done. */
typedef struct vf_completion {
    void *op_;        /**< internal: the op */
    uint64_t ticket_; /**< internal: which of its runs, so a second call is
                           refused */
} vf_completion;

/** A sync op: return 0 on success, anything else marks the op failed
 * (with that code: one of varflow's own, VF_ESKIPPED say, is taken as the
 * op's own failure, and its done gets it as it would a skip's: return a
 * code of your own to tell them apart). */
typedef int (*vf_sync_fn)(vf_run *run, void *arg);

/**
 * An async op: start the work and return; call vf_completion_finish(done, ...)
 * later, from any thread, exactly once. The op's variables stay held until
 * then. The completion may also come before the function returns (the
 * function, or a thread it waits for, calls it): the op finishes then (its
 * `done` is called, its vars are released, a wait for it returns), and
 * an argument copied at push (arg_size) and the run handle stay valid
 * until the function returns; what `done` frees does not. The function
 * may go on pushing and waiting (for its children, for vars, the ones it
 * wrote included); it counts as running until it returns: the engine's
 * stop, a fork's drain and its destroy wait for it, and for what it
 * pushed (vf_engine_wait_all() and the waits on its vars do not).
 */
typedef void (*vf_async_fn)(vf_run *run, void *arg, vf_completion done);

/**
 * Called exactly once for every op, after it ran or was skipped and before
 * its variables are released: status 0 (ran ok), the op's error code (ran
 * and failed) or VF_ESKIPPED. For freeing `arg`, whatever happened. An op
 * it pushes is not the op's child: it takes its place at its push, after
 * what was pushed meanwhile (vf_engine_push()). A device
 * op's `done` comes once its work on the stream completed (with that
 * work's outcome), which may be after its variables were released, on the
 * thread that completes the engine's device ops one after the other (the
 * one that marks device work done): keep it short (one that blocks holds
 * up the completion of every later device op of the engine, and one that
 * waits, on another engine, for what waits for that completion never
 * returns). An async op it makes ready (by a push, or by finishing a
 * completion) starts on a worker of the engine's CPU pool, not there, as
 * from device work (vf_run_submit()), since its start may wait on the host
 * for device work in flight.
 */
typedef void (*vf_done_fn)(void *arg, int status);

/** The kinds of device an op can run on. @ingroup devices */
typedef enum vf_device_type {
    VF_DEVICE_CPU = 0, /**< the host's CPUs, id 0 */
    VF_DEVICE_CUDA,    /**< an NVIDIA GPU, id = ordinal (libvarflow-cuda:
                            varflow_cuda.h, vf_cuda_register()) */
    VF_DEVICE_EMULATED /**< streams emulated on CPU threads, ids 0..7 */
} vf_device_type;

/** A device: its kind and its number among those of the kind.
 * @ingroup devices */
typedef struct vf_device {
    vf_device_type type; /**< the kind */
    int id;              /**< which one (0 for the CPU) */
} vf_device;

/**
 * @ingroup devices
 * Work for a device stream (vf_run_submit()): runs on the device, after every
 * piece of work submitted to the same stream before it. Non-zero fails the
 * op that submitted it (its error code; see vf_run_submit()).
 */
typedef int (*vf_device_fn)(void *arg);

/** Where an op runs and how it is scheduled (MXNet's FnProperty). A copy
 * (VF_PROP_COPY_TO_DEVICE, VF_PROP_COPY_FROM_DEVICE) names its device in
 * vf_op.device: on the CPU it is refused (VF_EINVAL). The others suit
 * every device: VF_PROP_DEVICE_PRIORITIZED on a CPU op runs in the CPU
 * pool (the device is the CPU), VF_PROP_CPU_PRIORITIZED and
 * VF_PROP_DELETE_VAR on a device op in its device's compute workers. */
typedef enum vf_property {
    VF_PROP_NORMAL = 0,         /**< the CPU pool; a device op: the device's
                                     compute workers */
    VF_PROP_COPY_TO_DEVICE,     /**< the device's copy workers */
    VF_PROP_COPY_FROM_DEVICE,   /**< the device's copy workers */
    VF_PROP_CPU_PRIORITIZED,    /**< the per-device engine's CPU priority
                                     pool */
    VF_PROP_DEVICE_PRIORITIZED, /**< the device's priority workers */
    VF_PROP_DELETE_VAR          /**< jumps to the front of the ready queue */
} vf_property;

/** The most handles an op's two lists hold together (1,048,576:
 * vf_op.reads.count + vf_op.writes.count), repeats included. */
#define VF_MAX_OP_VARS (1 << 20)

/** Copied arguments (vf_op.arg_size, vf_operator_push_arg()): up to
 * VF_OP_ARG_INLINE bytes the copy comes from the engine's per-thread free
 * lists (no malloc); up to VF_MAX_OP_ARG_SIZE it is malloc'd; larger ones
 * are refused (VF_EINVAL). */
#define VF_OP_ARG_INLINE 128
/** The largest copied argument, in bytes (see VF_OP_ARG_INLINE). */
#define VF_MAX_OP_ARG_SIZE 65536

/**
 * An op to push. Exactly one of `fn` and `async_fn` is set. Reads and writes
 * may overlap or repeat: each variable counts once, as a write if any use of
 * it writes. The two lists together hold at most VF_MAX_OP_VARS handles,
 * repeats included (more: VF_EINVAL); putting them in order takes
 * O(n log n). `name` (may be NULL) must stay valid until the op has
 * finished.
 */
typedef struct vf_op {
    vf_sync_fn fn VF_ZERO_;        /**< sync: returns the op's status */
    vf_async_fn async_fn VF_ZERO_; /**< async: runs inline on the dispatching
                                        thread (from device work, a device
                                        op's `done`, or on a service thread:
                                        on a CPU worker, vf_run_submit(),
                                        vf_done_fn, vf_thread_set_service()) */
    void *arg VF_ZERO_;            /**< what fn, async_fn and done get (see
                                        arg_size) */
    vf_done_fn done VF_ZERO_;      /**< may be NULL */
    vf_var_list reads VF_ZERO_;    /**< the variables the op reads */
    vf_var_list writes VF_ZERO_;   /**< the variables it writes (and may
                                        read) */
    vf_device device VF_ZERO_;     /**< zero: CPU 0 */
    vf_property property VF_ZERO_; /**< zero: normal */
    int priority VF_ZERO_;         /**< higher runs first among ready ops of a
                                        pool: one above 0 across a CPU
                                        pool's workers; 0 and below, and in
                                        a device pool (its ops spread over
                                        its workers' streams), within each
                                        worker's queue. Not across workers
                                        for a thread that helps at a wait
                                        (help_on_wait), a spare thread, or
                                        a replayed graph's run of nodes */
    bool no_skip VF_ZERO_;         /**< run even when an input has failed */
    bool nonblocking VF_ZERO_;     /**< at the in-flight limit: VF_EAGAIN, not
                                        wait */
    const char *name VF_ZERO_;     /**< for errors, logs and profiles; may be
                                        NULL; must stay valid until the op
                                        has finished (the profiler keeps a
                                        copy) */
    size_t arg_size VF_ZERO_;      /**< 0: `arg` is passed as it is, and must
                                        outlive the op. Otherwise the push
                                        copies arg_size bytes from `arg` into
                                        the op (aligned to max_align_t), and fn,
                                        async_fn and done get the copy, freed
                                        once the op has finished (after `done`)
                                        and its async_fn has returned: `arg`
                                        may go at once. No allocation up
                                        to VF_OP_ARG_INLINE bytes; at most
                                        VF_MAX_OP_ARG_SIZE (VF_EINVAL beyond, or
                                        for a NULL arg with a size). For
                                        vf_operator_create(): copied once, freed
                                        with the operator */
} vf_op;

/**
 * Push an op: it runs once every op pushed before it that conflicts with it
 * has finished. Returns at once (the naive engine runs ready ops inside the
 * call, and so may any engine a child ready at its push: below). May be
 * called from any thread, and from inside running ops. The naive engine
 * runs an op that waited where the op it waited for ends: on that op's
 * thread, inside the same push, even when it was pushed by another
 * thread. Pushed to a naive engine from inside an op of another engine,
 * an op so runs inside that op; one of its waits on a var that op holds
 * never finishes (known, not found: avoid pushing to a naive engine from
 * several threads where pooled ops push to it too).
 * When the engine has max_inflight ops pushed and not finished, the push
 * first waits for room; with op->nonblocking it fails with VF_EAGAIN
 * instead; from inside an op it runs ready ops that descend from the
 * pushing op meanwhile (as a wait inside an op does; a wait in one of
 * them that can never finish returns VF_EDEADLK, as it would there) and,
 * when none is left to run there, goes over the limit rather than
 * deadlock (a recursion with a wait at every level, its device ops'
 * included); from
 * a done callback of the engine's it goes over the limit at once (the op
 * whose callback runs still counts), and so it does from device work
 * (vf_run_submit()) on any engine, from a service thread
 * (vf_thread_set_service(): unbounded there, as the completions it
 * finishes may be the room), and from an op of another engine that
 * runs inside an op of this one on the same thread (a naive engine's op,
 * pushed to from inside it, or one run above a push at this bound or
 * above a wait inside an op of this engine) or on a worker of this
 * engine. A push from outside that waits for room behind async ops whose
 * completions only a later push would bring (an op pushed after one
 * completes it) waits for ever: after 2 s, and every 10 s after, it says
 * so on stderr, naming the async ops in flight and the ops its workers
 * run, as destroy does.
 * From inside an op, a child that is ready at its push (no op it conflicts
 * with is pending) may run at once, inside the push, on the pushing worker
 * (vf_run_worker() is the parent's), as the serial program runs it and as
 * OpenMP may run a task at its creation: on a pool of one worker always,
 * on a larger pool when the worker's own queue already holds enough for
 * the others (a sync op of the worker's pool only, while its stack has
 * room). So a child must never wait for something its parent does after
 * pushing it (a flag, a lock): the serial program never finishes that
 * either. No engine lock is held while it runs.
 * Errors: VF_EINVAL (no or two functions, bad list, more than
 * VF_MAX_OP_VARS handles in the lists), VF_ESTALE / VF_EXDEV (a
 * variable), VF_ENODEV (device), VF_ENOTSUP (an async_fn on a device: a
 * device op's function puts its work on its stream), VF_ESYSTEM (a
 * device's first op, whose threads could not be started: the detail says
 * which; a later push tries again), VF_ESHUTDOWN, VF_ENOMEM, VF_EAGAIN. On
 * error nothing was pushed and `done` is not called.
 */
VF_API int vf_engine_push(vf_engine *e, const vf_op *op);

/**
 * Finish an async op. `status` 0 means success; any other value fails the op
 * (recorded like a sync function's return value) with `message` (may be
 * NULL). VF_EALREADY if this completion was already used (at any time
 * after, even once its engine was destroyed). The ops the op's end makes
 * ready are dispatched before it returns: an async one among them runs
 * its function on the calling thread (an async function runs on the
 * thread that makes it ready; not on a service thread:
 * vf_thread_set_service()), so a thread whose return another op's
 * function waits for (a join) must not be one that next function needs.
 */
VF_API int vf_completion_finish(vf_completion done, int status,
                                const char *message);

/**
 * Finish an async op whose result is a failure that happened elsewhere (in
 * another process, say): the op counts as skipped (its `done` gets
 * VF_ESKIPPED), the ops that depend on it are skipped, and the waits report
 * `cause` (its code, op name and message) as if that op had failed here;
 * an empty op name there is this op's.
 * VF_EINVAL when `cause` is NULL or its code is 0; VF_EALREADY as
 * vf_completion_finish().
 */
VF_API int vf_completion_fail(vf_completion done, const vf_error *cause);

/**
 * Make the calling thread a service thread (`on`), or an ordinary one
 * again: one that finishes completions for others (an MPI progress thread,
 * an I/O reactor) and must never be held by an op's function. An async op
 * that a completion it finishes, or a push it makes, makes ready starts on
 * a worker of the op's pool instead of on it, as from device work (on the
 * naive engine, whose ops have no pool, it still starts there); no op runs
 * at its push (vf_config.run_at_push). The `done` callbacks of the ops it
 * finishes still run on it, and a push it makes never waits for room
 * under max_inflight (it goes over the bound, as from a done callback),
 * nor is it held by a stop while the stop drains (vf_engine_stop(): when
 * its op names no variable, or nothing is held yet).
 * So an async op's function may wait (vf_var_wait()) for what the service
 * thread has yet to finish: it runs on a worker (started on the service
 * thread, it held that thread in its wait for ever). A thread is ordinary
 * when it starts; libvarflow-mpi's communication thread is a service
 * thread.
 */
VF_API void vf_thread_set_service(bool on);

/**
 * For an op pushed with no_skip: 1 when one of its variables carries a
 * failure that would have skipped it (an earlier op that writes it failed
 * and no wait before the op in push order has reported it), and then
 * `*out` (if not NULL) is that failure as a wait would report it; 0 when
 * none does. The op's own waits come after it: one that reports the
 * failure leaves the answer as it was. Call it from the op's function, on
 * its thread: the handle is valid only until the function returns, and
 * one of no op running on the calling thread is VF_EINVAL (an async op's,
 * asked from the thread that finishes its completion, say), its detail
 * saying so. An async op whose completion finished it (its variables
 * released) is VF_EINVAL too, its detail saying so. So call it before the
 * completion is handed to another thread that may finish it: a call
 * racing that finish may read what the op's own failure, or a later op's,
 * left on its variables (a race of the program's). VF_EINVAL for a NULL
 * run.
 */
VF_API int vf_run_input_failure(const vf_run *run, vf_error *out);

/** Record why the op is failing; the message reaches vf_error.message
 * (past its size, its beginning and its end). A device op whose function
 * returns 0 and whose work then fails on its stream fails with it too, in
 * place of the device's words (a device function has no run handle). An
 * async op's function may call it while another thread finishes its
 * completion: a vf_completion_finish() with a status and no message of
 * its own takes the last message set before it, whole; one set after it
 * goes nowhere (the op has its outcome). */
VF_API void vf_run_set_error(vf_run *run, const char *fmt, ...)
    VF_PRINTF_LIKE(2, 3);

/** The engine running the op (for nested pushes and waits). */
VF_API vf_engine *vf_run_engine(const vf_run *run);

/**
 * Whether the calling thread is inside engine `e`: running one of its ops
 * (a function, an async op's start, a free callback, an op run by a
 * waiting thread; or an op of another engine run inline inside one of
 * them, inside a push on the naive engine, say), one of its `done`
 * callbacks, device work of one of its ops (vf_run_submit()), or any other
 * code on one of its workers. False for NULL and from
 * any other thread. Reads no engine state (any pointer will do). A library
 * built on varflow uses it to refuse, at once and alike everywhere, a call that
 * must not come from an op (libvarflow-mpi's calls in sequence: VF_EDEADLK).
 */
VF_API bool vf_engine_in_op(const vf_engine *e);

/** Index of the worker running the op, unique across the engine's pools;
 * -1 when it runs on a thread that is not a worker (naive engine, async op
 * dispatched by a pusher, an op run by a waiting thread: help_on_wait, a
 * spare thread a pool lends while its workers wait inside ops). A table
 * indexed by it needs a slot for -1, or a lock there. */
VF_API int vf_run_worker(const vf_run *run);

/** The device the op was pushed for. @ingroup devices */
VF_API vf_device vf_run_device(const vf_run *run);

/** @ingroup devices
 * The worker's device stream: a cudaStream_t for VF_DEVICE_CUDA, an
 * emulated stream for VF_DEVICE_EMULATED (use it with vf_run_submit()); NULL
 * for a CPU op. Work the op puts on it is ordered with every other op by
 * events: the op's function returns at once, and ops that depend on it wait
 * for its work on their own stream, or on the host when they run there.
 * So a device op that depends on device work still in flight may have its
 * function called before that work's outcome is known: when the work
 * fails, the op's own work is skipped on the device and its `done` gets
 * VF_ESKIPPED, but what its function did on the host stands (ops it
 * pushed run, its waits returned). Keep a device op's function to putting
 * work on its stream, or set device_sync, under which the host meets the
 * work first and never calls such a function, as on the naive engine. */
VF_API void *vf_run_stream(const vf_run *run);

/**
 * @ingroup devices
 * Put `fn(arg)` on the op's stream, after the work already there: it runs
 * on the device (for CUDA, as a host function of the stream), not in this
 * call. `bytes` > 0 marks a copy of that many bytes (the emulated device
 * charges its bandwidth for it). A non-zero return of fn fails the op (its
 * code; the ops that depend on it are skipped, on the device too), the op
 * that submitted it, also when an op it pushed ran on the same stream
 * meanwhile (a child run at its push, or above its wait).
 * fn must not block on varflow: it runs inside its op, which cannot end
 * before it returns, ahead of the work queued behind it on the stream, as
 * CUDA allows no CUDA call in a host function. So every wait, stop, start
 * and destroy called from it, on any engine, returns VF_EDEADLK at once;
 * its pushes never wait for room under max_inflight (they go over the
 * limit, as from a done callback), a CPU op it pushes never runs on its
 * thread (under run_at_push either), and vf_graph_begin() from it is
 * VF_EINVAL. vf_engine_in_op() is true there for the op's engine. An async
 * op it makes ready (by a push, or by finishing another) starts on a
 * worker of the engine's CPU pool, not on its thread: its start waits on
 * the host for the device work its variables wait for, which may come
 * later on this same stream (vf_run_worker() is that worker's). The naive
 * engine, which has no thread but the pusher's, is the exception: there a
 * CPU or async op pushed or made ready here runs on this thread, inside
 * the work, and its waits are refused (VF_EDEADLK) as the work's own are,
 * where the other engines' return 0; push such ops from the device op's
 * function instead, or use another engine kind.
 * VF_EINVAL outside a device op, VF_ENOMEM, VF_EDEVICE; a refusal's
 * detail is also the op's error message, unless the op set one.
 */
VF_API int vf_run_submit(vf_run *run, vf_device_fn fn, void *arg, size_t bytes);

/** @ingroup devices
 * Devices of a type usable now: 1 for VF_DEVICE_CPU, the emulated device's
 * count, the GPUs CUDA sees (0 until libvarflow-cuda's vf_cuda_register()
 * was called, or when no GPU or driver is there; vf_error_detail()
 * then says why). */
VF_API int vf_device_count(vf_device_type type);

/** The op's name (never NULL: "" when unnamed). */
VF_API const char *vf_run_name(const vf_run *run);

/** @} */

/**
 * @defgroup devices Devices
 * @brief Ops on GPUs and emulated devices, ordered on device streams.
 *
 * An op pushed with `.device` set runs on that device's workers, each of
 * which owns a stream. What the op puts on its stream (vf_run_stream(),
 * vf_run_submit()) is ordered with every other op by events, so the op's
 * function returns at once. The CUDA device is in libvarflow-cuda
 * (varflow_cuda.h).
 */

/* ------------------------------------------------------------------------ */
/* Reusable operators                                                        */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup operators Reusable operators
 * @ingroup ops
 * @brief An op made once and pushed many times.
 * @{
 */

/**
 * An op created once and pushed many times: the variable sets are checked,
 * de-duplicated and sorted once, so vf_operator_push() allocates nothing.
 */
typedef struct vf_operator vf_operator;

/** Create an operator from an op description (its `priority` field is not
 * used: each push gives one). The name is copied; `done` runs once per
 * pushed run. Errors as vf_engine_push(); from inside an op pushed before
 * the delete of a var it names, made (its pushes from there go ahead of
 * the delete, as the op's other children do). */
VF_API int vf_operator_create(vf_engine *e, const vf_op *def,
                              vf_operator **out);

/** Push one run of the operator, with the given priority. Errors as
 * vf_engine_push() (VF_ESTALE when one of its variables has been deleted
 * since).
 */
VF_API int vf_operator_push(vf_engine *e, vf_operator *op, int priority);

/**
 * Push one run of the operator with an argument of its own, in place of the
 * operator's `arg`: the run's fn, async_fn and done get it. The var set,
 * routing and checks are the operator's, made once at create, so a program
 * whose ops differ only in an index pays no var-set check or sort per push.
 * arg_size 0: `arg` is passed as it is (it must outlive the run); otherwise
 * arg_size bytes of it are copied, as vf_op.arg_size says (no allocation up
 * to VF_OP_ARG_INLINE bytes). Errors as vf_operator_push(), and VF_EINVAL for
 * arg_size over VF_MAX_OP_ARG_SIZE or a NULL arg with a size.
 */
VF_API int vf_operator_push_arg(vf_engine *e, vf_operator *op, int priority,
                                void *arg, size_t arg_size);

/**
 * Delete the operator: the handle must not be used again; the operator is
 * freed once its last pushed run has finished. A call on the handle after
 * that (a second destroy, a push) is VF_EINVAL, not a read of freed
 * memory, until a later vf_operator_create() takes the memory over (the
 * handle then names that operator); a push racing the destroy on another
 * thread either pushes a run or is refused so. VF_EXDEV for an operator of
 * another engine. One the program left undestroyed is retired by its
 * engine's destroy, not freed (256 bytes kept for the life of the
 * process): a call on its handle then returns VF_EINVAL, even when another
 * engine was made at the old engine's address since.
 */
VF_API int vf_operator_destroy(vf_engine *e, vf_operator *op);

/** @} */

/* ------------------------------------------------------------------------ */
/* Bulk execution                                                            */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup bulk Bulk execution
 * @brief Many small ops from one thread fused into one, at one op's cost.
 * @{
 */

/**
 * Set the calling thread's bulk size for engine `e` (0 turns bulking off;
 * at most 4096) and return the previous one (>= 0), or a negative code.
 * Threads start with config.bulk_size (VF_BULK_SIZE), 0 by default.
 *
 * With a bulk size n > 0, consecutive pushes from this thread of sync CPU
 * ops of normal property and equal priority (vf_engine_push() or
 * vf_operator_push(), not nonblocking) are collected, up to n, and pushed as
 * one fused op whose variable set is the union of theirs (a variable both read
 * and written counts as written). The fused op runs their functions in push
 * order on one worker, so n ops cost about one op's overhead, at the price of
 * no parallelism among them. Each op still fails, is skipped and calls its
 * done callback as it would alone, and the version of a variable is bumped
 * per write. The naive engine ignores the bulk size, and so does an engine
 * with an in-flight bound (config.max_inflight): the bound counts ops, and
 * a fused op would hold many as one.
 *
 * A batch is pushed when it is full; before a push from this thread that
 * cannot join it; when this thread's bulk size changes; by vf_bulk_flush();
 * by a push from another thread that names one of its variables; and,
 * every thread's batch, by any wait (vf_var_wait(), vf_engine_wait_all()),
 * vf_var_destroy(), stop, shutdown, destroy and fork. Bulking never changes
 * what a program computes (but for an op that waits inside itself on a
 * variable a later op of its batch uses: below; and where the program
 * leaves it to timing: an op of a batch runs only with its batch, after
 * every input of the batch's later ops, so a child that takes its place at
 * its push because one of its variables is still busy (vf_engine_push())
 * may find busy what an unbulked op would have freed): an op pushed before
 * another thread's push (the program's own synchronization, a mutex, a
 * condition variable, a thread join, ordering the two) comes before it on
 * every variable they share, as without bulking, whatever either thread's
 * bulk size (set here, by config.bulk_size or by VF_BULK_SIZE), so no
 * flush is needed for that.
 * While an async op of the engine is pushed and not finished, no push is
 * fused (each goes alone), and a batch pushed then goes op by op: a fused
 * op waits for every input of its ops,
 * and one of them may be what completes the async op that a later op of
 * its batch reads the result of; nor while a stop holds the pushes from
 * outside the engine's ops (an async op among them is not finished), and
 * the later ops of a batch that ends early for a child go each alone (an
 * async op may come ahead of them). Nor is a push from inside an op that
 * must wait for its parent's end, or that goes ahead behind an ancestor
 * that writes one of its variables (vf_engine_push(), nested pushes), or
 * from inside an op of a launch that replays (vf_graph_launch()): a
 * batch pushed later could come too late for that. A size set here
 * before this thread's first push holds from that push on (0 included).
 * An op in a batch runs only once the batch is pushed: a batch nothing
 * else pushes is pushed by the engine's idle workers within about a
 * millisecond, so a thread that waits for its ops by its own means (a done
 * callback it sleeps on) gets them without a flush, only later than with
 * vf_bulk_flush() (which saves that delay). Each push is checked as a
 * lone push would be (its
 * errors, VF_ESTALE for a variable whose delete was pushed, are returned
 * by the push). A batch that cannot be pushed whole (another thread
 * deleted a variable of it meanwhile, no memory) falls back to pushing its
 * ops one by one; one that still fails is reported by its done callback
 * and vf_engine_wait_all (its vars carry no failure). An op of a batch
 * that pushes children gets what it would unbulked: where a child (or a
 * later descendant, pushed on any thread while the op runs) must come
 * before a later op of the batch, and where the op waits for its children
 * (vf_run_wait_children()), the batch ends after the op, and its later
 * ops go on each alone, where they stood on each
 * variable, behind that child; and the batch then holds only what the op
 * needs, so a child on a variable only an earlier op used runs at once,
 * and one reading a variable the op reads runs beside it. A wait inside
 * the op (vf_var_wait()) first lets go of the variables no op of the
 * batch from this one on uses, so it meets them as the ops alone would
 * have left them (a wait for what an earlier op wrote: 0, or
 * VF_EOPFAILED with its failure). A variable a later op of the batch uses
 * stays held: a wait on it gets what it would unbulked when nothing is
 * queued behind the batch or when the op reads it itself (it waits for
 * nothing then, as alone), and VF_EDEADLK when a write of it is queued
 * behind (another thread's op), which the batch cannot let run before its
 * later op (do not bulk such ops: unbulked, the wait would finish).
 * vf_engine_stats()
 * counts the fused ops (bulks, those a batch ending early makes of its
 * later ops among them) and the pushes in them (bulked).
 */
VF_API int vf_bulk_set_size(vf_engine *e, int size);

/** Push the calling thread's open batch now (0, or VF_EINVAL). */
VF_API int vf_bulk_flush(vf_engine *e);

/** @} */

/* ------------------------------------------------------------------------ */
/* Waiting                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup waits Waits and failures
 * @brief Wait for ops; learn which failed, once, in push order.
 *
 * Waits and failures (docs/DESIGN.md, "Failures"). A failure belongs to the
 * program's push order, like everything else: an op that fails marks the
 * vars it writes; an op that reads or writes a failed var is skipped (its
 * `done` gets VF_ESKIPPED) and passes the same failure on to what it
 * writes, unless it is no_skip; an op that runs and succeeds leaves its
 * vars' failures as they were. A var holds one failure: a write of it
 * that gives it one (a failed op's, or a skipped op's, which passes on
 * the failure whose op was pushed first of those it meets) replaces the
 * one it held, which a wait on that var then does not report (a wait on
 * another var still holding it does, and vf_engine_wait_all() may). A
 * wait reports a failure as of its own place in push order: every op
 * pushed before the wait still sees it, even one that runs after the wait
 * returned, and every op pushed after it does not. One failure is
 * reported once, by the first wait (in push order) that meets it, on
 * whatever var; from then on it skips no op pushed later. So which ops run,
 * fail or are skipped, and what each wait returns, are the same on every engine
 * and in every run.
 *
 * One exception: a wait from inside an op (vf_var_wait(),
 * vf_run_wait_children(); the ones that can finish: see there). Its place
 * is the op's, but nothing holds back the ops pushed after that op that do
 * not depend on it (the program's own thread goes on pushing while the op
 * runs): one that
 * meets the failure before the wait reports it is skipped, one after
 * runs, and a wait of another thread may report it first, as timing
 * decides, where the serial program (and the naive engine, which runs
 * each op inside its push) has the inner wait first. The ops the waiting
 * op pushes after the wait are after it, as in the serial program. To
 * make it exact, order the ops that follow after the waiting op through
 * a variable it writes (they read it), or wait outside the ops.
 *
 * An op pushed from inside a running op goes, on a var that op (or one it
 * descends from, to a nesting depth of 128) writes, right behind it, ahead
 * of the ops pushed after it meanwhile (by the program's thread, say) and
 * of the waits on the var, as in the serial program, where nothing pushed
 * after the parent comes before its children (the child still runs after
 * its parent returns, which holds the var: the naive engine runs it then
 * too); and a child that reads a var its parent reads runs beside the
 * parent's read, ahead of a write queued behind the reads. That holds when each
 * of its other vars is free for it at once, it waits behind one running write
 * only (its parent's, when it also reads beside its parent: the ops it passes
 * waited for that one already), and no op it would pass comes before it in the
 * serial program (a sibling pushed earlier that took its place at its push,
 * say). With bulking, a batch of children goes as one op, where its first
 * would. Where it would queue behind another op (one it might pass on the first
 * var: each would wait for the other), where it writes a var its parent
 * only reads, and on a var no running ancestor holds, it takes its place
 * when it is pushed, after the ops pushed before that in time. So does a
 * child whose ancestors ended before it was pushed (an op that pushed a
 * child and returned without waiting for it, whose child pushes on its
 * vars): the ops pushed after them may have run already. To keep the
 * serial order there, wait for the children (vf_run_wait_children())
 * before returning. A child placed so behind the failing child of an op
 * pushed after its own parent is skipped, where the serial program runs
 * it: the wait that would have returned 0 for it says VF_ESKIPPED.
 * A child of an op that a batch holds
 * (vf_bulk_set_size()) goes as it would beside the op alone, before the
 * batch's later ops (the batch ends there). A child's failure is ordered
 * as in the serial program, where each op runs at its push: with the
 * top-level op it descends from, after its parent and before the ops its
 * parent pushes after it, whenever each of them runs (to a nesting depth
 * of 128; deeper, by its parent's place and its own). So is a wait's
 * report (to the same depth): a child of an op pushed before a wait comes
 * before the wait, and still sees the failure the wait reported, however
 * late a worker ran its parent and it was pushed.
 *
 * A wait from a `done` callback of one of the engine's own ops returns
 * VF_EDEADLK at once (the op whose callback runs has not finished).
 *
 * The calls that end an op with a failure (vf_run_set_error(),
 * vf_completion_finish(), vf_completion_fail()) and the one that lets a
 * no_skip op see it (vf_run_input_failure()) are with the
 * @ref ops "operations".
 * @{
 */

/**
 * Block until every op pushed before this call that writes `v` has finished.
 * Returns 0, or VF_EOPFAILED when a failure no earlier wait reported reached
 * `v` (then `err`, if not NULL, says which op failed first and why).
 * VF_ESHUTDOWN when, with no failure to report, the shutdown notice
 * (vf_engine_shutdown()) skipped an op that writes `v`: its function never
 * ran, so `v` does not hold what the program computes (every later wait on
 * `v` says so too). VF_ESKIPPED when, with no failure to report, the write
 * of `v` that finished last, an op before this call, was skipped for the
 * failure of an op pushed after it (a child that took its place by time:
 * see "Waits and failures"), which the serial program runs first: `v` does
 * not hold what the program computes (so say later waits on `v` until
 * another write of it finishes; vf_error_detail() names the failed op).
 * From inside an op, the calling worker runs ready ops that descend from
 * the waiting op (its children, theirs, ..., whatever their priorities)
 * while it waits, on top of the wait (as OpenMP's taskwait does), and
 * none once three quarters of its stack are used
 * (config.worker_stack_kib); a device's worker, whose queue no other
 * thread takes, also runs the ops queued there that write the variable it
 * waits on, and no other; the waiting thread also runs
 * there the inline ops (async ops' functions, any op of the naive engine)
 * made ready on that thread (with the waiting op, inside it, or by an op
 * its wait ran) that come before the waiting op in push order (the ones
 * it may wait for); a later one (which might wait for it) runs after it on
 * that thread, as in the serial program, but when every other op of the
 * engine looks stuck (an op queued on a device's worker that waits and
 * refused it looks so, and may yet run): then it runs above the wait, and a
 * wait of its own for the waiting op returns VF_EDEADLK. So does a push at
 * the in-flight bound (config.max_inflight) from inside an op. A wait on
 * another engine's variable from inside an op runs those made ready with
 * its op that come before it, and every other one made ready on its
 * thread, a later one too (an op of the other engine may wait for it, and
 * ops of two engines are ordered by the pushes' order in time, not by a
 * serial program), but for one later than an op of its engine that waits
 * further down the thread (the op above it ran before that one), which
 * runs after it; so does a `done` callback's wait, at its op's point;
 * other ops are the other workers'
 * (and, when every worker of the pool waits so, a spare thread's: up to
 * 1024 a pool, each holding as many levels as a worker's stack); a worker
 * of another engine's CPU pool waiting here (an op of that engine waiting
 * on this one), or of this engine's waiting inside an op of another
 * engine that it runs inline (the naive engine's), counts as so waiting in
 * its own pool once it has waited a millisecond (most such waits end
 * sooner, and the children its op pushed before are then still its own to
 * run above its next wait; an op's timed waits that give up in a row, a
 * millisecond from the first),
 * which so lends a spare for the ops queued
 * there, which the wait may need; so does one blocked in
 * vf_engine_destroy() of another engine or in a push at another engine's
 * in-flight bound (a spare that could not start, under a thread quota, is
 * asked for again every 10 ms while it blocks; it runs none of those ops
 * itself, so under a quota that never lets a thread start it waits until
 * one can). A device's
 * pool lends no spare; there, and wherever nobody else would ever run
 * them, a waiting thread whose stack has room runs the ops queued beside
 * it itself. So a recursive program with a wait at every level (fib,
 * quicksort, tree walks), its device ops' functions included, runs at any
 * count, its stack as deep as its own nesting, as far as the threads'
 * stacks hold it: a wait whose thread's stack is full, for ops nobody else
 * will run (a device's pool, or a CPU pool out of spares, or that cannot
 * start a thread: a thread quota), returns
 * VF_EDEADLK, its detail saying so, rather than wait for ever.
 * From inside an op, "before this call" is in push order: the ops pushed
 * before that op, and its children pushed before the wait; no write by an
 * op pushed after it counts, whenever it was pushed, nor its failure (as
 * in the serial program, where the wait runs inside the op, before any
 * later push). From inside an op that reads `v` itself, the wait waits
 * for nothing: every op before it on `v` has finished.
 * A wait that can never finish returns VF_EDEADLK: at once when the op
 * writes `v` itself, or an op it descends from does (its parent, the
 * parent's parent, ...: in the serial program that op runs around this
 * one, unfinished; the detail names the waiting op and says how many
 * levels up that one is; past 128 levels of nesting, the ancestors
 * between the 128th level and the parent are not looked at); otherwise (the ops
 * it waits for wait, directly or not, on it) as soon as no op of the engine can
 * run any more, so an unrelated long op delays the answer until it ends. An
 * async op whose function waits inside holds its vars until its completion,
 * which the engine cannot tell will come when a thread outside it has it: a
 * wait that needs it (one of the op's own, on a child's write of a var the
 * op writes or reads, say) counts it as nothing that can run, and returns
 * VF_EDEADLK once no op can run, or 0 if the completion came first
 * (whichever the timing gives): finish the op before such a wait. When
 * several waits inside ops are stuck together, the one first in push order
 * (the one the serial program reaches first) returns VF_EDEADLK; the
 * others go on waiting, and finish once its op's end lets them. Past 128
 * levels of nesting, where an op knows only its children as its
 * descendants, an ancestor's wait beyond the 128th level that waits for
 * the stuck one may return VF_EDEADLK first (its wait would have
 * finished); the stuck one's returns VF_EDEADLK too. Not quite
 * on a device's pool (or a CPU pool out of spares), whose thread, waiting
 * with ops queued that no other thread takes, runs any of them above its
 * wait: a wait it buries so cannot give up before that op ends, and
 * another stuck wait, later in push order, may give up first. A child
 * waiting on a var whose writer needs one of the child's ancestors to end
 * (reads what it writes) gets VF_EDEADLK where it runs inside its push
 * (vf_engine_push()), as in the serial program, but may get 0 where it was
 * queued and ran after the ancestor ended: such a wait is a bug in the program
 * either way.
 * From inside an op of another engine, a wait in a cycle with other waits
 * of that kind returns VF_EDEADLK at once: `v`'s writer, running, waits
 * for all of the calling op's engine (vf_engine_wait_all()) or for a var
 * the calling op writes, or for all of an engine or a var whose running
 * writer waits so in turn, and so on; of the cycle's waits, the one that
 * comes last is refused, and the others then finish. Not found, and so
 * waiting for ever: cycles through a var whose writer is queued, not
 * running (it waits behind an op in the cycle), and a wait on a var that
 * an op of `e` running further out on the same thread writes (the calling
 * op runs inside it, inside its push on the naive engine, say).
 */
VF_API int vf_var_wait(vf_engine *e, vf_var v, vf_error *err);

/**
 * From inside an op's function, block until every op it pushed so far on
 * its engine (its children, and a batch of them: not theirs, which each
 * child waits for if it needs them) has finished, as OpenMP's `taskwait`
 * and TBB's `task_group::wait` do, without a var per child. Returns 0, or
 * VF_EOPFAILED when, of the failures its children met (a child's own, or
 * the one an input of a skipped child carried), the first in push order
 * is one of an op before this call that no earlier wait reported (then
 * `err`, if not NULL, says which);
 * it is then reported, as a var wait reports a var's (at this call's place
 * in push order: ops pushed before it still see it). A second call waits
 * only for children pushed since, and reports only their failures.
 * A child on a device has finished once its work there completed.
 * The waiting worker runs the children meanwhile, as vf_var_wait() does
 * from inside an op (the same stack bound), and a wait that can never
 * finish returns VF_EDEADLK the same way (once nothing can run: a child
 * writes a var its parent only reads, say), in a device op's function
 * too, on every engine; at once, on every engine, and whatever else is in
 * flight, when one of its children uses a var the waiting op writes, the
 * waiting op being a sync one (the child cannot run before it ends: an
 * async op's completion lets go of its vars, and may come from anywhere,
 * one of its children included, so its wait is refused only once nothing
 * can run, a completion another thread holds counting as nothing: see
 * vf_var_wait()), or a var that an op
 * further up writes (a grandparent, say): in the serial program the wait
 * runs within that op, whether or not it happens to have ended here (as
 * vf_var_wait() refuses a wait on such a var); the children it
 * waited for are then given up on (they run once they can, their failures
 * left to var waits and vf_engine_wait_all()), so the next call waits only
 * for children pushed since, as after any call. VF_ESHUTDOWN when, with
 * no failure to report, the shutdown notice (vf_engine_shutdown()) skipped
 * a child it waited for: that child's function never ran, so what it
 * would have computed is not there. VF_ESKIPPED when, with no failure to
 * report, a child it waited for was skipped for the failure of an op
 * pushed after it, as vf_var_wait() says. VF_ENOMEM when there is no
 * memory to wait with: it waited for nothing, and the next call waits for
 * these children too. VF_EINVAL when `run`
 * is NULL or not the running op's (call it from the op's own function, on
 * its thread: its run handle is valid only there, not in another engine's
 * `done` callback run above the op's wait). An op that pushed nothing
 * returns 0 at once.
 */
VF_API int vf_run_wait_children(vf_run *run, vf_error *err);

/**
 * Block until every pushed op has finished: until the engine has no op
 * pending, those other threads push while it waits included (with another
 * thread pushing steadily it may return late, or never; to wait for what
 * this thread pushed, wait on its vars: vf_var_wait()). Returns 0, or
 * VF_EOPFAILED with the failure first in push order among those since the
 * last vf_engine_wait_all() that no wait reported; then every one of them
 * is cleared (ops pushed later run normally). Of those that only this call
 * could still report (their vars deleted or written since, or none
 * written), the engine keeps the first in push order alone, so a program
 * that never calls it keeps the failures its vars and ops still hold and
 * that first one (and up to as many again between two of its looks, made
 * each time their number doubles), not every failure it ever had.
 * VF_EDEADLK from inside an op
 * (it would wait for itself), and,
 * at once, from inside an op of another engine where the wait could never
 * finish: an op of `e` runs further out on the same thread (the calling op
 * runs inside it: inside its push on the naive engine, say), or the wait
 * would close a cycle of such waits (an op of `e` is in
 * vf_engine_wait_all() on the calling op's engine, or waits for a var
 * (vf_var_wait()) that the calling op writes, or for all of an engine or
 * a var whose running writer waits so in turn, and so on: of the cycle's
 * waits, the one that comes last is refused, and the others then finish).
 * A timed wait (vf_engine_wait_all_timed(), vf_var_wait_timed()) is
 * refused the same way, but closes no cycle for a later wait, for it
 * gives up: that one waits, and finishes once the timed one gave up.
 * A cycle through a var whose writer is queued, not running (an op of `e`
 * waits for a var whose writer waits behind the calling op), is not
 * found, and its waits wait for ever: avoid waits for all of an engine
 * from inside ops of another.
 */
VF_API int vf_engine_wait_all(vf_engine *e, vf_error *err);

/** @name Timed waits
 * @{ */
/**
 * vf_var_wait() and vf_engine_wait_all() giving up after `timeout_ms`
 * milliseconds (negative: never; 0: only look) with VF_ETIMEDOUT, whose detail
 * (vf_error_detail()) names the async ops started and never completed,
 * the usual reason a wait never ends (the oldest first, each whole, a name
 * past 48 bytes cut, then how many more it did not name), and then the ops
 * the engine's workers run (spare threads not), as vf_engine_destroy()'s
 * reports name them (a sync op that does not return; for at least how long
 * since a timed call began); so does vf_engine_destroy_timed()'s. A wait that
 * timed out reports and clears nothing: the failure stays for a later wait. A
 * look (0) at a var leaves nothing behind, and runs nothing, from inside an op
 * too: looks polled in a loop there may never see an op they look for end,
 * where it needs the looping thread (a child queued on a pool of one worker,
 * say); a wait with a timeout runs it, as an untimed one does. A var wait that
 * gave up later leaves its marker queued on the var until the ops it
 * waited for finish (one op more in vf_stats.pending and in the in-flight
 * bound), which the next wait on the var takes over when nothing was
 * pushed on it since; one with ops queued after it (another wait's
 * marker, or an op pushed since, say) is taken off the queue when its wait
 * or a later one on the var gives up: polling a var with timed waits, from
 * any number of threads, with pushes on it between polls or not, holds a
 * marker a thread (two while one gives up), not one a poll. A wait that runs
 * ops itself meanwhile (one inside an op may run the ops it waits for on top of
 * itself, as a look (0) for children may; vf_engine_wait_all() with
 * help_on_wait runs queued ops, one after another, until its deadline, but
 * for an engine with devices, whose ops may wait for device work first)
 * cannot cut short the op it runs: it returns when that op (inside an op,
 * and what it made ready there) has ended, late by that much.
 */
VF_API int vf_var_wait_timed(vf_engine *e, vf_var v, int64_t timeout_ms,
                             vf_error *err);
VF_API int vf_engine_wait_all_timed(vf_engine *e, int64_t timeout_ms,
                                    vf_error *err);
/** vf_run_wait_children() giving up after `timeout_ms` milliseconds in the
 * same way (VF_ETIMEDOUT, reporting nothing). */
VF_API int vf_run_wait_children_timed(vf_run *run, int64_t timeout_ms,
                                      vf_error *err);
/** @} */

/** @} */

/* ------------------------------------------------------------------------ */
/* Graphs: capture and replay                                                */
/* ------------------------------------------------------------------------ */
/**
 * @defgroup graphs Graphs (capture and replay)
 * @brief Record the ops a thread pushes once; launch them again and again.
 *
 * An iterative program pushes the same ops every step. Captured once into a
 * graph, they are launched with one call per step: the launch does not
 * check, sort or queue each op again, but runs them from the dependencies
 * found at capture (docs/DESIGN.md, "Graphs").
 *
 * **A launch is exactly the pushes it recorded.** Launching a graph is
 * equivalent to pushing its ops again, in the order they were recorded, at
 * the point of the launch: after everything pushed before it and before
 * everything pushed after, on every variable. What runs, fails or is
 * skipped, each op's `done`, the versions of the variables, what waits
 * report and vf_engine_stats() are what those pushes give, but for
 * `pending`: a launch that replays (below) counts as one pending op
 * itself, from its push to its last op's end, beside its ops not finished
 * once it runs; one pushed op by op counts as the ops it pushed. Its ops take
 * their places in push order at the launch, one after the other, so a
 * failure among them is ordered as one of those pushes would be.
 *
 * How a launch runs: its ops start once every earlier op that conflicts
 * with *any* op of the graph has finished on that variable (the graph
 * takes its variables together, as one op would), and each variable is
 * let go as soon as the graph's last use of it has finished, so later ops
 * on it need not wait for the whole graph. A graph of sync CPU ops is
 * replayed from its own edges (vf_stats.replays), and so is one of one
 * device's ops (and CPU ops) with vf_graph_device_replay() on; one with
 * async or other device ops, one whose ops name more than VF_MAX_OP_VARS
 * variables together (more than one launch may hold), a launch on an
 * engine that is profiled, logs ops
 * (VF_ENGINE_INFO), has an in-flight bound, bulks this thread's pushes or
 * has a device's pools (made by its first device op pushed, captured or made
 * an operator, and kept for its life: its variables may carry device work
 * in flight), and a
 * launch from inside an op, push the recorded ops one by one instead, with the
 * same result, each op with the argument it had when the launch was made,
 * but for other threads: their pushes may fall between such a launch's
 * ops (as between a thread's pushes), and a variable deleted meanwhile
 * (by another thread, or by an op of the launch run already) fails with
 * VF_ESTALE the pushes of the ops that use it, after those before them were
 * pushed. A launch that replays comes after every other thread's open batch
 * that holds one of its variables (that batch is pushed first), as its pushes
 * would. A variable deleted from inside an op of a launch that replays goes
 * once the graph's hold on it ends, as if deleted after the launch: the
 * graph's later ops on it run (pushed one by one on the naive engine, they
 * would fail with VF_ESTALE), and the next launch fails with VF_ESTALE.
 *
 * **Capture.** Between vf_graph_begin() and vf_graph_end(), this thread's
 * pushes to the engine (vf_engine_push(), vf_operator_push(),
 * vf_operator_push_arg()) are checked as a push checks them (the same
 * errors) and recorded, not run. A capture may not contain what a replay
 * could not repeat: a wait (vf_var_wait(), vf_engine_wait_all() and their
 * timed forms), creating or destroying a variable (vf_var_create(),
 * vf_var_of(), vf_var_destroy()), stopping, starting or shutting the engine
 * down, a launch or a second capture; each is refused with VF_EINVAL and a
 * detail naming the capture, and the capture goes on. A `nonblocking` op
 * (or operator) is refused too (a launch never half-happens). Other
 * threads, other engines and ops running on the engine push as usual. A
 * capture is the thread's own code's: an op, a `done` callback or device
 * work that runs on the thread meanwhile (inside a call of the thread's: a
 * push to a naive engine, a completion, a wait that helps) pushes and
 * waits as anywhere else, and vf_graph_capturing() is false there. An
 * op's `name`, a `done` and a pointer argument (arg_size 0) are kept as
 * given: they must stay valid while the graph lives and its launched ops
 * run. A copied argument (arg_size > 0) is copied once at capture and
 * again into each launch. Each launch calls each op's `done` once, as each
 * push does: a `done` that frees a pointer argument must not be recorded
 * (the next launch would use what it freed); give such an op a copied
 * argument instead. An operator the graph pushes stays alive for the
 * graph (vf_operator_destroy() lets go of the handle only).
 *
 * Ops pushed from inside a launched op are ordinary pushes: a child of an
 * op of a launch that replays goes where the same push from inside the
 * same op would (@ref waits, "An op pushed from inside a running op"),
 * right behind its parent on a variable the parent writes and beside
 * it on one both only read, before the graph's later ops on the variable
 * and what was pushed after the launch, and a wait for it inside its parent
 * (vf_run_wait_children()) returns what that push's would (it ran after
 * the graph's later ops, and that wait got VF_EDEADLK, before this was
 * fixed: found trying graphs from C++ as a user). On the naive engine,
 * which runs the graph's ops one after the other, so does a child on a
 * variable the graph writes and its parent does not use: its push finds
 * the variable free of the ops before its parent, as the same push does,
 * so it runs at its push when nothing else holds it back, before the
 * graph's later ops in any case, and its parent's waits for it
 * (vf_run_wait_children(), vf_var_wait() on the variable, a look) return
 * what the push's would (it ran after them, the first wait got
 * VF_EDEADLK and the second returned before it had run: found by a user
 * tester). There the launch runs its later ops on a variable once such a
 * child has finished: an async one's end runs the rest of the launch (the
 * call that launched returns meanwhile), as it would run the same ops
 * pushed and queued behind it; all the launch's later ops wait with it,
 * where pushed ones that do not depend on the child would run before it
 * ends, so their order against the children of those that do can differ
 * from the pushes' (a child of a later op on a variable an independent
 * later op writes, say). These run after the graph's later ops on
 * the variable, as a push after the launch would: on the threaded
 * engines, a child on a variable its parent does not use; on every
 * engine, a child that takes its place at its push (see @ref waits, "An
 * op pushed from inside a running op": one that writes a variable its
 * parent only reads, or would queue behind another op, a sibling pushed
 * before it that has not run, say; on the naive
 * engine, one pushed after its parent's child that reads it beside the
 * parent goes before the graph's later ops), and on the naive engine one
 * that writes a variable the graph holds only to read by then (no op of
 * the graph writes it, or none after an op whose child read it beside
 * it); an op pushed further down (a child's child, ...) on a variable its
 * own parent does not use; and, in a graph replayed as one device graph
 * (vf_graph_device_replay()), a child of its CPU op on a variable the
 * graph holds. A wait for such a
 * child inside its parent, vf_run_wait_children(), waits for the graph's
 * later ops, which wait for the parent: VF_EDEADLK. A wait from inside an
 * op of a launch that replays, on a variable the graph writes, waits for
 * its launch's whole hold on it (the graph takes its variables together,
 * as one op does), not for what other threads and later launches queued
 * on it since: VF_EDEADLK when a later op of the graph uses it and
 * depends on the waiting op, where its push would have waited only for
 * the ops before it (do not record such a wait; push those ops instead).
 * On a variable the waiting op reads itself, it waits for nothing (the
 * graph's ops before it have finished), as its push's would; on one the
 * graph only reads, on the threaded engines, for none of the graph's ops
 * nor for the op's own children queued behind the graph's hold there: it
 * may return before they have run. Otherwise, on the naive engine, and in
 * a launch pushed op by op, a wait inside an op waits for what was before
 * it, as its push would (the op's own children on the variable among
 * them, where one that runs after the graph's later ops, above, makes it
 * VF_EDEADLK; a wait inside an op: see vf_var_wait() for what it may
 * report). So whether a launch
 * replays can change what such a wait returns; a program that must not
 * depend on it records no such wait. A push from a launched op's `done`
 * callback is not its child: in a launch that replays it goes after the
 * graph's hold on its variables, after the graph's later ops there, where
 * on the naive engine the pushes would run it before them (a `done` that
 * pushes on a variable a later op of the graph uses: push those ops
 * instead; on the threaded engines the pushes' order there is the
 * `done`'s timing).
 * @{
 */
/** A recorded sequence of pushes, launched any number of times. */
typedef struct vf_graph vf_graph;

/**
 * Begin capturing this thread's pushes to `e` into a new graph. VF_EINVAL
 * when this thread already captures (on any engine), from inside an op, a
 * `done` callback or device work (vf_run_submit()); VF_ESHUTDOWN; VF_ENOMEM. A
 * capture whose engine was destroyed, by this thread or another, is over (its
 * graph went with the engine): the thread may begin another.
 */
VF_API int vf_graph_begin(vf_engine *e);

/**
 * End this thread's capture on `e`: *out is the graph of the ops recorded
 * since vf_graph_begin() (none is a graph too: its launch does nothing).
 * The dependencies among them and the variables the graph touches are
 * worked out here, once. VF_EINVAL when this thread does not capture on
 * `e` or `out` is NULL (the capture then goes on), VF_ENOMEM (the capture
 * is ended and its graph freed).
 */
VF_API int vf_graph_end(vf_engine *e, vf_graph **out);

/**
 * Launch the graph: push its ops again, as a whole (see above). Returns at
 * once, as a push does (the naive engine runs the ops inside the call);
 * waits as for pushed ops. May be called from any thread, from inside
 * ops, and again before an earlier launch of the same graph finished
 * (the launches are ordered as their calls). Errors: VF_EINVAL (not a
 * graph, destroyed, or this thread captures on `e`), VF_EXDEV (another
 * engine's), VF_ESTALE (a variable of the graph was deleted: nothing of the
 * graph is launched, but for one pushing op by op whose variable was
 * deleted midway: see above; on a stopped engine, a variable whose delete
 * it holds counts as deleted), VF_ESHUTDOWN (the engine was destroyed or
 * shut down before the call: nothing is launched; one that begins while a
 * launch pushes op by op lets it push all its ops), VF_ENOMEM (a launch pushing
 * op by op that runs out of memory midway has pushed the ops before: see
 * above). Out of memory when a replayed launch starts fails each of its ops
 * with VF_ENOMEM (their `done`, their failures on the vars they write).
 */
VF_API int vf_graph_launch(vf_engine *e, vf_graph *g);

/**
 * Change the argument op `index` (0 for the first op recorded, in push
 * order) gets from the next launch on, without capturing again: a time
 * step's index, say. For an op recorded with a copied argument, `arg_size`
 * must be its size and `arg_size` bytes of `arg` are copied (each launch
 * copies them again into its op, as a push would); for one recorded with a
 * pointer (arg_size 0), `arg_size` must be 0 and the pointer is kept. An
 * operator's run counts as recorded with the argument it was pushed with:
 * vf_operator_push_arg()'s, or for vf_operator_push() the operator's own
 * (copied, of its arg_size, when the operator was made with one). A
 * launch already made keeps what it had. VF_EINVAL (bad graph or index, a
 * size that differs, a NULL `arg` with a size), VF_EXDEV, VF_ENOMEM (nothing
 * changed: a launch made before it, not started, could not keep its own).
 */
VF_API int vf_graph_set_arg(vf_engine *e, vf_graph *g, size_t index, void *arg,
                            size_t arg_size);

/**
 * Let the launches of `g` replay its device work as one device graph (a
 * CUDA graph on CUDA: one cudaGraphLaunch in place of a launch, a record
 * and waits per op), or stop them (`on` false, the default).
 *
 * It changes one thing the program sees, which is why it is the
 * program's to turn on: **a launch that replays does not call the ops'
 * functions**. Their functions are called at the launch that records the
 * device graph (the first that replays, and the first after a
 * vf_graph_set_arg()), under the device's capture: the work they submit
 * to vf_run_stream() then is recorded, and every later launch runs that
 * same work again. So turn it on only for ops whose functions do nothing
 * but submit the same work each time (kernels, copies; on the emulated
 * device vf_run_submit()), reading what changes through pointers at the
 * time the work runs. On CUDA a recorded function may submit kernels and
 * copies only: vf_run_submit() (a host function) fails with VF_ENOTSUP
 * there while recording, which fails its op. An op a recorded function
 * pushes is an ordinary push, made once (at the recording); on the naive
 * engine, which would run it on the stream being recorded, a device op
 * for the same device fails with VF_EINVAL instead.
 *
 * Everything else is what the pushes give: each op's `done` is called and
 * its outcome counted once per launch; a failure of an op's work on the
 * device fails that op and skips those that use what it wrote; a
 * function that fails while recording fails its op (or, when the work it
 * follows fails on the device, is skipped with that failure, as its push
 * would be), and that launch runs the ops after it as pushes would (the
 * next one records again). A launch whose variables carry a failure
 * known on the host, that runs under the
 * shutdown notice, or that runs while another launch of the graph records
 * it, runs its ops as their pushes would (their functions are called),
 * and so does one that cannot replay at all (see "How a
 * launch runs" above: an engine profiled or logging ops, and the rest).
 *
 * Replays apply to a graph whose ops are synchronous device ops of one
 * device (not `no_skip`), on a device kind that records device graphs
 * (the emulated device and CUDA), and synchronous CPU ops among them.
 * The CPU ops are not recorded: at every launch each runs where the
 * launch runs, its function called, once the device work it depends on is
 * done, as its push would. The device ops that depend on no CPU op are one
 * device graph, launched first; those that depend on CPU ops, another per
 * step of such dependence, launched after those CPU ops ran. VF_ENOTSUP (with a
 * detail) for any other graph when `on` (no device op, two devices, a
 * `no_skip` device op, an async CPU op); VF_EINVAL (not a graph: NULL or
 * destroyed), VF_EXDEV.
 */
VF_API int vf_graph_device_replay(vf_engine *e, vf_graph *g, bool on);

/** How many ops the graph holds (0 for NULL or a destroyed graph). */
VF_API size_t vf_graph_ops(const vf_graph *g);

/** Whether the calling thread captures a graph on `e` (false for NULL or
 * a destroyed engine): a layer above the C API asks before it records an
 * op whose `done` frees what it runs (varflow.hpp does). */
VF_API bool vf_graph_capturing(vf_engine *e);

/**
 * Destroy the graph: from here on every call on the handle is VF_EINVAL
 * (a graph made later at the same address is that graph's, as with
 * engines); launches still running finish first (the graph is freed after
 * them), and a call on it racing the destroy either does its work or is
 * refused. An engine's destroy frees what the graphs the program did not
 * destroy hold, and retires their handles (about 450 bytes each kept for
 * the life of the process): a call on one then returns VF_EINVAL, even
 * when another engine was made at the old engine's address since.
 * VF_EINVAL, VF_EXDEV.
 */
VF_API int vf_graph_destroy(vf_engine *e, vf_graph *g);
/** @} */

#ifdef __cplusplus
}
#endif

#ifdef VF_CXX11_
/* ------------------------------------------------------------------------ */
/* C++ users of this header                                                  */
/* ------------------------------------------------------------------------ */

/* C++ linkage, also where the header is included inside extern "C" { }, as
 * C headers often are (templates and overloads have none in C). */
extern "C++" {

#include <cstddef>
#include <initializer_list>

#if defined(__has_cpp_attribute)
#if __has_cpp_attribute(clang::lifetimebound)
#define VF_LIFETIMEBOUND_ [[clang::lifetimebound]]
#endif
#endif
#ifndef VF_LIFETIMEBOUND_
#define VF_LIFETIMEBOUND_
#endif

/** What C++'s VF_VARS(a, b) is: a list over the braced list's temporary
 * array, valid until the end of the full-expression that wrote it. */
inline vf_var_list
vf_var_list_of(std::initializer_list<vf_var> vars VF_LIFETIMEBOUND_) noexcept
{
    vf_var_list l = {vars.size() != 0 ? vars.begin() : nullptr,
                     static_cast<int>(vars.size())};
    return l;
}

/** A list of a named array: valid as long as the array. */
template <std::size_t N>
inline vf_var_list vf_var_list_of(const vf_var (&vars)[N]) noexcept
{
    static_assert(N <= 2147483647, "a var list holds at most INT_MAX vars");
    vf_var_list l = {vars, static_cast<int>(N)};
    return l;
}

/** vf_engine_push() and vf_operator_create() taking the op itself, so it can be
 * written in the call, VF_VARS lists and all: vf_engine_push(e, {.fn = f,
 * ...}). */
inline int vf_engine_push(vf_engine *e, const vf_op &op)
{
    return vf_engine_push(e, &op);
}

inline int vf_operator_create(vf_engine *e, const vf_op &def, vf_operator **out)
{
    return vf_operator_create(e, &def, out);
}
} /* extern "C++" */
#endif /* VF_CXX11_ */

#endif /* VARFLOW_H */
