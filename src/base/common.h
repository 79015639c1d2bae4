/*
 * common.h: what every varflow source file shares.
 *
 * VF__ASSERT checks internal invariants (never a caller's mistake: those get
 * a VF_E* code). It stays on in every build, tests and releases alike, since
 * a broken invariant in a scheduler is a silent wrong answer otherwise.
 */
#ifndef VF_COMMON_H
#define VF_COMMON_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <varflow.h>

#define VF__CACHELINE 64

#define VF__LIKELY(x) __builtin_expect(!!(x), 1)
#define VF__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Internal invariant: prints where and aborts. A bug in varflow, never a
 * caller's error. */
#define VF__ASSERT(cond)                                                       \
    do {                                                                       \
        if (VF__UNLIKELY(!(cond)))                                             \
            vf__panic(__FILE__, __LINE__, #cond);                              \
    } while (0)

_Noreturn void vf__panic(const char *file, int line, const char *what);

/* Hint to the CPU inside a spin loop. */
static inline void vf__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif /* VF_COMMON_H */
