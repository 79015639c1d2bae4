/*
 * W10's shared parts: sizes, input, partition, leaf sort, checks. See
 * recursive.h.
 */
#include "recursive.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads.h"

bool bench_workload_recursive(const char *key)
{
    return strncmp(key, "W10", 3) == 0;
}

/* ---- fib ----------------------------------------------------------------- */

int64_t bench_fib_closed(int n)
{
    const double sqrt5 = sqrt(5.0), phi = (1.0 + sqrt5) / 2.0;
    return (int64_t)llround(pow(phi, n) / sqrt5);
}

int64_t bench_fib_serial(int n)
{
    return n < 2 ? n : bench_fib_serial(n - 1) + bench_fib_serial(n - 2);
}

/* Calls of the recursion for fib(n): 2 fib(n+1) - 1. */
static size_t fib_calls(int n)
{
    return (size_t)(2 * bench_fib_closed(n + 1) - 1);
}

/* ---- quicksort -------------------------------------------------------------
 */

static void swap32(int32_t *a, int32_t *b)
{
    int32_t t = *a;
    *a = *b;
    *b = t;
}

size_t bench_qsort_partition(int32_t *a, size_t n)
{
    /* The median of three to a[0], then Hoare's scheme with pivot a[0]:
     * it stops at j in [0, n-2], so both halves are non-empty. */
    size_t m = n / 2, l = n - 1;
    if (a[m] < a[0])
        swap32(&a[m], &a[0]);
    if (a[l] < a[0])
        swap32(&a[l], &a[0]);
    if (a[l] < a[m])
        swap32(&a[l], &a[m]);
    swap32(&a[0], &a[m]);
    int32_t pivot = a[0];
    size_t i = (size_t)-1, j = n;
    for (;;) {
        do
            i++;
        while (a[i] < pivot);
        do
            j--;
        while (a[j] > pivot);
        if (i >= j)
            return j + 1;
        swap32(&a[i], &a[j]);
    }
}

static void insertion_sort(int32_t *a, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        int32_t x = a[i];
        size_t j = i;
        for (; j > 0 && a[j - 1] > x; j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
}

void bench_qsort_leaf(int32_t *a, size_t n)
{
    /* The same partition down to 16 ints, then insertion sort; recursing
     * on the smaller half keeps the stack at log2(cutoff) frames. */
    while (n > 16) {
        size_t k = bench_qsort_partition(a, n);
        if (k < n - k) {
            bench_qsort_leaf(a, k);
            a += k, n -= k;
        } else {
            bench_qsort_leaf(a + k, n - k);
            n = k;
        }
    }
    insertion_sort(a, n);
}

size_t bench_qsort_serial(int32_t *a, size_t n)
{
    if (n <= BENCH_QSORT_CUTOFF) {
        bench_qsort_leaf(a, n);
        return 1;
    }
    size_t k = bench_qsort_partition(a, n);
    return 1 + bench_qsort_serial(a, k) + bench_qsort_serial(a + k, n - k);
}

/* ---- programs
 * ---------------------------------------------------------------- */

/* splitmix64, as the other workloads' generator, another seed. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int bench_rec_build(bench_prog *p, const char *key, const bench_sizing *sz)
{
    double scale = sz->scale > 0 ? sz->scale : 1.0;
    if (strcmp(key, "W10-qsort") == 0) {
        /* 10M ints at scale 1; never fewer than a few cutoffs. */
        size_t n = (size_t)(10000000.0 * scale);
        if (n < 8 * BENCH_QSORT_CUTOFF)
            n = 8 * BENCH_QSORT_CUTOFF;
        p->rec_kind = BENCH_REC_QSORT;
        p->rec_len = n;
        p->rec_input = malloc(n * sizeof *p->rec_input);
        int32_t *copy = malloc(n * sizeof *copy);
        if (!p->rec_input || !copy) {
            free(copy);
            fprintf(stderr, "bench: out of memory for %s's %zu ints\n", key, n);
            return -1;
        }
        uint64_t seed = 0x5eed0010;
        for (size_t i = 0; i < n; i++)
            p->rec_input[i] = (int32_t)(uint32_t)rng_next(&seed);
        /* The task count is the serial recursion's: the partition is
         * deterministic, so every engine makes exactly these calls. */
        memcpy(copy, p->rec_input, n * sizeof *copy);
        p->nops = bench_qsort_serial(copy, n);
        free(copy);
        snprintf(p->size, sizeof p->size, "N=%zu cutoff=%d, %zu tasks", n,
                 BENCH_QSORT_CUTOFF, p->nops);
        return 0;
    }
    /* fib: the spec's n, or at smaller scales the largest n whose calls
     * fit the scaled count (n >= 10). */
    int spec = strcmp(key, "W10-fib25") == 0 ? 25 : 30, n = spec;
    double want = (double)fib_calls(spec) * scale;
    while (n > 10 && (double)fib_calls(n) > want)
        n--;
    p->rec_kind = BENCH_REC_FIB;
    p->rec_n = n;
    p->nops = fib_calls(n);
    snprintf(p->size, sizeof p->size, "n=%d, %zu tasks", n, p->nops);
    return 0;
}

void bench_rec_run_serial(bench_state *s)
{
    const bench_prog *p = s->prog;
    if (p->rec_kind == BENCH_REC_FIB)
        s->fib = bench_fib_serial(p->rec_n);
    else
        bench_qsort_serial(s->arr, p->rec_len);
}

/* ---- checks
 * ------------------------------------------------------------------ */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

static uint64_t hash_ints(const int32_t *a, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = mix(h, (uint32_t)a[i]);
    return h;
}

uint64_t bench_rec_hash(const bench_state *s)
{
    const bench_prog *p = s->prog;
    if (p->rec_kind == BENCH_REC_FIB)
        return mix(0xcbf29ce484222325ULL, (uint64_t)s->fib);
    return hash_ints(s->arr, p->rec_len);
}

static int cmp_int32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* qsort(3)'s output of the program's input (malloc'd), or NULL. */
static int32_t *libc_sorted(const bench_prog *p)
{
    int32_t *a = malloc(p->rec_len * sizeof *a);
    if (!a)
        return NULL;
    memcpy(a, p->rec_input, p->rec_len * sizeof *a);
    qsort(a, p->rec_len, sizeof *a, cmp_int32);
    return a;
}

int bench_rec_reference(const bench_prog *p, uint64_t *hash)
{
    if (p->rec_kind == BENCH_REC_FIB) {
        *hash = mix(0xcbf29ce484222325ULL,
                    (uint64_t)bench_fib_closed(p->rec_n));
        return 0;
    }
    int32_t *ref = libc_sorted(p);
    if (!ref) {
        fprintf(stderr, "bench: out of memory for the reference of %s\n",
                p->key);
        return -1;
    }
    *hash = hash_ints(ref, p->rec_len);
    free(ref);
    return 0;
}

/* When the run agrees with what is recomputed here, the reference it was
 * checked against came from the --ref-dir cache of another build. */
#define STALE_REF                                                              \
    "!!! (the result agrees with the reference made here again: the one\n"     \
    "!!! this run was checked against was saved by another build in the\n"     \
    "!!! --ref-dir)\n"

void bench_rec_mismatch(const bench_state *s)
{
    const bench_prog *p = s->prog;
    if (p->rec_kind == BENCH_REC_FIB) {
        fprintf(stderr,
                "!!! fib(%d) came out %" PRId64
                ", the closed form says %" PRId64 "\n",
                p->rec_n, s->fib, bench_fib_closed(p->rec_n));
        if (s->fib == bench_fib_closed(p->rec_n))
            fputs(STALE_REF, stderr);
        return;
    }
    size_t n = p->rec_len, unsorted = 0, differing = 0, first = n;
    for (size_t i = 1; i < n; i++)
        if (s->arr[i - 1] > s->arr[i] && unsorted++ == 0)
            fprintf(stderr,
                    "!!! not sorted: a[%zu] = %" PRId32 " > a[%zu] = %" PRId32
                    "\n",
                    i - 1, s->arr[i - 1], i, s->arr[i]);
    int32_t *ref = libc_sorted(p);
    for (size_t i = 0; ref && i < n; i++)
        if (s->arr[i] != ref[i] && differing++ == 0)
            first = i;
    if (ref && differing)
        fprintf(stderr,
                "!!! a[%zu] = %" PRId32 ", qsort(3) gives %" PRId32 "\n", first,
                s->arr[first], ref[first]);
    fprintf(
        stderr,
        "!!! %zu descents, %zu of %zu ints differ from qsort(3)'s output%s\n",
        unsorted, differing, n, ref ? "" : " (out of memory for qsort's)");
    if (ref && !unsorted && !differing)
        fputs(STALE_REF, stderr);
    free(ref);
}
