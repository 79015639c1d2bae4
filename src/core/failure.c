/* failure.c: failure records and their reserve (see failure.h). */
#include "core/failure.h"

#include <string.h>

#include "base/alloc.h"

int vf__failure_reserve_init(vf__failure_reserve *r)
{
    if (pthread_mutex_init(&r->lock, NULL) != 0)
        return VF_ESYSTEM;
    r->head = NULL;
    r->count = 0;
    for (int i = 0; i < VF__FAILURE_RESERVE; i++) {
        vf__failure *f = vf__malloc(sizeof *f);
        if (f == NULL)
            return VF_ENOMEM; /* destroy frees what was made */
        f->next = r->head;
        r->head = f;
        r->count++;
    }
    return 0;
}

void vf__failure_reserve_destroy(vf__failure_reserve *r)
{
    while (r->head != NULL) {
        vf__failure *next = r->head->next;
        free(r->head);
        r->head = next;
    }
    pthread_mutex_destroy(&r->lock);
}

vf__failure *vf__failure_new(vf__failure_reserve *r, int code,
                             const char *op_name, const char *message,
                             uint32_t epoch)
{
    vf__failure *f = vf__malloc(sizeof *f);
    if (f == NULL) {
        pthread_mutex_lock(&r->lock);
        f = r->head;
        if (f != NULL) {
            r->head = f->next;
            r->count--;
        }
        pthread_mutex_unlock(&r->lock);
        if (f == NULL)
            return NULL;
    }
    atomic_init(&f->refs, 1);
    atomic_init(&f->reported, false);
    f->epoch = epoch;
    f->next = NULL;
    f->reserve = r;
    f->info.code = code;
    snprintf(f->info.op_name, sizeof f->info.op_name, "%s",
             op_name ? op_name : "");
    snprintf(f->info.message, sizeof f->info.message, "%s",
             message ? message : "");
    return f;
}

void vf__failure_ref(vf__failure *f)
{
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

void vf__failure_unref(vf__failure *f)
{
    if (f == NULL ||
        atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1)
        return;
    vf__failure_reserve *r = f->reserve;
    pthread_mutex_lock(&r->lock);
    bool keep = r->count < VF__FAILURE_RESERVE;
    if (keep) {
        f->next = r->head;
        r->head = f;
        r->count++;
    }
    pthread_mutex_unlock(&r->lock);
    if (!keep)
        free(f);
}
