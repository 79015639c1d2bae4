/*
 * test_sleeplock: the lock that spins a little, then sleeps
 * (src/base/sleeplock.h), which guards a thread's bulk state.
 *
 * - mutual_exclusion: 8 threads each add 1 to a plain counter 200,000
 *   times under the lock: the sum is exact (TSan sees the lock's orders);
 * - waiters_sleep: while the test's thread holds the lock, 16 threads
 *   that want it go to sleep in the kernel, not spin (each thread's state
 *   from /proc; spinlock.h's waiters stayed runnable, and with hundreds of
 *   them a preempted holder ran once a round of them: found by a user
 *   tester, a program pushing from a thread per request on a shared var);
 *   the unlock then lets every one of them in, one at a time.
 */
#include "runner.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "base/sleeplock.h"

static vf__sleeplock lock;
static long counter; /* under `lock` only */

#define ADDS 200000

static void *add_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < ADDS; i++) {
        vf__sleeplock_lock(&lock);
        counter++;
        vf__sleeplock_unlock(&lock);
    }
    return NULL;
}

TEST_CASE(mutual_exclusion)
{
    vf__sleeplock_init(&lock);
    counter = 0;
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        t[i] = tu_thread_start(add_many, NULL);
    for (int i = 0; i < 8; i++)
        tu_thread_join(t[i]);
    CHECK_EQ(counter, 8L * ADDS);
    CHECK_EQ(atomic_load(&lock.state), 0);
}

#define WAITERS 16

static atomic_long waiter_tid[WAITERS];
static atomic_int inside; /* threads that got the lock */

static void *take_once(void *arg)
{
    int k = (int)(intptr_t)arg;
    atomic_store(&waiter_tid[k], (long)syscall(SYS_gettid));
    vf__sleeplock_lock(&lock);
    counter++;
    atomic_fetch_add(&inside, 1);
    vf__sleeplock_unlock(&lock);
    return NULL;
}

TEST_CASE(waiters_sleep)
{
    vf__sleeplock_init(&lock);
    counter = 0;
    vf__sleeplock_lock(&lock);
    pthread_t t[WAITERS];
    for (int k = 0; k < WAITERS; k++) {
        atomic_store(&waiter_tid[k], 0);
        t[k] = tu_thread_start(take_once, (void *)(intptr_t)k);
    }
    /* Every waiter asleep, on a loaded machine too: 20 s at the most. */
    int asleep = 0;
    for (int tries = 0; tries < 2000 && asleep < WAITERS; tries++) {
        usleep(10000);
        asleep = 0;
        for (int k = 0; k < WAITERS; k++) {
            long tid = atomic_load(&waiter_tid[k]);
            asleep += tid != 0 && tu_thread_asleep(tid);
        }
    }
    if (asleep < WAITERS)
        CHECK_REPORT_("%d of %d threads waiting for the lock asleep", asleep,
                      WAITERS);
    CHECK_EQ(atomic_load(&inside), 0);
    CHECK_EQ(atomic_load(&lock.state), 2); /* its unlock must wake */
    vf__sleeplock_unlock(&lock);
    for (int k = 0; k < WAITERS; k++)
        tu_thread_join(t[k]);
    CHECK_EQ(atomic_load(&inside), WAITERS);
    CHECK_EQ(counter, (long)WAITERS);
    CHECK_EQ(atomic_load(&lock.state), 0);
}

TEST_MAIN("test_sleeplock", 120)
