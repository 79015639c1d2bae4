/*
 * error.h: error codes for callers, and failure records for ops.
 *
 * Two different things fail in varflow:
 * - a call (bad argument, out of memory, ...): it returns a negative VF_E*
 *   code, and vf__fail() also leaves a sentence for vf_last_error_detail()
 *   in a thread-local buffer (only on the error path, so it costs nothing
 *   otherwise);
 * - an op (its function returned non-zero): a vf__failure record is made,
 *   stored on every var the op writes, and passed on by skipped ops to the
 *   vars they write. One record is one failure chain, so it is reported once:
 *   the first wait that sees it claims it (`reported`), and from then on it
 *   is inert wherever it is still stored. wait_all clears the rest by moving
 *   the engine to a new epoch: a record of an older epoch is inert too.
 */
#ifndef VF_ERROR_H
#define VF_ERROR_H

#include <stdbool.h>

#include "common.h"

/* Record `code` and a printf-style detail for vf_last_error_detail();
 * returns `code` so call sites read `return vf__fail(VF_EINVAL, ...)`. */
int vf__fail(int code, const char *fmt, ...) VF_PRINTF_LIKE(2, 3);

typedef struct vf__failure vf__failure;
struct vf__failure {
    atomic_int refs;         /* acq_rel: the last unref frees */
    atomic_bool reported;    /* acq_rel CAS: exactly one wait claims it */
    uint32_t epoch;          /* engine error epoch it was raised in */
    vf__failure *next;       /* engine's list of failures (engine fail_lock) */
    vf_error info;
};

/*
 * A new record with one reference, or a shared static "out of memory" record
 * (never freed) when allocation fails: a failure is never lost for want of
 * memory. `message` may be NULL.
 */
vf__failure *vf__failure_new(int code, const char *op_name, const char *message,
                             uint32_t epoch);

/* The shared out-of-memory record: not listed, never freed. */
bool vf__failure_is_static(const vf__failure *f);

void vf__failure_ref(vf__failure *f);
void vf__failure_unref(vf__failure *f);

/* True once, for the first caller: that caller reports the failure. */
static inline bool vf__failure_claim(vf__failure *f)
{
    bool expected = false;
    return atomic_compare_exchange_strong_explicit(
        &f->reported, &expected, true, memory_order_acq_rel,
        memory_order_acquire);
}

/* Whether the record still makes ops skip: unreported and of the epoch. */
static inline bool vf__failure_active(const vf__failure *f, uint32_t epoch)
{
    return f->epoch == epoch &&
           !atomic_load_explicit(&f->reported, memory_order_acquire);
}

#endif /* VF_ERROR_H */
