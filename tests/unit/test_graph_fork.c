/*
 * test_graph_fork: fork (lifecycle.c's handlers) while another thread
 * holds a graph's lock, as a thread launching a graph or setting an
 * argument does for a moment. The child's start pushes the launches the
 * stop held, and a launch takes its instance under that lock
 * (vf__graph_bind): inherited held by a thread the child does not have,
 * it hung the child (found trying fork with graph launches from another
 * thread as a user). The handlers now take every graph's lock before the
 * fork, waiting for the holder (vf__graph_fork_lock). The test holds the
 * lock itself, from a second thread, over the fork.
 */
#include "runner.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/graph_impl.h"

static int count_up(vf_run *run, void *arg)
{
    (void)run;
    ++*(long *)arg;
    return 0;
}

typedef struct holder {
    vf_graph *g;
    tu_gate holding;
} holder;

/* Hold the graph's lock for 200 ms: the fork is made meanwhile. */
static void *hold_graph_lock(void *arg)
{
    holder *h = arg;
    pthread_mutex_lock(&h->g->lock);
    tu_gate_open(&h->holding);
    nanosleep(&(struct timespec){0, 200 * 1000000L}, NULL);
    pthread_mutex_unlock(&h->g->lock);
    return NULL;
}

TEST_CASE(fork_while_another_thread_holds_a_graphs_lock)
{
#if defined(TU_TSAN)
    TEST_SKIP("under TSan (its runtime cannot follow threads started in a "
              "forked child: see test_lifecycle_fork)");
#endif
    vf_engine *e = tu_engine(
        &(tu_kind){.name = "pooled/2",
                   .cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 2}});
    vf_var a = tu_var(e);
    long n = 0;
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = count_up, .arg = &n, .writes = VF_VARS(a)}));
    CHECK_OK(vf_graph_end(e, &g));
    REQUIRE(g != NULL);
    /* A launch held by the stop: the child's start pushes it. */
    CHECK_OK(vf_engine_stop(e));
    CHECK_OK(vf_graph_launch(e, g));
    holder h = {.g = g};
    tu_gate_init(&h.holding);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, hold_graph_lock, &h) == 0);
    REQUIRE(tu_gate_wait(&h.holding, TU_TIMEOUT));
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(20); /* a hung child is killed: the parent sees the signal */
        int bad = vf_engine_start(e) != 0;
        bad += vf_var_wait(e, a, NULL) != 0;
        bad += n != 1;
        _exit(bad);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status))
        CHECK_REPORT_("the child died of signal %d (SIGALRM: it hung)",
                      WTERMSIG(status));
    else
        CHECK_EQ(WEXITSTATUS(status), 0);
    REQUIRE(pthread_join(t, NULL) == 0);
    tu_gate_destroy(&h.holding);
    CHECK_OK(vf_engine_start(e));
    CHECK_OK(vf_var_wait(e, a, NULL));
    CHECK_EQ(n, 1);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

/* A graph planned on 4 workers, launched in a forked child whose pool
 * has fewer (fork_child_workers 1 and 3): the nodes planned at home on a
 * worker the child's pool lacks go where nodes without a home go. They
 * were sent past the pool's end: the child crashed, or hung with 2
 * workers in the parent (found trying features combined as a user). */
TEST_CASE(a_forked_child_launches_a_graph_planned_on_more_workers)
{
#if defined(TU_TSAN)
    TEST_SKIP("under TSan (its runtime cannot follow threads started in a "
              "forked child: see test_lifecycle_fork)");
#endif
    enum { N = 16 };
    const int child_workers[2] = {1, 3};
    for (int c = 0; c < 2; c++) {
        vf_engine *e = tu_engine(
            &(tu_kind){.name = "pooled/4",
                       .cfg = {.type = VF_ENGINE_POOLED,
                               .cpu_workers = 4,
                               .fork_child_workers = child_workers[c]}});
        vf_var v[N];
        long n[N] = {0};
        vf_graph *g = NULL;
        for (int i = 0; i < N; i++)
            v[i] = tu_var(e);
        CHECK_OK(vf_graph_begin(e));
        for (int i = 0; i < N; i++) {
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = count_up,
                                                .arg = &n[i],
                                                .writes = VF_VARS(v[i])}));
        }
        CHECK_OK(vf_graph_end(e, &g));
        REQUIRE(g != NULL);
        int homes[N];
        REQUIRE(vf__graph_homes(g, homes, N) == N);
        CHECK_EQ(homes[N - 1], 3); /* the last of the 16 on worker 3 */
        CHECK_OK(vf_graph_launch(e, g));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        fflush(NULL);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            alarm(20); /* a hung child is killed: the parent sees it */
            int bad = 0;
            for (int k = 0; k < 3; k++)
                bad += vf_graph_launch(e, g) != 0;
            bad += vf_engine_wait_all(e, NULL) != 0;
            for (int i = 0; i < N; i++)
                bad += n[i] != 4;
            _exit(bad);
        }
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        if (WIFSIGNALED(status))
            CHECK_REPORT_("%d workers in the child: it died of signal %d "
                          "(SIGALRM: it hung)",
                          child_workers[c], WTERMSIG(status));
        else if (WEXITSTATUS(status) != 0)
            CHECK_REPORT_("%d workers in the child: %d checks failed there",
                          child_workers[c], WEXITSTATUS(status));
        CHECK_OK(vf_graph_destroy(e, g));
        tu_finish_engine(e);
    }
}

TEST_MAIN("test_graph_fork", 60)
