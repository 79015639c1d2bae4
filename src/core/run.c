/* run.c: the run handle's calls (see run.h). */
#include "core/run.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/async.h"
#include "core/device_ops.h"
#include "core/engine.h"
#include "core/exec.h"
#include "core/push.h"

VF_API int vf_run_input_failure(const vf_run *run, vf_error *out)
{
    if (run == NULL)
        return vf__fail(VF_EINVAL, "vf_run_input_failure: run is NULL");
    /* Not read until known to be this thread's running op's (an async
     * op's handle, asked from the thread that finished its completion:
     * a crash, 18 runs in 20). */
    if (vf__run_op_here(run) == NULL)
        return vf__fail(VF_EINVAL,
                        "vf_run_input_failure: run is not the handle of an op "
                        "running on this thread (a handle is valid only in "
                        "its op's function, until that returns: ask there)");
    /* Finished, its vars are released: what they carry now is its own
     * failure, or later ops' (found trying async ops as a user: 1, its own
     * failure, after a vf_completion_finish with an error). */
    if (vf__exec_async_finished(run->op))
        return vf__fail(VF_EINVAL,
                        "vf_run_input_failure: called after the async op's "
                        "completion finished it (its variables are released: "
                        "ask before vf_completion_finish)");
    /* A fused op's item has a place of its own (run_bulk sets it). */
    vf__failure *f = vf__exec_inherited_failure(
        run->op, run->item_refs, run->item_nrefs, run->op->up,
        run->item_refs != NULL ? run->place : run->op->place,
        vf__engine_has_devices(vf__op_engine(run->op)));
    if (f == NULL)
        return 0;
    if (out != NULL)
        *out = f->info; /* the var holds a reference while the op runs */
    return 1;
}

VF_API void vf_run_set_error(vf_run *run, const char *fmt, ...)
{
    if (run == NULL || fmt == NULL)
        return;
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    char small[1024], *text = small;
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n >= (int)sizeof small && (text = malloc((size_t)n + 1)) != NULL)
        vsnprintf(text, (size_t)n + 1, fmt, again);
    va_end(again);
    va_end(ap);
    vf__message_fit(run->message, sizeof run->message,
                    n < 0          ? ""
                    : text != NULL ? text
                                   : small);
    if (text != small)
        free(text);
    if (run->op->def->async) {
        /* The run handle dies when async_fn returns; the completion may come
         * later, so an async op keeps its message in the op (a finish on
         * another thread may take it meanwhile: async.h). */
        vf__async_set_message(run->op, run->message);
    }
}

VF_API vf_engine *vf_run_engine(const vf_run *run)
{
    return run ? vf__op_engine(run->op) : NULL;
}

VF_API int vf_run_worker(const vf_run *run)
{
    return run ? run->worker : -1;
}

VF_API vf_device vf_run_device(const vf_run *run)
{
    return run ? run->op->def->device : (vf_device){VF_DEVICE_CPU, 0};
}

VF_API void *vf_run_stream(const vf_run *run)
{
    if (run == NULL || run->stream == NULL)
        return NULL;
    vf__device_op_work_begins(run->op); /* its work comes next */
    return run->cls->stream_handle(run->stream);
}

/* A refused submit's detail becomes the op's message, unless the op set
 * one (vf_run_set_error): an op that returns the code as its failure then
 * says why (its wait said "failed (-1): " and no more: found by a user
 * tester). The op may also ignore the refusal and succeed: no harm. */
static int submit_refused(vf_run *run, int rc)
{
    if (run->message[0] == '\0')
        snprintf(run->message, sizeof run->message, "%s", vf_error_detail());
    return rc;
}

VF_API int vf_run_submit(vf_run *run, vf_device_fn fn, void *arg, size_t bytes)
{
    char label[VF__OP_LABEL_MAX];
    if (run == NULL)
        return vf__fail(VF_EINVAL, "vf_run_submit: run is NULL");
    if (fn == NULL)
        return submit_refused(run,
                              vf__fail(VF_EINVAL, "vf_run_submit: fn is NULL"));
    if (run->stream == NULL)
        return submit_refused(
            run, vf__fail(VF_EINVAL,
                          "vf_run_submit: %s is not a device op (it has no "
                          "stream)",
                          run->item_refs != NULL
                              ? vf__op_label(run->name, run->place, label)
                              : vf__push_running_label(run->op, label)));
    vf__device_op_work_begins(run->op);
    int rc = run->cls->submit(run->stream, fn, arg, bytes);
    return rc != 0 ? submit_refused(run, rc) : 0;
}

VF_API const char *vf_run_name(const vf_run *run)
{
    return run ? run->name : "";
}

VF_API bool vf_engine_in_op(const vf_engine *e)
{
    return e != NULL && vf__exec_in_engine(e);
}
