/*
 * stall_report.h: what a call that may wait for ever says while it waits.
 * A destroy, a stop and a fork's drain wait for every pushed op, a push at
 * the in-flight bound for room, and an async op whose completion never
 * comes keeps them waiting: each says so
 * on stderr, first after a grace period, then every period, naming the
 * async ops in flight (name, place in push order, age). A stop and a fork
 * said nothing, and a fork from the thread that would complete such an op
 * hung silently (found by a user tester).
 */
#ifndef VF_STALL_REPORT_H
#define VF_STALL_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "varflow.h"

typedef struct vf__stall_report {
    const char *who; /* the call: "vf_engine_destroy", "fork()" */
    int64_t start_ms, next_ms;
} vf__stall_report;

/* CLOCK_MONOTONIC in milliseconds. */
int64_t vf__stall_now_ms(void);

/* The wait of `who` begins now: its first report is due after the grace. */
void vf__stall_report_start(vf__stall_report *r, const char *who);

/* Milliseconds until the next report is due (0: it is). */
int64_t vf__stall_report_due_in_ms(const vf__stall_report *r);

/* Report on stderr now: "varflow: WHO has waited S s for WHAT (N ops
 * pending); " and the async ops of e in flight, then the ops its threads
 * run (vf__stall_running); the next one is due a period later. */
void vf__stall_report_say(vf__stall_report *r, vf_engine *e, const char *what);

/* Write a report line (printf-style, cut to 1 KiB) to stderr without ever
 * blocking: dropped when stderr cannot take it now (a pipe nobody reads,
 * full; a closed descriptor). A blocking fprintf there kept a destroy, a
 * destroy_timed past its deadline, a stop and a push at the bound waiting
 * for ever after their ops were done (found by a user tester). */
void vf__stall_write(const char *fmt, ...) VF_PRINTF_LIKE(1, 2);

/* A report is said now (by the caller, in words of its own): the seconds
 * waited since the start; the next one is due a period later. */
double vf__stall_report_said(vf__stall_report *r);

/* Note which op each thread of e's pools runs now (sched.h:
 * running_place); with `spares`, the pools' spare threads too (under
 * their spare_lock: a timed wait, which may time out a thousand times a
 * second in a recursion's waits, leaves them out, and its detail too:
 * the lock taken at every time-out made test_wait_recursive's 1 ms waits
 * queue on it past the watchdog). Called where a wait that reports
 * begins. */
void vf__stall_sample(vf_engine *e, bool spares);

/* The ops e's threads run now, to buf (size n, terminated): "; running
 * now: op #4 on worker 0 (cpu) for at least 2.0 s, op #9 on worker 1
 * (cpu)" ("for at least" since the op was first seen running, at the
 * sample or an earlier report; those seen anew are noted now), at most
 * four, then " and N more"; "" when none. */
void vf__stall_running(vf_engine *e, char *buf, size_t n, bool spares);

/* vf__fail(code) with the detail `fmt`'s text followed by the async ops
 * of e in flight (vf__async_describe) and the ops its workers run
 * (vf__stall_running, no spares), each fitted whole to what the detail holds (a
 * sentence made for more was cut mid-word, the count of the rest lost:
 * found by a reviewer). A timed wait that gave up said "no async op in
 * flight" with a hung op running (found by a user tester). */
int vf__stall_fail(vf_engine *e, int code, const char *fmt, ...)
    VF_PRINTF_LIKE(3, 4);

/* vf__stall_report_say if a report is due. */
void vf__stall_report_pace(vf__stall_report *r, vf_engine *e, const char *what);

/* The first report after `grace_ms`, then every `period_ms` (defaults
 * 2000 and 10000; tests shorten them). */
void vf__stall_report_times(uint32_t grace_ms, uint32_t period_ms);

#endif /* VF_STALL_REPORT_H */
