/*
 * async.pml: a Promela model of how an async op's call and its finish on
 * another thread hand the op over (src/core/exec.c: async_call_returned,
 * async_call_returns, finish), when a nested wait loop ran the op and so
 * its waiter is to be counted back in as the call returns. Checked with
 * spin by scripts/model-check beside varflow.pml and sleep.pml.
 *
 * What it models, and where each piece lives in the C code:
 *   wait            the op block's `wait`: CALL (the function runs),
 *                   LEFT (it returned first: the finish owns all),
 *                   FINISHING (a finish began while it ran), LEFT_LATE
 *                   (it returned during that finish), HANDED (the finish
 *                   ended while it ran: the call owns the op's active
 *                   count and its block)
 *   nactive         the engine's active count (counts.h), summed: the op
 *                   (1), the waiter once counted back in, the marker of
 *                   scenario 2 while it is ready
 *   pending         the op's pending count (1 until its finish)
 *   wstate          the waiter's state (wait.h): BUSY (its thread runs
 *                   another op: the op here), IDLE, DONE_UNCOUNTED (its
 *                   marker fired while BUSY: nobody counted it in), DONE
 *   freed           how many times the block was freed
 *   proctype Call   the thread that ran the op in its wait loop, from the
 *                   function's return: loop_frame_returns (BUSY -> IDLE,
 *                   or DONE_UNCOUNTED -> DONE and one to count in), then
 *                   async_call_returns (CALL -> LEFT, FINISHING ->
 *                   LEFT_LATE, or HANDED: async_call_ends_op counts the
 *                   op out and frees it)
 *   proctype Finish the finish, on another thread (vf_completion_finish):
 *                   async_finish_begins (CALL -> FINISHING); then pending
 *                   out, and async_finish_hands_over (FINISHING ->
 *                   HANDED), or, when the call returned meanwhile
 *                   (LEFT_LATE), the op's active out and the block freed;
 *                   or, the call having returned first (LEFT), both counts
 *                   out in one step (count_finished) and the block freed.
 *                   No op made ready (act = 0): the worst case.
 *   proctype Marker scenario 2: the waiter's marker fires (waiter_fire)
 *                   while the call runs or after: BUSY -> DONE_UNCOUNTED;
 *                   IDLE -> DONE, the waiter counted in; then the marker's
 *                   own active count goes.
 * Every read or write of a shared variable is a step of its own but for
 * the compare-and-swaps and fetch-adds, one step each as in C.
 *
 * What is checked (safety): the thread of the call always runs something
 * (the op's function, or the waiter's op once it resumes), so `active`
 * never falls to zero: a zero is what a deadlock watcher on a third
 * thread reads as "nothing runs, nothing can" (a false VF_EDEADLK). Every
 * lowering asserts it. At the end: the block freed once, pending 0, and
 * active 1 (the waiter, running on).
 *
 * Scenarios (-DSCENARIO=n):
 *   1  the waiter's marker fired before the call returned (DONE_UNCOUNTED)
 *   2  it fires at any moment, from another thread
 *
 * Mutants (-DMUTANT=m): each breaks one rule and must be caught.
 *   1  the call says it returned first and counts the waiter in after
 *      (the code before this model: a false VF_EDEADLK in the window)
 *   2  handed over, the call counts the op out before the waiter in (the
 *      code before RELIABILITY row 405)
 *   3  the finish that saw the call return meanwhile leaves the op's
 *      active count to it (a leak: active never falls back)
 */
#ifndef SCENARIO
#define SCENARIO 1
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#define CALL 1
#define LEFT 2
#define FINISHING 3
#define LEFT_LATE 4
#define HANDED 5

#define BUSY 1
#define IDLE 2
#define DONE_UNCOUNTED 3
#define DONE 4

byte wait = CALL;
byte nactive;
byte pending = 1;
byte wstate;
byte freed;

/* Lower the active count by one; it must stay above zero. */
#define active_out()                                                         \
    atomic { nactive--; assert(nactive > 0) }

/* loop_frame_returns: the waiter is on top of the thread again; `back`
 * is one when it is to be counted in. */
#define frame_returns(back)                                                  \
    atomic {                                                                 \
        if                                                                   \
        :: wstate == BUSY -> wstate = IDLE; back = 0                         \
        :: wstate == DONE_UNCOUNTED -> wstate = DONE; back = 1               \
        fi                                                                   \
    }

proctype Call()
{
    bool back;
    byte s;
#if MUTANT != 1 && MUTANT != 2
    frame_returns(back); /* the waiter first, while the op holds its count */
    if
    :: back -> nactive++
    :: else -> skip
    fi;
#endif
    atomic { /* async_call_returns */
        s = wait;
        if
        :: s == CALL -> wait = LEFT
        :: s == FINISHING -> wait = LEFT_LATE
        :: s == HANDED -> skip
        fi
    }
#if MUTANT == 1 || MUTANT == 2
    frame_returns(back); /* the waiter after: loop_op_returned */
    if
    :: s == HANDED ->
#if MUTANT == 1
        if
        :: back -> skip /* one step: the waiter in, the op out */
        :: else -> active_out()
        fi;
#else
        active_out(); /* the op out, then the waiter in */
        if
        :: back -> nactive++
        :: else -> skip
        fi;
#endif
        freed++
    :: else ->
        if
        :: back -> nactive++
        :: else -> skip
        fi
    fi
#else
    if
    :: s == HANDED -> active_out(); freed++ /* async_call_ends_op */
    :: else -> skip
    fi
#endif
}

proctype Finish()
{
    bool began, handed;
    atomic { /* async_finish_begins */
        if
        :: wait == CALL -> wait = FINISHING; began = 1
        :: else -> began = 0
        fi
    }
    if
    :: began ->
        pending--;
        atomic { /* async_finish_hands_over */
            if
            :: wait == FINISHING -> wait = HANDED; handed = 1
            :: else -> handed = 0
            fi
        }
        if
        :: handed -> skip /* the call's now */
        :: else ->
#if MUTANT != 3
            active_out();
#endif
            freed++
        fi
    :: else -> /* count_finished: pending and active in one step */
        atomic { pending--; nactive--; assert(nactive > 0) }
        freed++
    fi
}

#if SCENARIO == 2
proctype Marker()
{
    atomic { /* waiter_fire */
        if
        :: wstate == BUSY -> wstate = DONE_UNCOUNTED
        :: wstate == IDLE -> wstate = DONE; nactive++
        fi
    }
    active_out() /* the marker's own count */
}
#endif

init
{
    atomic {
        nactive = 1; /* the op */
#if SCENARIO == 1
        wstate = DONE_UNCOUNTED;
#else
        wstate = BUSY;
        nactive++; /* the marker, ready */
#endif
        run Call();
        run Finish();
#if SCENARIO == 2
        run Marker();
#endif
    }
    _nr_pr == 1; /* every other process ended */
    assert(freed == 1 && pending == 0 && nactive == 1 && wstate == DONE)
}
