/*
 * alloc.h: every allocation varflow makes goes through here, so a test can
 * make any one of them fail (vf__testing_fail_alloc) and check that the call
 * that needed it returns VF_ENOMEM and leaves the engine usable and
 * leak-free. Memory is freed with plain free().
 *
 * The hot path does not come here: op blocks come from the free
 * lists (freelist.h), which call vf__calloc only when they run dry.
 */
#ifndef VF_ALLOC_H
#define VF_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "varflow.h" /* VF_API */

void *vf__malloc(size_t size);
void *vf__calloc(size_t count, size_t size);
/* realloc's contract: on failure `p` is left as it was. */
void *vf__realloc(void *p, size_t size);
/* Zeroed memory aligned to `align` (a power of two dividing `size`). */
void *vf__aligned_calloc(size_t align, size_t size);
char *vf__strdup(const char *s);

/*
 * Fault injection, a testing aid: the n-th allocation varflow makes from
 * now on (counting from 1, process-wide) fails as if memory were
 * exhausted; n = 0 turns it off. The call that needed the memory returns
 * VF_ENOMEM (an op failure record falls back to a static one). Resets the
 * count. Not part of the API: libvarflow exports these two internal names
 * so the tests can reach the real library's allocations, and no installed
 * header declares them (a test includes "base/alloc.h" from src/).
 */
VF_API void vf__testing_fail_alloc(uint64_t n);

/* Allocations varflow made since the last vf__testing_fail_alloc. */
VF_API uint64_t vf__testing_alloc_count(void);

#endif /* VF_ALLOC_H */
