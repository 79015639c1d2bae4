/*
 * run.h: the run handle (vf_run) an op's function gets, and what it can ask
 * through it (run.c): its engine, worker, device and stream, its name, the
 * failure its inputs carry, an error message, device work to submit.
 *
 * A handle lives on the stack of whoever runs the op (exec.c for a lone
 * op, device_ops.c for a device op, bulk_op.c for each op of a fused
 * batch), for the duration of the call.
 */
#ifndef VF_RUN_H
#define VF_RUN_H

#include "core/op.h"
#include "device/device.h"

/* The op whose run handle `run` is, when its function runs on this thread,
 * else NULL. Compared, never read through: a handle kept past its op's end
 * points at a dead frame (vf_run_input_failure read one: found by a user
 * tester). */
static inline vf__op *vf__run_op_here(const struct vf_run *run)
{
    vf__op *cur = vf__current_op();
    return run != NULL && cur != NULL && cur->run == run ? cur : NULL;
}

struct vf_run {
    vf__op *op;
    const char *name; /* the op's, or in a bulk the running one's */
    int worker;
    const vf__device_class *cls; /* a device op's stream, or NULL */
    vf__stream *stream;
    /* In a fused op, the running item's vars (bulk.h refs into the fused
     * op's vars); NULL for a lone op, whose vars are all its own. */
    const uint32_t *item_refs;
    int item_nrefs;
    uint64_t place; /* a fused op's item: its place (failure.h) */
    char message[256];
};

#endif /* VF_RUN_H */
