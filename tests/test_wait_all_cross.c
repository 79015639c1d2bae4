/*
 * test_wait_all_cross: vf_engine_wait_all() on one engine from inside an
 * op of another, every engine kind against every other.
 *
 * A ring of engines E0, E1, ... En-1: the op on E0 pushes an op to E1,
 * that one an op to E2, and so on; the last one calls wait_all(E0).
 * - "cycle": each op waits for all of the next engine after its push.
 *   Every op waits for the next one, and the last for the first: the wait
 *   that closes the cycle must be refused with VF_EDEADLK and the others
 *   return 0 (before, all of them hung: found trying recursion across
 *   engines as a user). Exactly one is refused, whatever the timing; the
 *   last one whenever it runs on the first op's thread (inside it, as the
 *   serial program has it).
 * - "inline": only the last op waits. It must get VF_EDEADLK exactly when
 *   it runs inside the first op on its thread (the naive engine ran it
 *   inside a push there, or a worker of E0 did: that op cannot end before
 *   the wait returns), and 0 when it runs elsewhere (the first op ends).
 * - "open": each op waits for all of the next, and the last waits for
 *   nothing: no cycle, every wait returns 0 (no false alarm), and two ops
 *   of one engine waiting for all of the same other engine at once too.
 * The watchdog names the case that hangs.
 */
#include "runner.h"

#include <pthread.h>
#include <stdio.h>

#define MAX_RING 3
#define NOT_RUN 1 /* no wait result yet: not a vf_error code */

typedef enum shape { CYCLE, INLINE, OPEN } shape;

typedef struct ring {
    vf_engine *eng[MAX_RING];
    int n;
    shape how;
    bool timed; /* the last op's wait is vf_engine_wait_all_timed */
    atomic_int rc[MAX_RING];
    pthread_t thread[MAX_RING];
} ring;

typedef struct level_arg {
    ring *r;
    int k;
} level_arg;

static int level_op(vf_run *run, void *arg)
{
    (void)run;
    const level_arg *a = arg;
    ring *r = a->r;
    int k = a->k;
    r->thread[k] = pthread_self();
    if (k == r->n - 1) {
        if (r->how != OPEN) {
            vf_engine *first = r->eng[0];
            int rc = r->timed ? vf_engine_wait_all_timed(first, 20000, NULL)
                              : vf_engine_wait_all(first, NULL);
            atomic_store(&r->rc[k], rc);
        }
        return 0;
    }
    level_arg next = {r, k + 1};
    CHECK_OK(vf_engine_push(r->eng[k + 1], &(vf_op){.fn = level_op,
                                                    .arg = &next,
                                                    .arg_size = sizeof next,
                                                    .name = "ring level"}));
    if (r->how != INLINE)
        atomic_store(&r->rc[k], vf_engine_wait_all(r->eng[k + 1], NULL));
    return 0;
}

/* Run one ring over kinds `kinds` (n of them) and check its results. */
static void run_ring(const int *kinds, int n, shape how, bool timed)
{
    static const char *const shapes[] = {"cycle", "inline", "open"};
    char phase[160];
    int len = snprintf(phase, sizeof phase, "%s%s:", shapes[how],
                       timed ? " (timed)" : "");
    for (int i = 0; i < n; i++)
        len += snprintf(phase + len, sizeof phase - (size_t)len, " %s",
                        tu_kinds[kinds[i]].name);
    tu_phase(phase);

    ring r = {.n = n, .how = how, .timed = timed};
    for (int i = 0; i < n; i++) {
        r.eng[i] = tu_engine(&tu_kinds[kinds[i]]);
        atomic_init(&r.rc[i], NOT_RUN);
    }
    level_arg first = {&r, 0};
    CHECK_OK(vf_engine_push(
        r.eng[0],
        &(vf_op){.fn = level_op, .arg = &first, .arg_size = sizeof first}));
    for (int i = 0; i < n; i++)
        CHECK_OK(vf_engine_wait_all(r.eng[i], NULL));

    int last = n - 1;
    bool inside_first = pthread_equal(r.thread[last], r.thread[0]);
    int refused = 0;
    for (int i = 0; i < n; i++) {
        int rc = atomic_load(&r.rc[i]);
        bool waits = how == CYCLE || (how == INLINE && i == last) ||
                     (how == OPEN && i != last);
        if (!waits) {
            CHECK_EQ(rc, NOT_RUN);
            continue;
        }
        if (rc != 0 && rc != VF_EDEADLK)
            CHECK_REPORT_("%s: level %d returned %s", phase, i,
                          vf_error_name(rc));
        refused += rc == VF_EDEADLK;
    }
    switch (how) {
    case CYCLE:
        CHECK_EQ(refused, 1);
        if (inside_first)
            CHECK_EQ(atomic_load(&r.rc[last]), VF_EDEADLK);
        break;
    case INLINE:
        CHECK_EQ(atomic_load(&r.rc[last]), inside_first ? VF_EDEADLK : 0);
        break;
    case OPEN:
        CHECK_EQ(refused, 0);
        break;
    }
    for (int i = 0; i < n; i++)
        CHECK_OK(vf_engine_destroy(r.eng[i]));
}

TEST_CASE(two_engines_every_kind)
{
    for (int a = 0; a < TU_NKINDS; a++)
        for (int b = 0; b < TU_NKINDS; b++) {
            int kinds[] = {a, b};
            for (int how = CYCLE; how <= OPEN; how++)
                run_ring(kinds, 2, (shape)how, (a + b) % 2 != 0);
        }
}

TEST_CASE(three_engines)
{
    static const int some[] = {0, 1, 4}; /* naive, pooled/1, perdevice/2 */
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++) {
                int kinds[] = {some[a], some[b], some[c]};
                for (int how = CYCLE; how <= OPEN; how++)
                    run_ring(kinds, 3, (shape)how, c == 1);
            }
}

/* Threaded engines on both sides: either op may come to its wait first
 * (the last op's wait is then the one that waits, and the first op's is
 * refused); whichever it is, one is refused and both finish. */
TEST_CASE(cycle_either_order)
{
    int kinds[] = {2, 2}; /* pooled/2 twice */
    for (int i = 0; i < (int)tu_scaled(100, 20); i++)
        run_ring(kinds, 2, CYCLE, i % 2 != 0);
}

/* Two ops of one engine in vf_engine_wait_all on the same other engine
 * at once, whose ops wait for nothing: both 0. */
static int waits_for_all(vf_run *run, void *arg)
{
    (void)run;
    vf_engine *other = arg;
    CHECK_OK(vf_engine_push(other, &(vf_op){.fn = tu_nop}));
    CHECK_OK(vf_engine_wait_all(other, NULL));
    return 0;
}

TEST_CASE(two_ops_wait_for_one_engine)
{
    vf_config c = {.type = VF_ENGINE_POOLED, .cpu_workers = 2};
    vf_engine *a = NULL, *b = NULL;
    CHECK_OK(vf_engine_create(&a, &c));
    CHECK_OK(vf_engine_create(&b, &c));
    for (int i = 0; i < 50; i++) {
        CHECK_OK(vf_engine_push(a, &(vf_op){.fn = waits_for_all, .arg = b}));
        CHECK_OK(vf_engine_push(a, &(vf_op){.fn = waits_for_all, .arg = b}));
    }
    CHECK_OK(vf_engine_wait_all(a, NULL));
    CHECK_OK(vf_engine_destroy(a));
    CHECK_OK(vf_engine_destroy(b));
}

TEST_MAIN("test_wait_all_cross", 240)
