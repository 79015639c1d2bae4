/*
 * test_family: family.h's tree order, alone: runs entered and left by
 * hand (vf__running_enter / vf__running_leave), families made by their
 * first push (vf__running_family), keys compared with vf__family_before.
 *
 * - tree_order: a child's children come before its parent's later
 *   children, whatever their places; an ancestor before its descendants;
 *   top-level ops by place; a key is not before itself; the answer is
 *   the same both ways round (exactly one of a < b, b < a unless equal);
 * - families_live_with_their_children: a run's family outlives the run
 *   while a child holds it, and goes (up the chain) with the last
 *   reference (LSan and ASan check the frees);
 * - deep_chain: past VF__FAMILY_DEPTH a family stands beside its parent,
 *   so a chain of 10,000 runs each pushing the next holds at most
 *   VF__FAMILY_DEPTH families above any op, and keys there compare by
 *   their parents' places, then their own.
 */
#include "runner.h"

#include "core/family.h"
#include "core/freelist.h"
#include "core/op.h"

/* A run's op, for its identity (and its var set: none). */
static vf__op *fake_op(int i)
{
    static _Alignas(max_align_t) char ops[16][sizeof(vf__op)];
    return (vf__op *)ops[i % 16];
}

/* The family a child pushed now from the run at `place` under `up` gets
 * (a reference), as vf__push_family gives it. */
static vf__family *child_family(vf__running *saved, int id, uint64_t place,
                                vf__family *up)
{
    vf__running_enter(saved, fake_op(id));
    vf__family *f = vf__running_family(fake_op(id), up, place);
    REQUIRE(f != NULL);
    CHECK_EQ(atomic_load(&f->refs), 1); /* the run's, no more */
    vf__family_ref(f);
    return f;
}

/* Both ways round: a before b, and not b before a. */
#define CHECK_ORDER(au, ap, bu, bp)                                            \
    do {                                                                       \
        CHECK(vf__family_before(au, ap, bu, bp));                              \
        CHECK(!vf__family_before(bu, bp, au, ap));                             \
    } while (0)

TEST_CASE(tree_order)
{
    vf__fl_init(VF__FL_FAMILY, sizeof(vf__family));
    /* Op 1 pushes ops 2 and 5; op 2 pushes 7 (after 5 in time) and 9;
     * op 7 pushes 11. Op 10 is top-level. Serial order: 1 2 7 11 9 5 10. */
    vf__running top, in2, in7;
    vf__family *f1 = child_family(&top, 1, 1, NULL);           /* up of 2 */
    vf__family *f1b = vf__running_family(fake_op(1), NULL, 1); /* of 5 */
    CHECK(f1 == f1b);
    CHECK_EQ(atomic_load(&f1->refs), 2); /* the run's and op 2's */
    vf__family_ref(f1b);
    CHECK_EQ(f1->depth, 1);
    CHECK_EQ(f1->root, 1);
    vf__family *f2 = child_family(&in2, 2, 2, f1); /* up of 7 and 9 */
    CHECK_EQ(f2->depth, 2);
    CHECK_EQ(f2->root, 1);
    vf__family *f7 = child_family(&in7, 7, 7, f2); /* up of 11 */
    CHECK_EQ(f7->root, 1);

    CHECK_ORDER(f2, 7, f1, 5);    /* a grandchild before a later child */
    CHECK_ORDER(f7, 11, f2, 9);   /* and its child too */
    CHECK_ORDER(f7, 11, f1, 5);   /* two levels apart */
    CHECK_ORDER(NULL, 1, f7, 11); /* an ancestor first */
    CHECK_ORDER(f1, 2, f2, 7);    /* the parent before its child */
    CHECK_ORDER(f2, 9, NULL, 10); /* the root's place decides */
    CHECK_ORDER(f1, 2, f1, 5);    /* siblings by place */
    CHECK(!vf__family_before(f2, 9, f2, 9));
    CHECK(!vf__family_before(NULL, 10, NULL, 10));

    vf__running_leave(&in7); /* each run drops its own reference */
    vf__running_leave(&in2);
    vf__running_leave(&top);
    vf__family_unref(f7);
    vf__family_unref(f2);
    vf__family_unref(f1b);
    vf__family_unref(f1);
}

TEST_CASE(families_live_with_their_children)
{
    vf__fl_init(VF__FL_FAMILY, sizeof(vf__family));
    vf__running top, mid;
    vf__family *f1 = child_family(&top, 1, 1, NULL);
    vf__family *f2 = child_family(&mid, 2, 2, f1);
    vf__running_leave(&mid);
    vf__running_leave(&top);
    /* The runs are over; the children's references keep both alive. */
    CHECK_EQ(atomic_load(&f2->refs), 1);
    CHECK_EQ(atomic_load(&f1->refs), 2); /* op 2's, and f2's `up` */
    vf__family_unref(f1);
    CHECK_EQ(atomic_load(&f1->refs), 1);
    CHECK(vf__family_before(f2, 3, NULL, 4));
    vf__family_unref(f2); /* frees f2, then f1 */
    CHECK(vf__running_now.op == NULL);
}

/* A family whose op runs alone inside its push (op.h: alone) borrows its
 * parent's: no reference to `up` while its run lasts; its run's end
 * frees it without touching `up` when nothing else holds it, and takes a
 * reference to `up` first when something does. */
TEST_CASE(alone_runs_borrow_up)
{
    vf__fl_init(VF__FL_FAMILY, sizeof(vf__family));
    vf__running top, in2, in3;
    vf__family *f1 = child_family(&top, 1, 1, NULL); /* op 2's reference */
    CHECK_EQ(atomic_load(&f1->refs), 2);

    /* Op 2 runs alone and pushes only children that end within its run. */
    fake_op(2)->alone = true;
    vf__running_enter(&in2, fake_op(2));
    vf__family *f2 = vf__running_family(fake_op(2), f1, 2);
    REQUIRE(f2 != NULL);
    CHECK(f2->up_borrowed);
    CHECK_EQ(atomic_load(&f1->refs), 2); /* no reference taken */
    vf__running_leave(&in2);             /* frees f2 */
    CHECK_EQ(atomic_load(&f1->refs), 2); /* and none let go */

    /* Op 3 runs alone and pushes a child that outlives its run. */
    fake_op(3)->alone = true;
    vf__running_enter(&in3, fake_op(3));
    vf__family *f3 = vf__running_family(fake_op(3), f1, 3);
    REQUIRE(f3 != NULL);
    vf__family_ref(f3); /* the queued child's */
    CHECK(f3->up_borrowed);
    vf__running_leave(&in3);
    CHECK(!f3->up_borrowed);
    CHECK_EQ(atomic_load(&f1->refs), 3); /* f3 holds f1 itself now */
    CHECK_EQ(atomic_load(&f3->refs), 1);
    vf__family_unref(f3); /* the child finished: frees f3, lets go of f1 */
    CHECK_EQ(atomic_load(&f1->refs), 2);
    fake_op(2)->alone = false;
    fake_op(3)->alone = false;

    vf__running_leave(&top);
    CHECK_EQ(atomic_load(&f1->refs), 1);
    vf__family_unref(f1);
}

TEST_CASE(deep_chain)
{
    vf__fl_init(VF__FL_FAMILY, sizeof(vf__family));
    enum { N = 10000, D = VF__FAMILY_DEPTH };
    static vf__running saved[N];
    static vf__family *fam[N];
    vf__family *up = NULL;
    for (int i = 0; i < N; i++) {
        /* Run i (place i + 1) pushes run i + 1, and has ended when that
         * one runs: fam[i] is held by run i + 1's op (and the families
         * whose `up` it is). */
        fam[i] = child_family(&saved[i], i, (uint64_t)i + 1, up);
        vf__running_leave(&saved[i]);
        CHECK_EQ(fam[i]->depth, i < D ? (uint32_t)i + 1 : (uint32_t)D);
        CHECK_EQ(fam[i]->root, 1);
        up = fam[i];
    }
    /* Past the depth every family stands beside the last one within it,
     * under the same `up`: the chain holds D families, not N. */
    CHECK(fam[D - 1]->up == fam[D - 2]);
    CHECK(fam[D]->up == fam[D - 2]);
    CHECK(fam[N - 1]->up == fam[D - 2]);
    /* Within the depth, tree order: an op before what its child pushed,
     * and a child's subtree before its parent's later child (place N + 5,
     * pushed by run 5 after everything else). */
    CHECK_ORDER(fam[5], 7, fam[100], 102);
    CHECK_ORDER(fam[D - 3], D + 100, fam[4], N + 5);
    /* Past it, by the parent's place, then the op's own. */
    CHECK_ORDER(fam[D + 5], D + 7, fam[N - 1], N + 1);
    CHECK_ORDER(fam[N - 2], N, fam[N - 1], N + 1);
    CHECK_ORDER(fam[N - 1], N + 1, NULL, N + 2);
    for (int i = 0; i < N; i++)
        vf__family_unref(fam[i]); /* the ops' references: frees them all */
}

TEST_MAIN("test_family", 60)
