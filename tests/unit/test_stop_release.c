/*
 * test_stop_release: a service thread's push goes through a stop's drain
 * (src/core/lifecycle.h), on every engine kind. The cases read
 * `life.holding` and `life.nheld`, internals, to push only once the stop
 * holds and to see what it holds.
 *
 * - An async op completed by an op a service thread pushes once the stop
 *   began: the push goes through, the op completes and the stop returns;
 *   a push after the stop returned is held until the start. The stop
 *   waited for ever (found by a user tester).
 * - Order: once a plain thread's push on a var is held, a service
 *   thread's push on that var is held behind it (nothing overtakes a held
 *   op), while one naming no variable goes through; after the start the
 *   var holds the serial value.
 * - The in-flight bound: a service thread's push goes over it, through
 *   the drain too, so a completion at the bound comes through (a drain
 *   that let held pushes go under the bound waited for ever: the reviewer
 *   of a first fix).
 * - A steady pipeline: a plain thread starts an async request every
 *   millisecond, a service thread completes each by a pushed op 3 ms
 *   later: the stop returns (held requests wait), and every request is
 *   completed once the engine starts again (a drain that let held pushes
 *   go let the new requests go too, for ever: the reviewer).
 * - fork(): the engines drain together, so an async op of one completed
 *   by a service thread's op pushed to another comes through; and a fork
 *   from inside an op while another thread stops that op's engine leaves
 *   it out of its drain (a shared drain that took it in waited for the
 *   forking op for ever: the reviewer); a service thread's request that
 *   went through a drain as it ended gets its completion through too (the
 *   drain is over only when nothing is pending at one instant, seen under
 *   the engines' locks: the next reviewer's fork waited for it for ever).
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
    vf_var own;             /* a var the finisher writes, with `has_own` */
    bool has_own;
    vf_completion done; /* the async op's */
    atomic_int started, finisher_ran, pushed_rc;
} completer_case;

static void keeps_its_completion(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    completer_case *c = arg;
    c->done = done;
    atomic_store(&c->started, 1);
}

/* An async op on `e` that writes v, started (in flight) when this
 * returns; c->done completes it. */
static void async_op_in_flight(completer_case *c, vf_engine *e, vf_var v)
{
    c->e = c->push_to = e;
    atomic_store(&c->pushed_rc, 1);
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = keeps_its_completion,
                                        .arg = c,
                                        .writes = VF_VARS(v)}));
    REQUIRE(tu_wait_flag(&c->started, 1, TU_TIMEOUT));
}

static int finishes_the_async_op(vf_run *run, void *arg)
{
    (void)run;
    completer_case *c = arg;
    atomic_store(&c->finisher_ran, 1);
    return vf_completion_finish(c->done, 0, NULL);
}

/* A service thread pushes the finisher once the stops hold. */
static void *service_pushes_finisher(void *arg)
{
    completer_case *c = arg;
    vf_thread_set_service(true);
    until_holding(c->e);
    until_holding(c->push_to);
    vf_var_list writes = {&c->own, c->has_own ? 1 : 0};
    atomic_store(
        &c->pushed_rc,
        vf_engine_push(
            c->push_to,
            &(vf_op){.fn = finishes_the_async_op, .arg = c, .writes = writes}));
    vf_thread_set_service(false);
    return NULL;
}

static int sets_flag(vf_run *run, void *arg)
{
    (void)run;
    atomic_store((atomic_int *)arg, 1);
    return 0;
}

TEST_KIND_CASE(a_service_threads_completion_reaches_its_op, k)
{
    for (int own = 0; own < 2; own++) { /* naming no var, and one */
        vf_engine *e = tu_engine(k);
        vf_var v = tu_var(e);
        completer_case *c = calloc(1, sizeof *c);
        REQUIRE(c != NULL);
        if (own) { /* nothing held yet: it goes through all the same */
            c->own = tu_var(e);
            c->has_own = true;
        }
        async_op_in_flight(c, e, v);
        pthread_t t = tu_thread_start(service_pushes_finisher, c);
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
}

/* --- order ---------------------------------------------------------------
 */

typedef struct order_case {
    completer_case c;
    vf_var s;
    int value; /* under s */
    atomic_int plain_held;
} order_case;

static order_case *the_order_case; /* one case at a time */

static int appends_one(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    the_order_case->value = the_order_case->value * 10 + 1;
    return 0;
}

static int appends_two(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    the_order_case->value = the_order_case->value * 10 + 2;
    return 0;
}

/* A plain thread's push on s, held. */
static void *plain_pushes_one(void *arg)
{
    order_case *o = arg;
    until_holding(o->c.e);
    CHECK_OK(vf_engine_push(
        o->c.e, &(vf_op){.fn = appends_one, .writes = VF_VARS(o->s)}));
    atomic_store(&o->plain_held, 1);
    return NULL;
}

/* Then a service thread's on s (held behind it), and the finisher, which
 * names no var (through). */
static void *service_pushes_two_then_finisher(void *arg)
{
    order_case *o = arg;
    vf_thread_set_service(true);
    while (!atomic_load(&o->plain_held))
        sched_yield();
    CHECK_OK(vf_engine_push(
        o->c.e, &(vf_op){.fn = appends_two, .writes = VF_VARS(o->s)}));
    CHECK_EQ(held_now(o->c.e), 2);
    CHECK_OK(vf_engine_push(
        o->c.e, &(vf_op){.fn = finishes_the_async_op, .arg = &o->c}));
    vf_thread_set_service(false);
    return NULL;
}

TEST_KIND_CASE(a_service_push_never_overtakes_a_held_one, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    order_case *o = calloc(1, sizeof *o);
    REQUIRE(o != NULL);
    the_order_case = o;
    o->s = tu_var(e);
    async_op_in_flight(&o->c, e, v);
    pthread_t t1 = tu_thread_start(plain_pushes_one, o);
    pthread_t t2 = tu_thread_start(service_pushes_two_then_finisher, o);
    CHECK_OK(vf_engine_stop(e));
    tu_thread_join(t1);
    tu_thread_join(t2);
    CHECK_EQ(atomic_load(&o->c.finisher_ran), 1);
    CHECK_EQ(o->value, 0); /* both held */
    CHECK_OK(vf_engine_start(e));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(o->value, 12);
    tu_finish_engine(e);
    free(o);
}

/* --- the in-flight bound --------------------------------------------------
 */

TEST_CASE(a_service_push_goes_over_the_bound_through_a_drain)
{
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                               .cpu_workers = 2,
                                               .max_inflight = 1}));
    REQUIRE(e != NULL);
    vf_var v = tu_var(e);
    completer_case *c = calloc(1, sizeof *c);
    REQUIRE(c != NULL);
    async_op_in_flight(c, e, v); /* takes the room */
    pthread_t t = tu_thread_start(service_pushes_finisher, c);
    CHECK_OK(vf_engine_stop(e));
    tu_thread_join(t);
    CHECK_EQ(atomic_load(&c->pushed_rc), 0);
    CHECK_EQ(atomic_load(&c->finisher_ran), 1);
    CHECK_OK(vf_engine_start(e));
    tu_finish_engine(e);
    free(c);
}

/* --- a steady pipeline ----------------------------------------------------
 */

#define RING 1024

typedef struct pipeline {
    vf_engine *e;
    pthread_mutex_t lock; /* the requests to complete */
    vf_completion ring[RING];
    double due[RING];
    int head, tail;
    atomic_int stop_requests, stop_service, refused;
    atomic_long requested, finished;
} pipeline;

static void request_starts(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    pipeline *p = arg;
    pthread_mutex_lock(&p->lock);
    if ((p->tail + 1) % RING == p->head) { /* full: completed now */
        pthread_mutex_unlock(&p->lock);
        vf_completion_finish(done, 0, NULL);
        atomic_fetch_add(&p->finished, 1);
        return;
    }
    p->ring[p->tail] = done;
    p->due[p->tail] = tu_now() + 0.003;
    p->tail = (p->tail + 1) % RING;
    pthread_mutex_unlock(&p->lock);
}

typedef struct finisher_arg {
    pipeline *p;
    vf_completion done;
} finisher_arg;

static int finishes_a_request(vf_run *run, void *arg)
{
    (void)run;
    finisher_arg *f = arg;
    int rc = vf_completion_finish(f->done, 0, NULL);
    atomic_fetch_add(&f->p->finished, 1);
    return rc;
}

/* The I/O thread: completes each request 3 ms after it started, by
 * pushing an op that finishes it (a copied argument). */
static void *io_service(void *arg)
{
    pipeline *p = arg;
    vf_thread_set_service(true);
    for (;;) {
        finisher_arg f = {p, {0}};
        bool have = false;
        pthread_mutex_lock(&p->lock);
        if (p->head != p->tail && p->due[p->head] <= tu_now()) {
            f.done = p->ring[p->head];
            p->head = (p->head + 1) % RING;
            have = true;
        }
        bool empty = p->head == p->tail;
        pthread_mutex_unlock(&p->lock);
        if (have) {
            int rc = vf_engine_push(p->e, &(vf_op){.fn = finishes_a_request,
                                                   .arg = &f,
                                                   .arg_size = sizeof f});
            if (rc != 0)
                atomic_store(&p->refused, rc);
        } else if (empty && atomic_load(&p->stop_service)) {
            break;
        } else {
            nanosleep(&(struct timespec){0, 100000L}, NULL);
        }
    }
    vf_thread_set_service(false);
    return NULL;
}

/* A plain thread: a request every millisecond. */
static void *requests(void *arg)
{
    pipeline *p = arg;
    while (!atomic_load(&p->stop_requests)) {
        int rc = vf_engine_push(p->e,
                                &(vf_op){.async_fn = request_starts, .arg = p});
        if (rc != 0) {
            atomic_store(&p->refused, rc);
            break;
        }
        atomic_fetch_add(&p->requested, 1);
        nanosleep(&(struct timespec){0, 1000000L}, NULL);
    }
    return NULL;
}

TEST_KIND_CASE(a_steady_pipeline_stops, k)
{
    pipeline *p = calloc(1, sizeof *p);
    REQUIRE(p != NULL);
    pthread_mutex_init(&p->lock, NULL);
    p->e = tu_engine(k);
    pthread_t io = tu_thread_start(io_service, p);
    pthread_t req = tu_thread_start(requests, p);
    while (atomic_load(&p->requested) < 20)
        sched_yield();
    CHECK_OK(vf_engine_stop(p->e)); /* the watchdog catches for ever */
    /* Stopped: what was started is finished, new requests are held. */
    long requested = atomic_load(&p->requested);
    while (atomic_load(&p->requested) < requested + 5 &&
           atomic_load(&p->refused) == 0)
        sched_yield();
    CHECK(held_now(p->e) >= 5);
    atomic_store(&p->stop_requests, 1);
    tu_thread_join(req);
    CHECK_OK(vf_engine_start(p->e));
    while (atomic_load(&p->finished) < atomic_load(&p->requested))
        sched_yield();
    atomic_store(&p->stop_service, 1);
    tu_thread_join(io);
    CHECK_OK(vf_engine_wait_all(p->e, NULL));
    CHECK_EQ(atomic_load(&p->refused), 0);
    CHECK_EQ(atomic_load(&p->finished), atomic_load(&p->requested));
    tu_finish_engine(p->e);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* --- fork ----------------------------------------------------------------
 */

#if defined(TU_TSAN) || defined(TU_ASAN)
/* As test_lifecycle_fork's cases: TSan cannot follow threads started in a
 * forked child, and ASan's allocator has no fork handlers (a thread of the
 * test allocates as the fork happens). */
#define SKIP_FORK_UNDER_SANITIZERS()                                           \
    TEST_SKIP("under the sanitizers (see test_lifecycle_fork)")
#else
#define SKIP_FORK_UNDER_SANITIZERS() ((void)0)
#endif

TEST_CASE(a_fork_drains_the_engines_together)
{
    SKIP_FORK_UNDER_SANITIZERS();
    vf_engine *e1 = NULL, *e2 = NULL;
    CHECK_OK(vf_engine_create(
        &e1, &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 2}));
    CHECK_OK(vf_engine_create(
        &e2, &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 2}));
    REQUIRE(e1 != NULL && e2 != NULL);
    vf_var v = tu_var(e1);
    completer_case *c = calloc(1, sizeof *c);
    REQUIRE(c != NULL);
    async_op_in_flight(c, e1, v);
    c->push_to = e2; /* the finisher goes to the other engine */
    pthread_t t = tu_thread_start(service_pushes_finisher, c);
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

typedef struct fork_inside_case {
    vf_engine *e;
    atomic_int stop_began, forked, child_status;
} fork_inside_case;

static int forks_once_the_stop_drains(vf_run *run, void *arg)
{
    (void)run;
    fork_inside_case *f = arg;
    while (!atomic_load(&f->stop_began))
        sched_yield();
    until_holding(f->e);
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int status = -1;
    waitpid(pid, &status, 0);
    atomic_store(&f->child_status, status);
    atomic_store(&f->forked, 1);
    return 0;
}

static void *stops(void *arg)
{
    fork_inside_case *f = arg;
    atomic_store(&f->stop_began, 1);
    CHECK_OK(vf_engine_stop(f->e));
    return NULL;
}

TEST_CASE(a_fork_inside_an_op_beside_another_threads_stop)
{
    SKIP_FORK_UNDER_SANITIZERS();
    fork_inside_case *f = calloc(1, sizeof *f);
    REQUIRE(f != NULL);
    CHECK_OK(vf_engine_create(
        &f->e, &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 2}));
    REQUIRE(f->e != NULL);
    CHECK_OK(vf_engine_push(
        f->e, &(vf_op){.fn = forks_once_the_stop_drains, .arg = f}));
    pthread_t t = tu_thread_start(stops, f);
    tu_thread_join(t); /* the stop waited for the op, which forked */
    CHECK_EQ(atomic_load(&f->forked), 1);
    CHECK_EQ(atomic_load(&f->child_status), 0);
    CHECK_OK(vf_engine_start(f->e));
    tu_finish_engine(f->e);
    free(f);
}

/* A service thread makes requests on X (async ops with a pause between
 * them, each completed by an op it pushes), while a thread forks, the
 * fork's drain kept a while by ops on Y: a request that went through X's
 * drain after X was seen drained but before the drain ended must get its
 * completion through too. The fork waited for it for ever, its completion
 * held, within the first 5 forks (the reviewer's program). */
typedef struct requests_case {
    vf_engine *x;
    vf_completion done;
    atomic_int started, finished, quit;
} requests_case;

static void request_keeps_its_completion(vf_run *run, void *arg,
                                         vf_completion done)
{
    (void)run;
    requests_case *r = arg;
    r->done = done;
    atomic_store(&r->started, 1);
}

static void request_done(void *arg, int status)
{
    (void)status;
    atomic_fetch_add(&((requests_case *)arg)->finished, 1);
}

static int completes_the_request(vf_run *run, void *arg)
{
    (void)run;
    return vf_completion_finish(((requests_case *)arg)->done, 0, NULL);
}

static void *service_makes_requests(void *arg)
{
    requests_case *r = arg;
    vf_thread_set_service(true);
    unsigned seed = 1;
    while (!atomic_load(&r->quit)) {
        int before = atomic_load(&r->finished);
        atomic_store(&r->started, 0);
        CHECK_OK(vf_engine_push(
            r->x, &(vf_op){.async_fn = request_keeps_its_completion,
                           .done = request_done,
                           .arg = r}));
        while (!atomic_load(&r->started))
            sched_yield();
        CHECK_OK(vf_engine_push(
            r->x, &(vf_op){.fn = completes_the_request, .arg = r}));
        while (atomic_load(&r->finished) == before)
            sched_yield();
        nanosleep(&(struct timespec){0, (long)(rand_r(&seed) % 300) * 1000L},
                  NULL);
    }
    vf_thread_set_service(false);
    return NULL;
}

static int sleeps_3_ms(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    nanosleep(&(struct timespec){0, 3000000L}, NULL);
    return 0;
}

TEST_CASE(a_request_through_the_end_of_a_drain_gets_its_completion)
{
    SKIP_FORK_UNDER_SANITIZERS();
    vf_engine *y = NULL;
    requests_case *r = calloc(1, sizeof *r);
    REQUIRE(r != NULL);
    const vf_config cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 2};
    CHECK_OK(vf_engine_create(&y, &cfg));
    CHECK_OK(vf_engine_create(&r->x, &cfg));
    REQUIRE(y != NULL && r->x != NULL);
    pthread_t service = tu_thread_start(service_makes_requests, r);
    for (int i = 0; i < 100; i++) {
        for (int k = 0; k < 3; k++)
            CHECK_OK(vf_engine_push(y, &(vf_op){.fn = sleeps_3_ms}));
        fflush(NULL);
        pid_t pid = fork(); /* the watchdog catches one that never returns */
        REQUIRE(pid >= 0);
        if (pid == 0)
            _exit(0);
        CHECK_EQ(waitpid(pid, NULL, 0), pid);
    }
    atomic_store(&r->quit, 1);
    tu_thread_join(service);
    CHECK(atomic_load(&r->finished) > 0);
    tu_finish_engine(r->x);
    tu_finish_engine(y);
    free(r);
}

TEST_MAIN("test_stop_release", 120)
