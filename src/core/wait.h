/*
 * wait.h: where threads that wait for the engine sleep (wait.c).
 *
 * A thread outside the engine's ops that waits (vf_wait_var, vf_wait_all,
 * destroy's drain), and a nested waiter with no pool to sleep in, sleep on
 * the engine's `waits.cond`. Whoever changes `counts` to a state a waiter
 * may want (engine.h: vf__engine_counts_changed) broadcasts under `lock`
 * when the waiter counts say somebody sleeps: the counts and these
 * counters are seq_cst, a Dekker pair, so no wake-up is lost. `lock` is a
 * leaf: nothing else is taken under it.
 */
#ifndef VF_WAIT_H
#define VF_WAIT_H

#include <pthread.h>

#include "base/common.h"

typedef struct vf__waits {
    pthread_mutex_t lock;
    pthread_cond_t cond;  /* on CLOCK_MONOTONIC (timed waits) */
    atomic_int nwaiters;  /* seq_cst: threads sleeping on cond */
    atomic_int nnested;   /* seq_cst: ops blocked in a nested wait */
} vf__waits;

#endif /* VF_WAIT_H */
