/*
 * cancel.h: pthread_cancel() waits until a blocking public call returns.
 *
 * A wait, a push blocked at the in-flight bound, a stop, a start, a
 * destroy and a fork's drain block in pthread_cond_wait, nanosleep and
 * write(2), all cancellation points, with engine locks held or counts
 * raised that only their own return gives back: a thread cancelled there
 * left a mutex locked, and every other thread of the engine, its workers
 * included, then waited for ever on it (found by a user tester cancelling
 * a thread blocked in vf_engine_wait_all). So such a call disables
 * cancellation while it runs and restores the thread's state as it
 * returns: a cancel requested meanwhile acts at the thread's next
 * cancellation point after the call, as the header says.
 */
#ifndef VF_CANCEL_H
#define VF_CANCEL_H

#include <pthread.h>

/* Cancellation off: the state to give back to vf__cancel_restore. */
static inline int vf__cancel_hold(void)
{
    int old = PTHREAD_CANCEL_ENABLE;
    (void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    return old;
}

static inline void vf__cancel_restore(int old)
{
    int was;
    (void)pthread_setcancelstate(old, &was);
}

/* `call` (an int expression) with cancellation held off. */
#define VF__UNCANCELLED(call)                                                  \
    __extension__({                                                            \
        int cancel_state_ = vf__cancel_hold();                                 \
        int rc_uncancelled_ = (call);                                          \
        vf__cancel_restore(cancel_state_);                                     \
        rc_uncancelled_;                                                       \
    })

#endif /* VF_CANCEL_H */
