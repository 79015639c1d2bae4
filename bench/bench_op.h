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
    uint8_t kind;   /* BENCH_OP_MIX, BENCH_OP_CHOL or a BENCH_OP_LU* (W8) */
    uint8_t pusher; /* which pushing thread pushes it (W7), else 0 */
    uint16_t nreads;
    uint16_t nwrites;
    uint16_t naccs;
    uint32_t first;
    int32_t arg; /* BENCH_OP_CHOL: index into prog->chol; BENCH_OP_LU*:
                    BENCH_OP_ALLOCS when the op is the first to use the
                    block it writes (absent at the start), which the pushing
                    thread allocates before it pushes the op; else 0 */
} bench_op;

enum { BENCH_OP_ALLOCS = 1 };

#endif /* VF_BENCH_OP_H */
