/*
 * push.h: enqueueing an op on all its vars as one atomic step (push.c,
 * which also has the public push calls).
 */
#ifndef VF_PUSH_H
#define VF_PUSH_H

#include "core/op.h"

/* Push a prepared op: `op->def` set, its var set normalized. A user op
 * with no place yet takes the next number once the push can no longer
 * fail; any other op comes with its place (failure.h). Appends it
 * to every var atomically, counts it, and dispatches it when ready.
 */
int vf__push_enqueue(vf_engine *e, vf__op *op, const char *who);

#endif /* VF_PUSH_H */
