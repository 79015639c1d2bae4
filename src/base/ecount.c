/* ecount.c: the event count's two sleeps, futex and fallback (ecount.h). */
#include "base/ecount.h"

#include <limits.h>

#include "base/common.h"

/* Owe a wake and bump the epoch, in one step: one more wake (false when
 * nobody sleeps, or every sleeper is owed one already: nothing to do), or
 * one for every sleeper. */
static bool owe(vf__ecount *ec, bool all)
{
    uint64_t s = atomic_load(&ec->state), n;
    do {
        uint32_t sleepers = vf__ecount_sleepers_(s);
        uint32_t owed = vf__ecount_owed_(s);
        if (sleepers == 0 || (!all && owed == sleepers))
            return false;
        n = s + VF__ECOUNT_EPOCH +
            (all ? (uint64_t)(sleepers - owed) * VF__ECOUNT_OWED
                 : VF__ECOUNT_OWED);
    } while (!atomic_compare_exchange_weak(&ec->state, &s, n));
    return true;
}

#if VF__ECOUNT_FUTEX

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The epoch: the high half of `state`, a 32-bit word the kernel reads and
 * compares. */
static uint32_t *epoch_word(vf__ecount *ec)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return (uint32_t *)(void *)&ec->state + 1;
#else
    return (uint32_t *)(void *)&ec->state;
#endif
}

static void futex(vf__ecount *ec, int op, uint32_t val,
                  const struct timespec *at, uint32_t mask)
{
    /* EAGAIN (the epoch moved), ETIMEDOUT, EINTR: all mean "return, the
     * caller looks again". */
    (void)syscall(SYS_futex, epoch_word(ec), op | FUTEX_PRIVATE_FLAG, val, at,
                  NULL, mask);
}

int vf__ecount_init(vf__ecount *ec)
{
    atomic_init(&ec->state, 0);
    return 0;
}

void vf__ecount_destroy(vf__ecount *ec)
{
    (void)ec;
}

void vf__ecount_wait_tagged(vf__ecount *ec, uint32_t key, unsigned tag,
                            const vf__deadline *until)
{
    VF__ASSERT(tag <= VF__ECOUNT_TAGS);
    /* A sleeper's bit of the futex bitset: bit 0 untagged, bit `tag`
     * tagged; FUTEX_WAKE (a notify) wakes any. FUTEX_WAIT_BITSET's time is
     * absolute on CLOCK_MONOTONIC, as a vf__deadline's is; a deadline
     * already passed returns at once. */
    futex(ec, FUTEX_WAIT_BITSET, key,
          until == NULL || until->forever ? NULL : &until->at, 1u << tag);
    vf__ecount_leave_(ec);
}

void vf__ecount_wait(vf__ecount *ec, uint32_t key, const vf__deadline *until)
{
    vf__ecount_wait_tagged(ec, key, 0, until);
}

void vf__ecount_notify(vf__ecount *ec, bool all)
{
    if (owe(ec, all))
        futex(ec, FUTEX_WAKE, all ? INT_MAX : 1, NULL, 0);
}

void vf__ecount_wake_tag(vf__ecount *ec, unsigned tag)
{
    VF__ASSERT(tag >= 1 && tag <= VF__ECOUNT_TAGS);
    if (vf__ecount_sleepers_(atomic_fetch_add(&ec->state, VF__ECOUNT_EPOCH)) >
        0)
        futex(ec, FUTEX_WAKE_BITSET, INT_MAX, NULL, 1u << tag);
}

#else /* the portable fallback */

int vf__ecount_init(vf__ecount *ec)
{
    atomic_init(&ec->state, 0);
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
    if (vf__ecount_epoch(ec) == key)
        vf__cond_wait_until(&ec->cond, &ec->lock, until);
    pthread_mutex_unlock(&ec->lock);
    vf__ecount_leave_(ec);
}

void vf__ecount_wait_tagged(vf__ecount *ec, uint32_t key, unsigned tag,
                            const vf__deadline *until)
{
    (void)tag;
    vf__ecount_wait(ec, key, until);
}

void vf__ecount_wake_tag(vf__ecount *ec, unsigned tag)
{
    (void)tag;
    if (vf__ecount_sleepers_(atomic_fetch_add(&ec->state, VF__ECOUNT_EPOCH)) ==
        0)
        return;
    pthread_mutex_lock(&ec->lock); /* after the bump: as a notify's */
    pthread_cond_broadcast(&ec->cond);
    pthread_mutex_unlock(&ec->lock);
}

void vf__ecount_notify(vf__ecount *ec, bool all)
{
    if (!owe(ec, all))
        return;
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
