/* stall_report.c: see stall_report.h. */
#include "core/stall_report.h"

#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core/engine.h"

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

void vf__stall_report_say(vf__stall_report *r, vf_engine *e, const char *what)
{
    char ops[512];
    vf__async_describe(&e->async, ops, sizeof ops);
    double waited_s = vf__stall_report_said(r);
    vf__stall_write(
        "varflow: %s has waited %.1f s for %s (%" PRIu32 " ops pending); %s\n",
        r->who, waited_s, what, vf__counts_pending(vf__engine_counts(e)), ops);
}

void vf__stall_report_pace(vf__stall_report *r, vf_engine *e, const char *what)
{
    if (vf__stall_report_due_in_ms(r) == 0)
        vf__stall_report_say(r, e, what);
}
