/*
 * W6's tile kernels, compiled here once and linked into every benchmark
 * binary, as W8's (sparselu.c) are. examples/cholesky_tiles.h defines them
 * inline; included by workloads.c they were built by each binary's own
 * compiler, so vfbench-omp-clang ran clang's build of the loops, which ran
 * the serial factorization 1.6-1.7x faster than GCC's (2026-12-06, AMD EPYC,
 * plain C kernels), and W6's omp-clang column compared two compilers rather
 * than two runtimes.
 */
#include "chol_kernels.h"

int bench_chol_run(const chol_matrix *m, const chol_task *t)
{
    return chol_run(m, t);
}
