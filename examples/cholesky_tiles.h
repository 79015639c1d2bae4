/*
 * Tile kernels of the tiled Cholesky factorization, shared by
 * examples/cholesky.c and the benchmark suite (workload W6): one definition,
 * included by both.
 *
 * The matrix A (n x n, symmetric positive definite) is cut into T x T tiles
 * of b x b doubles, n = T * b. Only the lower triangle is stored and used:
 * tile (i, j) with i >= j, each tile contiguous and column-major. The
 * right-looking algorithm factors A = L * L^T in place:
 *
 *     for k in 0..T-1:
 *         POTRF(k)            A[k][k] = chol(A[k][k])          rw kk
 *         for i in k+1..T-1:
 *             TRSM(k, i)      A[i][k] = A[i][k] * A[k][k]^-T   r kk, rw ik
 *         for i in k+1..T-1:
 *             SYRK(k, i)      A[i][i] -= A[i][k] * A[i][k]^T   r ik, rw ii
 *             for j in k+1..i-1:
 *                 GEMM(k,i,j) A[i][j] -= A[i][k] * A[j][k]^T   r ik jk, rw ij
 *
 * Pushed in this order with tiles as variables, a dependency engine runs the
 * same updates on each tile in the same order as the loop, so the result is
 * bit-for-bit the serial one. n^3/3 floating-point operations in all.
 *
 * The kernels are plain C loops written so the compiler vectorizes the inner
 * loop. Define VF_CHOL_CBLAS (and link CBLAS and LAPACKE) to use
 * dtrsm/dsyrk/dgemm/dpotrf instead; with VF_CHOL_OPENBLAS as well,
 * chol_init() makes OpenBLAS single-threaded (the engine supplies the
 * parallelism).
 */
#ifndef VF_CHOLESKY_TILES_H
#define VF_CHOLESKY_TILES_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef VF_CHOL_CBLAS
#include <cblas.h>
#include <lapacke.h>
#endif
#ifdef VF_CHOL_OPENBLAS
void openblas_set_num_threads(int num_threads);
#endif

/* Call once before the first kernel. */
static inline void chol_init(void)
{
#ifdef VF_CHOL_OPENBLAS
    openblas_set_num_threads(1);
#endif
}

/* Kinds of tile op, in the order of the algorithm above. */
enum chol_kind { CHOL_POTRF, CHOL_TRSM, CHOL_SYRK, CHOL_GEMM };

/* One tile op: the kind and its tile coordinates (unused ones are -1). */
typedef struct chol_task {
    enum chol_kind kind;
    int k, i, j;
} chol_task;

/* The tiled matrix: ntiles x ntiles tiles of b x b, lower triangle only. */
typedef struct chol_matrix {
    int ntiles;
    int b;
    double *data; /* the lower tiles, one after the other */
} chol_matrix;

/* Offset of tile (i, j), i >= j, in units of tiles. */
static inline size_t chol_tile_index(int ntiles, int i, int j)
{
    (void)ntiles;
    return (size_t)i * (size_t)(i + 1) / 2 + (size_t)j;
}

/* Address of tile (i, j), i >= j. */
static inline double *chol_tile(const chol_matrix *m, int i, int j)
{
    return m->data +
           chol_tile_index(m->ntiles, i, j) * (size_t)m->b * (size_t)m->b;
}

/* Number of tiles stored (the lower triangle, diagonal included). */
static inline size_t chol_num_tiles(int ntiles)
{
    return (size_t)ntiles * (size_t)(ntiles + 1) / 2;
}

/* Allocate the tiles (64-byte aligned). Returns 0 or -1 (out of memory). */
static inline int chol_matrix_alloc(chol_matrix *m, int ntiles, int b)
{
    size_t bytes = chol_num_tiles(ntiles) * (size_t)b * (size_t)b *
                   sizeof(double);
    bytes = (bytes + 63) / 64 * 64;
    m->ntiles = ntiles;
    m->b = b;
    m->data = aligned_alloc(64, bytes);
    return m->data ? 0 : -1;
}

static inline void chol_matrix_free(chol_matrix *m)
{
    free(m->data);
    m->data = NULL;
}

static inline size_t chol_matrix_bytes(const chol_matrix *m)
{
    return chol_num_tiles(m->ntiles) * (size_t)m->b * (size_t)m->b *
           sizeof(double);
}

/* A(r, c) of the whole matrix, r >= c, in a tiled matrix. */
static inline double *chol_at(const chol_matrix *m, int r, int c)
{
    int b = m->b;
    return chol_tile(m, r / b, c / b) + (size_t)(c % b) * (size_t)b +
           (size_t)(r % b);
}

/*
 * Fill m with a deterministic SPD matrix: symmetric entries in [-0.5, 0.5)
 * from a fixed-seed generator plus n on the diagonal (diagonally dominant).
 */
static inline void chol_matrix_fill_spd(chol_matrix *m, uint64_t seed)
{
    int n = m->ntiles * m->b;
    uint64_t s = seed;
    for (int c = 0; c < n; c++) {
        for (int r = c; r < n; r++) {
            /* splitmix64 */
            uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            z ^= z >> 31;
            double v = (double)(z >> 11) * (1.0 / 9007199254740992.0) - 0.5;
            *chol_at(m, r, c) = (r == c) ? v + (double)n : v;
        }
    }
    /* Upper parts of diagonal tiles are never read; keep them defined. */
    for (int t = 0; t < m->ntiles; t++) {
        double *d = chol_tile(m, t, t);
        for (int c = 0; c < m->b; c++)
            for (int r = 0; r < c; r++)
                d[(size_t)c * (size_t)m->b + (size_t)r] = 0.0;
    }
}

/* Floating-point operations of the whole factorization (n^3 / 3). */
static inline double chol_flops(int n)
{
    return (double)n * (double)n * (double)n / 3.0;
}

/* ---- tile kernels (column-major b x b) ---------------------------------- */

/* A = chol(A), lower. Returns 0, or the 1-based column that was not
 * positive (A is not positive definite). */
static inline int chol_potrf(double *a, int b)
{
#ifdef VF_CHOL_CBLAS
    return (int)LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', b, a, b);
#else
    for (int j = 0; j < b; j++) {
        double *cj = a + (size_t)j * (size_t)b;
        for (int l = 0; l < j; l++) {
            const double *cl = a + (size_t)l * (size_t)b;
            double f = cl[j];
            for (int i = j; i < b; i++)
                cj[i] -= cl[i] * f;
        }
        if (!(cj[j] > 0.0))
            return j + 1;
        double d = sqrt(cj[j]);
        cj[j] = d;
        double inv = 1.0 / d;
        for (int i = j + 1; i < b; i++)
            cj[i] *= inv;
    }
    return 0;
#endif
}

/* X = X * L^-T, L lower (the solved diagonal tile). */
static inline void chol_trsm(const double *l, double *x, int b)
{
#ifdef VF_CHOL_CBLAS
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit,
                b, b, 1.0, l, b, x, b);
#else
    /* Column j of X: (X(:,j) - sum_{m<j} X(:,m) L(j,m)) / L(j,j). */
    for (int j = 0; j < b; j++) {
        double *xj = x + (size_t)j * (size_t)b;
        for (int m = 0; m < j; m++) {
            double f = l[(size_t)m * (size_t)b + (size_t)j];
            const double *xm = x + (size_t)m * (size_t)b;
            for (int i = 0; i < b; i++)
                xj[i] -= xm[i] * f;
        }
        double inv = 1.0 / l[(size_t)j * (size_t)b + (size_t)j];
        for (int i = 0; i < b; i++)
            xj[i] *= inv;
    }
#endif
}

/* C = C - A * A^T, lower triangle of C only. */
static inline void chol_syrk(const double *a, double *c, int b)
{
#ifdef VF_CHOL_CBLAS
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, b, b, -1.0, a, b, 1.0,
                c, b);
#else
    for (int j = 0; j < b; j++) {
        double *cj = c + (size_t)j * (size_t)b;
        for (int m = 0; m < b; m++) {
            const double *am = a + (size_t)m * (size_t)b;
            double f = am[j];
            for (int i = j; i < b; i++)
                cj[i] -= am[i] * f;
        }
    }
#endif
}

/* C = C - A * B^T. */
static inline void chol_gemm(const double *a, const double *bt, double *c,
                             int b)
{
#ifdef VF_CHOL_CBLAS
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, b, b, b, -1.0, a, b,
                bt, b, 1.0, c, b);
#else
    for (int j = 0; j < b; j++) {
        double *cj = c + (size_t)j * (size_t)b;
        for (int m = 0; m < b; m++) {
            const double *am = a + (size_t)m * (size_t)b;
            double f = bt[(size_t)m * (size_t)b + (size_t)j];
            for (int i = 0; i < b; i++)
                cj[i] -= am[i] * f;
        }
    }
#endif
}

/* Run one tile op on tiles given by address: `reads` are the tiles it
 * reads, in the order chol_task_tiles lists them, `w` the tile it writes
 * (how an engine with its own buffers per tile, varflow-mpi's, runs it).
 * Returns 0, or non-zero when POTRF finds the tile not positive definite. */
static inline int chol_run_tiles(const chol_task *t, const double *const *reads,
                                 double *w, int b)
{
    switch (t->kind) {
    case CHOL_POTRF:
        return chol_potrf(w, b);
    case CHOL_TRSM:
        chol_trsm(reads[0], w, b);
        return 0;
    case CHOL_SYRK:
        chol_syrk(reads[0], w, b);
        return 0;
    case CHOL_GEMM:
        chol_gemm(reads[0], reads[1], w, b);
        return 0;
    }
    return -1;
}

/*
 * The tile ops of the factorization in push order. `out` may be NULL (only
 * counts). Returns the number of ops.
 */
static inline size_t chol_tasks(int ntiles, chol_task *out)
{
    size_t n = 0;
    for (int k = 0; k < ntiles; k++) {
        if (out)
            out[n] = (chol_task){CHOL_POTRF, k, -1, -1};
        n++;
        for (int i = k + 1; i < ntiles; i++) {
            if (out)
                out[n] = (chol_task){CHOL_TRSM, k, i, -1};
            n++;
        }
        for (int i = k + 1; i < ntiles; i++) {
            if (out)
                out[n] = (chol_task){CHOL_SYRK, k, i, -1};
            n++;
            for (int j = k + 1; j < i; j++) {
                if (out)
                    out[n] = (chol_task){CHOL_GEMM, k, i, j};
                n++;
            }
        }
    }
    return n;
}

/*
 * The tiles a task reads and the tile it writes, as (row, col) pairs:
 * reads[0..*nreads-1], then the written tile in *wi, *wj.
 */
static inline void chol_task_tiles(const chol_task *t, int reads[2][2],
                                   int *nreads, int *wi, int *wj)
{
    *nreads = 0;
    *wi = *wj = 0;
    reads[0][0] = reads[0][1] = reads[1][0] = reads[1][1] = 0;
    switch (t->kind) {
    case CHOL_POTRF:
        *nreads = 0;
        *wi = t->k;
        *wj = t->k;
        break;
    case CHOL_TRSM:
        *nreads = 1;
        reads[0][0] = t->k, reads[0][1] = t->k;
        *wi = t->i;
        *wj = t->k;
        break;
    case CHOL_SYRK:
        *nreads = 1;
        reads[0][0] = t->i, reads[0][1] = t->k;
        *wi = t->i;
        *wj = t->i;
        break;
    case CHOL_GEMM:
        *nreads = 2;
        reads[0][0] = t->i, reads[0][1] = t->k;
        reads[1][0] = t->j, reads[1][1] = t->k;
        *wi = t->i;
        *wj = t->j;
        break;
    }
}

/* Run one tile op on m. Returns 0, or non-zero when POTRF finds the tile not
 * positive definite. */
static inline int chol_run(const chol_matrix *m, const chol_task *t)
{
    int reads[2][2], nreads, wi, wj;
    chol_task_tiles(t, reads, &nreads, &wi, &wj);
    const double *r[2] = {NULL, NULL};
    for (int i = 0; i < nreads; i++)
        r[i] = chol_tile(m, reads[i][0], reads[i][1]);
    return chol_run_tiles(t, r, chol_tile(m, wi, wj), m->b);
}

/*
 * Relative residual ||A - L L^T||_F / ||A||_F, where `l` holds the factor
 * and `a` the original matrix (both tiled, same shape). Copies L into a dense
 * row-major n x n buffer; O(n^3 / 6) multiply-adds. INFINITY when out of
 * memory.
 */
static inline double chol_residual(const chol_matrix *a, const chol_matrix *l)
{
    int n = a->ntiles * a->b;
    double *d = malloc((size_t)n * (size_t)n * sizeof(double));
    if (!d)
        return INFINITY;
    for (int r = 0; r < n; r++)
        for (int c = 0; c <= r; c++)
            d[(size_t)r * (size_t)n + (size_t)c] = *chol_at(l, r, c);
    double num = 0.0, den = 0.0;
    for (int r = 0; r < n; r++) {
        const double *lr = d + (size_t)r * (size_t)n;
        for (int c = 0; c <= r; c++) {
            const double *lc = d + (size_t)c * (size_t)n;
            double s = 0.0;
            for (int m = 0; m <= c; m++)
                s += lr[m] * lc[m];
            double av = *chol_at(a, r, c);
            double diff = av - s;
            double w = (r == c) ? 1.0 : 2.0; /* both triangles */
            num += w * diff * diff;
            den += w * av * av;
        }
    }
    free(d);
    return sqrt(num) / sqrt(den);
}

#endif /* VF_CHOLESKY_TILES_H */
