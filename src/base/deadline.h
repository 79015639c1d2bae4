/*
 * deadline.h: deadlines for timed waits, on CLOCK_MONOTONIC (a wall-clock
 * change must not make a wait end early or never), and condition
 * variables that wait on that clock.
 */
#ifndef VF_DEADLINE_H
#define VF_DEADLINE_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

typedef struct vf__deadline {
    bool forever;
    struct timespec at; /* CLOCK_MONOTONIC */
} vf__deadline;

/* Now on CLOCK_MONOTONIC, in nanoseconds. */
static inline uint64_t vf__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* `ms` milliseconds from now; a negative `ms` never passes. */
static inline vf__deadline vf__deadline_in_ms(int64_t ms)
{
    vf__deadline d = {.forever = ms < 0};
    if (d.forever)
        return d;
    clock_gettime(CLOCK_MONOTONIC, &d.at);
    d.at.tv_sec += (time_t)(ms / 1000);
    d.at.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (d.at.tv_nsec >= 1000000000L) {
        d.at.tv_sec++;
        d.at.tv_nsec -= 1000000000L;
    }
    return d;
}

/* The earlier of `a` and `b` (NULL: never). */
static inline const vf__deadline *vf__deadline_earlier(const vf__deadline *a,
                                                       const vf__deadline *b)
{
    if (a == NULL || a->forever)
        return b;
    if (b == NULL || b->forever)
        return a;
    return a->at.tv_sec < b->at.tv_sec || (a->at.tv_sec == b->at.tv_sec &&
                                           a->at.tv_nsec < b->at.tv_nsec)
               ? a
               : b;
}

/* The earlier of `d` (NULL: never) and `us` microseconds from now. */
static inline vf__deadline vf__deadline_within_us(const vf__deadline *d,
                                                  int64_t us)
{
    vf__deadline soon = {.forever = false};
    clock_gettime(CLOCK_MONOTONIC, &soon.at);
    soon.at.tv_nsec += (long)us * 1000L;
    while (soon.at.tv_nsec >= 1000000000L) {
        soon.at.tv_sec++;
        soon.at.tv_nsec -= 1000000000L;
    }
    if (d != NULL && !d->forever &&
        (d->at.tv_sec < soon.at.tv_sec ||
         (d->at.tv_sec == soon.at.tv_sec && d->at.tv_nsec < soon.at.tv_nsec)))
        return *d;
    return soon;
}

/* Whether the deadline has passed (NULL: never). */
static inline bool vf__deadline_passed(const vf__deadline *d)
{
    if (d == NULL || d->forever)
        return false;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > d->at.tv_sec ||
           (now.tv_sec == d->at.tv_sec && now.tv_nsec >= d->at.tv_nsec);
}

/* pthread_cond_init on CLOCK_MONOTONIC: 0 or an errno value. */
static inline int vf__cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);
    if (rc != 0)
        return rc;
    rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
    return rc;
}

/* Wait on `c` (made by vf__cond_init_monotonic) until signalled or until
 * the deadline (NULL: none). Spurious returns happen: callers loop. */
static inline void vf__cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m,
                                       const vf__deadline *d)
{
    if (d == NULL || d->forever)
        pthread_cond_wait(c, m);
    else
        (void)pthread_cond_timedwait(c, m, &d->at);
}

#endif /* VF_DEADLINE_H */
