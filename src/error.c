/* error.c: error names and messages, call details, failure records. */
#include "error.h"

#include <stdarg.h>
#include <string.h>

#include "alloc.h"

static _Thread_local char detail[256];

VF_API const char *vf_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
#define VF_STRERROR_CASE_(name, value, message)                                \
    case value:                                                                \
        return message;
        VF_ERRNO_MAP(VF_STRERROR_CASE_)
#undef VF_STRERROR_CASE_
    default:
        return "unknown error";
    }
}

VF_API const char *vf_err_name(int code)
{
    switch (code) {
    case 0:
        return "0";
#define VF_ERRNAME_CASE_(name, value, message)                                 \
    case value:                                                                \
        return "VF_" #name;
        VF_ERRNO_MAP(VF_ERRNAME_CASE_)
#undef VF_ERRNAME_CASE_
    default:
        return "VF_UNKNOWN";
    }
}

VF_API const char *vf_last_error_detail(void)
{
    return detail;
}

int vf__fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return code;
}

_Noreturn void vf__panic(const char *file, int line, const char *what)
{
    fprintf(stderr, "varflow: internal error at %s:%d: %s\n", file, line, what);
    abort();
}

/* Handed out when a failure record cannot be allocated. Its refcount is
 * never used to free it; its `reported` flag is never set (so a second
 * out-of-memory failure is reported too). */
static vf__failure oom_failure = {
    .info = {.code = VF_ENOMEM,
             .op_name = "",
             .message = "out of memory while recording an op's failure"},
};

vf__failure *vf__failure_new(int code, const char *op_name, const char *message,
                             uint32_t epoch)
{
    vf__failure *f = vf__malloc(sizeof *f);
    if (f == NULL)
        return &oom_failure;
    atomic_init(&f->refs, 1);
    atomic_init(&f->reported, false);
    f->epoch = epoch;
    f->next = NULL;
    f->info.code = code;
    snprintf(f->info.op_name, sizeof f->info.op_name, "%s",
             op_name ? op_name : "");
    snprintf(f->info.message, sizeof f->info.message, "%s",
             message ? message : "");
    return f;
}

bool vf__failure_is_static(const vf__failure *f)
{
    return f == &oom_failure;
}

void vf__failure_ref(vf__failure *f)
{
    if (f != &oom_failure)
        atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

void vf__failure_unref(vf__failure *f)
{
    if (f == NULL || f == &oom_failure)
        return;
    if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
        free(f);
}
