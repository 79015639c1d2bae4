/*
 * W8, blocked sparse LU (shared/bench/WORKLOADS.md): the block kernels,
 * the sparsity pattern and the initial values, the flop count and the
 * residual of the factor. The program (which op runs on which blocks, and
 * which op allocates a block) is built in workloads.c; the adapters push it.
 *
 * The algorithm is BOTS's SparseLU (Duran et al., ICPP 2009), LU without
 * pivoting of an NB x NB grid of B x B blocks, each block a separate
 * row-major array of floats or absent (NULL):
 *
 *     for kk in 0..NB-1:
 *         lu0(A[kk][kk])                                     rw kk,kk
 *         for jj > kk where A[kk][jj] present:
 *             fwd(A[kk][kk], A[kk][jj])                      r kk,kk  rw kk,jj
 *         for ii > kk where A[ii][kk] present:
 *             bdiv(A[kk][kk], A[ii][kk])                     r kk,kk  rw ii,kk
 *         for ii > kk where A[ii][kk] present:
 *             for jj > kk where A[kk][jj] present:
 *                 if A[ii][jj] absent: allocate it zeroed    (the pushing
 * thread) bmod(A[ii][kk], A[kk][jj], A[ii][jj])      r ii,kk kk,jj  rw ii,jj
 *
 * Every op writes one block, and the ops that write a block are pushed in
 * the loop's order, so with blocks as vars each block sees the same updates
 * in the same order under every engine: the result is the serial one bit
 * for bit (each kernel is deterministic, and bench/CMakeLists.txt builds
 * this file once, with -ffp-contract=off, into a library that every binary
 * links, the clang-built one too: every engine runs the same kernel code,
 * so the columns differ by runtime only). An exact check is also the one
 * that sees an ordering bug: with bmod's depend(inout:) on its block
 * dropped, OpenMP's blocks differed from the serial ones in the last bits
 * only, in most blocks, which a relative tolerance like BOTS's own check
 * would have passed. The serial factor's residual is checked too
 * (LU_MAX_RESIDUAL), so that a wrong kernel, which would make every
 * engine's result and the serial one wrong alike, fails as well.
 *
 * The kernels are BOTS's loops as they are (lu0, fwd, bdiv, bmod), in
 * single precision as in BOTS. The pattern is WORKLOADS.md's: about half of
 * the blocks present at the start, drawn from a fixed seed, the diagonal
 * always present. The values follow BOTS's generator ((3125 x) mod 65536,
 * mapped to [-2, 2)), seeded per block, plus 4 n on the diagonal of the
 * diagonal blocks (n = NB B): the matrix is then strictly diagonally
 * dominant, which elimination preserves, so LU without pivoting meets no
 * small pivot and the values stay of the same size (no overflow, no
 * denormals to slow a kernel down).
 */
#ifndef VF_BENCH_SPARSELU_H
#define VF_BENCH_SPARSELU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The kernels of the algorithm, in its order. */
enum lu_kind { LU_LU0, LU_FWD, LU_BDIV, LU_BMOD };

/* The kernels (BOTS's names), on B x B row-major blocks. */
void lu_lu0(float *diag, int b);                    /* diag = L U in place */
void lu_fwd(const float *diag, float *col, int b);  /* col = L^-1 col */
void lu_bdiv(const float *diag, float *row, int b); /* row = row U^-1 */
void lu_bmod(const float *row, const float *col, float *inner,
             int b); /* inner -= row col */

/*
 * Floating-point operations credited to each kernel, BOTS's nominal counts
 * (the leading terms of its loops): lu0 2/3 B^3, fwd B^3, bdiv B^3, bmod
 * 2 B^3. A run's GFLOP/s is their sum over its ops divided by its time.
 */
double lu_flops_lu0(int b);
double lu_flops_fwd(int b);
double lu_flops_bdiv(int b);
double lu_flops_bmod(int b);

/* The pattern at the start: present[ii * nb + jj] = 1 or 0 (fixed seed). */
void lu_pattern(int nb, uint8_t *present);

/* The initial values of block (ii, jj) (B x B floats) of an nb x nb grid. */
void lu_fill_block(float *blk, int nb, int b, int ii, int jj);

/* A block of b x b floats, 64-byte aligned and zeroed (every byte written
 * by the caller, as BOTS's allocate_clean_block does), or NULL when out of
 * memory. Free with free(). */
float *lu_alloc_block(int b);

/* The grid a run factors: nb x nb block pointers, NULL where absent. */
typedef struct lu_grid {
    int nb, b;
    float **blk;            /* nb * nb: the blocks, row-major by block */
    const uint8_t *present; /* nb * nb: present at the start (lu_pattern) */
    float *init;            /* the initial values of the present blocks, in
                               block order (what lu_grid_reset copies in) */
} lu_grid;

/* Allocate the blocks present at the start and their initial values, then
 * put them in (lu_grid_reset). `present` must outlive the grid. Returns 0,
 * or -1 when out of memory (the grid is then destroyed). */
int lu_grid_init(lu_grid *g, int nb, int b, const uint8_t *present);
void lu_grid_destroy(lu_grid *g);

/* Back to the start: the blocks allocated on the way are freed and absent
 * again, the others get their initial values. Not timed. */
void lu_grid_reset(lu_grid *g);

/* Allocate block k (absent) zeroed: the pushing thread, before it pushes
 * the op that first uses it. Returns the block, or NULL when out of memory
 * (said on stderr). */
float *lu_grid_alloc(lu_grid *g, int k);

/* Run one kernel: blocks v[0..] are the op's reads then its write, as the
 * algorithm above names them (lu0: kk; fwd: kk, kj; bdiv: kk, ik; bmod:
 * ik, kj, ij). */
void lu_grid_run(lu_grid *g, enum lu_kind kind, const int32_t *v);

/* Print to f the first blocks where a and b differ (presence or any bit of
 * a value), at most `show`; returns how many blocks differ. */
int lu_grid_diff(const lu_grid *a, const lu_grid *b, FILE *f, int show);

/*
 * ||A - L U||_F / ||A||_F, in double, of a factored grid `lu` (L unit lower,
 * U upper, absent blocks zero) against the original pattern and values
 * (lu_pattern, lu_fill_block). Costs about as much as the factorization.
 * Returns -1 when out of memory.
 */
double lu_residual(float *const *lu, const uint8_t *present, int nb, int b);

/* The largest residual a serial factor may have (workloads.c fails the
 * row beyond it). Correct single-precision factors of this matrix come out
 * at 2.2e-7 to 2.6e-7 (about 4 float ulps) at every size the suite runs.
 * The strong diagonal dominates ||A||, so a wrong kernel moves the
 * residual less than one might think: bmod dropping the last term of its
 * sum gives 3e-6 to 1e-5. Hence a bound only 4x above the correct
 * figure. */
#define LU_MAX_RESIDUAL 1e-6

#endif /* VF_BENCH_SPARSELU_H */
