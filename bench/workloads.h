/*
 * The benchmark workloads W1-W10 (shared/bench/WORKLOADS.md), defined once
 * for every engine and peer.
 *
 * A workload is built into a program: a flat array of ops, each naming the
 * variables it reads, writes and accumulates into (indices 0..nvars-1). The
 * adapters (varflow, serial, OpenMP, StarPU) only translate a program into
 * their own calls; the kernel that an op runs, the state it runs on, the
 * sizes, and the check against a serial run all live here.
 *
 * Kernel of the generic ops (W1-W5, W7): hash the values of the vars the op
 * reads and writes, run `work` iterations of a dependent multiply-add loop
 * on the hash, write hash + j into the j-th written var, add the hash to each
 * accumulated var. Every written value depends on every value read, so an
 * engine that runs two conflicting ops in the wrong order leaves a different
 * final state. Writes are read-modify-writes (inout / STARPU_RW). An
 * accumulation (W7's shared var) is a commutative write: any order of the
 * two pushers' ops on it gives the same final state, while the engine must
 * still never run two of them at the same time.
 *
 * W6 ops are the tile kernels of examples/cholesky_tiles.h, tiles as vars,
 * built once by the C compiler (chol_kernels.c) for every binary.
 *
 * W8 ops are the block kernels of BOTS's sparse LU (sparselu.h), blocks as
 * vars: var ii * NB + jj is block (ii, jj). Blocks absent at the start have
 * no storage until the op that first uses them (BENCH_OP_ALLOCS in its
 * `arg`): the pushing thread allocates the block, zeroed, just before it
 * pushes that op (bench_op_alloc), inside the timed run, as BOTS's
 * task-creating thread does; an engine that needs a handle per block makes
 * that one there too. W6 and W8 ignore `work`.
 *
 * W9 is Task Bench's stencil_1d (bench/w9_run.py runs it): W columns and S
 * steps; task (t, i) reads the values of (t-1, i-1), (t-1, i), (t-1, i+1)
 * (clipped at the edges; step 0 reads nothing) and writes (t, i). Each
 * column has two vars, as a program reuses two buffers: step t writes var
 * (t % 2) * W + i, so a task also waits for the three readers of the value
 * it overwrites. Its kernel (BENCH_OP_STENCIL) hashes the values it reads
 * with its op index, runs `work` iterations of the calibrated FLOP loop of
 * stencil.h seeded with that hash, and writes hash and loop result mixed:
 * a pure function of its inputs, so the final values of the last two steps
 * (which every task reaches) match the serial run's only if every task read
 * the right versions. W = T or 4T for a program built for T workers
 * (bench_sizing.w9_threads); S as sized there. Its rows ("W9-x1",
 * "W9-x4") are not in bench_workload_keys: its sizes are a sweep of its own
 * (the FLOP loop's iterations), not the suite's work sizes.
 */
#ifndef VF_BENCH_WORKLOADS_H
#define VF_BENCH_WORKLOADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_op.h"
#include "chol_kernels.h"
#include "recursive.h"
#include "sparselu.h"
#include "stencil.h"

/* Op kinds: the W8 ones are BENCH_OP_LU0 + enum lu_kind. */
enum {
    BENCH_OP_MIX = 0,
    BENCH_OP_CHOL = 1,
    BENCH_OP_LU0 = 2,
    BENCH_OP_FWD = BENCH_OP_LU0 + LU_FWD,
    BENCH_OP_BDIV = BENCH_OP_LU0 + LU_BDIV,
    BENCH_OP_BMOD = BENCH_OP_LU0 + LU_BMOD,
    BENCH_OP_STENCIL = BENCH_OP_BMOD + 1, /* W9 */
};
enum { BENCH_MAX_PUSHERS = 2 };

typedef struct bench_prog {
    char key[16];  /* row key, stable across sizes: "W3-K16" */
    char id[4];    /* "W3", "W10" */
    char name[48]; /* "fan-out/fan-in K=16" */
    char size[80]; /* the actual sizes: "R=5556 K=16" */
    int nvars;
    size_t nops;
    bench_op *ops;
    int32_t *vars;
    size_t nvarrefs;
    int npushers;                         /* 1, or 2 for W7 */
    size_t push_begin[BENCH_MAX_PUSHERS]; /* pusher p pushes ops */
    size_t push_end[BENCH_MAX_PUSHERS];   /* [push_begin[p], push_end[p]) */
    /* W6 only: var v is tile number v of the lower triangle */
    int chol_ntiles;
    int chol_b;
    chol_task *chol;
    /* W8 only (lu_nb > 0): an lu_nb x lu_nb grid of lu_b x lu_b blocks */
    int lu_nb;
    int lu_b;
    uint8_t *lu_present; /* lu_nb^2: the blocks present at the start */
    double flops;        /* W6: n^3/3; W8: the sum of its ops' (sparselu.h); W9:
                            tasks x work x BENCH_FLOPS_PER_ITER; else 0 */
    /* W9 only (w9_width > 0): w9_width columns, w9_steps steps */
    int w9_width;
    long w9_steps;
    /* Var v's value is vals[v * val_stride] (bench_val): 1, or, for W9,
     * a cache line a value, as separate buffers would be (Task Bench
     * mallocs each task's output): packed, every task would write the
     * line the other workers' tasks write, and every engine, not the
     * serial loop, would pay a line's transfer per task. The generic
     * ops (bench_op_run) index vals directly: their programs keep 1. */
    int val_stride;
    /* A program that repeats (W2, W9): from op period_first on, op
     * period_first + j * period_ops + l names the vars op period_first + l
     * names, for every j; period_ops 0: it does not repeat. What a replay
     * of a captured graph needs (adapters/vf_replay.c). */
    size_t period_first, period_ops;
    /* W10 only (rec_kind != BENCH_REC_NONE): no ops; nops counts its tasks */
    int rec_kind;       /* enum bench_rec_kind */
    int rec_n;          /* fib: n */
    size_t rec_len;     /* quicksort: ints to sort */
    int32_t *rec_input; /* quicksort: the unsorted ints (a fixed seed) */
} bench_prog;

/* What the values of a program run live in. */
typedef struct bench_state {
    const bench_prog *prog;
    uint64_t work;    /* loop iterations per generic op */
    uint64_t *vals;   /* generic, W9: nvars values (bench_val) */
    chol_matrix mat;  /* W6: the matrix being factored */
    chol_matrix mat0; /* W6: the original matrix */
    lu_grid lu;       /* W8: the blocks being factored */
    char *deps;       /* nvars distinct addresses (OpenMP depend items) */
    int64_t fib;      /* W10 fib: the result */
    int32_t *arr;     /* W10 quicksort: the ints being sorted */
    int failed;       /* set (racily, to 1) when a kernel failed */
} bench_state;

/* How big to make a program. */
typedef struct bench_sizing {
    double scale;     /* 1.0: the sizes of WORKLOADS.md; smaller: fewer ops */
    double op_ns;     /* estimated time of one op's work, 0: empty ops */
    double budget_ns; /* with op_ns > 0: cap the ops so that one serial
                         run takes about this long */
    int chol_n;       /* W6 matrix order (2048 in WORKLOADS.md) */
    int lu_n;         /* W8 matrix order NB x B (2560 in WORKLOADS.md) */
    /* W9: the program is for w9_threads workers (W = w9_threads or 4 x;
     * 0: 1), w9_steps steps (0: 1000, WORKLOADS.md's); with w9_run_ns > 0
     * and op_ns > 0, more steps where needed for the ideal run, tasks x
     * op_ns / w9_threads, to take w9_run_ns, but not past w9_max_tasks
     * tasks (0: no cap); `work` is the loop iterations, for its FLOPs. */
    int w9_threads;
    long w9_steps;
    double w9_run_ns;
    double w9_max_tasks;
    uint64_t work;
} bench_sizing;

/* The row keys in table order, NULL-terminated. */
extern const char *const bench_workload_keys[];

/* The name of a row ("fan-out/fan-in K=16") for a key, or NULL. */
const char *bench_workload_name(const char *key);

/* Build the program of a row. Returns NULL (with a message on stderr) for an
 * unknown key or when out of memory. */
bench_prog *bench_prog_build(const char *key, const bench_sizing *sz);
void bench_prog_free(bench_prog *p);

/* Var v's value in a generic or W9 program's state (bench_prog.val_stride). */
static inline uint64_t *bench_val(const bench_state *s, int v)
{
    return &s->vals[(size_t)v * (size_t)s->prog->val_stride];
}

/* Allocate a state for a program (values set as by bench_state_reset).
 * Returns 0 or -1. */
int bench_state_init(bench_state *s, const bench_prog *p, uint64_t work);
void bench_state_destroy(bench_state *s);

/* Put the initial values back (before each run; not timed). */
void bench_state_reset(bench_state *s);

/* Run op i of the program on the state. Returns 0, or -1 when the kernel
 * failed (a W6 tile not positive definite); also sets s->failed. */
int bench_op_run(bench_state *s, size_t i);

/* Whether a row ignores `work` and runs tile or block kernels (W6, W8):
 * its work label is "tiles" and it reports GFLOP/s. */
bool bench_workload_tiled(const char *key);

/* Whether a row is W9's ("W9-x1", "W9-x4"): its ops run the FLOP loop of
 * stencil.h, so its `work` is timed by bench_flop_calibrate. */
bool bench_workload_stencil(const char *key);

/* The work label of a row that ignores `work` and runs once whatever the
 * work sizes: "tiles" (W6, W8), "rec" (W10); NULL for the others. */
const char *bench_workload_fixed_label(const char *key);

/* Whether var v exists from the start. Every var does, but W8's blocks
 * absent at the start: an engine makes their handles as the pusher goes. */
static inline bool bench_var_at_start(const bench_prog *p, int v)
{
    return p->lu_present == NULL || p->lu_present[v] != 0;
}

/*
 * What the pushing thread does before it pushes op i of a W8 program: when
 * the op is the first to use its written block, allocate that block zeroed
 * (sparselu.h). Returns the block's var (>= 0) when it allocated one, -1
 * when the op allocates nothing, -2 when out of memory (said on stderr).
 */
static inline int bench_op_alloc(bench_state *s, size_t i)
{
    const bench_op *o = &s->prog->ops[i];
    if (!(o->kind >= BENCH_OP_LU0 && (o->arg & BENCH_OP_ALLOCS)))
        return -1;
    int32_t v = s->prog->vars[o->first + o->nreads];
    return lu_grid_alloc(&s->lu, v) ? v : -2;
}

/* A 64-bit hash of the whole final state (all values or all tiles). */
uint64_t bench_state_hash(const bench_state *s);

/* The serial reference of a program at a work size. */
typedef struct bench_ref {
    uint64_t hash;
    double residual; /* W6: ||A - L L^T|| / ||A||; W8: ||A - L U|| / ||A||;
                        else 0 */
} bench_ref;

/*
 * Get the reference: read it from `dir` (may be NULL: no cache) when a
 * previous process saved it, else run the program serially and save it.
 * Returns 0 or -1.
 */
int bench_reference(const bench_prog *p, uint64_t work, const char *dir,
                    bench_ref *out);

/*
 * Print to stderr, loudly, how `s` differs from the serial run (recomputed
 * here): the first differing values or tiles.
 */
void bench_report_mismatch(const bench_state *s, const char *engine,
                           int threads);

/* The loop every generic op runs: `iters` dependent multiply-adds on h. */
uint64_t bench_work_loop(uint64_t h, uint64_t iters);

/* Seconds on a monotonic clock. */
double bench_now(void);

#endif /* VF_BENCH_WORKLOADS_H */
