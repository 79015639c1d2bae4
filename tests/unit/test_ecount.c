/*
 * test_ecount: the event count idle workers sleep on (src/base/ecount.h),
 * alone. Built twice: test_ecount on the library (the futex on Linux) and
 * test_ecount_condvar with ecount.c compiled in under VF_ECOUNT_CONDVAR
 * (the portable fallback), so both sleeps are checked.
 *
 * It checks that a notify between prepare and wait is not lost (the wait
 * returns), that a wait with a deadline returns without any notify, that
 * waiters are counted in and out, that a notify-one to sleepers all owed
 * a wake already does nothing and a leaving sleeper pays one off, that
 * one notify-all releases every
 * blocked sleeper, and, over many rounds with threads, that no wake-up is
 * lost between a publisher and sleepers that use the protocol of ecount.h
 * with no deadline: a lost one leaves a sleeper blocked for good, which
 * the watchdog reports, naming the case. Tags: a wake of a tag owes
 * nothing and moves the epoch, it wakes its sleeper and, on the futex,
 * no sleeper blocked with another tag or none (the fallback wakes them
 * all), a notify wakes tagged sleepers too, and a ping-pong of tagged
 * wakes loses none.
 */
#include "runner.h"

#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/ecount.h"

TEST_CASE(notify_before_wait_is_not_lost)
{
    vf__ecount ec;
    REQUIRE(vf__ecount_init(&ec) == 0);
    uint32_t key = vf__ecount_prepare(&ec);
    CHECK_EQ(vf__ecount_waiters(&ec), 1u);
    vf__ecount_notify(&ec, false);
    vf__ecount_wait(&ec, key, NULL); /* would block for good if lost */
    CHECK_EQ(vf__ecount_waiters(&ec), 0u);
    key = vf__ecount_prepare(&ec);
    vf__ecount_notify(&ec, true);
    vf__ecount_wait(&ec, key, NULL);
    CHECK_EQ(vf__ecount_waiters(&ec), 0u);
    vf__ecount_destroy(&ec);
}

TEST_CASE(cancel_counts_out)
{
    vf__ecount ec;
    REQUIRE(vf__ecount_init(&ec) == 0);
    (void)vf__ecount_prepare(&ec);
    (void)vf__ecount_prepare(&ec);
    CHECK_EQ(vf__ecount_waiters(&ec), 2u);
    vf__ecount_cancel(&ec);
    vf__ecount_cancel(&ec);
    CHECK_EQ(vf__ecount_waiters(&ec), 0u);
    vf__ecount_destroy(&ec);
}

/* A notify-one owes the sleeper a wake: a second one finds nobody unwoken
 * and does nothing (the epoch moves once); leaving pays the wake off, and
 * a notify with nobody counted does nothing either. */
TEST_CASE(owed_wakes)
{
    vf__ecount ec;
    REQUIRE(vf__ecount_init(&ec) == 0);
    vf__ecount_notify(&ec, false);
    vf__ecount_notify(&ec, true);
    CHECK_EQ(vf__ecount_epoch(&ec), 0u); /* nobody to wake */
    uint32_t k1 = vf__ecount_prepare(&ec);
    uint32_t k2 = vf__ecount_prepare(&ec);
    CHECK_EQ(vf__ecount_unwoken(&ec), 2u);
    vf__ecount_notify(&ec, false);
    CHECK_EQ(vf__ecount_unwoken(&ec), 1u);
    vf__ecount_notify(&ec, false);
    CHECK_EQ(vf__ecount_unwoken(&ec), 0u);
    CHECK_EQ(vf__ecount_epoch(&ec), 2u);
    vf__ecount_notify(&ec, false); /* both owed one: nothing */
    CHECK_EQ(vf__ecount_epoch(&ec), 2u);
    vf__ecount_wait(&ec, k1, NULL); /* returns: the epoch moved */
    CHECK_EQ(vf__ecount_waiters(&ec), 1u);
    CHECK_EQ(vf__ecount_unwoken(&ec), 0u); /* one paid off, one owed */
    vf__ecount_cancel(&ec);
    /* Epoch 2, nobody counted, nothing owed. */
    CHECK_EQ(atomic_load(&ec.state), (uint64_t)2 << 32);
    (void)k2;
    /* A notify-all owes every sleeper a wake, owed one already or not. */
    (void)vf__ecount_prepare(&ec);
    vf__ecount_notify(&ec, false);
    uint32_t k3 = vf__ecount_prepare(&ec);
    vf__ecount_notify(&ec, true);
    CHECK_EQ(vf__ecount_epoch(&ec), 4u);
    CHECK_EQ(vf__ecount_unwoken(&ec), 0u);
    vf__ecount_wait(&ec, k3, NULL);
    vf__ecount_cancel(&ec);
    CHECK_EQ(atomic_load(&ec.state), (uint64_t)4 << 32);
    vf__ecount_destroy(&ec);
}

/* With no notify, a wait with a deadline returns (passed or not yet). */
TEST_CASE(deadline_ends_a_wait)
{
    vf__ecount ec;
    REQUIRE(vf__ecount_init(&ec) == 0);
    vf__deadline passed = vf__deadline_in_ms(0);
    uint32_t key = vf__ecount_prepare(&ec);
    vf__ecount_wait(&ec, key, &passed);
    CHECK_EQ(vf__ecount_waiters(&ec), 0u);
    vf__deadline soon = vf__deadline_in_ms(5);
    while (!vf__deadline_passed(&soon)) { /* spurious returns: loop */
        key = vf__ecount_prepare(&ec);
        vf__ecount_wait(&ec, key, &soon);
    }
    CHECK_EQ(vf__ecount_waiters(&ec), 0u);
    CHECK_EQ(vf__ecount_epoch(&ec), 0u); /* nobody notified */
    vf__ecount_destroy(&ec);
}

/* Sleepers wait for `round` to reach a value, publishers bump it: the
 * protocol of ecount.h. */
typedef struct shared {
    vf__ecount ec;
    atomic_int round;
    atomic_int arrived; /* sleepers that have seen the current round */
    int rounds;
} shared;

static void sleep_until(shared *s, int want)
{
    while (atomic_load(&s->round) < want) {
        uint32_t key = vf__ecount_prepare(&s->ec);
        if (atomic_load(&s->round) >= want)
            vf__ecount_cancel(&s->ec);
        else
            vf__ecount_wait(&s->ec, key, NULL);
    }
}

static void publish(shared *s, bool all)
{
    atomic_fetch_add(&s->round, 1);
    if (all ? vf__ecount_waiters(&s->ec) > 0 : vf__ecount_unwoken(&s->ec) > 0)
        vf__ecount_notify(&s->ec, all);
}

/* sleep_until and publish for a sleeper with a tag, woken by it. */
static void sleep_until_tagged(shared *s, int want, unsigned tag)
{
    while (atomic_load(&s->round) < want) {
        uint32_t key = vf__ecount_prepare(&s->ec);
        if (atomic_load(&s->round) >= want)
            vf__ecount_cancel(&s->ec);
        else
            vf__ecount_wait_tagged(&s->ec, key, tag, NULL);
    }
}

static void publish_tagged(shared *s, unsigned tag)
{
    atomic_fetch_add(&s->round, 1);
    vf__ecount_wake_tag(&s->ec, tag);
}

#define NSLEEPERS 3

static void *all_sleeper(void *arg)
{
    shared *s = arg;
    for (int r = 1; r <= s->rounds; r++) {
        sleep_until(s, r);
        atomic_fetch_add(&s->arrived, 1);
    }
    return NULL;
}

/* One notify-all per round, whether the sleepers are blocked yet or not:
 * every one of them must get through every round. */
TEST_CASE(notify_all_releases_every_sleeper)
{
    shared *s = calloc(1, sizeof *s);
    REQUIRE(s != NULL && vf__ecount_init(&s->ec) == 0);
    s->rounds = (int)tu_scaled(3000, 300);
    pthread_t t[NSLEEPERS];
    for (int i = 0; i < NSLEEPERS; i++)
        t[i] = tu_thread_start(all_sleeper, s);
    for (int r = 1; r <= s->rounds; r++) {
        if (r % 64 == 0) /* now and then, let them all block first */
            while (vf__ecount_waiters(&s->ec) < (uint32_t)NSLEEPERS)
                sched_yield();
        tu_phase("notify-all rounds");
        publish(s, true);
        /* The next round only once every sleeper saw this one. */
        while (atomic_load(&s->arrived) < r * NSLEEPERS)
            sched_yield();
    }
    for (int i = 0; i < NSLEEPERS; i++)
        tu_thread_join(t[i]);
    CHECK_EQ(atomic_load(&s->arrived), s->rounds * NSLEEPERS);
    CHECK_EQ(vf__ecount_waiters(&s->ec), 0u);
    vf__ecount_destroy(&s->ec);
    free(s);
}

/* Ping-pong: each side sleeps until the other moves `round` on, with
 * notify-one: a lost wake-up hangs the pair. */
static void *ponger(void *arg)
{
    shared *s = arg;
    for (int r = 1; r <= s->rounds; r += 2) {
        sleep_until(s, r);
        publish(s, false); /* r + 1 */
    }
    return NULL;
}

/* The same with tags: each side sleeps with its own (1, 2) and is woken
 * by it alone. */
static void *tagged_ponger(void *arg)
{
    shared *s = arg;
    for (int r = 1; r <= s->rounds; r += 2) {
        sleep_until_tagged(s, r, 2);
        publish_tagged(s, 1); /* r + 1 */
    }
    return NULL;
}

TEST_CASE(ping_pong_loses_no_wake_up)
{
    shared *s = calloc(1, sizeof *s);
    REQUIRE(s != NULL && vf__ecount_init(&s->ec) == 0);
    s->rounds = 2 * (int)tu_scaled(20000, 2000);
    pthread_t t = tu_thread_start(ponger, s);
    tu_phase("ping-pong");
    for (int r = 0; r < s->rounds; r += 2) {
        publish(s, false); /* r + 1 */
        sleep_until(s, r + 2);
    }
    tu_thread_join(t);
    CHECK_EQ(atomic_load(&s->round), s->rounds);
    CHECK_EQ(vf__ecount_waiters(&s->ec), 0u);
    vf__ecount_destroy(&s->ec);
    free(s);
}

TEST_CASE(tagged_ping_pong_loses_no_wake_up)
{
    shared *s = calloc(1, sizeof *s);
    REQUIRE(s != NULL && vf__ecount_init(&s->ec) == 0);
    s->rounds = 2 * (int)tu_scaled(20000, 2000);
    pthread_t t = tu_thread_start(tagged_ponger, s);
    tu_phase("tagged ping-pong");
    for (int r = 0; r < s->rounds; r += 2) {
        publish_tagged(s, 2); /* r + 1 */
        sleep_until_tagged(s, r + 2, 1);
    }
    tu_thread_join(t);
    CHECK_EQ(atomic_load(&s->round), s->rounds);
    CHECK_EQ(vf__ecount_waiters(&s->ec), 0u);
    vf__ecount_destroy(&s->ec);
    free(s);
}

/* A wake of a tag owes no wake (the owed count is for notifies) but moves
 * the epoch, so a sleeper counted in before it does not block. */
TEST_CASE(a_tag_wake_owes_nothing)
{
    vf__ecount ec;
    REQUIRE(vf__ecount_init(&ec) == 0);
    vf__ecount_wake_tag(&ec, 3); /* nobody: no system call, epoch moves */
    CHECK_EQ(vf__ecount_epoch(&ec), 1u);
    uint32_t key = vf__ecount_prepare(&ec);
    vf__ecount_wake_tag(&ec, 3);
    CHECK_EQ(vf__ecount_epoch(&ec), 2u);
    CHECK_EQ(vf__ecount_unwoken(&ec), 1u);     /* still counted, owed nothing */
    vf__ecount_wait_tagged(&ec, key, 3, NULL); /* returns: the epoch moved */
    CHECK_EQ(vf__ecount_waiters(&ec), 0u);
    vf__ecount_destroy(&ec);
}

/* Three sleepers on one event count, tagged 1 and 2 and untagged (0),
 * each waiting for its own flag; each counts its wait's returns. */
typedef struct tagged_sleeper {
    vf__ecount *ec;
    unsigned tag;
    atomic_int go;
    atomic_int wakes;
    atomic_long tid;
} tagged_sleeper;

static void *tagged_sleep(void *arg)
{
    tagged_sleeper *t = arg;
    atomic_store(&t->tid, (long)syscall(SYS_gettid));
    while (!atomic_load(&t->go)) {
        uint32_t key = vf__ecount_prepare(t->ec);
        if (atomic_load(&t->go)) {
            vf__ecount_cancel(t->ec);
            break;
        }
        if (t->tag != 0)
            vf__ecount_wait_tagged(t->ec, key, t->tag, NULL);
        else
            vf__ecount_wait(t->ec, key, NULL);
        atomic_fetch_add(&t->wakes, 1);
    }
    return NULL;
}

static void until_blocked(vf__ecount *ec, tagged_sleeper *t, int n, int k)
{
    for (;;) {
        bool all = vf__ecount_waiters(ec) >= (uint32_t)k;
        for (int i = 0; i < n && all; i++)
            all = atomic_load(&t[i].go) ||
                  (atomic_load(&t[i].tid) != 0 && tu_thread_asleep(t[i].tid));
        if (all)
            return;
        sched_yield();
    }
}

TEST_CASE(a_tag_wakes_its_sleeper_alone)
{
    vf__ecount ec;
    REQUIRE(vf__ecount_init(&ec) == 0);
    tagged_sleeper t[3] = {
        {.ec = &ec, .tag = 1}, {.ec = &ec, .tag = 2}, {.ec = &ec, .tag = 0}};
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        th[i] = tu_thread_start(tagged_sleep, &t[i]);
    until_blocked(&ec, t, 3, 3);
    atomic_store(&t[0].go, 1);
    vf__ecount_wake_tag(&ec, 1);
    tu_thread_join(th[0]); /* would hang if the tag missed its sleeper */
    CHECK_EQ(atomic_load(&t[0].wakes), 1);
#if VF__ECOUNT_FUTEX
    /* The others were blocked in the kernel: not woken. */
    CHECK_EQ(atomic_load(&t[1].wakes), 0);
    CHECK_EQ(atomic_load(&t[2].wakes), 0);
    CHECK_EQ(vf__ecount_waiters(&ec), 2u);
#endif
    /* A notify wakes a tagged sleeper as an untagged one. */
    until_blocked(&ec, t, 3, 2);
    atomic_store(&t[1].go, 1);
    atomic_store(&t[2].go, 1);
    vf__ecount_notify(&ec, true);
    tu_thread_join(th[1]);
    tu_thread_join(th[2]);
    CHECK_EQ(vf__ecount_waiters(&ec), 0u);
    vf__ecount_destroy(&ec);
}

TEST_MAIN("test_ecount", 120)
