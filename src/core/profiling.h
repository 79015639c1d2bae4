/*
 * profiling.h: the engine's side of the profiler (profiling.c): the hooks
 * byte new ops copy at push, what the profiler is told of the engine, and
 * what an op whose hooks byte is set tells the observers.
 */
#ifndef VF_PROFILING_H
#define VF_PROFILING_H

#include "core/op.h"
#include "profile/hooks.h"

/* Mirror the profiler's state and engine_info into `hooks` (after the
 * profiler starts, stops, pauses or resumes). */
void vf__profiling_update_hooks(vf_engine *e);

/* What the profiler needs to know of the engine for a snapshot. */
void vf__profiling_describe(const vf_engine *e, vf__prof_engine_desc *d);

/* An op whose hooks byte is set (out of line: rarely on)
 * tells the observers when it starts on `worker` (-1: not a worker of its
 * engine), when it ends (before its `done`), and, finished, hands the
 * profiler its record (before the engine may go; the op keeps no hook of
 * the profiler's then). */
void vf__profiling_op_start(vf__op *op, int worker);
void vf__profiling_op_end(vf__op *op);
/* A recorded op's push, its `n` vars locked before it queues on them: its
 * id, taken now so that ids follow every var's queue whatever the threads
 * pushing (hooks.h: vf__prof_op_number), the edges of the vars it holds
 * at once (hooks.h: vf__prof_var_edge), and `parent`, the running op that
 * pushed it (NULL: none), when recorded (hooks.h: vf__prof_op_parent). */
void vf__profiling_held_at_push(const vf__op *op, int n, const vf__op *parent);
void vf__profiling_op_record(vf__op *op);
/* The recorded op `op` lets go of its var `x` (at its end, or a fused
 * op's early release, as the record of the item whose id it has then):
 * it is the last to end on x (hooks.h: vf__prof_var_used). */
void vf__profiling_var_used(const vf__op *op, int x);
/* The recorded op `op`, made ready on its var v by an op not recorded,
 * takes the edge its push would have taken had v been free (hooks.h:
 * vf__prof_var_edge; `write`: op holds v to write). */
void vf__profiling_edge_past(vf__op *op, const vf__var *v, bool write);

/* A stretch of a recorded op's run that is not its own work (a wait, a
 * child run at its push): its time goes into the op's record
 * (varflow_profile.h: inside_ns). Only the outermost stretch of an op on
 * its thread counts (a `done` callback run above its wait may wait or
 * push too, with the same op running); not an async op's (its record may
 * be made while its function still runs). */
typedef struct vf__prof_stretch {
    const vf__op *op; /* NULL: nothing to count */
    const vf__op *outer;
    uint64_t from;
} vf__prof_stretch;

void vf__profiling_stretch_from(const vf__op *op, vf__prof_stretch *s);
void vf__profiling_stretch_to(const vf__prof_stretch *s);

/* `op`, running on this thread (NULL: none), begins a stretch. */
static inline void vf__profiling_stretch_begin(const vf__op *op,
                                               vf__prof_stretch *s)
{
    s->op = NULL;
    /* An async op's first: another thread's finish may record it and
     * clear its hooks meanwhile (TSan: a child run at its push while
     * another thread finished its async parent). */
    if (VF__UNLIKELY(op != NULL && !op->def->async &&
                     (op->hooks & VF__HOOK_PROF)))
        vf__profiling_stretch_from(op, s);
}

static inline void vf__profiling_stretch_end(const vf__prof_stretch *s)
{
    if (VF__UNLIKELY(s->op != NULL))
        vf__profiling_stretch_to(s);
}

#endif /* VF_PROFILING_H */
