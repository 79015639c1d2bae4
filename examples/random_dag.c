/*
 * random_dag.c: a random program of ops over shared variables, run serially
 * and then through each kind of varflow engine; prints the wall time of each,
 * the speedup over the serial loop, and checks that every engine computed
 * bitwise the same values as the serial loop (exit status 1 if not).
 *
 * The program: NVARS doubles, NOPS ops drawn with a fixed seed. Each op reads
 * 1-3 vars and writes 1-2 others (all distinct). Its body averages what it
 * reads, iterates the logistic map x = 3.9 x (1 - x) for about WORK_US
 * microseconds of CPU time (calibrated at start-up, so "100 us" means 100 us
 * on this machine), and stores the result (and one more step of the map for a
 * second output). The map is chaotic: running any op in an order the serial
 * program would not have used changes the final values, so "identical" is a
 * real check of the engine's ordering, not of luck.
 *
 * Usage: random_dag [-n ops] [-v vars] [-u work_us] [-s seed] [-r repeats]
 * Each timing is the best of `repeats` runs, from the first push to the
 * return of vf_engine_wait_all (engine start-up and shut-down are not counted).
 * Worker counts follow VF_CPU_WORKER_NTHREADS etc. when set, else all cores.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <varflow.h>

enum { MAX_READS = 3, MAX_WRITES = 2 };

/* One op of the random program: indices into the value array. */
typedef struct dag_op {
    int nreads, nwrites;
    int reads[MAX_READS];
    int writes[MAX_WRITES];
} dag_op;

/* The program and how much work each op does. */
typedef struct dag {
    int nops, nvars;
    long iters; /* logistic-map steps per op: WORK_US of CPU time */
    dag_op *ops;
} dag;

/* What one pushed op needs: its description, the values, the work size. */
typedef struct job {
    const dag_op *op;
    double *vals;
    long iters;
} job;

/* The calibration reads its input from a volatile and stores its result to
 * one, so the compiler can neither drop a timed call nor compute it once for
 * all repeats (work() is a pure function). */
static volatile double calib_in = 0.3, calib_out;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* splitmix64: a small, good, fixed-seed random number generator. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* The work: `iters` steps of the logistic map, one dependent chain. */
static double work(double x, long iters)
{
    for (long i = 0; i < iters; i++)
        x = 3.9 * x * (1.0 - x);
    return x;
}

/* The body of every op, shared by the serial loop and the engines. */
static void op_body(const dag_op *op, double *vals, long iters)
{
    double sum = 0;
    for (int i = 0; i < op->nreads; i++)
        sum += vals[op->reads[i]];
    double x = work(0.05 + 0.9 * (sum / op->nreads),
                    iters); /* start in (0, 1) */
    for (int i = 0; i < op->nwrites; i++) {
        vals[op->writes[i]] = x;
        x = 3.9 * x * (1.0 - x);
    }
}

static int run_job(vf_run *run, void *arg)
{
    const job *j = arg;
    (void)run;
    op_body(j->op, j->vals, j->iters);
    return 0;
}

/* Steps of work() that take `us` microseconds here: best of several timings. */
static long calibrate(double us)
{
    long n = 1024;
    double dt;
    for (;;) { /* grow until one timing is long enough to trust (>= 2 ms) */
        double t = now_us();
        calib_out = work(calib_in, n);
        dt = now_us() - t;
        if (dt >= 2000 || n > (1L << 40))
            break;
        n *= 2;
    }
    for (int rep = 0; rep < 5; rep++) {
        double t = now_us();
        calib_out = work(calib_in, n);
        double d = now_us() - t;
        if (d < dt)
            dt = d;
    }
    long iters = (long)((double)n * us / dt);
    return iters > 0 ? iters : 1;
}

/* Picks a var not among the first `n` of `used`. */
static int pick_var(uint64_t *rng, int nvars, const int *used, int n)
{
    for (;;) {
        int v = (int)(next_random(rng) % (uint64_t)nvars);
        int dup = 0;
        for (int i = 0; i < n; i++)
            dup |= used[i] == v;
        if (!dup)
            return v;
    }
}

static void make_dag(dag *d, uint64_t seed)
{
    uint64_t rng = seed;
    for (int k = 0; k < d->nops; k++) {
        dag_op *op = &d->ops[k];
        int used[MAX_READS + MAX_WRITES], n = 0;
        op->nreads = 1 + (int)(next_random(&rng) % MAX_READS);
        op->nwrites = 1 + (int)(next_random(&rng) % MAX_WRITES);
        for (int i = 0; i < op->nreads; i++, n++)
            used[n] = op->reads[i] = pick_var(&rng, d->nvars, used, n);
        for (int i = 0; i < op->nwrites; i++, n++)
            used[n] = op->writes[i] = pick_var(&rng, d->nvars, used, n);
    }
}

/* Longest chain of dependent ops (read-after-write, write-after-read,
 * write-after-write), in ops: no engine can beat nops / this. */
static int critical_path(const dag *d)
{
    /* per var: when its last write finished, and its last read */
    int *wfin = calloc((size_t)d->nvars, sizeof *wfin);
    int *rfin = calloc((size_t)d->nvars, sizeof *rfin);
    int longest = 0;
    if (wfin == NULL || rfin == NULL) {
        free(wfin);
        free(rfin);
        return 0;
    }
    for (int k = 0; k < d->nops; k++) {
        const dag_op *op = &d->ops[k];
        int start = 0;
        for (int i = 0; i < op->nreads; i++)
            start = wfin[op->reads[i]] > start ? wfin[op->reads[i]] : start;
        for (int i = 0; i < op->nwrites; i++) {
            int v = op->writes[i];
            start = wfin[v] > start ? wfin[v] : start;
            start = rfin[v] > start ? rfin[v] : start;
        }
        int fin = start + 1;
        for (int i = 0; i < op->nreads; i++)
            rfin[op->reads[i]] = fin > rfin[op->reads[i]] ? fin
                                                          : rfin[op->reads[i]];
        for (int i = 0; i < op->nwrites; i++)
            wfin[op->writes[i]] = rfin[op->writes[i]] = fin;
        longest = fin > longest ? fin : longest;
    }
    free(wfin);
    free(rfin);
    return longest;
}

static void init_values(double *vals, int nvars)
{
    for (int v = 0; v < nvars; v++)
        vals[v] = (double)(v + 1) / (double)(nvars + 2);
}

/* The reference: a plain loop over the ops. Returns microseconds. */
static double run_serial(const dag *d, double *vals)
{
    init_values(vals, d->nvars);
    double t = now_us();
    for (int k = 0; k < d->nops; k++)
        op_body(&d->ops[k], vals, d->iters);
    return now_us() - t;
}

static int report(int rc, const char *what)
{
    if (rc != 0)
        fprintf(stderr, "random_dag: %s: %s (%s)\n", what, vf_error_string(rc),
                vf_error_detail());
    return rc;
}

/* Runs the program once on a fresh engine of kind `type`. Fills `*us` with
 * the time from first push to wait_all and `*workers`. 0 or a VF_E* code. */
static int run_engine(const dag *d, vf_engine_type type, double *vals,
                      job *jobs, double *us, int *workers)
{
    vf_engine *e;
    int rc = report(vf_engine_create(&e, &(vf_config){.type = type}),
                    "vf_engine_create");
    if (rc != 0)
        return rc;
    *workers = vf_engine_num_workers(e);
    vf_var *vars = malloc((size_t)d->nvars * sizeof *vars);
    if (vars == NULL) {
        vf_engine_destroy(e);
        return VF_ENOMEM;
    }
    for (int v = 0; v < d->nvars && rc == 0; v++)
        rc = report(vf_var_create(e, &vars[v]), "vf_var_create");
    init_values(vals, d->nvars);
    for (int k = 0; k < d->nops; k++)
        jobs[k] = (job){.op = &d->ops[k], .vals = vals, .iters = d->iters};

    double t = now_us();
    for (int k = 0; k < d->nops && rc == 0; k++) {
        const dag_op *op = &d->ops[k];
        vf_var r[MAX_READS], w[MAX_WRITES];
        for (int i = 0; i < op->nreads; i++)
            r[i] = vars[op->reads[i]];
        for (int i = 0; i < op->nwrites; i++)
            w[i] = vars[op->writes[i]];
        rc = report(vf_engine_push(e, &(vf_op){.fn = run_job,
                                               .arg = &jobs[k],
                                               .reads = {r, op->nreads},
                                               .writes = {w, op->nwrites},
                                               .name = "dag op"}),
                    "vf_engine_push");
    }
    vf_error err;
    int wrc = vf_engine_wait_all(e, &err);
    *us = now_us() - t;
    if (wrc != 0 && rc == 0) {
        fprintf(stderr,
                "random_dag: vf_engine_wait_all: %s: op '%s' failed: %s\n",
                vf_error_string(wrc), err.op_name, err.message);
        rc = wrc;
    }
    vf_stats st;
    if (rc == 0 && report(vf_engine_stats(e, &st), "vf_engine_stats") == 0 &&
        (st.ran != (uint64_t)d->nops || st.pending != 0)) {
        fprintf(stderr,
                "random_dag: %s: %llu ops ran, %llu pending; expected %d ran\n",
                vf_engine_type_name(type), (unsigned long long)st.ran,
                (unsigned long long)st.pending, d->nops);
        rc = VF_EINVAL;
    }
    int drc = report(vf_engine_destroy(e), "vf_engine_destroy");
    free(vars);
    return rc != 0 ? rc : drc;
}

/* FNV-1a over the bytes of the values: a short fingerprint to print. */
static uint64_t fingerprint(const double *vals, int nvars)
{
    const unsigned char *p = (const unsigned char *)vals;
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < (size_t)nvars * sizeof *vals; i++)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

/* The 1-minute load average (Linux /proc/loadavg), or -1 where unknown:
 * other programs busy on the cores slow the parallel runs, not the serial. */
static double load_average(void)
{
    double load = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1;
        fclose(f);
    }
    return load;
}

/* Says which var first differs from the serial result, with the seed. */
static void print_first_difference(const char *engine, const double *vals,
                                   const double *ref, int nvars, uint64_t seed)
{
    for (int v = 0; v < nvars; v++)
        if (memcmp(&vals[v], &ref[v], sizeof *vals) != 0) {
            fprintf(
                stderr,
                "random_dag: %s: var %d = %.17g, serial %.17g (seed %llu)\n",
                engine, v, vals[v], ref[v], (unsigned long long)seed);
            return;
        }
}

static int parse_args(int argc, char **argv, dag *d, double *work_us,
                      uint64_t *seed, int *reps)
{
    int c, bad = 0;
    while ((c = getopt(argc, argv, "hn:v:u:s:r:")) != -1) {
        long x = optarg ? strtol(optarg, NULL, 10) : 0;
        switch (c) {
        case 'n':
            d->nops = (int)x;
            break;
        case 'v':
            d->nvars = (int)x;
            break;
        case 'u':
            *work_us = (double)x;
            break;
        case 's':
            *seed = (uint64_t)x;
            break;
        case 'r':
            *reps = (int)x;
            break;
        case 'h':
            bad = 2;
            break;
        default:
            bad = 1;
            break; /* getopt has said what was wrong */
        }
    }
    if (bad || optind < argc || d->nops < 1 ||
        d->nvars < MAX_READS + MAX_WRITES || *work_us < 1 || *reps < 1) {
        fprintf(
            bad == 2 ? stdout : stderr,
            "usage: random_dag [-n ops>=1] [-v vars>=%d] [-u work_us>=1] [-s "
            "seed] "
            "[-r repeats>=1]\n  defaults: -n 3000 -v 128 -u 100 -s 42 -r 3\n",
            MAX_READS + MAX_WRITES);
        return bad == 2 ? 1 : -1;
    }
    return 0;
}

/* One line of the results table: the serial loop or an engine kind. */
typedef struct row {
    vf_engine_type type; /* VF_ENGINE_DEFAULT stands for the serial loop */
    double best_us;      /* best wall time over the repeats */
    int workers;
    int rc;    /* 0, or the error that stopped this engine */
    bool same; /* final values bitwise equal to the serial loop's */
} row;

/* Runs every row `reps` times. The repeats go round all rows in turn, so a
 * burst of load elsewhere on the machine hurts every row alike. */
static void measure(const dag *d, row *rows, int nrows, int reps, double *ref,
                    double *vals, job *jobs, uint64_t seed)
{
    size_t bytes = (size_t)d->nvars * sizeof *vals;
    for (int rep = 0; rep < reps; rep++) {
        for (int i = 0; i < nrows; i++) {
            row *r = &rows[i];
            double t = 0;
            if (r->type == VF_ENGINE_DEFAULT) {
                t = run_serial(d, ref);
            } else if (r->rc == 0 && r->same) {
                r->rc = run_engine(d, r->type, vals, jobs, &t, &r->workers);
                r->same = r->rc != 0 || memcmp(vals, ref, bytes) == 0;
                if (!r->same)
                    print_first_difference(vf_engine_type_name(r->type), vals,
                                           ref, d->nvars, seed);
            }
            if (rep == 0 || t < r->best_us)
                r->best_us = t;
        }
    }
}

/* Prints the table; returns 1 if an engine failed or differed, else 0. */
static int print_table(const row *rows, int nrows, const double *ref, int nvars)
{
    int failed = 0;
    double serial_us = rows[0].best_us;
    printf("  %-10s %7s %10s %8s  %s\n", "engine", "workers", "wall ms",
           "speedup", "final values");
    printf("  %-10s %7d %10.1f %7.2fx  fingerprint %016llx\n", "serial", 1,
           serial_us / 1e3, 1.0, (unsigned long long)fingerprint(ref, nvars));
    for (int i = 1; i < nrows; i++) {
        const row *r = &rows[i];
        const char *name = vf_engine_type_name(r->type);
        if (!r->same || r->rc != 0) {
            printf("  %-10s %7d %10s %8s  %s%s\n", name, r->workers, "-", "-",
                   r->same ? "FAILED: " : "DIFFERENT from serial",
                   r->same ? vf_error_name(r->rc) : "");
            failed = 1;
            continue;
        }
        printf("  %-10s %7d %10.1f %7.2fx  identical to serial\n", name,
               r->workers, r->best_us / 1e3, serial_us / r->best_us);
    }
    return failed;
}

int main(int argc, char **argv)
{
    dag d = {.nops = 3000, .nvars = 128};
    double work_us = 100;
    uint64_t seed = 42;
    int reps = 3;
    int args = parse_args(argc, argv, &d, &work_us, &seed, &reps);
    if (args != 0)
        return args > 0 ? 0 : 2; /* -h: done; bad arguments: exit status 2 */

    d.ops = malloc((size_t)d.nops * sizeof *d.ops);
    job *jobs = malloc((size_t)d.nops * sizeof *jobs);
    double *ref = malloc((size_t)d.nvars * sizeof *ref);
    double *vals = malloc((size_t)d.nvars * sizeof *vals);
    if (d.ops == NULL || jobs == NULL || ref == NULL || vals == NULL) {
        fprintf(stderr, "random_dag: out of memory\n");
        return 1;
    }
    make_dag(&d, seed);
    d.iters = calibrate(work_us);
    int path = critical_path(&d);

    printf("random DAG: %d ops over %d vars, 1-%d reads, 1-%d writes, "
           "seed %llu\n",
           d.nops, d.nvars, MAX_READS, MAX_WRITES, (unsigned long long)seed);
    printf("work per op: %.0f us = %ld logistic-map steps (calibrated)\n",
           work_us, d.iters);
    printf("critical path: %d ops, so at most %.1fx parallel\n", path,
           path > 0 ? (double)d.nops / path : 0.0);
    printf("cores online: %ld", sysconf(_SC_NPROCESSORS_ONLN));
    double load = load_average();
    if (load >= 0)
        printf(", load average %.2f (speedups need idle cores)", load);
    printf(
        "\ntimes: best of %d runs, first push to end of vf_engine_wait_all\n\n",
        reps);

    row rows[] = {
        {.type = VF_ENGINE_DEFAULT, .workers = 1, .same = true},
        {.type = VF_ENGINE_NAIVE, .same = true},
        {.type = VF_ENGINE_POOLED, .same = true},
        {.type = VF_ENGINE_PERDEVICE, .same = true},
    };
    int nrows = (int)(sizeof rows / sizeof rows[0]);
    measure(&d, rows, nrows, reps, ref, vals, jobs, seed);
    int failed = print_table(rows, nrows, ref, d.nvars);

    printf("\nnaive runs each op inside vf_engine_push (no workers: serial "
           "speed);\n"
           "perdevice's workers include its CPU priority pool, which normal\n"
           "ops do not use.\n");
    printf("%s\n", failed ? "random_dag: FAILED"
                          : "random_dag: all engines match serial");
    free(vals);
    free(ref);
    free(jobs);
    free(d.ops);
    return failed;
}
