/*
 * One op of a benchmark program (workloads.h), in a header of its own: the
 * C++ half of the varflow adapter (adapt_varflow_cxx.cpp) reads ops too,
 * and cannot include workloads.h (cholesky_tiles.h is C only).
 */
#ifndef VF_BENCH_OP_H
#define VF_BENCH_OP_H

#include <stdint.h>

/* One op of a program. Its vars are prog->vars[first .. first + nreads +
 * nwrites + naccs - 1]: reads, then writes, then accumulations; all
 * distinct. */
typedef struct bench_op {
    uint8_t kind;   /* BENCH_OP_MIX or BENCH_OP_CHOL */
    uint8_t pusher; /* which pushing thread pushes it (W7), else 0 */
    uint16_t nreads;
    uint16_t nwrites;
    uint16_t naccs;
    uint32_t first;
    int32_t chol; /* BENCH_OP_CHOL: index into prog->chol */
} bench_op;

#endif /* VF_BENCH_OP_H */
