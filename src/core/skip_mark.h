/*
 * skip_mark.h: what the waits on a var say of its last write's skip.
 *
 * A child that takes its place on a var by time (on a var no running
 * ancestor holds: the header's "Waits and failures") may queue behind the
 * failing child of an op pushed after its own parent, and is skipped, where
 * the serial program, which has not made that failure yet, runs it. The
 * var then does not hold what the program computes, and a wait with no
 * failure of its own to report must not return 0. So the skipped write
 * leaves a mark: its key and the failure it was skipped for. A wait after
 * that write in push order that finds it says VF_ESKIPPED (wait.c); the
 * var's next write replaces it (var.h). A device write whose stream skips
 * its work leaves its mark on its fence (fences.h), which the waits read
 * while the fence is the var's last write's.
 */
#ifndef VF_SKIP_MARK_H
#define VF_SKIP_MARK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/failure.h"

typedef struct vf__skip_mark {
    uint64_t place;            /* the skipped write's key: its place */
    struct vf__family *up;     /* and its family (a reference) */
    struct vf__failure *cause; /* what it was skipped for (a reference;
                                  NULL: not known, out of memory) */
} vf__skip_mark;

/* The mark of the write by the op at `place` under `up` (its key) that was
 * skipped for `f`: NULL when `f` is not a later op's (vf__failure_after),
 * for a skip in push order is the rule's (failure.h). Out of memory, a
 * mark that names nothing and counts as before every wait. */
vf__skip_mark *vf__skip_mark_make(struct vf__failure *f, struct vf__family *up,
                                  uint64_t place);

void vf__skip_mark_free(vf__skip_mark *m);

/* Whether the mark `m` (may be NULL) is of a write before a wait at `key`;
 * then *cause is the failure it was skipped for (a new reference, or NULL
 * when not known). */
bool vf__skip_mark_before(const vf__skip_mark *m, vf__wait_key key,
                          struct vf__failure **cause);

#endif /* VF_SKIP_MARK_H */
