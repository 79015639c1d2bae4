/* stall_report.c: see stall_report.h. */
#include "core/stall_report.h"

#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "core/async.h"
#include "core/engine.h"
#include "core/sched.h"

static _Atomic uint32_t grace_ms = 2000, period_ms = 10000;

void vf__stall_report_times(uint32_t grace, uint32_t period)
{
    atomic_store(&grace_ms, grace);
    atomic_store(&period_ms, period > 0 ? period : 1);
}

int64_t vf__stall_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void vf__stall_report_start(vf__stall_report *r, const char *who)
{
    r->who = who;
    r->start_ms = vf__stall_now_ms();
    r->next_ms = r->start_ms + atomic_load(&grace_ms);
}

int64_t vf__stall_report_due_in_ms(const vf__stall_report *r)
{
    int64_t left = r->next_ms - vf__stall_now_ms();
    return left > 0 ? left : 0;
}

void vf__stall_write(const char *fmt, ...)
{
    /* One write of at most PIPE_BUF bytes, which a pipe with room takes
     * whole, without blocking. */
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    if (len > 0 && line[len - 1] != '\n')
        line[len - 1] = '\n'; /* cut: still a line */
    struct pollfd p = {.fd = STDERR_FILENO, .events = POLLOUT};
    if (poll(&p, 1, 0) != 1 || p.revents != POLLOUT)
        return; /* full, closed, no reader (SIGPIPE): this report is dropped */
    ssize_t wrote = write(STDERR_FILENO, line, len);
    (void)wrote; /* nothing to do about a failed report */
}

double vf__stall_report_said(vf__stall_report *r)
{
    int64_t now = vf__stall_now_ms();
    r->next_ms = now + atomic_load(&period_ms);
    return (double)(now - r->start_ms) / 1000.0;
}

/* Each thread of e's pools in turn, `fn(w, pool, arg)`: the workers of
 * the pools made so far (a device's are published with a release store
 * of npools), then, with `spares`, the spares (under the pool's
 * spare_lock: a stop frees them, after taking the list away under it). */
static void each_worker(vf_engine *e,
                        void (*fn)(vf__worker *w, const vf__pool *p, void *arg),
                        void *arg, bool spares)
{
    int npools = atomic_load_explicit(&e->npools, memory_order_acquire);
    for (int i = 0; i < npools; i++) {
        vf__pool *p = &e->pools[i];
        for (int j = 0; j < p->nworkers; j++)
            fn(&p->workers[j], p, arg);
        if (!spares ||
            atomic_load_explicit(&p->nspares, memory_order_relaxed) == 0)
            continue;
        pthread_mutex_lock(&p->spare_lock);
        for (vf__worker *w = p->spares; w != NULL; w = w->next_spare)
            fn(w, p, arg);
        pthread_mutex_unlock(&p->spare_lock);
    }
}

/* Note w's op at `*arg` (ms) unless it is the one noted already: the time
 * first, the place after it with release (say_worker reads the place with
 * acquire, then the time). */
static void sample_worker(vf__worker *w, const vf__pool *p, void *arg)
{
    (void)p;
    uint64_t place = atomic_load_explicit(&w->running_place,
                                          memory_order_relaxed);
    if (place != atomic_load_explicit(&w->seen_place, memory_order_relaxed)) {
        atomic_store_explicit(&w->seen_ms, *(const int64_t *)arg,
                              memory_order_relaxed);
        atomic_store_explicit(&w->seen_place, place, memory_order_release);
    }
}

void vf__stall_sample(vf_engine *e, bool spares)
{
    int64_t now = vf__stall_now_ms();
    each_worker(e, sample_worker, &now, spares);
}

/* The ops threads run now, at most SHOWN of them, each whole. */
typedef struct running_words {
    char *buf;
    size_t n, len;
    int64_t now;
    int shown, more;
} running_words;

static void say_worker(vf__worker *w, const vf__pool *p, void *arg)
{
    enum { SHOWN = 4, ENTRY_MAX = 120, TAIL_MAX = 24 };
    running_words *rw = arg;
    uint64_t place = atomic_load_explicit(&w->running_place,
                                          memory_order_relaxed);
    bool same = place ==
                atomic_load_explicit(&w->seen_place, memory_order_acquire);
    int64_t since = atomic_load_explicit(&w->seen_ms, memory_order_relaxed);
    if (!same)
        sample_worker(w, p, &rw->now);
    if (place == 0)
        return;
    char who[48], entry[ENTRY_MAX];
    if (w->index >= 0)
        snprintf(who, sizeof who, "worker %d (%s)", w->index, p->name);
    else
        snprintf(who, sizeof who, "a spare thread (%s)", p->name);
    int k = snprintf(entry, sizeof entry, "%s op #%" PRIu64 " on %s",
                     rw->shown ? "," : "; running now:", place, who);
    if (same && k > 0 && (size_t)k < sizeof entry)
        snprintf(entry + k, sizeof entry - (size_t)k, " for at least %.1f s",
                 (double)(rw->now - since) / 1000.0);
    size_t len = strlen(entry);
    if (rw->shown >= SHOWN || rw->len + len + TAIL_MAX >= rw->n) {
        rw->more++;
        return;
    }
    memcpy(rw->buf + rw->len, entry, len + 1);
    rw->len += len;
    rw->shown++;
}

void vf__stall_running(vf_engine *e, char *buf, size_t n, bool spares)
{
    running_words rw = {.buf = buf, .n = n, .now = vf__stall_now_ms()};
    buf[0] = '\0';
    each_worker(e, say_worker, &rw, spares);
    if (rw.more > 0)
        snprintf(buf + rw.len, n - rw.len, " and %d more", rw.more);
}

int vf__stall_fail(vf_engine *e, int code, const char *fmt, ...)
{
    /* The running ops get at most a third of the detail (one or two, then
     * how many more), the async ops, the usual reason, what the text and
     * they leave (with half, two running ops left no room for one async op
     * with a name: found by a reviewer). */
    char detail[VF__DETAIL_MAX], running[VF__DETAIL_MAX / 3];
    vf__stall_running(e, running, sizeof running, false);
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    size_t tail = strlen(running);
    if (len >= 0 && (size_t)len + tail + 1 < sizeof detail) {
        vf__async_describe(&e->async, detail + len,
                           sizeof detail - (size_t)len - tail);
        strcat(detail, running);
    }
    return vf__fail(code, "%s", detail);
}

void vf__stall_report_say(vf__stall_report *r, vf_engine *e, const char *what)
{
    char ops[512], running[384], calls[96] = "";
    vf__async_describe(&e->async, ops, sizeof ops);
    vf__stall_running(e, running, sizeof running, true);
    /* A function that runs on after its op's completion holds a stop or
     * a destroy with nothing pending (async.h: calls): said so. */
    uint64_t n = vf__async_calls(&e->async);
    if (n != 0)
        snprintf(calls, sizeof calls,
                 "; %" PRIu64 " async op function%s still running", n,
                 n == 1 ? "" : "s");
    double waited_s = vf__stall_report_said(r);
    vf__stall_write("varflow: %s has waited %.1f s for %s (%" PRIu32
                    " ops pending); %s%s%s\n",
                    r->who, waited_s, what,
                    vf__counts_pending(vf__engine_counts(e)), ops, running,
                    calls);
}

void vf__stall_report_pace(vf__stall_report *r, vf_engine *e, const char *what)
{
    if (vf__stall_report_due_in_ms(r) == 0)
        vf__stall_report_say(r, e, what);
}
