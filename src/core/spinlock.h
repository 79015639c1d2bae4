/*
 * spinlock.h: the tiny lock guarding one variable's state.
 *
 * A var's critical sections are a handful of pointer updates, so a
 * test-and-test-and-set lock beats a mutex. After a short spin the waiter
 * yields the CPU, so a preempted holder on an oversubscribed machine does not
 * cost a whole time slice per waiter. Acquire/release orders make everything
 * written under the lock visible to the next holder (and TSan sees them).
 */
#ifndef VF_SPINLOCK_H
#define VF_SPINLOCK_H

#include <sched.h>
#include <stdbool.h>

#include "base/common.h"

typedef struct vf__spinlock {
    atomic_bool locked;
} vf__spinlock;

static inline void vf__spin_init(vf__spinlock *l)
{
    atomic_init(&l->locked, false);
}

static inline void vf__spin_lock(vf__spinlock *l)
{
    for (unsigned spins = 0;; spins++) {
        if (!atomic_exchange_explicit(&l->locked, true, memory_order_acquire))
            return;
        while (atomic_load_explicit(&l->locked, memory_order_relaxed)) {
            if (++spins < 64)
                vf__cpu_relax();
            else
                sched_yield();
        }
    }
}

static inline void vf__spin_unlock(vf__spinlock *l)
{
    atomic_store_explicit(&l->locked, false, memory_order_release);
}

#endif /* VF_SPINLOCK_H */
