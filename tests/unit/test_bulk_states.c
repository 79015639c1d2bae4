/*
 * test_bulk_states: what a thread that bulked leaves on an engine when it
 * exits (src/core/bulk.h: vf__bulk_thread_exit), on every engine kind.
 *
 * - exited_threads_leave_no_state: 300 short-lived threads, one after
 *   another, each bulking on one long-lived engine (its own bulk size, or
 *   the engine's), pushing a chain of 40 ops and exiting with its batch
 *   open: every op runs (the chain's count), the engine keeps at most a
 *   state or two (a thread's state, given back at its exit, is the next
 *   thread's), and none is counted as a live thread's. Each exited
 *   thread's state stayed, and every wait walked them all: a service with
 *   a thread per request grew by 1.1 KB a thread and slowed down with the
 *   count of threads that ever lived (found by a user tester);
 * - a_thread_remembers_only_engines_alive: a thread that makes, bulks on
 *   and destroys 1,000 engines, one at a time, remembers at most a few;
 * - a_thread_alive_keeps_its_batch_order: while one thread holds an open
 *   batch on a var, threads that come and go push to the same var: the
 *   var's writes stay in the order of the program's synchronization
 *   (rule 13), across states taken over;
 * - a_thread_finds_its_state_without_the_engine_lock: while the engine's
 *   bulk lock is held, a thread that owns a state there (out of its
 *   lookup cache) bulks on, and a thread that never bulked pushes: each
 *   took that lock and walked every state, and with threads coming faster
 *   than the walks, thousands of them queued on it and a fork waited for
 *   it for ever (found by a user tester).
 */
#include "runner.h"

#include <unistd.h>

#include "core/bulk.h"
#include "core/engine.h"

typedef struct chain {
    vf_engine *e;
    vf_var v;
    long *value; /* written by the ops, in order */
    int thread;
    bool set_size;
} chain;

static int step(vf_run *run, void *arg)
{
    (void)run;
    long *v = arg;
    ++*v;
    return 0;
}

static void *push_chain_and_exit(void *arg)
{
    chain *c = arg;
    if (c->set_size)
        CHECK(vf_bulk_set_size(c->e, 16) >= 0); /* the size before */
    for (int i = 0; i < 40; i++)
        CHECK_OK(vf_engine_push(c->e, &(vf_op){.fn = step,
                                               .arg = c->value,
                                               .writes = tu_list(&c->v, 1)}));
    return NULL; /* its batch still open */
}

TEST_CASE(exited_threads_leave_no_state)
{
    for (int k = 0; k < TU_NKINDS; k++) {
        for (int by_config = 0; by_config < 2; by_config++) {
            vf_config cfg = tu_kinds[k].cfg;
            if (by_config)
                cfg.bulk_size = 16;
            vf_engine *e = tu_engine_cfg(&tu_kinds[k], &cfg);
            long value = 0;
            chain c = {.e = e,
                       .v = tu_var(e),
                       .value = &value,
                       .set_size = !by_config};
            int threads = (int)tu_scaled(300, 60), most = 0;
            for (int t = 0; t < threads; t++) {
                c.thread = t;
                tu_thread_join(tu_thread_start(push_chain_and_exit, &c));
                int n = vf__bulk_states_listed(e);
                if (n > most)
                    most = n;
            }
            CHECK_OK(vf_engine_wait_all(e, NULL));
            CHECK_EQ(value, 40L * threads);
            if (most > 2)
                CHECK_REPORT_("%s%s: %d states listed after %d threads",
                              tu_kinds[k].name, by_config ? ", config" : "",
                              most, threads);
            CHECK_EQ(atomic_load(&e->bulk.nstates), 0);
            tu_finish_engine(e);
        }
    }
}

/* A thread that bulks on the var, alive, and threads that come and go
 * between its pushes: each write appends its own mark, in the order the
 * program's synchronization gives (join before the next push). */
typedef struct ordered {
    vf_engine *e;
    vf_var v;
    int log[256];
    int n;
} ordered;

typedef struct mark_op {
    ordered *o;
    int mark;
} mark_op;

static int write_mark(vf_run *run, void *arg)
{
    (void)run;
    mark_op *m = arg;
    if (m->o->n < 256)
        m->o->log[m->o->n++] = m->mark;
    return 0;
}

static void push_mark(ordered *o, int mark)
{
    mark_op m = {o, mark};
    CHECK_OK(vf_engine_push(o->e, &(vf_op){.fn = write_mark,
                                           .arg = &m,
                                           .arg_size = sizeof m,
                                           .writes = tu_list(&o->v, 1)}));
}

static ordered *the_ordered;
static atomic_int next_mark;

static void *bulk_one_mark_and_exit(void *arg)
{
    (void)arg;
    CHECK(vf_bulk_set_size(the_ordered->e, 8) >= 0);
    push_mark(the_ordered, atomic_fetch_add(&next_mark, 1));
    return NULL;
}

TEST_CASE(a_thread_alive_keeps_its_batch_order)
{
    for (int k = 0; k < TU_NKINDS; k++) {
        vf_engine *e = tu_engine(&tu_kinds[k]);
        ordered *o = calloc(1, sizeof *o);
        REQUIRE(o != NULL);
        o->e = e;
        o->v = tu_var(e);
        the_ordered = o;
        atomic_store(&next_mark, 0);
        CHECK(vf_bulk_set_size(e, 8) >= 0); /* this thread bulks too */
        for (int i = 0; i < 60; i++) {
            if (i % 2 == 0)
                push_mark(o, atomic_fetch_add(&next_mark, 1));
            else
                tu_thread_join(tu_thread_start(bulk_one_mark_and_exit, NULL));
        }
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(o->n, 60);
        for (int i = 0; i < o->n; i++)
            if (o->log[i] != i) {
                CHECK_REPORT_("%s: write %d was mark %d", tu_kinds[k].name, i,
                              o->log[i]);
                break;
            }
        CHECK_EQ(vf_bulk_set_size(e, 0), 8);
        tu_finish_engine(e);
        free(o);
    }
}

/* A thread that makes an engine for each job and bulks on it remembers
 * the engines alive, not every one it ever bulked on: the list of states
 * its exit gives back grew by an entry an engine, and the exit tried each
 * (found by the reviewer: 1 MB over 50,000 engines). */
TEST_CASE(a_thread_remembers_only_engines_alive)
{
    int most = 0;
    for (int i = 0; i < 1000; i++) {
        vf_engine *e = NULL;
        REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_NAIVE}) ==
                0);
        CHECK(vf_bulk_set_size(e, 4) >= 0);
        if (vf__bulk_owned_count() > most)
            most = vf__bulk_owned_count();
        CHECK_OK(vf_engine_destroy(e));
    }
    if (most > 8)
        CHECK_REPORT_("the thread remembered %d engines, one alive at a time",
                      most);
}

typedef struct lookup {
    vf_engine *e, *others[4];
    vf_var v, w;
    long value;
    atomic_int stage; /* 1: state made; 2: lock held; 3: pushed */
} lookup;

/* Whether `stage` reaches `at` within 10 s (a push blocked on the lock
 * never lets it). */
static bool reaches_soon(atomic_int *stage, int at)
{
    for (int i = 0; i < 1000 && atomic_load(stage) < at; i++)
        usleep(10000);
    return atomic_load(stage) >= at;
}

static void *bulk_past_the_cache(void *arg)
{
    lookup *l = arg;
    CHECK(vf_bulk_set_size(l->e, 8) >= 0);
    CHECK_OK(vf_engine_push(
        l->e, &(vf_op){.fn = step, .arg = &l->value, .writes = {&l->v, 1}}));
    for (int i = 0; i < 4; i++) /* the lookup cache's 4 slots, taken */
        CHECK(vf_bulk_set_size(l->others[i], 8) >= 0);
    atomic_store(&l->stage, 1);
    CHECK(reaches_soon(&l->stage, 2));
    CHECK_OK(vf_engine_push(
        l->e, &(vf_op){.fn = step, .arg = &l->value, .writes = {&l->v, 1}}));
    CHECK(vf_bulk_set_size(l->e, 8) == 8);
    atomic_store(&l->stage, 3);
    CHECK_OK(vf_bulk_flush(l->e));
    return NULL;
}

static atomic_int unbulked_done;

static void *push_unbulked(void *arg)
{
    lookup *l = arg;
    CHECK_OK(
        vf_engine_push(l->e, &(vf_op){.fn = tu_nop, .writes = {&l->w, 1}}));
    atomic_store(&unbulked_done, 1);
    return NULL;
}

TEST_CASE(a_thread_finds_its_state_without_the_engine_lock)
{
    lookup l = {.value = 0};
    atomic_init(&l.stage, 0);
    l.e = tu_engine(&tu_kinds[1]);
    for (int i = 0; i < 4; i++)
        l.others[i] = tu_engine(&tu_kinds[1]);
    l.v = tu_var(l.e);
    l.w = tu_var(l.e);
    pthread_t t = tu_thread_start(bulk_past_the_cache, &l);
    REQUIRE(reaches_soon(&l.stage, 1));
    pthread_mutex_lock(&l.e->bulk.lock);
    atomic_store(&l.stage, 2);
    bool bulked = reaches_soon(&l.stage, 3);
    atomic_store(&unbulked_done, 0);
    pthread_t u = tu_thread_start(push_unbulked, &l);
    bool pushed = reaches_soon(&unbulked_done, 1);
    pthread_mutex_unlock(&l.e->bulk.lock);
    tu_thread_join(t);
    tu_thread_join(u);
    CHECK(bulked); /* its own state, found without the lock */
    CHECK(pushed); /* none, known without the lock */
    CHECK_OK(vf_var_wait(l.e, l.v, NULL));
    CHECK_EQ(l.value, 2);
    for (int i = 0; i < 4; i++)
        tu_finish_engine(l.others[i]);
    tu_finish_engine(l.e);
}

TEST_MAIN("test_bulk_states", 120)
