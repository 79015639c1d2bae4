/*
 * testing.h: testing aids that look inside the engine: a stepped engine,
 * which runs no worker thread and runs one ready op at a time on the
 * calling thread, so a test can assert exact orders (priority, rule 2)
 * without a race.
 *
 * Where testing aids live. This header and testing.c are compiled only into
 * `varflow_internal`, the static library the unit tests link (CMakeLists.txt):
 * never into libvarflow.a or libvarflow.so, never installed. Their names
 * are internal (vf__testing_*), and a program reaches them only by
 * including "core/testing.h" from src/, which no installed header does.
 *
 * How stepping works. A stepped engine is a pooled engine whose CPU pool
 * has one worker queue and no thread: creation joins the pool's thread
 * before anything was pushed. Every ready CPU op therefore waits in that
 * one queue, in the queue's order (priority, then arrival: sched.h), until
 * vf__testing_run_one takes the best of them and runs it on the calling
 * thread, which acts as the pool's worker 0 for that step: the op sees
 * vf_run_worker 0, a nested wait inside it runs ready ops as a worker's
 * would, its push from inside lands in the same queue. What the step makes
 * ready is dispatched as usual (routing unchanged): CPU ops join the
 * queue, none is handed straight to the stepping thread (a worker's
 * hand-off would hide them from the queue's order), and inline ops (async
 * ops, wait markers) run at once on the stepping thread as part of the step.
 *
 * Limits (it is a testing aid):
 * - ops of a device run on their device's own pools, with threads, as in a
 *   normal engine: stepping covers the CPU pool only;
 * - vf_engine_wait_all helps (config.help_on_wait is set): it runs the queued
 * ops on the calling thread until none is left, then sleeps; ops that another
 *   thread makes ready afterwards (an async op completed there, a device
 *   op finished) are left for the next step, so such a test steps rather
 *   than waits;
 * - vf_var_wait does not help: step until the var is ready instead;
 * - destroy drains without helping: run the ops first (vf_engine_wait_all, or
 *   vf__testing_run_all);
 * - vf_engine_stop / vf_engine_start, and fork (whose handlers stop and
 *   start every engine), start the pool's thread again: the engine is no
 *   longer stepped then (vf__testing_run_one returns VF_EINVAL).
 */
#ifndef VF_TESTING_H
#define VF_TESTING_H

#include "base/common.h"

/*
 * Create a stepped engine. `config` may be NULL; its type must be
 * VF_ENGINE_DEFAULT or VF_ENGINE_POOLED (the engine is pooled), its
 * cpu_workers 0 (there is no thread) and its max_inflight 0, as must
 * VF_MAX_INFLIGHT be (a push over the bound would wait for a step that the
 * same thread has to make). Other fields work as in vf_engine_create.
 * Returns 0, VF_EINVAL (with a detail), or vf_engine_create's errors.
 * Destroy it with vf_engine_destroy, once nothing is pending.
 */
int vf__testing_engine_create_stepped(vf_engine **out, const vf_config *config);

/*
 * Run one ready op of a stepped engine's CPU pool on the calling thread:
 * the first by the queue's order (higher priority first, then the one
 * ready first), then finish it (done callback, vars released, ops it made
 * ready dispatched). Ops still in the calling thread's or another's bulk
 * batch are pushed first, as a wait would. Returns 1 when it ran one, 0
 * when none was ready; VF_EINVAL when `e` is not a stepped engine,
 * VF_EDEADLK when called from inside an op or a done callback of `e`.
 * Blocks only as long as the op runs.
 */
int vf__testing_run_one(vf_engine *e);

/* Step until no op is ready; returns how many ran, or a negative code as
 * vf__testing_run_one. */
long vf__testing_run_all(vf_engine *e);

#endif /* VF_TESTING_H */
