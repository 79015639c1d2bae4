/* async.c: the async ops in flight (see async.h). */
#include "core/async.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "base/alloc.h"
#include "base/error.h"
#include "core/engine.h"
#include "core/exec.h"
#include "core/freelist.h"
#include "core/lifecycle.h"

int vf__async_init(vf__async_ops *a)
{
    a->head = NULL;
    atomic_init(&a->count, 0);
    a->calls = 0;
    return pthread_mutex_init(&a->lock, NULL) == 0 ? 0 : VF_ESYSTEM;
}

void vf__async_destroy(vf__async_ops *a)
{
    pthread_mutex_destroy(&a->lock);
}

/* Milliseconds on the monotonic clock, modulo 2^32 (ages up to 49 days). */
static uint32_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000u +
                      (uint64_t)ts.tv_nsec / 1000000u);
}

void vf__async_started(vf__async_ops *a, vf__op *op)
{
    op->seq = now_ms(); /* its start, for its age (op.h) */
    pthread_mutex_lock(&a->lock);
    op->child = NULL; /* back link */
    op->next = a->head;
    if (a->head != NULL)
        a->head->child = op;
    a->head = op;
    /* Written only under the lock: a store, no locked add. */
    atomic_store_explicit(&a->count, vf__async_count(a) + 1,
                          memory_order_relaxed);
    a->calls++;
    pthread_mutex_unlock(&a->lock);
}

void vf__async_call_over(vf__async_ops *a)
{
    pthread_mutex_lock(&a->lock);
    a->calls--;
    pthread_mutex_unlock(&a->lock);
}

uint64_t vf__async_calls(vf__async_ops *a)
{
    pthread_mutex_lock(&a->lock);
    uint64_t calls = a->calls;
    pthread_mutex_unlock(&a->lock);
    return calls;
}

void vf__async_completed(vf__async_ops *a, vf__op *op)
{
    pthread_mutex_lock(&a->lock);
    if (op->child != NULL)
        op->child->next = op->next;
    else
        a->head = op->next;
    if (op->next != NULL)
        op->next->child = op->child;
    op->next = op->child = NULL;
    atomic_store_explicit(&a->count, vf__async_count(a) - 1,
                          memory_order_relaxed);
    pthread_mutex_unlock(&a->lock);
}

uint64_t vf__async_count(vf__async_ops *a)
{
    return atomic_load_explicit(&a->count, memory_order_relaxed);
}

/* Append to buf at *len, as snprintf (truncated, always terminated). */
static void put(char *buf, size_t n, size_t *len, const char *fmt, ...)
{
    if (*len >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *len, n - *len, fmt, ap);
    va_end(ap);
    if (w > 0)
        *len += (size_t)w;
}

/* The sentence for `count` ops in flight, under the list's lock. An op is
 * named only whole, with room left for " and N more" after it, and a name
 * is cut (between UTF-8 characters) to NAME_MAX bytes: a sentence cut at
 * the buffer's end lost the count of the rest and ended mid-word (1000
 * ops in flight, a timed wait's 200 bytes: found by a user tester). */
static void describe_locked(const vf__async_ops *a, uint64_t count, char *buf,
                            size_t n)
{
    enum { SHOWN = 4, NAME_MAX = 48, TAIL_MAX = 32 };
    size_t len = 0;
    put(buf, n, &len,
        "%" PRIu64 " async op%s started and never "
        "completed:",
        count, count == 1 ? "" : "s");
    /* The oldest are at the tail: they are the likeliest culprits. */
    const vf__op *op = a->head;
    while (op != NULL && op->next != NULL)
        op = op->next;
    uint32_t now = now_ms();
    uint64_t shown = 0;
    for (; op != NULL && shown < SHOWN; op = op->child) {
        char name[NAME_MAX + 1], entry[NAME_MAX + 64];
        vf__name_fit(name, sizeof name, op->name);
        double age = (double)(uint32_t)(now - op->seq) / 1000.0;
        const char *sep = shown ? "," : "";
        if (name[0] != '\0')
            snprintf(entry, sizeof entry,
                     "%s \"%s\" (op #%" PRIu64 ", started %.1f s ago)", sep,
                     name, op->place, age);
        else
            snprintf(entry, sizeof entry,
                     "%s op #%" PRIu64 " (started %.1f s ago)", sep, op->place,
                     age);
        size_t room = shown + 1 < count ? TAIL_MAX : 0;
        if (len + strlen(entry) + room >= n)
            break;
        put(buf, n, &len, "%s", entry);
        shown++;
    }
    if (shown < count)
        put(buf, n, &len, " and %" PRIu64 " more", count - shown);
}

void vf__async_describe(vf__async_ops *a, char *buf, size_t n)
{
    if (n == 0)
        return;
    if (vf__async_count(a) != 0) {
        pthread_mutex_lock(&a->lock);
        uint64_t count = vf__async_count(a);
        if (count != 0) {
            describe_locked(a, count, buf, n);
            pthread_mutex_unlock(&a->lock);
            return;
        }
        pthread_mutex_unlock(&a->lock);
    }
    snprintf(buf, n, "no async op in flight");
}

/* --- completion -------------------------------------------------------- */

/* acq_rel: the taker sees the string's bytes (release), and a setter sees
 * the allocation of the one it frees (acquire). */
void vf__async_set_message(vf__op *op, const char *message)
{
    free(atomic_exchange_explicit(&op->pending_message, vf__strdup(message),
                                  memory_order_acq_rel));
}

char *vf__async_take_message(vf__op *op)
{
    return atomic_exchange_explicit(&op->pending_message, NULL,
                                    memory_order_acq_rel);
}

int vf__async_completion(vf__op *op, vf_completion *out)
{
    vf__completion_slot *s = vf__fl_alloc(VF__FL_COMPLETION);
    if (s == NULL)
        return VF_ENOMEM;
    s->op = op;
    uint64_t ticket = atomic_load_explicit(&s->ticket, memory_order_relaxed);
    /* Released: a claim from any thread (its acq_rel compare-and-swap)
     * sees `op`, whatever passed the handle there. */
    atomic_store_explicit(&s->ticket, ticket, memory_order_release);
    *out = (vf_completion){.op_ = s, .ticket_ = ticket};
    return 0;
}

/* Claim the completion handle for `*out`: 0, or VF_EINVAL when it is not
 * one, VF_EALREADY when it was used already. The slot goes back at once,
 * its ticket two on (even again: the next op's), so this handle fails from
 * now on whoever holds the slot. */
static int claim_completion(vf_completion done, const char *caller,
                            vf__op **out)
{
    vf__completion_slot *s = done.op_;
    if (s == NULL || (done.ticket_ & 1) != 0)
        return vf__fail(VF_EINVAL, "%s: not a completion handle", caller);
    uint64_t expected = done.ticket_;
    if (!atomic_compare_exchange_strong_explicit(
            &s->ticket, &expected, done.ticket_ + 1, memory_order_acq_rel,
            memory_order_relaxed))
        return vf__fail(VF_EALREADY, "%s: this op was already completed",
                        caller);
    vf__op *op = s->op;
    atomic_store_explicit(&s->ticket, done.ticket_ + 2, memory_order_relaxed);
    vf__fl_free(VF__FL_COMPLETION, s);
    *out = op;
    /* Claimed, but the engine runs nothing here: nothing it makes ready
     * could run (found by a reviewer). Before the list of ops in flight,
     * whose lock a thread the child lacks may have held at the fork (not
     * drained: forked from inside an op), and the completion blocked on it
     * for ever (found by a reviewer of the lifecycle code). */
    vf_engine *e = vf__op_engine(op);
    int rc = vf__lifecycle_refuse_fork_dead(e, caller);
    if (rc == 0)
        vf__async_completed(&e->async, op);
    return rc;
}

VF_API int vf_completion_finish(vf_completion done, int status,
                                const char *message)
{
    vf__op *op = NULL;
    int rc = claim_completion(done, "vf_completion_finish", &op);
    if (rc != 0)
        return rc;
    /* Taken, not read in place: the function may be setting it now, on
     * its own thread (a use after free: found by an auditor). One set
     * after this goes nowhere, and is freed with the op's block. */
    char *set = vf__async_take_message(op);
    if (status != 0)
        vf__exec_op_failed(op, status, message ? message : set);
    free(set);
    vf__exec_finish_completed(op);
    return 0;
}

VF_API int vf_completion_fail(vf_completion done, const vf_error *cause)
{
    if (cause == NULL || cause->code == 0)
        return vf__fail(VF_EINVAL, "vf_completion_fail: %s",
                        cause == NULL ? "cause is NULL"
                                      : "cause->code is 0 (not a failure)");
    vf__op *op = NULL;
    int rc = claim_completion(done, "vf_completion_fail", &op);
    if (rc != 0)
        return rc;
    /* The caller's strings may fill their arrays without a terminator. */
    char name[sizeof cause->op_name], message[sizeof cause->message];
    memcpy(name, cause->op_name, sizeof name);
    memcpy(message, cause->message, sizeof message);
    name[sizeof name - 1] = '\0';
    message[sizeof message - 1] = '\0';
    op->status = VF_ESKIPPED;
    op->skipped = true;
    /* No op name in the cause: this op's own (an unnamed one's label,
     * "op #N", comes from the log); the log gave "op #N" for a named op
     * too (found by a user tester). */
    op->failure = vf__engine_record_failure(vf__op_engine(op), cause->code,
                                            name[0] ? name : op->name, message,
                                            op->place, op->up);
    vf__exec_finish_completed(op);
    return 0;
}
