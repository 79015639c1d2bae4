/*
 * test_bulk_order: bulk keeps every order the program made between threads
 * (rule 13 of DESIGN.md; issue 27, finding 6).
 *
 * Thread A pushes an op; after that push returned it hands a token to
 * thread B, whose push touches a var of A's op. With bulking on, A's op
 * may still sit in A's open batch: B's op must come after it all the
 * same, at any bulk size, whether the size comes from the config, from
 * VF_BULK_SIZE or from vf_bulk_set_size on one thread only, and whether
 * B's push joins a batch of its own or not (an operator, an async op).
 * Each program is checked against its serial result: a hand-off, a ring
 * of threads with no wait until the end, a failure crossing threads. And
 * a crowd of threads bulking over shared vars with no order at all, where
 * claims move between batches all the time: nothing lost, nothing hangs.
 */
#include "runner.h"

/* A token handed from thread to thread: whose turn it is. */
typedef struct token {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int turn;
} token;

static void token_init(token *t)
{
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->turn = 0;
}

static void token_destroy(token *t)
{
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
}

static void token_wait(token *t, int me)
{
    pthread_mutex_lock(&t->mu);
    while (t->turn != me)
        pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
}

static void token_pass(token *t, int to)
{
    pthread_mutex_lock(&t->mu);
    t->turn = to;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* Where the bulk size comes from. */
typedef enum source { FROM_CONFIG, FROM_ENV, A_ONLY, B_ONLY } source;
static const char *const source_names[] = {"config", "VF_BULK_SIZE",
                                           "thread A only", "thread B only"};

static vf_engine *engine_with(const tu_kind *k, source src, int size)
{
    vf_config cfg = k->cfg;
    if (src == FROM_CONFIG)
        cfg.bulk_size = size;
    char text[16];
    snprintf(text, sizeof text, "%d", size);
    if (src == FROM_ENV)
        setenv("VF_BULK_SIZE", text, 1);
    vf_engine *e = tu_engine(&(tu_kind){.name = k->name, .cfg = cfg});
    unsetenv("VF_BULK_SIZE");
    return e;
}

/* --- a hand-off: A writes x, then B copies x to y ----------------------- */

typedef struct handoff {
    vf_engine *e;
    source src;
    int size, rounds;
    vf_var x, y, z;
    long xval, yval, zval;
    long wrong; /* rounds where B's copy did not see A's write */
    vf_operator *copy;
    token tok;
} handoff;

typedef struct set_arg {
    long *to;
    long value;
} set_arg;

static int set_fn(vf_run *run, void *arg)
{
    (void)run;
    set_arg *a = arg;
    *a->to = a->value;
    return 0;
}

static int copy_fn(vf_run *run, void *arg)
{
    (void)run;
    handoff *h = arg;
    h->yval = h->xval;
    return 0;
}

static void copy_async(vf_run *run, void *arg, vf_completion done)
{
    copy_fn(run, arg);
    vf_completion_finish(done, 0, NULL);
}

static void *thread_a(void *p)
{
    handoff *h = p;
    if (h->src == A_ONLY)
        vf_bulk_set_size(h->e, h->size);
    for (int i = 1; i <= h->rounds; i++) {
        token_wait(&h->tok, 0);
        set_arg x = {&h->xval, i}, z = {&h->zval, i};
        CHECK_OK(vf_engine_push(h->e, &(vf_op){.fn = set_fn,
                                               .arg = &x,
                                               .arg_size = sizeof x,
                                               .writes = VF_VARS(h->x),
                                               .name = "x = i"}));
        CHECK_OK(vf_engine_push(h->e, &(vf_op){.fn = set_fn,
                                               .arg = &z,
                                               .arg_size = sizeof z,
                                               .writes = VF_VARS(h->z),
                                               .name = "z = i"}));
        token_pass(&h->tok, 1);
    }
    return NULL;
}

static void *thread_b(void *p)
{
    handoff *h = p;
    if (h->src == B_ONLY)
        vf_bulk_set_size(h->e, h->size);
    for (int i = 1; i <= h->rounds; i++) {
        token_wait(&h->tok, 1);
        switch (i % 3) { /* a one-shot push, an operator's, an async op */
        case 0:
            CHECK_OK(vf_engine_push(h->e, &(vf_op){.fn = copy_fn,
                                                   .arg = h,
                                                   .reads = VF_VARS(h->x),
                                                   .writes = VF_VARS(h->y),
                                                   .name = "y = x"}));
            break;
        case 1:
            CHECK_OK(vf_operator_push(h->e, h->copy, 0));
            break;
        default:
            CHECK_OK(vf_engine_push(h->e, &(vf_op){.async_fn = copy_async,
                                                   .arg = h,
                                                   .reads = VF_VARS(h->x),
                                                   .writes = VF_VARS(h->y),
                                                   .name = "y = x (async)"}));
        }
        CHECK_OK(vf_var_wait(h->e, h->y, NULL));
        if (h->yval != i)
            h->wrong++;
        token_pass(&h->tok, 0);
    }
    return NULL;
}

static void run_handoff(const tu_kind *k, source src, int size, int rounds)
{
    handoff h = {.e = engine_with(k, src, size),
                 .src = src,
                 .size = size,
                 .rounds = rounds};
    check_context_ = source_names[src];
    h.x = tu_var(h.e);
    h.y = tu_var(h.e);
    h.z = tu_var(h.e);
    CHECK_OK(vf_operator_create(h.e,
                                &(vf_op){.fn = copy_fn,
                                         .arg = &h,
                                         .reads = VF_VARS(h.x),
                                         .writes = VF_VARS(h.y),
                                         .name = "y = x (operator)"},
                                &h.copy));
    token_init(&h.tok);
    pthread_t a = tu_thread_start(thread_a, &h);
    pthread_t b = tu_thread_start(thread_b, &h);
    tu_thread_join(a);
    tu_thread_join(b);
    CHECK_EQ(h.wrong, 0);
    CHECK_OK(vf_operator_destroy(h.e, h.copy));
    tu_finish_engine(h.e);
    CHECK_EQ(h.zval, rounds);
    token_destroy(&h.tok);
}

TEST_CASE(handoff)
{
    static const tu_kind kinds[] = {
        {"pooled/1", {.type = VF_ENGINE_POOLED, .cpu_workers = 1}, true, 1},
        {"pooled/2", {.type = VF_ENGINE_POOLED, .cpu_workers = 2}, true, 2},
        {"perdevice/2",
         {.type = VF_ENGINE_PERDEVICE,
          .cpu_workers = 2,
          .cpu_priority_workers = 1},
         true,
         2},
    };
    int rounds = (int)tu_scaled(300, 30);
    for (int k = 0; k < 3; k++) {
        tu_phase(kinds[k].name);
        for (int src = FROM_CONFIG; src <= B_ONLY; src++)
            run_handoff(&kinds[k], (source)src, src == FROM_ENV ? 8 : 64,
                        rounds);
    }
}

/* --- a ring: each thread in turn folds its number into acc -------------- */

#define RING 4

typedef struct ring {
    vf_engine *e;
    int rounds;
    int sizes[RING]; /* each thread's bulk size (-1: the engine's) */
    vf_var acc, shared, own[RING];
    unsigned long accval, sharedval, ownval[RING];
    token tok;
} ring;

typedef struct fold_arg {
    ring *r;
    int who;
} fold_arg;

static unsigned long fold(unsigned long acc, unsigned long shared, int who)
{
    return acc * 31 + shared + (unsigned long)who + 1;
}

static int fold_fn(vf_run *run, void *arg)
{
    (void)run;
    fold_arg *a = arg;
    a->r->accval = fold(a->r->accval, a->r->sharedval, a->who);
    a->r->ownval[a->who]++;
    return 0;
}

typedef struct ring_thread {
    ring *r;
    int who;
} ring_thread;

static void *ring_main(void *p)
{
    ring_thread *t = p;
    ring *r = t->r;
    if (r->sizes[t->who] >= 0)
        vf_bulk_set_size(r->e, r->sizes[t->who]);
    fold_arg arg = {r, t->who};
    for (int i = 0; i < r->rounds; i++) {
        token_wait(&r->tok, t->who);
        CHECK_OK(vf_engine_push(
            r->e, &(vf_op){.fn = fold_fn,
                           .arg = &arg,
                           .arg_size = sizeof arg,
                           .reads = VF_VARS(r->shared),
                           .writes = VF_VARS(r->acc, r->own[t->who]),
                           .name = "fold"}));
        token_pass(&r->tok, (t->who + 1) % RING);
    }
    return NULL;
}

/* No wait until the end: every thread's batch may still be open when the
 * next thread pushes. */
static void run_ring(const tu_kind *k, source src, int size,
                     const int sizes[RING], int rounds)
{
    ring r = {.e = engine_with(k, src, size), .rounds = rounds, .sharedval = 7};
    for (int i = 0; i < RING; i++)
        r.sizes[i] = sizes[i];
    r.acc = tu_var(r.e);
    r.shared = tu_var(r.e);
    for (int i = 0; i < RING; i++)
        r.own[i] = tu_var(r.e);
    token_init(&r.tok);
    ring_thread t[RING];
    pthread_t th[RING];
    for (int i = 0; i < RING; i++) {
        t[i] = (ring_thread){&r, i};
        th[i] = tu_thread_start(ring_main, &t[i]);
    }
    for (int i = 0; i < RING; i++)
        tu_thread_join(th[i]);
    CHECK_OK(vf_engine_wait_all(r.e, NULL));
    unsigned long serial = 0;
    for (int i = 0; i < rounds; i++)
        for (int w = 0; w < RING; w++)
            serial = fold(serial, 7, w);
    CHECK_EQ(r.accval, serial);
    for (int i = 0; i < RING; i++)
        CHECK_EQ(r.ownval[i], (unsigned long)rounds);
    vf_stats st;
    CHECK_OK(vf_engine_stats(r.e, &st));
    CHECK_EQ(st.ran, (uint64_t)rounds * RING);
    CHECK_OK(vf_engine_destroy(r.e));
    token_destroy(&r.tok);
}

TEST_CASE(ring)
{
    static const tu_kind kinds[] = {
        {"pooled/2", {.type = VF_ENGINE_POOLED, .cpu_workers = 2}, true, 2},
        {"perdevice/1",
         {.type = VF_ENGINE_PERDEVICE,
          .cpu_workers = 1,
          .cpu_priority_workers = 1},
         true,
         1},
    };
    static const int engine_size[RING] = {-1, -1, -1, -1};
    static const int mixed[RING] = {0, 3, 64, -1};
    int rounds = (int)tu_scaled(500, 50);
    for (int k = 0; k < 2; k++) {
        tu_phase(kinds[k].name);
        check_context_ = "config 8";
        run_ring(&kinds[k], FROM_CONFIG, 8, engine_size, rounds);
        check_context_ = "config 64";
        run_ring(&kinds[k], FROM_CONFIG, 64, engine_size, rounds);
        check_context_ = "VF_BULK_SIZE=8";
        run_ring(&kinds[k], FROM_ENV, 8, engine_size, rounds);
        check_context_ = "each thread its own size";
        run_ring(&kinds[k], FROM_CONFIG, 0, mixed, rounds);
    }
}

/* --- a failure crosses threads as in the serial program ----------------- */

static int fail_fn(vf_run *run, void *arg)
{
    (void)arg;
    vf_run_set_error(run, "A failed");
    return 42;
}

static void status_done(void *arg, int status)
{
    *(int *)arg = status;
}

typedef struct fail_case {
    vf_engine *e;
    vf_var x, y;
    token tok;
} fail_case;

static void *fail_pusher(void *p)
{
    fail_case *f = p;
    CHECK_OK(vf_engine_push(
        f->e, &(vf_op){.fn = fail_fn, .writes = VF_VARS(f->x), .name = "A"}));
    token_pass(&f->tok, 1);
    return NULL;
}

/* A's op fails; B's op, pushed after it by the handshake, reads what A
 * wrote: it is skipped, as in the serial program, and the failure is
 * A's. */
TEST_CASE(failure_order)
{
    int rounds = (int)tu_scaled(100, 10);
    check_context_ = "VF_BULK_SIZE=8";
    for (int i = 0; i < rounds; i++) {
        fail_case f = {
            .e = engine_with(
                &(tu_kind){.name = "pooled/2",
                           .cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 2}},
                FROM_ENV, 8)};
        f.x = tu_var(f.e);
        f.y = tu_var(f.e);
        token_init(&f.tok);
        pthread_t a = tu_thread_start(fail_pusher, &f);
        token_wait(&f.tok, 1);
        int status = 1;
        CHECK_OK(vf_engine_push(f.e, &(vf_op){.fn = tu_nop,
                                              .done = status_done,
                                              .arg = &status,
                                              .reads = VF_VARS(f.x),
                                              .writes = VF_VARS(f.y),
                                              .name = "B"}));
        tu_thread_join(a);
        vf_error err;
        CHECK_ERR(vf_var_wait(f.e, f.y, &err), VF_EOPFAILED);
        CHECK_EQ(err.code, 42);
        CHECK(strcmp(err.op_name, "A") == 0);
        CHECK_EQ(status, VF_ESKIPPED);
        CHECK_OK(vf_engine_destroy(f.e));
        token_destroy(&f.tok);
    }
}

/* --- no order at all: threads bulking over the same vars at once ------- */

typedef struct crowd {
    vf_engine *e;
    int per_thread;
    vf_var counter, table, own[RING];
    long counterval, tableval, ownval[RING];
} crowd;

typedef struct crowd_thread {
    crowd *c;
    int who;
} crowd_thread;

static int bump_fn(vf_run *run, void *arg)
{
    (void)run;
    long *p = arg;
    (*p)++;
    return 0;
}

static void *crowd_main(void *p)
{
    crowd_thread *t = p;
    crowd *c = t->c;
    vf_bulk_set_size(c->e, 1 + t->who * 5); /* 1, 6, 11, 16 */
    for (int i = 0; i < c->per_thread; i++) {
        switch ((i + t->who) % 4) {
        case 0: /* the shared counter and this thread's own var */
            CHECK_OK(
                vf_engine_push(c->e, &(vf_op){.fn = bump_fn,
                                              .arg = &c->counterval,
                                              .reads = VF_VARS(c->own[t->who]),
                                              .writes = VF_VARS(c->counter)}));
            break;
        case 1: /* reads only, shared with every thread */
            CHECK_OK(vf_engine_push(
                c->e, &(vf_op){.fn = tu_nop,
                               .reads = VF_VARS(c->table, c->counter)}));
            break;
        case 2:
            CHECK_OK(
                vf_engine_push(c->e, &(vf_op){.fn = bump_fn,
                                              .arg = &c->ownval[t->who],
                                              .writes = VF_VARS(c->own[t->who]),
                                              .reads = VF_VARS(c->table)}));
            break;
        default: /* now and then a wait, from inside the crowd */
            if (i % 64 == 3)
                CHECK_OK(vf_var_wait(c->e, c->own[t->who], NULL));
            else
                CHECK_OK(vf_engine_push(c->e,
                                        &(vf_op){.fn = bump_fn,
                                                 .arg = &c->tableval,
                                                 .writes = VF_VARS(c->table)}));
        }
    }
    return NULL;
}

/* Four threads push at once over shared vars, each with its own bulk
 * size: claims move between their batches all the time. Nothing is lost,
 * writers of one var never overlap (the counts are exact), and nothing
 * hangs. */
TEST_CASE(crowd)
{
    crowd c = {.e = tu_engine(&(tu_kind){
                   .name = "pooled/2",
                   .cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 2}}),
               .per_thread = (int)tu_scaled(20000, 2000)};
    c.counter = tu_var(c.e);
    c.table = tu_var(c.e);
    for (int i = 0; i < RING; i++)
        c.own[i] = tu_var(c.e);
    crowd_thread t[RING];
    pthread_t th[RING];
    for (int i = 0; i < RING; i++) {
        t[i] = (crowd_thread){&c, i};
        th[i] = tu_thread_start(crowd_main, &t[i]);
    }
    for (int i = 0; i < RING; i++)
        tu_thread_join(th[i]);
    CHECK_OK(vf_engine_wait_all(c.e, NULL));
    long counter = 0, table = 0;
    for (int w = 0; w < RING; w++) {
        long own = 0;
        for (int i = 0; i < c.per_thread; i++) {
            int k = (i + w) % 4;
            counter += k == 0;
            own += k == 2;
            table += k == 3 && i % 64 != 3;
        }
        CHECK_EQ(c.ownval[w], own);
    }
    CHECK_EQ(c.counterval, counter);
    CHECK_EQ(c.tableval, table);
    tu_finish_engine(c.e);
}

/* A batch of thread B holds an op pushed before thread A's op P (on
 * another var) and one pushed after it that writes P's var: a child P
 * pushes on that var comes right behind P, before B's later op, as
 * without bulking (found trying bulking from two threads as a user: the
 * child went behind the whole fused op, its first op being before P, and
 * saw what B's later op wrote). Serial: P sets 1, the child 10, B2 then
 * 10 * 100 + 2. */
typedef struct straddle {
    vf_engine *e;
    vf_var x, z;
    long val;
    long child_saw;
    int bulk;
    token turn; /* 0: B pushes B1; 1: A pushes P; 2: B pushes B2 */
    tu_gate release;
} straddle;

static int straddle_child(vf_run *run, void *arg)
{
    (void)run;
    straddle *s = arg;
    s->child_saw = s->val;
    s->val = 10;
    return 0;
}

static int straddle_parent(vf_run *run, void *arg)
{
    straddle *s = arg;
    CHECK(tu_gate_wait(&s->release,
                       60)); /* B2 is pushed: its batch holds P's var */
    s->val = 1;
    return vf_engine_push(
        vf_run_engine(run),
        &(vf_op){.fn = straddle_child, .arg = s, .writes = VF_VARS(s->x)});
}

static int straddle_b1(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static int straddle_b2(vf_run *run, void *arg)
{
    (void)run;
    straddle *s = arg;
    s->val = s->val * 100 + 2;
    return 0;
}

static void *straddle_b(void *arg)
{
    straddle *s = arg;
    CHECK(vf_bulk_set_size(s->e, s->bulk) >= 0);
    CHECK_OK(vf_engine_push(
        s->e, &(vf_op){.fn = straddle_b1, .arg = s, .writes = VF_VARS(s->z)}));
    token_pass(&s->turn, 1);
    token_wait(&s->turn, 2);
    CHECK_OK(vf_engine_push(
        s->e, &(vf_op){.fn = straddle_b2, .arg = s, .writes = VF_VARS(s->x)}));
    CHECK_OK(vf_bulk_flush(s->e));
    tu_gate_open(&s->release);
    return NULL;
}

TEST_KIND_CASE(batch_straddling_another_push, k)
{
    if (k->cfg.type == VF_ENGINE_NAIVE) /* P would run inside its push */
        return;
    check_context_ = k->name;
    for (int bulk = 0; bulk <= 8; bulk += 8) {
        straddle s = {.e = tu_engine(k), .bulk = bulk, .child_saw = -1};
        s.x = tu_var(s.e);
        s.z = tu_var(s.e);
        token_init(&s.turn);
        tu_gate_init(&s.release);
        pthread_t b = tu_thread_start(straddle_b, &s);
        token_wait(&s.turn, 1);
        CHECK_OK(vf_engine_push(s.e, &(vf_op){.fn = straddle_parent,
                                              .arg = &s,
                                              .writes = VF_VARS(s.x)}));
        token_pass(&s.turn, 2);
        tu_thread_join(b);
        CHECK_OK(vf_engine_wait_all(s.e, NULL));
        CHECK_EQ(s.child_saw, 1);
        CHECK_EQ(s.val, 1002);
        tu_finish_engine(s.e);
        tu_gate_destroy(&s.release);
        token_destroy(&s.turn);
    }
    check_context_ = NULL;
}

TEST_MAIN("test_bulk_order", 300)
