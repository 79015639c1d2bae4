/*
 * alloc.h: every allocation varflow makes goes through here, so a test can
 * make any one of them fail (vf_debug_fail_alloc) and check that the call
 * that needed it returns VF_ENOMEM and leaves the engine usable and
 * leak-free. Memory is freed with plain free().
 *
 * The hot path does not come here: op blocks come from the free
 * lists (freelist.h), which call vf__calloc only when they run dry.
 */
#ifndef VF_ALLOC_H
#define VF_ALLOC_H

#include <stddef.h>

void *vf__malloc(size_t size);
void *vf__calloc(size_t count, size_t size);
/* Zeroed memory aligned to `align` (a power of two dividing `size`). */
void *vf__aligned_calloc(size_t align, size_t size);
char *vf__strdup(const char *s);

#endif /* VF_ALLOC_H */
