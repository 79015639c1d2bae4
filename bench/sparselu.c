/*
 * W8's kernels, pattern, values and residual. See sparselu.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "sparselu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the kernels: BOTS's loops ----------------------------------------------
 */

/* Never inlined: lu_grid_run (the path of every engine but OpenMP, which
 * calls the kernels itself) would otherwise get copies of its own, which
 * GCC compiles differently from the functions; its copy of bmod ran 30%
 * slower than lu_bmod here. One copy of each: every engine runs the same
 * machine code. */
#define KERNEL __attribute__((noinline))

KERNEL void lu_lu0(float *diag, int b)
{
    for (int k = 0; k < b; k++)
        for (int i = k + 1; i < b; i++) {
            diag[i * b + k] = diag[i * b + k] / diag[k * b + k];
            for (int j = k + 1; j < b; j++)
                diag[i * b + j] = diag[i * b + j] -
                                  diag[i * b + k] * diag[k * b + j];
        }
}

KERNEL void lu_fwd(const float *diag, float *col, int b)
{
    for (int j = 0; j < b; j++)
        for (int k = 0; k < b; k++)
            for (int i = k + 1; i < b; i++)
                col[i * b + j] = col[i * b + j] -
                                 diag[i * b + k] * col[k * b + j];
}

KERNEL void lu_bdiv(const float *diag, float *row, int b)
{
    for (int i = 0; i < b; i++)
        for (int k = 0; k < b; k++) {
            row[i * b + k] = row[i * b + k] / diag[k * b + k];
            for (int j = k + 1; j < b; j++)
                row[i * b + j] = row[i * b + j] -
                                 row[i * b + k] * diag[k * b + j];
        }
}

KERNEL void lu_bmod(const float *row, const float *col, float *inner, int b)
{
    for (int i = 0; i < b; i++)
        for (int j = 0; j < b; j++)
            for (int k = 0; k < b; k++)
                inner[i * b + j] = inner[i * b + j] -
                                   row[i * b + k] * col[k * b + j];
}

double lu_flops_lu0(int b)
{
    return 2.0 / 3.0 * (double)b * b * b;
}

double lu_flops_fwd(int b)
{
    return (double)b * b * b;
}

double lu_flops_bdiv(int b)
{
    return (double)b * b * b;
}

double lu_flops_bmod(int b)
{
    return 2.0 * (double)b * b * b;
}

/* ---- pattern and values
 * ------------------------------------------------------- */

/* splitmix64, as workloads.c's generator. */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void lu_pattern(int nb, uint8_t *present)
{
    uint64_t rng = 0x5eed0008;
    for (int ii = 0; ii < nb; ii++)
        for (int jj = 0; jj < nb; jj++) {
            uint64_t draw = next(&rng); /* one draw per block, the diagonal's
                                           too (and ignored there) */
            present[ii * nb + jj] = ii == jj || (draw >> 63) != 0;
        }
}

void lu_fill_block(float *blk, int nb, int b, int ii, int jj)
{
    /* BOTS's generator, started per block from its position (an odd seed:
     * the multiplier 3125 = 5 mod 8 then has period 2^14 mod 2^16). */
    int v = (int)((1325u + 2u * (uint32_t)(ii * nb + jj)) % 65536u) | 1;
    for (int i = 0; i < b; i++)
        for (int j = 0; j < b; j++) {
            v = (3125 * v) % 65536;
            blk[i * b + j] = (float)((v - 32768.0) / 16384.0);
        }
    if (ii == jj)
        for (int i = 0; i < b; i++)
            blk[i * b + i] += (float)(4.0 * nb * b);
}

float *lu_alloc_block(int b)
{
    size_t bytes = (size_t)b * (size_t)b * sizeof(float);
    bytes = (bytes + 63) / 64 * 64; /* aligned_alloc wants a multiple */
    float *blk = aligned_alloc(64, bytes);
    if (blk)
        memset(blk, 0, bytes);
    return blk;
}

/* ---- the grid
 * ------------------------------------------------------------------ */

int lu_grid_init(lu_grid *g, int nb, int b, const uint8_t *present)
{
    size_t nblocks = (size_t)nb * (size_t)nb, bb = (size_t)b * (size_t)b,
           npresent = 0;
    *g = (lu_grid){.nb = nb, .b = b, .present = present};
    for (size_t k = 0; k < nblocks; k++)
        npresent += present[k];
    g->blk = calloc(nblocks, sizeof *g->blk);
    g->init = malloc((npresent ? npresent : 1) * bb * sizeof *g->init);
    if (!g->blk || !g->init)
        goto oom;
    float *init = g->init;
    for (int ii = 0; ii < nb; ii++)
        for (int jj = 0; jj < nb; jj++) {
            size_t k = (size_t)ii * (size_t)nb + (size_t)jj;
            if (!present[k])
                continue;
            /* As BOTS's genmat: each present block its own allocation. */
            if (!(g->blk[k] = lu_alloc_block(b)))
                goto oom;
            lu_fill_block(init, nb, b, ii, jj);
            init += bb;
        }
    lu_grid_reset(g);
    return 0;
oom:
    lu_grid_destroy(g);
    return -1;
}

void lu_grid_destroy(lu_grid *g)
{
    if (g->blk)
        for (size_t k = 0; k < (size_t)g->nb * (size_t)g->nb; k++)
            free(g->blk[k]);
    free(g->blk);
    free(g->init);
    memset(g, 0, sizeof *g);
}

void lu_grid_reset(lu_grid *g)
{
    size_t bb = (size_t)g->b * (size_t)g->b;
    const float *init = g->init;
    for (size_t k = 0; k < (size_t)g->nb * (size_t)g->nb; k++) {
        if (g->present[k]) {
            memcpy(g->blk[k], init, bb * sizeof *init);
            init += bb;
        } else {
            free(g->blk[k]);
            g->blk[k] = NULL;
        }
    }
}

float *lu_grid_alloc(lu_grid *g, int k)
{
    float *blk = lu_alloc_block(g->b);
    if (!blk)
        fprintf(stderr, "bench: W8: out of memory for a block\n");
    g->blk[k] = blk;
    return blk;
}

void lu_grid_run(lu_grid *g, enum lu_kind kind, const int32_t *v)
{
    float **a = g->blk;
    switch (kind) {
    case LU_LU0:
        lu_lu0(a[v[0]], g->b);
        break;
    case LU_FWD:
        lu_fwd(a[v[0]], a[v[1]], g->b);
        break;
    case LU_BDIV:
        lu_bdiv(a[v[0]], a[v[1]], g->b);
        break;
    case LU_BMOD:
        lu_bmod(a[v[0]], a[v[1]], a[v[2]], g->b);
        break;
    }
}

int lu_grid_diff(const lu_grid *a, const lu_grid *b, FILE *f, int show)
{
    size_t bb = (size_t)a->b * (size_t)a->b;
    int differing = 0;
    for (int k = 0; k < a->nb * a->nb; k++) {
        const float *x = a->blk[k], *y = b->blk[k];
        if ((!x && !y) || (x && y && memcmp(x, y, bb * sizeof *x) == 0))
            continue;
        if (differing++ >= show)
            continue;
        if (!x || !y) {
            fprintf(f, "!!! block (%d,%d): %s here, %s in the serial run\n",
                    k / a->nb, k % a->nb, x ? "present" : "absent",
                    y ? "present" : "absent");
            continue;
        }
        size_t e = 0;
        while (e < bb && memcmp(&x[e], &y[e], sizeof *x) == 0)
            e++;
        fprintf(f, "!!! block (%d,%d): element %zu is %.9g, serial %.9g\n",
                k / a->nb, k % a->nb, e, (double)x[e], (double)y[e]);
    }
    return differing;
}

/* ---- the residual
 * ------------------------------------------------------------- */

/* Block (i, k) of L as doubles: the whole block below the diagonal; on it,
 * the strict lower part and ones on the diagonal. NULL block: zero. */
static void l_block(double *out, const float *blk, int b, int diag)
{
    for (int p = 0; p < b; p++)
        for (int q = 0; q < b; q++) {
            double x = blk ? blk[p * b + q] : 0.0;
            if (diag)
                x = q < p ? x : q == p ? 1.0 : 0.0;
            out[p * b + q] = x;
        }
}

/* Block (k, j) of U as doubles: the whole block right of the diagonal; on
 * it, the upper part with the diagonal. */
static void u_block(double *out, const float *blk, int b, int diag)
{
    for (int p = 0; p < b; p++)
        for (int q = 0; q < b; q++) {
            double x = blk ? blk[p * b + q] : 0.0;
            out[p * b + q] = diag && q < p ? 0.0 : x;
        }
}

double lu_residual(float *const *lu, const uint8_t *present, int nb, int b)
{
    size_t bb = (size_t)b * (size_t)b;
    double *r = malloc(bb * sizeof *r), *l = malloc(bb * sizeof *l),
           *u = malloc(bb * sizeof *u);
    float *a0 = malloc(bb * sizeof *a0);
    double num = 0, den = 0;
    if (!r || !l || !u || !a0) {
        free(r), free(l), free(u), free(a0);
        return -1;
    }
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < nb; j++) {
            if (present[i * nb + j])
                lu_fill_block(a0, nb, b, i, j);
            else
                memset(a0, 0, bb * sizeof *a0);
            for (size_t e = 0; e < bb; e++) {
                r[e] = a0[e];
                den += (double)a0[e] * a0[e];
            }
            int kmax = i < j ? i : j;
            for (int k = 0; k <= kmax; k++) {
                const float *lik = lu[i * nb + k], *ukj = lu[k * nb + j];
                if (!lik || !ukj)
                    continue;
                l_block(l, lik, b, k == i);
                u_block(u, ukj, b, k == j);
                for (int p = 0; p < b; p++)
                    for (int t = 0; t < b; t++) {
                        double x = l[p * b + t];
                        for (int q = 0; q < b; q++)
                            r[p * b + q] -= x * u[t * b + q];
                    }
            }
            for (size_t e = 0; e < bb; e++)
                num += r[e] * r[e];
        }
    free(r), free(l), free(u), free(a0);
    return den > 0 ? sqrt(num / den) : 0.0;
}
