/*
 * test_fork_inside: a child forked from inside an op, on a worker
 * (lifecycle.c: leave_dead, exec.h: vf__exec_call_fn). That op's run goes
 * on in the parent only; in the child its function returns on the
 * worker's thread, which must end there, before it touches the op's vars,
 * family or queue: the engine was not drained, so another thread of the
 * parent may hold their locks at the fork, for good in the child. It
 * finished the op, and hung on such a lock in 1 fork in 500 (found by a
 * reviewer auditing the fork's locks).
 *
 * Here a thread of the parent holds the lock of the var the forking op
 * writes across the fork, so the child's finish would spin on it for
 * ever: the child must end by itself (its one thread ends), not by its
 * alarm. The same for a fork from the op's `done` callback, which runs
 * before the op's vars are let go (it hung there still, 10 children in
 * 10: found by the fix's reviewer).
 */
#include "runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/async.h"
#include "core/engine.h"
#include "core/spinlock.h"
#include "core/var.h"

/* A forked child's threads and locks are beyond TSan's runtime, and its
 * calls may take an allocator lock a thread of the parent held at the
 * fork under ASan (see test_lifecycle_fork). */
#if defined(TU_TSAN)
#define SKIP_FORK_UNDER_SANITIZERS()                                           \
    TEST_SKIP("under TSan (its runtime cannot follow threads in a forked "     \
              "child: see test_lifecycle_fork)")
#elif defined(TU_ASAN)
#define SKIP_FORK_UNDER_SANITIZERS()                                           \
    TEST_SKIP("under ASan (the child's calls may take an allocator lock a "    \
              "thread of the parent held at the fork: see "                    \
              "test_lifecycle_fork)")
#else
#define SKIP_FORK_UNDER_SANITIZERS() ((void)0)
#endif

typedef struct fork_rig {
    vf_engine *e;
    vf_var v;           /* the var whose lock is held (or none) */
    bool async_lock;    /* the async ops' list's lock instead */
    vf_completion done; /* an async op the child completes */
    atomic_int in_op, lock_held, forked;
    int child_status;
} fork_rig;

/* Fork once the other thread holds its lock: 0 in the child (killed by an
 * alarm if it gets stuck on the lock); 1 in the parent, once the child
 * ended (its status noted); -1 when the lock was never held. */
static int fork_when_held(fork_rig *r)
{
    if (!tu_wait_flag(&r->lock_held, 1, TU_TIMEOUT))
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        return 0;
    }
    int status = -1;
    if (pid > 0)
        waitpid(pid, &status, 0);
    r->child_status = status;
    atomic_store(&r->forked, 1);
    return 1;
}

static int fork_with_lock_held(vf_run *run, void *arg)
{
    (void)run;
    fork_rig *r = arg;
    atomic_store(&r->in_op, 1);
    /* In the child it returns on the worker's thread. */
    return fork_when_held(r) < 0 ? VF_ETIMEDOUT : 0;
}

/* The same from the op's `done` callback, which runs on the worker before
 * the op's vars are let go. */
static int enter_op(vf_run *run, void *arg)
{
    (void)run;
    atomic_store(&((fork_rig *)arg)->in_op, 1);
    return 0;
}

static void fork_from_done(void *arg, int status)
{
    (void)status;
    (void)fork_when_held(arg); /* in the child it returns on the worker */
}

/* Hold the rig's lock from the op's start until the fork was made. */
static void *hold_lock(void *arg)
{
    fork_rig *r = arg;
    REQUIRE(tu_wait_flag(&r->in_op, 1, TU_TIMEOUT));
    vf__var *var = NULL;
    if (r->async_lock) {
        pthread_mutex_lock(&r->e->async.lock);
    } else {
        REQUIRE(vf__var_lookup(&r->e->vars, r->v, &var) == 0);
        vf__spin_lock(&var->lock);
    }
    atomic_store(&r->lock_held, 1);
    REQUIRE(tu_wait_flag(&r->forked, 1, 60.0));
    if (r->async_lock)
        pthread_mutex_unlock(&r->e->async.lock);
    else
        vf__spin_unlock(&var->lock);
    return NULL;
}

/* The child's status: ended by itself, with 0. */
static void check_child(const fork_rig *r, const char *what)
{
    if (WIFSIGNALED(r->child_status))
        CHECK_REPORT_("%s: the child was killed by signal %d (stuck on a "
                      "lock)",
                      what, WTERMSIG(r->child_status));
    else
        CHECK(WIFEXITED(r->child_status) && WEXITSTATUS(r->child_status) == 0);
}

TEST_CASE(a_worker_forked_inside_its_op_ends_in_the_child)
{
#if defined(TU_TSAN)
    TEST_SKIP("under TSan (its runtime cannot follow threads in a forked "
              "child: see test_lifecycle_fork)");
#elif defined(TU_ASAN)
    TEST_SKIP("under ASan (a thread's end in a forked child takes an "
              "allocator lock a thread of the parent may have held at the "
              "fork: see test_lifecycle_fork)");
#endif
    static const vf_engine_type kinds[] = {VF_ENGINE_POOLED,
                                           VF_ENGINE_PERDEVICE};
    for (int k = 0; k < 4; k++) { /* from the function, then from `done` */
        fork_rig r = {.child_status = -1};
        check_context_ = k >= 2 ? "from done" : "from the function";
        CHECK_OK(vf_engine_create(
            &r.e, &(vf_config){.type = kinds[k % 2], .cpu_workers = 2}));
        REQUIRE(r.e != NULL);
        r.v = tu_var(r.e);
        pthread_t t = tu_thread_start(hold_lock, &r);
        bool from_done = k >= 2;
        CHECK_OK(vf_engine_push(
            r.e, &(vf_op){.fn = from_done ? enter_op : fork_with_lock_held,
                          .done = from_done ? fork_from_done : NULL,
                          .arg = &r,
                          .writes = VF_VARS(r.v)}));
        CHECK_OK(vf_engine_wait_all(r.e, NULL));
        tu_thread_join(t);
        check_child(&r, vf_engine_type_name(kinds[k % 2]));
        CHECK_OK(vf_engine_destroy(r.e));
    }
    check_context_ = NULL;
}

/* A child forked from inside an op completes an async op of the engine:
 * VF_ESHUTDOWN, whatever locks another thread of the parent held. The
 * list of async ops in flight was updated before the test: held at the
 * fork (by a timed wait naming them, say), it blocked the child's
 * completion for ever (found by a reviewer of the lifecycle code). */
static int fork_and_complete(vf_run *run, void *arg)
{
    (void)run;
    fork_rig *r = arg;
    atomic_store(&r->in_op, 1);
    int forked = fork_when_held(r);
    if (forked == 0)
        _exit(vf_completion_finish(r->done, 0, NULL) == VF_ESHUTDOWN ? 0 : 1);
    return forked < 0 ? VF_ETIMEDOUT : 0;
}

TEST_CASE(a_completion_in_a_child_forked_inside_an_op_is_refused)
{
    SKIP_FORK_UNDER_SANITIZERS();
    fork_rig r = {.child_status = -1, .async_lock = true};
    CHECK_OK(vf_engine_create(
        &r.e, &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 2}));
    REQUIRE(r.e != NULL);
    CHECK_OK(vf_engine_push(
        r.e, &(vf_op){.async_fn = tu_keep_completion, .arg = &r.done}));
    pthread_t t = tu_thread_start(hold_lock, &r);
    CHECK_OK(vf_engine_push(r.e, &(vf_op){.fn = fork_and_complete, .arg = &r}));
    tu_thread_join(t);
    check_child(&r, "a completion");
    CHECK_OK(vf_completion_finish(r.done, 0, NULL));
    CHECK_OK(vf_engine_wait_all(r.e, NULL));
    CHECK_OK(vf_engine_destroy(r.e));
}

/* The same lock held while an async op's function, run on the pushing
 * thread, forks: in the child the function returns, and its return must
 * not take that lock to count the call over (it hung there: found by the
 * reviewer of the count; fails without). */
static void fork_in_async(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    fork_rig *r = arg;
    atomic_store(&r->in_op, 1);
    if (fork_when_held(r) == 0)
        return;                  /* in the child, on the pushing thread */
    atomic_store(&r->forked, 1); /* the holder lets go, whatever happened */
    CHECK_OK(vf_completion_finish(done, 0, NULL));
}

TEST_CASE(an_async_function_forked_inside_returns_in_the_child)
{
    SKIP_FORK_UNDER_SANITIZERS();
    fork_rig r = {.child_status = -1, .async_lock = true};
    pid_t parent = getpid();
    CHECK_OK(vf_engine_create(
        &r.e, &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 2}));
    REQUIRE(r.e != NULL);
    pthread_t t = tu_thread_start(hold_lock, &r);
    /* Ready at its push: its function runs here. */
    (void)vf_engine_push(r.e, &(vf_op){.async_fn = fork_in_async, .arg = &r});
    if (getpid() != parent)
        _exit(0); /* the child: the function and the push returned */
    tu_thread_join(t);
    check_child(&r, "an async function's return");
    CHECK_OK(vf_engine_wait_all(r.e, NULL));
    CHECK_OK(vf_engine_destroy(r.e));
}

TEST_MAIN("test_fork_inside", 120)
