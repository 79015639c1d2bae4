/* ecount.c: the event count's two sleeps, futex and fallback (ecount.h). */
#include "base/ecount.h"

#include <limits.h>

#include "base/common.h"

#if VF__ECOUNT_FUTEX

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static void futex(_Atomic uint32_t *word, int op, uint32_t val,
                  const struct timespec *at, uint32_t mask)
{
    /* An _Atomic uint32_t is a plain 32-bit word here, which the kernel
     * reads and compares (EAGAIN: it changed, ETIMEDOUT, EINTR: all mean
     * "return, the caller looks again"). */
    (void)syscall(SYS_futex, (uint32_t *)word, op | FUTEX_PRIVATE_FLAG, val, at,
                  NULL, mask);
}

int vf__ecount_init(vf__ecount *ec)
{
    atomic_init(&ec->epoch, 0);
    atomic_init(&ec->waiters, 0);
    return 0;
}

void vf__ecount_destroy(vf__ecount *ec)
{
    (void)ec;
}

void vf__ecount_wait(vf__ecount *ec, uint32_t key, const vf__deadline *until)
{
    /* FUTEX_WAIT_BITSET's time is absolute on CLOCK_MONOTONIC, as a
     * vf__deadline's is; a deadline already passed returns at once. */
    futex(&ec->epoch, FUTEX_WAIT_BITSET, key,
          until == NULL || until->forever ? NULL : &until->at,
          FUTEX_BITSET_MATCH_ANY);
    atomic_fetch_sub(&ec->waiters, 1);
}

void vf__ecount_notify(vf__ecount *ec, bool all)
{
    atomic_fetch_add(&ec->epoch, 1);
    futex(&ec->epoch, FUTEX_WAKE, all ? INT_MAX : 1, NULL, 0);
}

#else /* the portable fallback */

int vf__ecount_init(vf__ecount *ec)
{
    atomic_init(&ec->epoch, 0);
    atomic_init(&ec->waiters, 0);
    if (pthread_mutex_init(&ec->lock, NULL) != 0)
        return VF_ESYSTEM;
    if (vf__cond_init_monotonic(&ec->cond) != 0) {
        pthread_mutex_destroy(&ec->lock);
        return VF_ESYSTEM;
    }
    return 0;
}

void vf__ecount_destroy(vf__ecount *ec)
{
    pthread_cond_destroy(&ec->cond);
    pthread_mutex_destroy(&ec->lock);
}

void vf__ecount_wait(vf__ecount *ec, uint32_t key, const vf__deadline *until)
{
    pthread_mutex_lock(&ec->lock);
    if (atomic_load(&ec->epoch) == key)
        vf__cond_wait_until(&ec->cond, &ec->lock, until);
    pthread_mutex_unlock(&ec->lock);
    atomic_fetch_sub(&ec->waiters, 1);
}

void vf__ecount_notify(vf__ecount *ec, bool all)
{
    atomic_fetch_add(&ec->epoch, 1);
    /* Taken after the bump: a sleeper that compared the old epoch under
     * the lock is inside its wait by now, and a later one sees the bump. */
    pthread_mutex_lock(&ec->lock);
    if (all)
        pthread_cond_broadcast(&ec->cond);
    else
        pthread_cond_signal(&ec->cond);
    pthread_mutex_unlock(&ec->lock);
}

#endif
