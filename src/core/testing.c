/* testing.c: the stepped engine (see testing.h). Compiled only into
 * varflow_internal. It changes nothing in the engine: it joins the CPU
 * pool's thread once and then does by hand what that thread's loop would
 * do (sched.c's worker_main), one op per call. */
#include "core/testing.h"

#include <string.h>

#include "base/error.h"
#include "core/bulk.h"
#include "core/engine.h"
#include "core/exec.h"

int vf__testing_engine_create_stepped(vf_engine **out, const vf_config *config)
{
    static const char who[] = "vf__testing_engine_create_stepped";
    if (out == NULL)
        return vf__fail(VF_EINVAL, "%s: out is NULL", who);
    *out = NULL;
    vf_config c = config != NULL ? *config : (vf_config){0};
    if (c.type != VF_ENGINE_DEFAULT && c.type != VF_ENGINE_POOLED)
        return vf__fail(VF_EINVAL,
                        "%s: config.type = %d (a stepped engine "
                        "is pooled)",
                        who, (int)c.type);
    if (c.cpu_workers != 0)
        return vf__fail(VF_EINVAL,
                        "%s: config.cpu_workers = %d (a stepped "
                        "engine runs no worker thread: 0)",
                        who, c.cpu_workers);
    if (c.max_inflight != 0)
        return vf__fail(VF_EINVAL,
                        "%s: config.max_inflight = %d (a push "
                        "over the bound would wait for a step)",
                        who, c.max_inflight);
    c.type = VF_ENGINE_POOLED;
    c.cpu_workers = 1; /* one queue, so every ready op is in one order */
    c.help_on_wait = true;
    vf_engine *e = NULL;
    int rc = vf_engine_create(&e, &c);
    if (rc != 0)
        return rc;
    if (e->max_inflight != 0) {
        vf_engine_destroy(e);
        return vf__fail(VF_EINVAL,
                        "%s: VF_MAX_INFLIGHT is set (a push over "
                        "the bound would wait for a step)",
                        who);
    }
    /* Nothing was pushed yet: the worker is idle, and joining it leaves
     * its queue to the steps. `stop` goes back to false, so that a nested
     * wait inside a step sleeps on the pool as a worker's would. */
    vf__pool_stop(e->cpu_pool);
    atomic_store(&e->cpu_pool->stop, false);
    *out = e;
    return 0;
}

static bool is_stepped(const vf_engine *e)
{
    return vf__engine_ok(e) && e->kind == VF_ENGINE_POOLED &&
           e->cpu_pool != NULL && e->cpu_pool->nworkers == 1 &&
           !e->cpu_pool->workers[0].started;
}

int vf__testing_run_one(vf_engine *e)
{
    static const char who[] = "vf__testing_run_one";
    if (!is_stepped(e))
        return vf__fail(VF_EINVAL, "%s: not a stepped engine", who);
    if (vf__exec_in_engine(e))
        return vf__fail(VF_EDEADLK,
                        "%s: called from the engine's own code "
                        "(an op or a done callback)",
                        who);
    vf__bulk_flush_all(e);
    vf__worker *w = &e->cpu_pool->workers[0];
    vf__op *op = vf__worker_take(w);
    if (op == NULL)
        return 0;
    /* The calling thread is worker 0 for this step (testing.h). It runs
     * the op as a worker of no pool: none of the ops it makes ready is
     * its "own", so none is handed off; each is dispatched, CPU ops into
     * w's queue (vf__pool_submit from w), inline ones run here. */
    vf__worker stepper;
    memset(&stepper, 0, sizeof stepper);
    stepper.pool = NULL;
    stepper.index = w->index;
    vf__worker *outer = vf__this_worker_;
    vf__this_worker_ = w;
    vf__op *next = vf__exec_worker_execute(&stepper, op);
    vf__this_worker_ = outer;
    VF__ASSERT(next == NULL);
    return 1;
}

long vf__testing_run_all(vf_engine *e)
{
    long n = 0;
    int rc;
    while ((rc = vf__testing_run_one(e)) == 1)
        n++;
    return rc < 0 ? rc : n;
}
