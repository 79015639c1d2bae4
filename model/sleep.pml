/*
 * sleep.pml: a Promela model of how a pool's workers go to sleep and are
 * woken (src/core/sched.c over src/base/ecount.h), checked with spin by
 * scripts/model-check beside varflow.pml, which models the per-var
 * protocol and leaves sleeping out.
 *
 * What it models, and where each piece lives in the C code:
 *   queued          the pool's queue lengths and inboxes together
 *                   (any_queued: queued > 0); placing an op is one
 *                   increment, a batch one increment by its size (one
 *                   compare-and-swap, vf__pool_submit_list)
 *   nspinning       vf__pool.nspinning
 *   waiters, owed,  vf__ecount.state's three parts: sleepers counted in,
 *   epoch           the wakes notify-ones owe them, the epoch
 *   inkernel[w]     worker w blocked in FUTEX_WAIT (the kernel's queue):
 *                   vf__ecount_wait compares the epoch and queues itself
 *                   in one step, as the kernel does under its hash lock
 *   prepare         count in and read the epoch: one step (one word)
 *   notify          vf__ecount_notify: owe a wake (one more, none when
 *                   every sleeper is owed one already; or all) and bump
 *                   the epoch in one step, then FUTEX_WAKE one (any one
 *                   blocked) or all
 *   leave           a sleeper counted out (after its wait, or cancelling)
 *                   pays off one owed wake, if any
 *   maybe_wake_one  sched.c's, pass_the_baton, spin_for_work's baton
 *   proctype Placer a thread placing K ops: one by one, or as one batch
 *   proctype Worker worker_main: take (then pass the baton), else spin
 *                   once (count in, look, count out, wake one if it was
 *                   the last spinner and saw work), else vf__pool_idle_wait
 *                   (prepare, recheck, cancel or wait)
 *   proctype Stopper vf__pool_stop once every op was taken: stop, then
 *                   vf__pool_wake_all
 * Every read or write of a shared variable is a step of its own
 * (sequentially consistent, as the C code's seq_cst atomics are).
 *
 * What is checked (safety: invalid end states): every process ends, i.e.
 * no wake-up is lost. A lost one leaves both workers blocked in the kernel
 * with an op queued: the Stopper then waits for ever (it stops the pool
 * only once every op was taken), an invalid end state.
 *
 * Scenarios (-DSCENARIO=n), 2 workers, 2 ops:
 *   1  the ops placed one by one (vf__pool_submit)
 *   2  the ops placed as one batch (vf__pool_submit_list)
 * Mutants (-DMUTANT=n), each must be caught:
 *   1  a sleeper reads the epoch after its recheck, not before
 *   2  a placer reads the waiter count before it publishes the op
 *   3  vf__ecount_wait blocks without comparing the epoch
 *   4  a leaving sleeper does not pay off an owed wake
 *   5  prepare counts in and reads the epoch in two steps (the first
 *      design of the owed wakes, which this model caught)
 *
 * Not modeled: deadlines (a timed wait only returns earlier), nested
 * waiters' wake predicates (woken by vf__pool_wake_all like the stop is),
 * device pools (every placement wakes all), which worker's queue holds an
 * op (any worker takes any op: stealing), spurious wake-ups.
 */

#ifndef SCENARIO
#define SCENARIO 1
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#define NW 2
#define K 2

byte queued, taken, nspinning, waiters, owed, epoch;
bool stop;
bool inkernel[NW];

inline notify(all)
{
    atomic { /* owe: one compare-and-swap */
        if
        :: waiters > 0 && (all || owed < waiters) ->
            if
            :: all -> owed = waiters
            :: else -> owed++
            fi;
            epoch++;
            ok = 1
        :: else -> ok = 0
        fi
    }
    if
    :: ok ->
        atomic {
            if
            :: all -> inkernel[0] = 0; inkernel[1] = 0
            :: !all && inkernel[0] -> inkernel[0] = 0
            :: !all && inkernel[1] -> inkernel[1] = 0
            :: else -> skip
            fi
        }
    :: else -> skip
    fi
}

inline leave()
{
    atomic {
        waiters--;
#if MUTANT != 4
        if
        :: owed > 0 -> owed--
        :: else -> skip
        fi
#endif
    }
}

/* Wake one unless nobody is left to wake or a spinner will find the work. */
inline maybe_wake_one()
{
    if
    :: waiters > owed ->
        if
        :: nspinning == 0 -> notify(false)
        :: else -> skip
        fi
    :: else -> skip
    fi
}

inline place(n)
{
#if MUTANT == 2
    if
    :: waiters > owed -> queued = queued + n; notify(false)
    :: else -> queued = queued + n
    fi
#else
    queued = queued + n;
    maybe_wake_one()
#endif
}

proctype Placer()
{
    bool ok;
#if SCENARIO == 1
    place(1);
    place(1)
#else
    place(2)
#endif
}

proctype Worker(byte me)
{
    bool took, found, ok;
    byte key, last;
    do
    :: atomic { stop && queued == 0 -> break }
    :: else ->
        atomic { /* try_take under the queue lock */
            if
            :: queued > 0 -> queued--; taken++; took = 1
            :: else -> took = 0
            fi
        }
        if
        :: took -> /* pass_the_baton */
            if
            :: waiters > owed ->
                if
                :: nspinning == 0 ->
                    if
                    :: queued > 0 -> notify(false)
                    :: else -> skip
                    fi
                :: else -> skip
                fi
            :: else -> skip
            fi
        :: else -> /* spin_for_work: one look */
            nspinning++;
            found = queued > 0 || stop;
            atomic { last = nspinning; nspinning-- }
            if
            :: last == 1 && found -> maybe_wake_one()
            :: else -> skip
            fi
            if
            :: !found -> /* vf__pool_idle_wait */
#if MUTANT == 1 || MUTANT == 5
                waiters++;
#endif
#if MUTANT == 5
                key = epoch;
#elif MUTANT != 1
                atomic { waiters++; key = epoch }
#endif
                found = queued > 0 || stop;
#if MUTANT == 1
                key = epoch;
#endif
                if
                :: found -> leave() /* cancel */
                :: else ->
                    atomic { /* FUTEX_WAIT: compare and queue, one step */
#if MUTANT == 3
                        inkernel[me] = 1
#else
                        if
                        :: epoch == key -> inkernel[me] = 1
                        :: else -> skip
                        fi
#endif
                    }
                    !inkernel[me]; /* blocked until a notify takes it out */
                    leave()
                fi
            :: else -> skip
            fi
        fi
    od
}

proctype Stopper()
{
    bool ok;
    taken == K; /* every op was taken: vf__pool_stop */
    stop = 1;
    if
    :: waiters > 0 -> notify(true)
    :: else -> skip
    fi
}

init
{
    atomic {
        run Worker(0);
        run Worker(1);
        run Placer();
        run Stopper()
    }
}
