/*
 * test_stop_release: a stop's drain lets its held pushes go while it
 * waits for an async op an earlier op started (src/core/lifecycle.c:
 * drain), on every engine kind. The cases read `life.holding` and
 * `life.nheld`, internals, to push only once the stop holds and to see
 * what it holds.
 *
 * - An async op completed by an op another thread pushes once the stop
 *   began: the push is held, the drain lets it go, the op completes and
 *   the stop returns. A push after the stop returned stays held until the
 *   start. The stop waited for ever (found by a user tester).
 * - Order: a thread pushes a fold on one var through the drain (the
 *   completion among its pushes) and after the stop returned; after the
 *   start the var holds the serial fold, and what it pushed once the stop
 *   returned ran only at the start.
 * - A thread pushing async ops without pause (each completed by a service
 *   thread a millisecond later) cannot keep the stop going: the drain lets
 *   go only while an op pushed before its first release owes it a
 *   completion, and once the stop returns that thread's pushes are held
 *   (the reviewer of a first fix: its stop never returned).
 * - The in-flight bound holds for the ops a drain lets go: with a bound
 *   of 2 and the async op holding one, one op at a time runs until the
 *   op is completed (the reviewer of a first fix saw 2-3).
 * - fork(): the engines drain together, so an async op of one completed
 *   by an op pushed to another once both hold comes through (the fork
 *   stopped one engine, then drained the other, for ever).
 */
#include "runner.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/engine.h"

/* Until `e`'s stop holds pushes. */
static void until_holding(vf_engine *e)
{
    while (!atomic_load(&e->life.holding))
        sched_yield();
}

static uint64_t held_now(vf_engine *e)
{
    pthread_mutex_lock(&e->life.lock);
    uint64_t n = e->life.nheld;
    pthread_mutex_unlock(&e->life.lock);
    return n;
}

typedef struct completer_case {
    vf_engine *e, *push_to; /* the engine stopped; where the finisher goes */
    vf_completion done;     /* the async op's */
    atomic_int finisher_ran, pushed_rc;
} completer_case;

static int finishes_the_async_op(vf_run *run, void *arg)
{
    (void)run;
    completer_case *c = arg;
    atomic_store(&c->finisher_ran, 1);
    return vf_completion_finish(c->done, 0, NULL);
}

/* Pushes the finisher once the stop (of c->e and of c->push_to) holds. */
static void *push_finisher_when_held(void *arg)
{
    completer_case *c = arg;
    until_holding(c->e);
    until_holding(c->push_to);
    atomic_store(
        &c->pushed_rc,
        vf_engine_push(c->push_to,
                       &(vf_op){.fn = finishes_the_async_op, .arg = c}));
    return NULL;
}

static int sets_flag(vf_run *run, void *arg)
{
    (void)run;
    atomic_store((atomic_int *)arg, 1);
    return 0;
}

TEST_KIND_CASE(a_completion_pushed_during_the_drain_reaches_its_op, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    completer_case *c = calloc(1, sizeof *c);
    REQUIRE(c != NULL);
    c->e = c->push_to = e;
    atomic_store(&c->pushed_rc, 1);
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = tu_keep_completion,
                                        .arg = &c->done,
                                        .writes = VF_VARS(v)}));
    pthread_t t = tu_thread_start(push_finisher_when_held, c);
    CHECK_OK(vf_engine_stop(e));
    tu_thread_join(t);
    CHECK_EQ(atomic_load(&c->pushed_rc), 0);
    CHECK_EQ(atomic_load(&c->finisher_ran), 1);
    /* Stopped now: a push is held until the start. */
    atomic_int later = 0;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = sets_flag, .arg = &later}));
    CHECK_EQ(held_now(e), 1);
    CHECK_EQ(atomic_load(&later), 0);
    CHECK_OK(vf_engine_start(e));
    CHECK_OK(vf_var_wait(e, v, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&later), 1);
    tu_finish_engine(e);
    free(c);
}

/* --- order ---------------------------------------------------------------
 */

#define FOLDS 400
#define FINISHER_AT 150 /* among the first half, pushed during the drain */

typedef struct fold_case {
    completer_case c;
    vf_var s;
    uint32_t value; /* under s */
    atomic_int ran, go_on, first_half_pushed;
    int index[FOLDS];
} fold_case;

static int folds(vf_run *run, void *arg)
{
    (void)run;
    int *i = arg; /* &f->index[*i]: f is index[0]'s case */
    fold_case *f = (fold_case *)((char *)(i - *i) - offsetof(fold_case, index));
    f->value = f->value * 31u + (uint32_t)*i;
    atomic_fetch_add(&f->ran, 1);
    if (*i == FINISHER_AT)
        return finishes_the_async_op(run, &f->c);
    return 0;
}

static void *pushes_folds(void *arg)
{
    fold_case *f = arg;
    until_holding(f->c.e);
    for (int i = 0; i < FOLDS; i++) {
        if (i == FOLDS / 2) {
            atomic_store(&f->first_half_pushed, 1);
            while (!atomic_load(&f->go_on))
                sched_yield();
        }
        f->index[i] = i;
        int rc = vf_engine_push(f->c.e, &(vf_op){.fn = folds,
                                                 .arg = &f->index[i],
                                                 .writes = VF_VARS(f->s)});
        if (rc != 0)
            atomic_store(&f->c.pushed_rc, rc);
    }
    return NULL;
}

TEST_KIND_CASE(a_drain_lets_held_ops_go_in_push_order, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    fold_case *f = calloc(1, sizeof *f);
    REQUIRE(f != NULL);
    f->c.e = f->c.push_to = e;
    f->s = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = tu_keep_completion,
                                        .arg = &f->c.done,
                                        .writes = VF_VARS(v)}));
    pthread_t t = tu_thread_start(pushes_folds, f);
    CHECK_OK(vf_engine_stop(e));
    CHECK(tu_wait_flag(&f->first_half_pushed, 1, TU_TIMEOUT));
    CHECK_EQ(atomic_load(&f->c.finisher_ran), 1);
    int ran_at_stop = atomic_load(&f->ran);
    CHECK(ran_at_stop > FINISHER_AT);
    atomic_store(&f->go_on, 1);
    tu_thread_join(t);
    /* What it pushed once the stop returned is held. */
    CHECK_EQ(atomic_load(&f->ran), ran_at_stop);
    CHECK_EQ(held_now(e), (uint64_t)(FOLDS - ran_at_stop));
    CHECK_OK(vf_engine_start(e));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&f->c.pushed_rc), 0);
    CHECK_EQ(atomic_load(&f->ran), FOLDS);
    uint32_t serial = 0;
    for (int i = 0; i < FOLDS; i++)
        serial = serial * 31u + (uint32_t)i;
    CHECK_EQ(f->value, serial);
    tu_finish_engine(e);
    free(f);
}

/* --- a pusher without pause ------------------------------------------------
 */

#define RING 4096

typedef struct storm_case {
    completer_case c;
    pthread_mutex_t lock; /* the ring of completions to make */
    vf_completion ring[RING];
    double due[RING];
    int head, tail;
    atomic_int stop_pushing, stop_serving, refused;
    atomic_long pushed, completed, pushed_after_stop;
    atomic_int stop_returned;
} storm_case;

static void queued_for_the_service(vf_run *run, void *arg, vf_completion c)
{
    (void)run;
    storm_case *s = arg;
    pthread_mutex_lock(&s->lock);
    if ((s->tail + 1) % RING == s->head) { /* full: completed here */
        pthread_mutex_unlock(&s->lock);
        vf_completion_finish(c, 0, NULL);
        atomic_fetch_add(&s->completed, 1);
        return;
    }
    s->ring[s->tail] = c;
    s->due[s->tail] = tu_now() + 0.001;
    s->tail = (s->tail + 1) % RING;
    pthread_mutex_unlock(&s->lock);
}

/* Completes each queued async op a millisecond after it started. */
static void *serves(void *arg)
{
    storm_case *s = arg;
    for (;;) {
        vf_completion c;
        bool have = false;
        pthread_mutex_lock(&s->lock);
        if (s->head != s->tail && s->due[s->head] <= tu_now()) {
            c = s->ring[s->head];
            s->head = (s->head + 1) % RING;
            have = true;
        }
        bool empty = s->head == s->tail;
        pthread_mutex_unlock(&s->lock);
        if (have) {
            vf_completion_finish(c, 0, NULL);
            atomic_fetch_add(&s->completed, 1);
        } else if (empty && atomic_load(&s->stop_serving)) {
            return NULL;
        } else {
            sched_yield();
        }
    }
}

static void *pushes_async_ops(void *arg)
{
    storm_case *s = arg;
    while (!atomic_load(&s->stop_pushing)) {
        bool after = atomic_load(&s->stop_returned);
        int rc = vf_engine_push(
            s->c.e, &(vf_op){.async_fn = queued_for_the_service, .arg = s});
        if (rc != 0) {
            atomic_store(&s->refused, rc);
            return NULL;
        }
        atomic_fetch_add(&s->pushed, 1);
        if (after)
            atomic_fetch_add(&s->pushed_after_stop, 1);
    }
    return NULL;
}

TEST_KIND_CASE(a_pusher_without_pause_cannot_keep_a_stop_going, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    storm_case *s = calloc(1, sizeof *s);
    REQUIRE(s != NULL);
    pthread_mutex_init(&s->lock, NULL);
    s->c.e = s->c.push_to = e;
    atomic_store(&s->c.pushed_rc, 1);
    /* The op the stop owes a completion through a held push. */
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = tu_keep_completion,
                                        .arg = &s->c.done,
                                        .writes = VF_VARS(v)}));
    pthread_t service = tu_thread_start(serves, s);
    pthread_t pusher = tu_thread_start(pushes_async_ops, s);
    while (atomic_load(&s->pushed) < 100)
        sched_yield();
    pthread_t finisher = tu_thread_start(push_finisher_when_held, &s->c);
    CHECK_OK(vf_engine_stop(e)); /* the watchdog catches a stop for ever */
    atomic_store(&s->stop_returned, 1);
    tu_thread_join(finisher);
    CHECK_EQ(atomic_load(&s->c.finisher_ran), 1);
    /* Held now, however fast it pushes. */
    while (atomic_load(&s->pushed_after_stop) < 100 &&
           atomic_load(&s->refused) == 0)
        sched_yield();
    CHECK(held_now(e) >= 100);
    atomic_store(&s->stop_pushing, 1);
    tu_thread_join(pusher);
    CHECK_EQ(atomic_load(&s->refused), 0);
    CHECK_OK(vf_engine_start(e));
    /* Every async op pushed is served, then waited for. */
    while (atomic_load(&s->completed) < atomic_load(&s->pushed))
        sched_yield();
    CHECK_OK(vf_engine_wait_all(e, NULL));
    atomic_store(&s->stop_serving, 1);
    tu_thread_join(service);
    CHECK_EQ(atomic_load(&s->completed), atomic_load(&s->pushed));
    tu_finish_engine(e);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* --- the in-flight bound --------------------------------------------------
 */

typedef struct bound_case {
    completer_case c;
    atomic_int running, most_running, a_done, bad;
} bound_case;

static int runs_a_while(vf_run *run, void *arg)
{
    (void)run;
    bound_case *b = arg;
    int now = atomic_fetch_add(&b->running, 1) + 1;
    if (!atomic_load(&b->a_done)) {
        int most = atomic_load(&b->most_running);
        while (now > most &&
               !atomic_compare_exchange_weak(&b->most_running, &most, now)) {
        }
    }
    nanosleep(&(struct timespec){0, 1000000L}, NULL);
    atomic_fetch_sub(&b->running, 1);
    return 0;
}

static int finishes_and_notes(vf_run *run, void *arg)
{
    bound_case *b = arg;
    runs_a_while(run, b);
    atomic_store(&b->a_done, 1);
    return finishes_the_async_op(run, &b->c);
}

static void *pushes_bounded(void *arg)
{
    bound_case *b = arg;
    until_holding(b->c.e);
    for (int i = 0; i < 40; i++) {
        int rc = vf_engine_push(
            b->c.e, &(vf_op){.fn = i == 20 ? finishes_and_notes : runs_a_while,
                             .arg = b});
        if (rc != 0)
            atomic_store(&b->bad, rc);
    }
    return NULL;
}

TEST_CASE(the_in_flight_bound_holds_for_what_a_drain_lets_go)
{
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                               .cpu_workers = 4,
                                               .max_inflight = 2}));
    REQUIRE(e != NULL);
    vf_var v = tu_var(e);
    bound_case *b = calloc(1, sizeof *b);
    REQUIRE(b != NULL);
    b->c.e = b->c.push_to = e;
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = tu_keep_completion,
                                        .arg = &b->c.done,
                                        .writes = VF_VARS(v)}));
    pthread_t t = tu_thread_start(pushes_bounded, b);
    CHECK_OK(vf_engine_stop(e));
    tu_thread_join(t);
    CHECK_EQ(atomic_load(&b->bad), 0);
    CHECK_EQ(atomic_load(&b->a_done), 1);
    /* The async op in flight takes one of the two. */
    CHECK(atomic_load(&b->most_running) <= 1);
    CHECK_OK(vf_engine_start(e));
    tu_finish_engine(e);
    free(b);
}

/* --- fork ----------------------------------------------------------------
 */

TEST_CASE(a_fork_drains_the_engines_together)
{
#if defined(TU_TSAN) || defined(TU_ASAN)
    /* As test_lifecycle_fork's cases: TSan cannot follow threads started
     * in a forked child, and ASan's allocator has no fork handlers (the
     * finisher's thread allocates as the fork happens). */
    TEST_SKIP("under the sanitizers (see test_lifecycle_fork)");
#endif
    vf_engine *e1 = NULL, *e2 = NULL;
    CHECK_OK(vf_engine_create(
        &e1, &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 2}));
    CHECK_OK(vf_engine_create(
        &e2, &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 2}));
    REQUIRE(e1 != NULL && e2 != NULL);
    vf_var v = tu_var(e1);
    completer_case *c = calloc(1, sizeof *c);
    REQUIRE(c != NULL);
    c->e = e1;
    c->push_to = e2; /* the finisher goes to the other engine */
    atomic_store(&c->pushed_rc, 1);
    CHECK_OK(vf_engine_push(e1, &(vf_op){.async_fn = tu_keep_completion,
                                         .arg = &c->done,
                                         .writes = VF_VARS(v)}));
    pthread_t t = tu_thread_start(push_finisher_when_held, c);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0)
        _exit(0);
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    tu_thread_join(t);
    CHECK_EQ(atomic_load(&c->pushed_rc), 0);
    CHECK_OK(vf_var_wait(e1, v, NULL));
    CHECK_EQ(atomic_load(&c->finisher_ran), 1);
    tu_finish_engine(e2);
    tu_finish_engine(e1);
    free(c);
}

TEST_MAIN("test_stop_release", 120)
