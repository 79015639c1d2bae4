/*
 * varflow.pml: a Promela model of varflow's per-var protocol (issue 4,
 * point 6), checked with spin by scripts/model-check (`make model-check`).
 *
 * What it models, and where each piece lives in the C code:
 *
 *   var state (vlock, nreaders, pw, qtl, vstate) and queue places
 *   (qop, qw)
 *       struct vf__var in src/core/var.h and vf__dep in src/core/op.h:
 *       `lock` (vf__spinlock), `nreaders` (-1 is VF__WRITE_RUNNING),
 *       `head` (pw: the oldest write still to finish), `tail`, `state`
 *       (LIVE / DELETING / FREE); a place's op (vf__dep_op) and `write`
 *       bit. Places are slots of an array per var, in append order (the
 *       linked list's order), never reused.
 *   inline lock / unlock          vf__spin_lock / vf__spin_unlock
 *   inline append_read            vf__var_append (src/core/var.c), a read
 *   inline append_write           vf__var_append, a write
 *   inline complete_read          vf__var_complete_read
 *   inline complete_write         vf__var_complete_write
 *   inline release                vf__op_release + make_ready (src/core/op.h,
 *                                 src/core/var.c): the fetch_sub on op->wait;
 *                                 whoever takes it to zero dispatches
 *   inline push                   vf__engine_enqueue (src/core/push.c): wait =
 *                                 nvars + 1, lock every var in address
 *                                 order, check each is usable
 *                                 (vf__var_usable), append to every queue,
 *                                 mark a deleted var DELETING, unlock, then
 *                                 the push takes the last one off itself
 *   proctype Pusher               a thread calling vf_engine_push / vf_var_destroy
 *                                 for its ops in program order (two run at
 *                                 once)
 *   proctype Op                   one op's life after its push: dispatched
 *                                 when wait reaches 0 (vf__exec_dispatch_pushed /
 *                                 vf__dispatch_list, a worker picking it
 *                                 up), its body (run_body in src/core/exec.c),
 *                                 then finish(): every var released in
 *                                 order (complete_read / complete_write),
 *                                 and for a delete op vf__var_free_slot
 *
 * What is checked (spin: assertions, invalid end states, and the LTL
 * property `done` when built with -DLTL):
 *   - ordering (rules 1, 2): when an op's body starts, on each of its vars
 *     every op appended before it that conflicts (a write, or anything
 *     when the op writes) has finished its body: conflicting ops never
 *     overlap, run in push order, and reads between two writes run after
 *     the first and before the second (the second write waits for them);
 *     running readers / writers per var are also counted and checked;
 *   - the wait counter (rule 4): an op is dispatched only once its push is
 *     over (the counter may only reach 0 after the pusher's own release);
 *   - the queue invariants the C code asserts (a completing read has
 *     nreaders > 0, a completing write holds the var, a deleted var's slot
 *     is freed with an empty queue and no reader) and that no op runs on a
 *     freed var;
 *   - deadlock freedom and no lost wake-up: every Op process ends (an op
 *     never released would block forever: an invalid end state), and at
 *     the end every op ran or had its push refused, every lock is free and
 *     every live var is idle; with -DLTL, <> done (every op ran or was
 *     refused) on every execution;
 *   - atomic multi-var enqueue: two pushers with crossed read/write sets
 *     (MXNet's cycle: A reads x writes y, B reads y writes x) and ops of
 *     three vars never deadlock;
 *   - delete (rule 7): a delete is a write that marks the var DELETING at
 *     its push; a later push of an op on it is refused (VF_ESTALE) without
 *     touching any queue, and the slot is freed only after every op
 *     appended before the delete.
 *
 * Scenarios (-DSCENARIO=n), over vars x = 0, y = 1, z = 2, two pushers
 * A and B each pushing its ops in order:
 *   1  crossed sets (MXNet's cycle) and two-var ops:
 *        A: R{x}W{y}, W{x,y}        B: R{y}W{x}, R{x,y}
 *   2  reads between writes, on one var:
 *        A: W{x}, W{x}              B: R{x}, R{x}, W{x}
 *   3  a delete racing pushes:
 *        A: W{x}, delete x          B: R{x}W{y}, W{x}
 *   4  three vars, an op of three vars:
 *        A: R{x}W{y}, R{y}W{z}      B: R{z}W{x,y}, R{z}
 * (Small on purpose: every interleaving is explored, exhaustively.)
 *
 * Mutants (-DMUTANT=n) break one thing each; scripts/model-check expects
 * spin to find an error in each (so the checks above are not vacuous):
 *   1  wait counter nvars instead of nvars + 1
 *   2  pusher B locks its vars in descending address order
 *   3  a read joins running reads although a write is queued (reader
 *      preference)
 *   4  no atomic enqueue: each var is locked, appended and unlocked in turn
 *      (MXNet's way)
 *   5  a delete does not mark its var DELETING
 *
 * Where the model differs from the code:
 *   - locks are Promela guards (`vlock[v] == 0 -> vlock[v] = 1` in one
 *     atomic step), not spinning test-and-set; memory is sequentially
 *     consistent (the C code's acquire/release orders, see docs/DESIGN.md,
 *     are not modeled);
 *   - the queue is an array of slots in append order rather than a list of
 *     places each op brings with it (where they live is not modeled); a var-side transition (lock, change, unlock)
 *     is one atomic step, and so is a push's check-append-unlock once it
 *     holds all its locks (nothing else can touch those vars meanwhile);
 *     taking each lock is a step of its own, as are the releases of the
 *     wait counters that follow an unlock;
 *   - every op has its own process, i.e. unboundedly many workers: no ready
 *     queues, priorities, stealing, inline trampolines or sleeping (how
 *     workers sleep and are woken is sleep.pml's); the engine's
 *     pending/active counts, waits (a wait_var marker is a read op like
 *     any other), failures, async completion and the in-flight bound are
 *     not modeled;
 *   - var handles and generations are not modeled: a push names the var
 *     directly, and `vstate` stands for the usable check.
 */

#ifndef SCENARIO
#define SCENARIO 1
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#if SCENARIO == 1
#define NOPS 4      /* A pushes ops 0..NA-1, B pushes NA..NOPS-1 */
#define NA 2
#elif SCENARIO == 2
#define NOPS 5
#define NA 2
#elif SCENARIO == 3
#define NOPS 4
#define NA 2
#else
#define NOPS 4
#define NA 2
#endif
#define NV 3        /* vars x, y, z */
#define MAXVARS 3   /* vars of one op */
#define QS 6        /* queue slots per var (more than the appends to it) */

#define FREE 0
#define LIVE 1
#define DELETING 2

#define WRITE_RUNNING (-1)

/* --- var state (src/core/var.h) --- */
#define NONE 255
byte vlock[NV];
short nreaders[NV];
byte pw[NV];            /* head: the head write's slot, or NONE */
byte qtl[NV];           /* tail: the next slot to use */
byte qop[NV * QS];      /* per queue place: op */
bit qw[NV * QS];        /*   write */
byte vstate[NV];

/* --- ops (src/core/op.h): var sets in normal form, sorted by address --- */
byte opn[NOPS];
byte opv[NOPS * MAXVARS];
bit opw[NOPS * MAXVARS];
bit opdel[NOPS];
short wcnt[NOPS];   /* op->wait */
bit pushing[NOPS];  /* its push is not over */
bit go[NOPS];       /* dispatched */
bit refused[NOPS];  /* its push failed (VF_ESTALE) */
bit started[NOPS];
bit finished[NOPS];
byte ndone;         /* ops finished or refused */

/* --- bookkeeping for the checks (not in the C code) --- */
byte oppos[NOPS * MAXVARS]; /* the op's append position on each var */
byte nappend[NV];
bit finpos[NV * QS];        /* the op appended at that position finished */
bit wpos[NV * QS];          /* ... and it writes the var */
byte rrun[NV];              /* bodies running that read the var */
byte wrun[NV];              /* ... that write it */

#define all_done (ndone == NOPS)

inline lock(v)
{
    atomic { vlock[v] == 0 -> vlock[v] = 1 }
}

inline unlock(v)
{
    vlock[v] = 0
}

/* Take n off op o's wait counter; at zero it is dispatched. It may reach
 * zero only once its push is over. */
inline release(o, n)
{
    d_step {
        wcnt[o] = wcnt[o] - (n);
        assert(wcnt[o] >= 0);
        if
        :: wcnt[o] == 0 -> assert(!pushing[o]); go[o] = 1
        :: else -> skip
        fi
    }
}

/* The push's own release: its last touch of the op, in the same step as
 * the push ends. */
inline push_release(o, n)
{
    d_step {
        pushing[o] = 0;
        wcnt[o] = wcnt[o] - (n);
        assert(wcnt[o] >= 0);
        if
        :: wcnt[o] == 0 -> go[o] = 1
        :: else -> skip
        fi
    }
}

inline note_append(v, o, i, w)
{
    assert(nappend[v] < QS);
    oppos[o * MAXVARS + i] = nappend[v];
    wpos[v * QS + nappend[v]] = w;
    nappend[v]++
}

/* vf__var_append of a read: ready now when no write is queued, else
 * queued at the tail. */
inline append_read(v, o, i)
{
    note_append(v, o, i, 0);
    if
#if MUTANT == 3
    :: pw[v] == NONE || nreaders[v] > 0 ->
#else
    :: pw[v] == NONE ->
#endif
        assert(nreaders[v] >= 0);
        nreaders[v]++;
        nready++
    :: else ->
        assert(qtl[v] < QS);
        qop[v * QS + qtl[v]] = o;
        qw[v * QS + qtl[v]] = 0;
        qtl[v]++
    fi
}

/* vf__var_append of a write: queued at the tail; ready now when it is the
 * head and no read runs. */
inline append_write(v, o, i)
{
    note_append(v, o, i, 1);
    assert(qtl[v] < QS);
    slot = qtl[v];
    qop[v * QS + slot] = o;
    qw[v * QS + slot] = 1;
    qtl[v]++;
    if
    :: pw[v] == NONE ->
        pw[v] = slot;
        if
        :: nreaders[v] == 0 ->
            nreaders[v] = WRITE_RUNNING;
            nready++
        :: else -> skip
        fi
    :: else -> skip
    fi
}

/* vf__var_complete_read: the last reader hands the var to the queued
 * write. */
inline complete_read(v)
{
    atomic {
        vlock[v] == 0 -> /* lock, change, unlock: one step */
        assert(nreaders[v] > 0);
        nreaders[v]--;
        if
        :: nreaders[v] == 0 && pw[v] != NONE ->
            nreaders[v] = WRITE_RUNNING;
            rel = qop[v * QS + pw[v]];
            hasrel = 1
        :: else -> hasrel = 0
        fi
    };
    if
    :: hasrel -> release(rel, 1)
    :: else -> skip
    fi
}

/* vf__var_complete_write: the head leaves; it releases the reads queued
 * behind it, up to the next write, or, when there are none, the next
 * write. Under the lock the reads are walked to find the next write and
 * counted; the released places are walked again after unlocking, to
 * release their ops, as in the C code. */
inline complete_write(v)
{
    atomic {
        vlock[v] == 0 -> /* lock, change, unlock: one step */
        assert(nreaders[v] == WRITE_RUNNING && pw[v] != NONE);
        k = pw[v]; /* done */
        slot = k + 1;
        nrl = 0;
        do
        :: slot < qtl[v] && !qw[v * QS + slot] -> nrl++; slot++
        :: else -> break
        od; /* end: the next write, or qtl */
        hasrel = 0;
        if
        :: slot == qtl[v] ->
            pw[v] = NONE;
            nreaders[v] = nrl
        :: else ->
            pw[v] = slot;
            if
            :: nrl == 0 ->
                nreaders[v] = WRITE_RUNNING;
                rel = qop[v * QS + slot];
                hasrel = 1
            :: else -> nreaders[v] = nrl
            fi
        fi
    };
    /* The blocks after `done` up to `end` are the released reads. */
    k++;
    cnt = 0;
    do
    :: k < slot ->
        assert(!qw[v * QS + k]);
        release(qop[v * QS + k], 1);
        k++;
        cnt++
    :: else -> break
    od;
    atomic { assert(cnt == nrl); k = 0; nrl = 0; cnt = 0; slot = 0 };
    if
    :: hasrel -> release(rel, 1)
    :: else -> skip
    fi
}

/* Append op o to var number i of its set (the caller holds the lock). */
inline append_one(o, i)
{
    v = opv[o * MAXVARS + i];
    if
    :: opw[o * MAXVARS + i] -> append_write(v, o, i)
    :: else -> append_read(v, o, i)
    fi
}

/* vf__engine_enqueue. `lv` is the lock order index: ascending addresses
 * (mutant 2: descending for pusher B). */
inline push(o)
{
    pushing[o] = 1;
#if MUTANT == 1
    wcnt[o] = opn[o];
#else
    wcnt[o] = opn[o] + 1;
#endif
    nready = 0;
    ok = 1;
#if MUTANT == 4
    /* var by var: lock, check, append, unlock */
    i = 0;
    do
    :: i < opn[o] ->
        atomic {
            v = opv[o * MAXVARS + i];
            vlock[v] == 0 ->
            if
            :: vstate[v] != LIVE -> ok = 0
            :: else -> append_one(o, i)
            fi;
            i++
        }
    :: else -> break
    od;
    if
    :: ok && opdel[o] -> vstate[opv[o * MAXVARS]] = DELETING
    :: else -> skip
    fi;
#else
    i = 0;
    do
    :: i < opn[o] ->
#if MUTANT == 2
        if
        :: o >= NA -> lv = opn[o] - 1 - i
        :: else -> lv = i
        fi;
#else
        lv = i;
#endif
        lock(opv[o * MAXVARS + lv]);
        i++
    :: else -> break
    od;
    /* All locks held: check, append and unlock in one step (nobody else
     * can touch these vars meanwhile). */
    atomic {
        i = 0;
        do
        :: i < opn[o] ->
            if
            :: vstate[opv[o * MAXVARS + i]] != LIVE -> ok = 0
            :: else -> skip
            fi;
            i++
        :: else -> break
        od;
        if
        :: ok ->
            i = 0;
            do
            :: i < opn[o] -> append_one(o, i); i++
            :: else -> break
            od;
#if MUTANT != 5
            if
            :: opdel[o] -> vstate[opv[o * MAXVARS]] = DELETING
            :: else -> skip
            fi
#else
            skip
#endif
        :: else -> skip
        fi;
        i = 0;
        do
        :: i < opn[o] -> unlock(opv[o * MAXVARS + i]); i++
        :: else -> break
        od;
        i = 0;
        v = 0;
        lv = 0;
        slot = 0
    };
#endif
    if
#if MUTANT == 1
    :: ok -> push_release(o, nready)
#else
    :: ok -> push_release(o, nready + 1)
#endif
    :: else ->
        /* Mutant 4 may have appended to some vars already: a real
         * implementation could not undo that; the op is refused anyway. */
        d_step { pushing[o] = 0; refused[o] = 1; ndone++ }
    fi
}

proctype Pusher(byte first; byte last)
{
    byte o, i, v, lv, nready, slot;
    bit ok;
    o = first;
    do
    :: o <= last -> push(o); o++
    :: else -> break
    od
}

/* Checks when op o's body starts: on each var, what was appended before it
 * and conflicts has finished, and nothing conflicting runs. */
inline body_starts(o)
{
    atomic {
        started[o] = 1;
        i = 0;
        do
        :: i < opn[o] ->
            v = opv[o * MAXVARS + i];
            assert(vstate[v] != FREE);
            k = 0;
            do
            :: k < oppos[o * MAXVARS + i] ->
                assert(finpos[v * QS + k] ||
                       (!opw[o * MAXVARS + i] && !wpos[v * QS + k]));
                k++
            :: else -> break
            od;
            if
            :: opw[o * MAXVARS + i] ->
                assert(rrun[v] == 0 && wrun[v] == 0);
                wrun[v]++
            :: else ->
                assert(wrun[v] == 0);
                rrun[v]++
            fi;
            i++
        :: else -> break
        od
    }
}

inline body_ends(o)
{
    atomic {
        i = 0;
        do
        :: i < opn[o] ->
            v = opv[o * MAXVARS + i];
            finpos[v * QS + oppos[o * MAXVARS + i]] = 1;
            if
            :: opw[o * MAXVARS + i] -> wrun[v]--
            :: else -> rrun[v]--
            fi;
            i++
        :: else -> break
        od
    }
}

proctype Op(byte o)
{
    byte i, v, k, nrl, rel, slot, cnt;
    bit hasrel;
    atomic {
        (go[o] || refused[o]);
        if
        :: refused[o] -> goto end
        :: else -> body_starts(o)
        fi
    };
    body_ends(o);
    /* finish(): release every var in order */
    i = 0;
    do
    :: i < opn[o] ->
        if
        :: opw[o * MAXVARS + i] -> complete_write(opv[o * MAXVARS + i])
        :: else -> complete_read(opv[o * MAXVARS + i])
        fi;
        i++
    :: else -> break
    od;
    if
    :: opdel[o] ->
        /* vf__var_free_slot */
        v = opv[o * MAXVARS];
        lock(v);
        assert(vstate[v] == DELETING && pw[v] == NONE && nreaders[v] == 0);
        vstate[v] = FREE;
        unlock(v)
    :: else -> skip
    fi;
    d_step { finished[o] = 1; ndone++ };
end:
    skip
}

/* Define op o: its vars (ascending), which it writes, whether a delete. */
inline def1(o, v0, w0)
{
    opn[o] = 1; opv[o * MAXVARS] = v0; opw[o * MAXVARS] = w0
}
inline def2(o, v0, w0, v1, w1)
{
    opn[o] = 2;
    opv[o * MAXVARS] = v0; opw[o * MAXVARS] = w0;
    opv[o * MAXVARS + 1] = v1; opw[o * MAXVARS + 1] = w1
}
inline def3(o, v0, w0, v1, w1, v2, w2)
{
    opn[o] = 3;
    opv[o * MAXVARS] = v0; opw[o * MAXVARS] = w0;
    opv[o * MAXVARS + 1] = v1; opw[o * MAXVARS + 1] = w1;
    opv[o * MAXVARS + 2] = v2; opw[o * MAXVARS + 2] = w2
}

init
{
    byte j;
    atomic {
        j = 0;
        do
        :: j < NV -> vstate[j] = LIVE; pw[j] = NONE; j++
        :: else -> break
        od;
#if SCENARIO == 1
        def2(0, 0, 0, 1, 1);        /* A: R{x} W{y} */
        def2(1, 0, 1, 1, 1);        /* A: W{x,y} */
        def2(2, 0, 1, 1, 0);        /* B: R{y} W{x} */
        def2(3, 0, 0, 1, 0);        /* B: R{x,y} */
#elif SCENARIO == 2
        def1(0, 0, 1);              /* A: W{x} */
        def1(1, 0, 1);              /* A: W{x} */
        def1(2, 0, 0);              /* B: R{x} */
        def1(3, 0, 0);              /* B: R{x} */
        def1(4, 0, 1);              /* B: W{x} */
#elif SCENARIO == 3
        def1(0, 0, 1);              /* A: W{x} */
        def1(1, 0, 1);              /* A: delete x */
        opdel[1] = 1;
        def2(2, 0, 0, 1, 1);        /* B: R{x} W{y} */
        def1(3, 0, 1);              /* B: W{x} */
#else
        def2(0, 0, 0, 1, 1);        /* A: R{x} W{y} */
        def2(1, 1, 0, 2, 1);        /* A: R{y} W{z} */
        def3(2, 0, 1, 1, 1, 2, 0);  /* B: R{z} W{x,y} */
        def1(3, 2, 0);              /* B: R{z} */
#endif
        j = 0;
        do
        :: j < NOPS -> run Op(j); j++
        :: else -> break
        od;
        run Pusher(0, NA - 1);
        run Pusher(NA, NOPS - 1)
    }
    /* Everything ended: all ran or were refused, all idle. */
    (_nr_pr == 1);
    assert(all_done);
    j = 0;
    do
    :: j < NV ->
        assert(vlock[j] == 0);
        assert(vstate[j] == FREE || (pw[j] == NONE && nreaders[j] == 0));
        j++
    :: else -> break
    od
}

#ifdef LTL
ltl done { <> all_done }
#endif
