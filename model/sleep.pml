/*
 * sleep.pml: a Promela model of how a pool's workers go to sleep and are
 * woken (src/core/sched.c over src/base/ecount.h), and of a nested waiter
 * sleeping among them by its tag (src/core/wait.c), checked with spin by
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
 *   inkernel[t]     thread t blocked in FUTEX_WAIT_BITSET (the kernel's
 *                   queue) with bitset bit 0 (1: a worker, vf__ecount_wait)
 *                   or with N's tag (2: vf__ecount_wait_tagged), or not
 *                   (0); the wait compares the epoch and queues itself in
 *                   one step, as the kernel does under its hash lock
 *   prepare         count in and read the epoch: one step (one word)
 *   notify          vf__ecount_notify: owe a wake (one more, none when
 *                   every sleeper is owed one already; or all) and bump
 *                   the epoch in one step, then FUTEX_WAKE one or all:
 *                   any blocked thread, whatever its bitset (N too)
 *   wake_tag        vf__ecount_wake_tag (vf__pool_wake_tag): bump the
 *                   epoch, owing nothing, and read the sleepers, one
 *                   fetch_add; then, if there were any, FUTEX_WAKE_BITSET
 *                   with N's tag: N if it is blocked, nobody else
 *   leave           a sleeper counted out (after its wait, or cancelling)
 *                   pays off one owed wake, if any (N too: possibly one
 *                   owed to another sleeper)
 *   maybe_wake_one  sched.c's, pass_the_baton (vf__pool_pass_on too),
 *                   spin_for_work's baton
 *   proctype Placer a thread placing K ops: one by one, or as one batch
 *   proctype Worker worker_main: take (then pass the baton), else spin
 *                   once (count in, look, count out, wake one if it was
 *                   the last spinner and saw work), else vf__pool_idle_wait
 *                   (prepare, recheck, cancel or wait)
 *   proctype Nested N: nested_wait (wait.c) on another worker's thread
 *                   (thread NW, with that worker's tag), waiting inside an
 *                   op. Each round: its wait's state DONE: out; else
 *                   vf__exec_loop_run_one, where the placed ops are none
 *                   of its op's descendants (it never takes one): one
 *                   queued (VF__LOOP_REFUSED): vf__pool_pass_on, then
 *                   sleep_alone (in_pool = false; prepare on its own event
 *                   count own_*, look at DONE, cancel or wait); none
 *                   (VF__LOOP_NOTHING): sleep_in_pool (in_pool = true;
 *                   vf__pool_idle_wait with its tag: prepare, look at
 *                   DONE (nested_should_wake), the queues and stop, cancel
 *                   or tagged wait). Its wait over after a sleep in the
 *                   pool (nested_wait's slept_in_pool; here in_pool, still
 *                   true), it passes the baton (vf__pool_pass_on: a
 *                   notify-one's wake it took may have been for the queued
 *                   work). Then its op runs on (for ever, as far as the
 *                   pool knows): N ends without taking an op, so a wake it
 *                   took and did not pass on is lost.
 *   proctype Firer  waiter_fire on another thread: store DONE, then load
 *                   in_pool: true, vf__pool_wake_tag; false, notify N's
 *                   own event count (vf__ecount_unwoken, then notify all)
 *   proctype Stopper vf__pool_stop once every op was taken (and, with N,
 *                   N's wait is over: the engine stops its pools once
 *                   every op ended): stop, then vf__pool_wake_all
 * Every read or write of a shared variable is a step of its own
 * (sequentially consistent, as the C code's seq_cst atomics are).
 *
 * What is checked (safety: invalid end states): every process ends, i.e.
 * no wake-up is lost. A lost one leaves the workers blocked in the kernel
 * with an op queued (the Stopper then waits for ever: it stops the pool
 * only once every op was taken), or N blocked after its wait's end, an
 * invalid end state.
 *
 * Scenarios (-DSCENARIO=n), K ops:
 *   1  2 workers, 2 ops placed one by one (vf__pool_submit)
 *   2  2 workers, 2 ops placed as one batch (vf__pool_submit_list)
 *   3  1 worker and N, with the Firer: 1 op
 *   4  1 worker and N, with the Firer: 2 ops as one batch
 *   5  1 worker and N, with the Firer: 2 ops one by one
 * (-DNW=2 gives 3-5 two workers besides N: too many states for CI.
 * Scenario 3 so passes a bitstate search, -DBITSTATE and pan -w33: 203
 * million states, hash factor 42, 200 s; mutant 9 so is caught.)
 * Mutants (-DMUTANT=n), each must be caught:
 *   1  a sleeper reads the epoch after its recheck, not before
 *   2  a placer reads the waiter count before it publishes the op
 *   3  vf__ecount_wait blocks without comparing the epoch
 *   4  a leaving sleeper does not pay off an owed wake
 *   5  prepare counts in and reads the epoch in two steps (the first
 *      design of the owed wakes, which this model caught)
 *   6  vf__ecount_wake_tag does not bump the epoch (N, between its look at
 *      DONE and its wait, blocks for ever)
 *   7  vf__ecount_wake_tag owes a wake, as a notify-one does (the Firer,
 *      having read in_pool true, may owe it when N has left the pool: a
 *      worker asleep counts as owed a wake nobody sends, and a placer
 *      then wakes nobody)
 *   8  the Firer loads in_pool before it stores DONE
 *   9  N does not pass the baton on when its wait ends after a sleep in
 *      the pool (the code of 9c63868, before 00b2313; this model finds it
 *      too: a placer's notify-one woke N, blocked beside a worker; N saw
 *      DONE and went back to its op, the worker slept on with the op
 *      queued; before tags, the Firer's vf__pool_wake_all woke the worker
 *      too)
 *  10  N refusing the queued ops does not pass the wake on
 *      (vf__pool_pass_on)
 *  11  N sets in_pool after its look at DONE, not before
 *
 * -DCONTINUE: N's op returns at once after its wait and its thread goes
 * back to worker_main (runs Worker's loop). A weaker check (its thread
 * takes any op a wake it took was for, so mutants 7 and 9 pass), and 12
 * million states for scenario 3: not run by model-check.
 *
 * Not modeled: deadlines (a timed wait only returns earlier: sleep_alone's
 * wait is untimed here, which is stricter), the other ends of a nested
 * wait (a deadlock's choice, active at zero: vf__wait_wake_alone,
 * vf__engine_wake), ops N would take (descendants of its op: it runs them
 * as a worker would), a wait with no stack room (it sleeps alone
 * throughout), the SIGNALING state (DONE is one store here), two threads
 * sharing a tag (past 31 threads: wake_tag wakes both, each looks again),
 * device pools (every placement wakes all; a waiter there sleeps on its
 * inbox), which worker's queue holds an op (any worker takes any op:
 * stealing), spurious wake-ups, the fallback's condition variable (its
 * wake_tag wakes all).
 */

#ifndef SCENARIO
#define SCENARIO 1
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#if SCENARIO >= 3
#define NESTED 1
#ifndef NW
#define NW 1
#endif
#else
#define NESTED 0
#define NW 2
#endif
#if SCENARIO == 3
#define K 1
#else
#define K 2
#endif

byte queued, taken, nspinning, waiters, owed, epoch;
bool stop;
/* inkernel[t]: thread t blocked in FUTEX_WAIT_BITSET, 0 not, 1 with bit 0
 * (a worker), 2 with N's tag (N's nested wait); N is thread NW */
byte inkernel[NW + NESTED];
#if NESTED
bool done, in_pool, over;
byte own_waiters, own_owed, own_epoch;
bool own_inkernel;
#endif

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
        atomic { /* FUTEX_WAKE: any bitset */
            if
            :: all ->
                inkernel[0] = 0
#if NW > 1
                ; inkernel[1] = 0
#endif
#if NESTED
                ; inkernel[NW] = 0
#endif
            :: !all && inkernel[0] -> inkernel[0] = 0
#if NW > 1
            :: !all && inkernel[1] -> inkernel[1] = 0
#endif
#if NESTED
            :: !all && inkernel[NW] -> inkernel[NW] = 0
#endif
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

inline pass_the_baton()
{
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
#if K == 1
    place(1)
#elif SCENARIO == 2 || SCENARIO == 4
    place(2)
#else
    place(1);
    place(1)
#endif
}

/* worker_main's loop, for thread `me` */
inline work(me)
{
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
        :: took -> pass_the_baton()
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
                    inkernel[me] == 0; /* blocked until a wake takes it out */
                    leave()
                fi
            :: else -> skip
            fi
        fi
    od
}

proctype Worker(byte me)
{
    bool took, found, ok;
    byte key, last;
    work(me)
}

#if NESTED
/* The wait's end wakes N by its tag: vf__ecount_wake_tag. */
inline wake_tag()
{
    atomic { /* one fetch_add */
#if MUTANT != 6
        epoch++;
#endif
#if MUTANT == 7
        if
        :: owed < waiters -> owed++
        :: else -> skip
        fi;
#endif
        s = waiters
    }
    if
    :: s > 0 ->
        atomic { /* FUTEX_WAKE_BITSET, N's tag: the tagged sleeper only */
            if
            :: inkernel[NW] == 2 -> inkernel[NW] = 0
            :: else -> skip
            fi
        }
    :: else -> skip
    fi
}

inline own_leave()
{
    atomic {
        own_waiters--;
        if
        :: own_owed > 0 -> own_owed--
        :: else -> skip
        fi
    }
}

/* N: nested_wait's loop in a worker's thread (thread NW, N's tag); the
 * placed ops are none of its op's descendants: it refuses them. */
proctype Nested()
{
    bool took, found, ok;
    byte key, last;
    do
    :: done -> break /* state DONE */
    :: else ->
        if
        :: queued > 0 -> /* vf__exec_loop_run_one: VF__LOOP_REFUSED */
#if MUTANT != 10
            pass_the_baton(); /* vf__pool_pass_on */
#endif
            /* sleep_alone, on its own event count */
            in_pool = 0;
            atomic { own_waiters++; key = own_epoch }
            if
            :: done -> own_leave()
            :: else ->
                atomic {
                    if
                    :: own_epoch == key -> own_inkernel = 1
                    :: else -> skip
                    fi
                }
                !own_inkernel;
                own_leave()
            fi
        :: else -> /* VF__LOOP_NOTHING: sleep_in_pool */
#if MUTANT != 11
            in_pool = 1;
#endif
            atomic { waiters++; key = epoch }
            found = done; /* nested_should_wake */
#if MUTANT == 11
            in_pool = 1;
#endif
            if
            :: !found -> found = queued > 0 || stop
            :: else -> skip
            fi
            if
            :: found -> leave() /* cancel */
            :: else ->
                atomic { /* FUTEX_WAIT_BITSET with its tag */
                    if
                    :: epoch == key -> inkernel[NW] = 2
                    :: else -> skip
                    fi
                }
                inkernel[NW] == 0;
                leave()
            fi
        fi
    od;
#if MUTANT != 9
    if /* slept_in_pool: the wake it took may have been for the queued op */
    :: in_pool -> pass_the_baton()
    :: else -> skip
    fi;
#endif
    over = 1;
#ifdef CONTINUE
    work(NW) /* its op returns: worker_main goes on */
#endif
}

/* waiter_fire: the wait's end, on another thread */
proctype Firer()
{
    bool ok, ip;
    byte s;
#if MUTANT == 8
    ip = in_pool;
    done = 1;
#else
    done = 1;
    ip = in_pool;
#endif
    if
    :: ip -> wake_tag() /* vf__pool_wake_tag */
    :: else ->
        if
        :: own_waiters > own_owed -> /* vf__ecount_notify(all) */
            atomic {
                if
                :: own_waiters > 0 -> own_owed = own_waiters; own_epoch++; ok = 1
                :: else -> ok = 0
                fi
            }
            if
            :: ok -> own_inkernel = 0
            :: else -> skip
            fi
        :: else -> skip
        fi
    fi
}
#endif

proctype Stopper()
{
    bool ok;
    taken == K; /* every op was taken: vf__pool_stop */
#if NESTED
    over; /* and N's op ended */
#endif
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
#if NW > 1
        run Worker(1);
#endif
        run Placer();
#if NESTED
        run Nested();
        run Firer();
#endif
        run Stopper()
    }
}
