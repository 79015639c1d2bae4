/*
 * W6's tile op, run by code that the C compiler built once (chol_kernels.c).
 */
#ifndef VF_BENCH_CHOL_KERNELS_H
#define VF_BENCH_CHOL_KERNELS_H

#include "cholesky_tiles.h"

/* chol_run(m, t): one tile op of examples/cholesky_tiles.h on m. Returns 0,
 * or non-zero when POTRF finds the tile not positive definite. */
int bench_chol_run(const chol_matrix *m, const chol_task *t);

#endif /* VF_BENCH_CHOL_KERNELS_H */
