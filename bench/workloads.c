/*
 * The workloads: program builders, the op kernel, state, and the serial
 * reference every run is checked against. See workloads.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "workloads.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const bench_workload_keys[] = {
    "W1",     "W2",        "W3-K16",    "W3-K64",    "W4-G100", "W4-G300",
    "W5",     "W7",        "W6-b32",    "W6-b64",    "W6-b128", "W8-b16",
    "W8-b64", "W10-fib25", "W10-fib30", "W10-qsort", NULL,
};

static const struct {
    const char *key, *name;
} names[] = {
    {"W1", "independent"},
    {"W2", "chain"},
    {"W3-K16", "fan-out/fan-in K=16"},
    {"W3-K64", "fan-out/fan-in K=64"},
    {"W4-G100", "wavefront G=100"},
    {"W4-G300", "wavefront G=300"},
    {"W5", "random DAG"},
    {"W6-b32", "tiled Cholesky b=32"},
    {"W6-b64", "tiled Cholesky b=64"},
    {"W6-b128", "tiled Cholesky b=128"},
    {"W7", "many pushers"},
    {"W8-b16", "blocked sparse LU B=16"},
    {"W8-b64", "blocked sparse LU B=64"},
    {"W9-x1", "iterative stencil W=T"},
    {"W9-x4", "iterative stencil W=4T"},
    {"W10-fib25", "recursive fib(25)"},
    {"W10-fib30", "recursive fib(30)"},
    {"W10-qsort", "recursive quicksort"},
};

const char *bench_workload_name(const char *key)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i].key, key) == 0)
            return names[i].name;
    return NULL;
}

bool bench_workload_tiled(const char *key)
{
    return strncmp(key, "W6", 2) == 0 || strncmp(key, "W8", 2) == 0;
}

bool bench_workload_stencil(const char *key)
{
    return strncmp(key, "W9-", 3) == 0;
}

const char *bench_workload_fixed_label(const char *key)
{
    return bench_workload_tiled(key)       ? "tiles"
           : bench_workload_recursive(key) ? "rec"
                                           : NULL;
}

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t bench_work_loop(uint64_t h, uint64_t iters)
{
    for (uint64_t k = 0; k < iters; k++) {
        h = h * 6364136223846793005ULL + 1442695040888963407ULL;
        /* Keep the compiler from folding the loop into a closed form. */
        __asm__ volatile("" : "+r"(h));
    }
    return h;
}

/* ---- building programs ----------------------------------------------------
 */

/* splitmix64: the fixed-seed generator of the random workloads. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t rng_below(uint64_t *s, uint32_t n)
{
    return (uint32_t)(((rng_next(s) >> 32) * (uint64_t)n) >> 32);
}

/* A program under construction: ops and var references grow by doubling. */
typedef struct builder {
    bench_prog *p;
    size_t cap_ops, cap_refs;
    bool oom;
} builder;

static bool builder_reserve(builder *b, size_t nrefs)
{
    bench_prog *p = b->p;
    if (p->nops == b->cap_ops) {
        size_t cap = b->cap_ops ? 2 * b->cap_ops : 1024;
        bench_op *ops = realloc(p->ops, cap * sizeof *ops);
        if (!ops)
            return false;
        p->ops = ops;
        b->cap_ops = cap;
    }
    while (p->nvarrefs + nrefs > b->cap_refs) {
        size_t cap = b->cap_refs ? 2 * b->cap_refs : 4096;
        int32_t *vars = realloc(p->vars, cap * sizeof *vars);
        if (!vars)
            return false;
        p->vars = vars;
        b->cap_refs = cap;
    }
    return true;
}

/* Append an op; `vars` lists its reads, then writes, then accumulations. */
static void add_op(builder *b, int kind, int pusher, const int32_t *vars,
                   int nreads, int nwrites, int naccs, int32_t arg)
{
    size_t n = (size_t)(nreads + nwrites + naccs);
    if (b->oom || !builder_reserve(b, n)) {
        b->oom = true;
        return;
    }
    bench_prog *p = b->p;
    p->ops[p->nops++] = (bench_op){
        .kind = (uint8_t)kind,
        .pusher = (uint8_t)pusher,
        .nreads = (uint16_t)nreads,
        .nwrites = (uint16_t)nwrites,
        .naccs = (uint16_t)naccs,
        .first = (uint32_t)p->nvarrefs,
        .arg = arg,
    };
    memcpy(p->vars + p->nvarrefs, vars, n * sizeof *vars);
    p->nvarrefs += n;
}

/* How many ops a row gets: WORKLOADS.md's count times the scale, capped by
 * the time budget when ops carry work, and never fewer than 64. */
static double size_ops(double spec, const bench_sizing *sz)
{
    double ops = spec * (sz->scale > 0 ? sz->scale : 1.0);
    if (sz->op_ns > 0 && sz->budget_ns > 0) {
        double cap = sz->budget_ns / sz->op_ns;
        if (cap < ops)
            ops = cap;
    }
    return ops < 64 ? 64 : ops;
}

static void build_independent(builder *b, const bench_sizing *sz)
{
    size_t n = (size_t)size_ops(100000, sz);
    b->p->nvars = (int)n;
    for (size_t i = 0; i < n; i++) {
        int32_t v = (int32_t)i;
        add_op(b, BENCH_OP_MIX, 0, &v, 0, 1, 0, -1);
    }
    snprintf(b->p->size, sizeof b->p->size, "N=%zu", n);
}

static void build_chain(builder *b, const bench_sizing *sz)
{
    size_t n = (size_t)size_ops(100000, sz);
    b->p->nvars = 1;
    for (size_t i = 0; i < n; i++) {
        int32_t v = 0;
        add_op(b, BENCH_OP_MIX, 0, &v, 0, 1, 0, -1);
    }
    b->p->period_ops = 1; /* every op writes var 0 */
    snprintf(b->p->size, sizeof b->p->size, "N=%zu", n);
}

static void build_fan(builder *b, const bench_sizing *sz, int k)
{
    size_t rounds = (size_t)(size_ops(100000, sz) / (k + 2));
    if (rounds < 2)
        rounds = 2;
    int32_t vars[1 + 64];
    b->p->nvars = 1 + k; /* X = 0, Y_j = 1 + j */
    for (size_t r = 0; r < rounds; r++) {
        vars[0] = 0;
        add_op(b, BENCH_OP_MIX, 0, vars, 0, 1, 0, -1); /* writes X */
        for (int j = 0; j < k; j++) {
            vars[0] = 0;
            vars[1] = 1 + j;
            add_op(b, BENCH_OP_MIX, 0, vars, 1, 1, 0, -1); /* X -> Y_j */
        }
        for (int j = 0; j < k; j++)
            vars[j] = 1 + j;
        vars[k] = 0;
        add_op(b, BENCH_OP_MIX, 0, vars, k, 1, 0, -1); /* all Y -> X */
    }
    snprintf(b->p->size, sizeof b->p->size, "R=%zu K=%d", rounds, k);
}

static void build_wavefront(builder *b, const bench_sizing *sz, int g_spec)
{
    int g = (int)sqrt(size_ops((double)g_spec * g_spec, sz));
    if (g < 4)
        g = 4;
    b->p->nvars = g * g;
    for (int i = 0; i < g; i++) {
        for (int j = 0; j < g; j++) {
            int32_t vars[3];
            int nr = 0;
            if (i > 0)
                vars[nr++] = (i - 1) * g + j;
            if (j > 0)
                vars[nr++] = i * g + j - 1;
            vars[nr] = i * g + j;
            add_op(b, BENCH_OP_MIX, 0, vars, nr, 1, 0, -1);
        }
    }
    snprintf(b->p->size, sizeof b->p->size, "G=%d", g);
}

/* One random op over vars [base, base + count): r in 0..4 reads and w in
 * 1..2 writes, all distinct; with `shared` >= 0, sometimes an accumulation
 * into it as well. */
static void add_random_op(builder *b, uint64_t *rng, int pusher, int base,
                          int count, int32_t shared)
{
    int nr = (int)rng_below(rng, 5);
    int nw = 1 + (int)rng_below(rng, 2);
    int32_t vars[8];
    for (int k = 0; k < nr + nw; k++) {
        int32_t v;
        bool dup;
        do {
            v = base + (int32_t)rng_below(rng, (uint32_t)count);
            dup = false;
            for (int m = 0; m < k; m++)
                dup = dup || vars[m] == v;
        } while (dup);
        vars[k] = v;
    }
    int na = 0;
    if (shared >= 0 && rng_below(rng, 50) == 0)
        vars[nr + nw + na++] = shared;
    add_op(b, BENCH_OP_MIX, pusher, vars, nr, nw, na, -1);
}

static void build_random(builder *b, const bench_sizing *sz)
{
    size_t n = (size_t)size_ops(100000, sz);
    uint64_t rng = 0x5eed0005;
    b->p->nvars = 1000;
    for (size_t i = 0; i < n; i++)
        add_random_op(b, &rng, 0, 0, 1000, -1);
    snprintf(b->p->size, sizeof b->p->size, "V=1000 N=%zu", n);
}

static void build_pushers(builder *b, const bench_sizing *sz)
{
    size_t n = (size_t)size_ops(100000, sz) / 2;
    bench_prog *p = b->p;
    p->nvars = 1000 + 1; /* 500 per pusher, then the shared var */
    p->npushers = 2;
    for (int t = 0; t < 2; t++) {
        uint64_t rng = 0x5eed0007 + (uint64_t)t;
        p->push_begin[t] = p->nops;
        for (size_t i = 0; i < n; i++)
            add_random_op(b, &rng, t, 500 * t, 500, 1000);
        p->push_end[t] = p->nops;
    }
    snprintf(p->size, sizeof p->size, "2 x N=%zu V=2x500+1", n);
}

static void build_cholesky(builder *b, const bench_sizing *sz, int tb)
{
    bench_prog *p = b->p;
    int n = sz->chol_n > 0 ? sz->chol_n : 2048;
    int nt = n / tb;
    if (nt < 2)
        nt = 2;
    size_t ntasks = chol_tasks(nt, NULL);
    p->chol = malloc(ntasks * sizeof *p->chol);
    if (!p->chol) {
        b->oom = true;
        return;
    }
    chol_tasks(nt, p->chol);
    p->chol_ntiles = nt;
    p->chol_b = tb;
    p->nvars = (int)chol_num_tiles(nt);
    p->flops = chol_flops(nt * tb);
    for (size_t t = 0; t < ntasks; t++) {
        int reads[2][2], nreads, wi, wj;
        chol_task_tiles(&p->chol[t], reads, &nreads, &wi, &wj);
        int32_t vars[3];
        for (int r = 0; r < nreads; r++)
            vars[r] = (int32_t)chol_tile_index(nt, reads[r][0], reads[r][1]);
        vars[nreads] = (int32_t)chol_tile_index(nt, wi, wj);
        add_op(b, BENCH_OP_CHOL, 0, vars, nreads, 1, 0, (int32_t)t);
    }
    snprintf(p->size, sizeof p->size, "n=%d b=%d", nt * tb, tb);
}

/* W8: the ops of BOTS's loop (sparselu.h) over the pattern, in its order,
 * following the fill-in: a bmod on an absent block allocates it. */
static void build_sparselu(builder *b, const bench_sizing *sz, int bs)
{
    bench_prog *p = b->p;
    int n = sz->lu_n > 0 ? sz->lu_n : 2560;
    int nb = n / bs < 2 ? 2 : n / bs;
    size_t nblocks = (size_t)nb * (size_t)nb, at_start = 0;
    uint8_t *now = malloc(nblocks);
    p->lu_present = malloc(nblocks);
    if (!now || !p->lu_present) {
        free(now);
        b->oom = true;
        return;
    }
    lu_pattern(nb, p->lu_present);
    memcpy(now, p->lu_present, nblocks);
    for (size_t k = 0; k < nblocks; k++)
        at_start += now[k];
    p->lu_nb = nb;
    p->lu_b = bs;
    p->nvars = (int)nblocks;
    size_t count[4] = {0};
    for (int kk = 0; kk < nb; kk++) {
        int32_t v[3] = {kk * nb + kk};
        add_op(b, BENCH_OP_LU0, 0, v, 0, 1, 0, 0);
        count[LU_LU0]++;
        for (int jj = kk + 1; jj < nb; jj++)
            if (now[kk * nb + jj]) {
                v[1] = kk * nb + jj;
                add_op(b, BENCH_OP_FWD, 0, v, 1, 1, 0, 0);
                count[LU_FWD]++;
            }
        for (int ii = kk + 1; ii < nb; ii++)
            if (now[ii * nb + kk]) {
                v[1] = ii * nb + kk;
                add_op(b, BENCH_OP_BDIV, 0, v, 1, 1, 0, 0);
                count[LU_BDIV]++;
            }
        for (int ii = kk + 1; ii < nb; ii++) {
            if (!now[ii * nb + kk])
                continue;
            for (int jj = kk + 1; jj < nb; jj++) {
                if (!now[kk * nb + jj])
                    continue;
                int32_t m[3] = {ii * nb + kk, kk * nb + jj, ii * nb + jj};
                int allocs = !now[ii * nb + jj];
                now[ii * nb + jj] = 1;
                add_op(b, BENCH_OP_BMOD, 0, m, 2, 1, 0,
                       allocs ? BENCH_OP_ALLOCS : 0);
                count[LU_BMOD]++;
            }
        }
    }
    free(now);
    p->flops = (double)count[LU_LU0] * lu_flops_lu0(bs) +
               (double)count[LU_FWD] * lu_flops_fwd(bs) +
               (double)count[LU_BDIV] * lu_flops_bdiv(bs) +
               (double)count[LU_BMOD] * lu_flops_bmod(bs);
    snprintf(p->size, sizeof p->size, "NB=%d B=%d, %zu of %zu blocks at start",
             nb, bs, at_start, nblocks);
}

/* W9: Task Bench's stencil_1d over two buffers (workloads.h). */
static void build_stencil(builder *b, const bench_sizing *sz, int mult)
{
    bench_prog *p = b->p;
    int threads = sz->w9_threads > 0 ? sz->w9_threads : 1;
    int w = mult * threads;
    long steps = sz->w9_steps > 0 ? sz->w9_steps : 1000;
    if (sz->w9_run_ns > 0 && sz->op_ns > 0) {
        double want = ceil(sz->w9_run_ns * threads / (w * sz->op_ns));
        if (sz->w9_max_tasks > 0 && want > sz->w9_max_tasks / w)
            want = floor(sz->w9_max_tasks / w);
        if (want > steps)
            steps = (long)want;
    }
    p->nvars = 2 * w;
    p->val_stride = 64 / sizeof(uint64_t);
    p->w9_width = w;
    p->w9_steps = steps;
    p->period_first = (size_t)w;   /* step 0 reads nothing */
    p->period_ops = 2 * (size_t)w; /* steps t and t + 2 name the same vars */
    for (long t = 0; t < steps && !b->oom; t++) {
        int32_t in = (int32_t)((t + 1) % 2) * w, out = (int32_t)(t % 2) * w;
        for (int i = 0; i < w; i++) {
            int32_t vars[4];
            int nr = 0;
            for (int j = i - 1; t > 0 && j <= i + 1; j++)
                if (j >= 0 && j < w)
                    vars[nr++] = in + j;
            vars[nr] = out + i;
            add_op(b, BENCH_OP_STENCIL, 0, vars, nr, 1, 0, 0);
        }
    }
    p->flops = (double)w * (double)steps * (double)sz->work *
               (double)BENCH_FLOPS_PER_ITER;
    snprintf(p->size, sizeof p->size, "W=%d S=%ld", w, steps);
}

bench_prog *bench_prog_build(const char *key, const bench_sizing *sz)
{
    const char *name = bench_workload_name(key);
    if (!name) {
        fprintf(stderr, "bench: unknown workload '%s'\n", key);
        return NULL;
    }
    bench_prog *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    snprintf(p->key, sizeof p->key, "%s", key);
    snprintf(p->id, sizeof p->id, "%.*s", (int)strcspn(key, "-"), key);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->npushers = 1;
    p->val_stride = 1;
    builder b = {.p = p};
    if (strcmp(key, "W1") == 0)
        build_independent(&b, sz);
    else if (strcmp(key, "W2") == 0)
        build_chain(&b, sz);
    else if (strcmp(key, "W3-K16") == 0)
        build_fan(&b, sz, 16);
    else if (strcmp(key, "W3-K64") == 0)
        build_fan(&b, sz, 64);
    else if (strcmp(key, "W4-G100") == 0)
        build_wavefront(&b, sz, 100);
    else if (strcmp(key, "W4-G300") == 0)
        build_wavefront(&b, sz, 300);
    else if (strcmp(key, "W5") == 0)
        build_random(&b, sz);
    else if (strcmp(key, "W6-b32") == 0)
        build_cholesky(&b, sz, 32);
    else if (strcmp(key, "W6-b64") == 0)
        build_cholesky(&b, sz, 64);
    else if (strcmp(key, "W6-b128") == 0)
        build_cholesky(&b, sz, 128);
    else if (strcmp(key, "W7") == 0)
        build_pushers(&b, sz);
    else if (strcmp(key, "W8-b16") == 0)
        build_sparselu(&b, sz, 16);
    else if (strcmp(key, "W8-b64") == 0)
        build_sparselu(&b, sz, 64);
    else if (strcmp(key, "W9-x1") == 0)
        build_stencil(&b, sz, 1);
    else if (strcmp(key, "W9-x4") == 0)
        build_stencil(&b, sz, 4);
    else if (bench_workload_recursive(key) && bench_rec_build(p, key, sz) != 0)
        b.oom = true;
    if (b.oom) {
        fprintf(stderr, "bench: out of memory building %s\n", key);
        bench_prog_free(p);
        return NULL;
    }
    if (p->npushers == 1) {
        p->push_begin[0] = 0;
        p->push_end[0] = p->nops;
    }
    return p;
}

void bench_prog_free(bench_prog *p)
{
    if (!p)
        return;
    free(p->ops);
    free(p->vars);
    free(p->chol);
    free(p->lu_present);
    free(p->rec_input);
    free(p);
}

/* ---- state and kernel
 * -------------------------------------------------------- */

static uint64_t initial_value(int v)
{
    uint64_t s = (uint64_t)v * 0x2545f4914f6cdd1dULL + 1;
    return rng_next(&s);
}

int bench_state_init(bench_state *s, const bench_prog *p, uint64_t work)
{
    memset(s, 0, sizeof *s);
    s->prog = p;
    s->work = work;
    s->deps = calloc(p->nvars > 0 ? (size_t)p->nvars : 1, 1);
    if (!s->deps)
        goto oom;
    if (p->chol) {
        if (chol_matrix_alloc(&s->mat, p->chol_ntiles, p->chol_b) != 0 ||
            chol_matrix_alloc(&s->mat0, p->chol_ntiles, p->chol_b) != 0)
            goto oom;
        chol_matrix_fill_spd(&s->mat0, 0x5eed0006);
    } else if (p->lu_nb) {
        if (lu_grid_init(&s->lu, p->lu_nb, p->lu_b, p->lu_present) != 0)
            goto oom;
    } else if (p->rec_kind) {
        s->arr = p->rec_len ? malloc(p->rec_len * sizeof *s->arr) : NULL;
        if (p->rec_len && !s->arr)
            goto oom;
    } else {
        s->vals = aligned_alloc(
            64,
            ((size_t)p->nvars * (size_t)p->val_stride * sizeof *s->vals + 63) /
                64 * 64);
        if (!s->vals)
            goto oom;
    }
    bench_state_reset(s);
    return 0;
oom:
    bench_state_destroy(s);
    return -1;
}

void bench_state_destroy(bench_state *s)
{
    free(s->deps);
    free(s->vals);
    free(s->arr);
    chol_matrix_free(&s->mat);
    chol_matrix_free(&s->mat0);
    if (s->lu.blk)
        lu_grid_destroy(&s->lu);
    memset(s, 0, sizeof *s);
}

void bench_state_reset(bench_state *s)
{
    const bench_prog *p = s->prog;
    s->failed = 0;
    if (p->chol) {
        memcpy(s->mat.data, s->mat0.data, chol_matrix_bytes(&s->mat0));
        return;
    }
    if (p->lu_nb) {
        lu_grid_reset(&s->lu);
        return;
    }
    s->fib = -1;
    if (s->arr)
        memcpy(s->arr, p->rec_input, p->rec_len * sizeof *s->arr);
    for (int v = 0; v < p->nvars; v++)
        *bench_val(s, v) = initial_value(v);
}

static inline uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

/* A W9 op (workloads.h): the values it reads and its index hashed, the
 * FLOP loop seeded with the hash, hash and loop result into its var. */
static void run_stencil(bench_state *s, const bench_op *op, size_t i,
                        const int32_t *v)
{
    uint64_t h = (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL;
    for (int k = 0; k < op->nreads; k++)
        h = mix(h, *bench_val(s, v[k]));
    *bench_val(s, v[op->nreads]) = mix(h, bench_flop_loop(h, s->work));
}

/* A W8 or W9 op. Not inlined into bench_op_run, whose generic path would
 * pay for it (callgrind: 2 more instructions per empty op, which would
 * shift the counts that earlier commits are compared by). */
static __attribute__((noinline)) void
run_kind(bench_state *s, const bench_op *op, size_t i, const int32_t *v)
{
    if (op->kind == BENCH_OP_STENCIL)
        run_stencil(s, op, i, v);
    else
        lu_grid_run(&s->lu, (enum lu_kind)(op->kind - BENCH_OP_LU0), v);
}

int bench_op_run(bench_state *s, size_t i)
{
    const bench_prog *p = s->prog;
    const bench_op *op = &p->ops[i];
    const int32_t *v = p->vars + op->first;
    if (op->kind == BENCH_OP_CHOL) {
        if (bench_chol_run(&s->mat, &p->chol[op->arg]) != 0) {
            s->failed = 1;
            return -1;
        }
        return 0;
    }
    if (op->kind >= BENCH_OP_LU0) { /* W8, W9 */
        run_kind(s, op, i, v);
        return 0;
    }
    uint64_t *vals = s->vals;
    int nrw = op->nreads + op->nwrites;
    uint64_t h = (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL;
    for (int k = 0; k < nrw; k++)
        h = mix(h, vals[v[k]]);
    h = bench_work_loop(h, s->work);
    for (int k = 0; k < op->nwrites; k++)
        vals[v[op->nreads + k]] = h + (uint64_t)k;
    for (int k = 0; k < op->naccs; k++)
        vals[v[nrw + k]] += h;
    return 0;
}

uint64_t bench_state_hash(const bench_state *s)
{
    const bench_prog *p = s->prog;
    uint64_t h = 0xcbf29ce484222325ULL;
    if (p->rec_kind)
        return bench_rec_hash(s);
    if (p->chol) {
        size_t words = chol_matrix_bytes(&s->mat) / sizeof(uint64_t);
        const unsigned char *bytes = (const unsigned char *)s->mat.data;
        for (size_t k = 0; k < words; k++) {
            uint64_t w;
            memcpy(&w, bytes + k * sizeof w, sizeof w);
            h = mix(h, w);
        }
        return h;
    }
    if (p->lu_nb) {
        /* Every block's presence, then its values' bits. */
        size_t bb = (size_t)p->lu_b * (size_t)p->lu_b;
        for (int k = 0; k < p->nvars; k++) {
            const float *blk = s->lu.blk[k];
            h = mix(h, blk != NULL);
            for (size_t e = 0; blk && e < bb; e++) {
                uint32_t w;
                memcpy(&w, &blk[e], sizeof w);
                h = mix(h, w);
            }
        }
        return h;
    }
    for (int k = 0; k < p->nvars; k++)
        h = mix(h, *bench_val(s, k));
    return h;
}

/* ---- the serial reference
 * ------------------------------------------------------ */

static int run_serial(bench_state *s)
{
    for (size_t i = 0; i < s->prog->nops; i++)
        if (bench_op_alloc(s, i) == -2 || bench_op_run(s, i) != 0)
            return -1;
    return 0;
}

/* The cache file of a reference: <dir>/<key>_<size>_w<work>.ref, with the
 * size's characters other than [A-Za-z0-9=] turned into '_'. */
static void ref_path(char *buf, size_t len, const char *dir,
                     const bench_prog *p, uint64_t work)
{
    char size[sizeof p->size];
    size_t k;
    for (k = 0; p->size[k] && k + 1 < sizeof size; k++) {
        char c = p->size[k];
        bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '=';
        size[k] = keep ? c : '_';
    }
    size[k] = '\0';
    uint64_t w = bench_workload_tiled(p->key) ? 0
                                              : work; /* W6, W8 ignore work */
    snprintf(buf, len, "%s/%s_%s_w%" PRIu64 ".ref", dir, p->key, size, w);
}

int bench_reference(const bench_prog *p, uint64_t work, const char *dir,
                    bench_ref *out)
{
    char path[1024];
    if (dir) {
        ref_path(path, sizeof path, dir, p, work);
        FILE *f = fopen(path, "r");
        if (f) {
            int got = fscanf(f, "%" SCNx64 " %lf", &out->hash, &out->residual);
            fclose(f);
            if (got == 2)
                return 0;
        }
    }
    bench_state s;
    if (p->rec_kind) { /* W10: the closed form or qsort(3) (recursive.h) */
        out->residual = 0;
        if (bench_rec_reference(p, &out->hash) != 0)
            return -1;
        goto save;
    }
    if (bench_state_init(&s, p, work) != 0) {
        fprintf(stderr, "bench: out of memory for the reference of %s\n",
                p->key);
        return -1;
    }
    if (run_serial(&s) != 0) {
        fprintf(stderr, "bench: %s: the serial run failed (matrix not SPD?)\n",
                p->key);
        bench_state_destroy(&s);
        return -1;
    }
    out->hash = bench_state_hash(&s);
    out->residual = p->chol    ? chol_residual(&s.mat0, &s.mat)
                    : p->lu_nb ? lu_residual(s.lu.blk, p->lu_present, p->lu_nb,
                                             p->lu_b)
                               : 0.0;
    bench_state_destroy(&s);
    if (p->lu_nb && !(out->residual >= 0 && out->residual <= LU_MAX_RESIDUAL)) {
        /* The serial run is the reference of every engine's: it must be an
         * LU of the matrix, else a wrong kernel passes every check. */
        fprintf(
            stderr,
            "!!! bench: %s: the serial factor's residual ||A - LU|| / ||A|| is "
            "%g (at most %g expected): a kernel is wrong%s\n",
            p->key, out->residual, LU_MAX_RESIDUAL,
            out->residual < 0 ? " (or out of memory)" : "");
        return -1;
    }
save:
    if (dir) {
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (f) {
            fprintf(f, "%016" PRIx64 " %.17g\n", out->hash, out->residual);
            if (fclose(f) == 0)
                rename(tmp, path);
        }
    }
    return 0;
}

void bench_report_mismatch(const bench_state *s, const char *engine,
                           int threads)
{
    const bench_prog *p = s->prog;
    fprintf(
        stderr,
        "\n"
        "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
        "\n"
        "!!! %s T=%d: %s %s (%s): final state differs from the serial run\n",
        engine, threads, p->key, p->name, p->size);
    if (p->rec_kind) {
        bench_rec_mismatch(s);
        fprintf(stderr, "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
                        "!!!!!!!!!!!!!!!!\n\n");
        return;
    }
    bench_state ref;
    if (bench_state_init(&ref, p, s->work) != 0 || run_serial(&ref) != 0) {
        fprintf(stderr,
                "!!! (could not recompute the serial run to show where)\n");
        return;
    }
    int shown = 0, differing = 0;
    if (p->chol) {
        for (int i = 0; i < p->chol_ntiles; i++) {
            for (int j = 0; j <= i; j++) {
                const double *a = chol_tile(&s->mat, i, j),
                             *r = chol_tile(&ref.mat, i, j);
                size_t bb = (size_t)p->chol_b * (size_t)p->chol_b;
                if (memcmp(a, r, bb * sizeof *a) == 0)
                    continue;
                differing++;
                if (shown++ < 8) {
                    size_t e = 0;
                    while (e < bb && a[e] == r[e])
                        e++;
                    fprintf(stderr,
                            "!!! tile (%d,%d): element %zu is %.17g, serial "
                            "%.17g\n",
                            i, j, e, e < bb ? a[e] : 0.0, e < bb ? r[e] : 0.0);
                }
            }
        }
        fprintf(stderr, "!!! %d tiles differ\n", differing);
    } else if (p->lu_nb) {
        differing = lu_grid_diff(&s->lu, &ref.lu, stderr, 8);
        fprintf(stderr, "!!! %d of %d blocks differ\n", differing, p->nvars);
    } else {
        for (int v = 0; v < p->nvars; v++) {
            if (*bench_val(s, v) == *bench_val(&ref, v))
                continue;
            differing++;
            if (shown++ < 8)
                fprintf(stderr,
                        "!!! var %d is %016" PRIx64 ", serial %016" PRIx64 "\n",
                        v, *bench_val(s, v), *bench_val(&ref, v));
        }
        fprintf(stderr, "!!! %d of %d vars differ\n", differing, p->nvars);
    }
    if (differing == 0)
        fprintf(stderr,
                "!!! (the serial run made here again agrees: the reference "
                "this run\n"
                "!!! was checked against was saved by another build in the\n"
                "!!! --ref-dir; after changing a kernel, empty that folder)\n");
    fprintf(stderr, "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
                    "!!!!!!!!!!!!\n\n");
    bench_state_destroy(&ref);
}
