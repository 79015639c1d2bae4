/* sleeplock.c: the spin, the sleep and the wake of sleeplock.h. */
#include "base/sleeplock.h"

#include <sched.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define SLEEPS 1
#else
#define SLEEPS 0
#endif

/* How many looks at a held lock before sleeping: a holder on another core
 * is usually out within them (a bulk state is held for a batch's push at
 * the most). */
#define SPINS 100

void vf__sleeplock_lock_slow(vf__sleeplock *l)
{
    for (int i = 0; i < SPINS; i++) {
        int free = 0;
        if (atomic_load_explicit(&l->state, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&l->state, &free, 1,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        vf__cpu_relax();
    }
    /* Held: say there are sleepers (2), and sleep while it stays so. The
     * lock taken by that exchange stays 2, so its unlock wakes the next
     * sleeper, maybe needlessly (one wake too many, never one too few). */
    while (atomic_exchange_explicit(&l->state, 2, memory_order_acquire) != 0) {
#if SLEEPS
        (void)syscall(SYS_futex, (int *)(void *)&l->state,
                      FUTEX_WAIT | FUTEX_PRIVATE_FLAG, 2, NULL, NULL, 0);
#else
        sched_yield();
#endif
    }
}

void vf__sleeplock_wake(vf__sleeplock *l)
{
#if SLEEPS
    (void)syscall(SYS_futex, (int *)(void *)&l->state,
                  FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
#else
    (void)l;
#endif
}
