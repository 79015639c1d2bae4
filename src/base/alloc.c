/* alloc.c: the allocation funnel and its fault injection (see alloc.h). */
#include "base/alloc.h"

#include <string.h>

#include "base/common.h"

/* Allocations counted since vf__testing_fail_alloc, and which one fails (0:
 * none). Relaxed: only a counter; a test arms it from one thread before
 * the work it checks. */
static _Atomic uint64_t alloc_count;
static _Atomic uint64_t fail_at;

VF_API void vf__testing_fail_alloc(uint64_t n)
{
    atomic_store_explicit(&alloc_count, 0, memory_order_relaxed);
    atomic_store_explicit(&fail_at, n, memory_order_relaxed);
}

VF_API uint64_t vf__testing_alloc_count(void)
{
    return atomic_load_explicit(&alloc_count, memory_order_relaxed);
}

/* Counts one allocation; true when this is the one that must fail. */
static bool injected_failure(void)
{
    uint64_t n = atomic_fetch_add_explicit(&alloc_count, 1,
                                           memory_order_relaxed) +
                 1;
    return VF__UNLIKELY(n ==
                        atomic_load_explicit(&fail_at, memory_order_relaxed));
}

void *vf__malloc(size_t size)
{
    return injected_failure() ? NULL : malloc(size);
}

void *vf__calloc(size_t count, size_t size)
{
    return injected_failure() ? NULL : calloc(count, size);
}

void *vf__realloc(void *p, size_t size)
{
    return injected_failure() ? NULL : realloc(p, size);
}

void *vf__aligned_calloc(size_t align, size_t size)
{
    if (injected_failure())
        return NULL;
    void *p = aligned_alloc(align, size);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

char *vf__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = vf__malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}
