/*
 * StarPU 1.3: each program var is a registered handle (the variable
 * interface over the var's value or tile, in main memory), each op a
 * starpu_task_insert() with STARPU_R on its reads and STARPU_RW on its
 * writes and accumulations, in push order; StarPU's sequential consistency
 * orders them. starpu_task_wait_for_all() waits. Two adapters, one per
 * scheduler: eager (one central queue) and lws (locality work stealing).
 * Several threads may insert tasks at once, so W7 runs as it is.
 *
 * The codelet's function ignores its buffers: with CPU workers only they
 * are the very values the shared kernel reads and writes.
 *
 * W8: a handle per block that exists. The blocks present at the start are
 * registered before the clock starts; a block allocated on the way is
 * registered by the inserting thread right after it allocates it, just
 * before the task that first uses it (timed, as a user porting BOTS's loop
 * would do it), and unregistered after the clock stops, before the next
 * run allocates it again.
 */
#define _POSIX_C_SOURCE 200809L
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>

#include "adapter.h"

typedef struct spu_task {
    bench_state *s;
    size_t i;
} spu_task;

typedef struct spu_run {
    bench_state *s;
    starpu_data_handle_t *handles;
    spu_task *tasks;
} spu_run;

static void spu_kernel(void *buffers[], void *cl_arg)
{
    (void)buffers;
    spu_task *t = cl_arg;
    bench_op_run(t->s, t->i);
}

static struct starpu_codelet spu_codelet = {
    .cpu_funcs = {spu_kernel},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "bench_op",
};

static int spu_start(const char *sched, void **engine, int threads,
                     char *version, size_t len)
{
    struct starpu_conf conf;
    setenv("STARPU_SILENT", "1", 0);
    starpu_conf_init(&conf);
    conf.sched_policy_name = sched;
    conf.ncpus = threads;
    conf.ncuda = 0;
    conf.nopencl = 0;
    conf.nmic = 0;
    conf.nmpi_ms = 0;
    conf.precedence_over_environment_variables = 1;
    int rc = starpu_init(&conf);
    if (rc != 0) {
        fprintf(stderr, "bench: starpu_init: %d\n", rc);
        return -1;
    }
    int maj, min, rel;
    starpu_get_version(&maj, &min, &rel);
    snprintf(version, len, "StarPU %d.%d.%d, %s scheduler, %u CPU workers", maj,
             min, rel, sched, starpu_cpu_worker_get_count());
    *engine = (void *)sched;
    return 0;
}

static int spu_start_eager(void **engine, int threads, char *version,
                           size_t len)
{
    return spu_start("eager", engine, threads, version, len);
}

static int spu_start_lws(void **engine, int threads, char *version, size_t len)
{
    return spu_start("lws", engine, threads, version, len);
}

static int spu_stop(void *engine)
{
    (void)engine;
    starpu_shutdown();
    return 0;
}

static void spu_release(void *run_)
{
    spu_run *r = run_;
    if (!r)
        return;
    if (r->handles)
        for (int v = 0; v < r->s->prog->nvars; v++)
            if (r->handles[v])
                starpu_data_unregister(r->handles[v]);
    free(r->handles);
    free(r->tasks);
    free(r);
}

static int spu_prepare(void *engine, bench_state *s, void **run)
{
    (void)engine;
    const bench_prog *p = s->prog;
    spu_run *r = calloc(1, sizeof *r);
    if (!r)
        return -1;
    r->s = s;
    r->handles = calloc((size_t)p->nvars, sizeof *r->handles);
    r->tasks = malloc(p->nops * sizeof *r->tasks);
    if (!r->handles || !r->tasks) {
        spu_release(r);
        return -1;
    }
    size_t tile_bytes = (size_t)p->chol_b * (size_t)p->chol_b * sizeof(double);
    size_t block_bytes = (size_t)p->lu_b * (size_t)p->lu_b * sizeof(float);
    for (int v = 0; v < p->nvars; v++) {
        uintptr_t ptr;
        size_t bytes;
        if (p->chol) {
            ptr = (uintptr_t)(s->mat.data +
                              (size_t)v * tile_bytes / sizeof(double));
            bytes = tile_bytes;
        } else if (p->lu_nb) {
            if (!bench_var_at_start(p, v))
                continue; /* registered by the inserting thread as it goes */
            ptr = (uintptr_t)s->lu.blk[v];
            bytes = block_bytes;
        } else {
            ptr = (uintptr_t)bench_val(s, v);
            bytes = sizeof(uint64_t);
        }
        starpu_variable_data_register(&r->handles[v], STARPU_MAIN_RAM, ptr,
                                      bytes);
    }
    for (size_t i = 0; i < p->nops; i++)
        r->tasks[i] = (spu_task){s, i};
    *run = r;
    return 0;
}

/* Insert ops [begin, end). */
static int spu_push(void *ctx, int pusher, size_t begin, size_t end)
{
    (void)pusher;
    spu_run *r = ctx;
    const bench_prog *p = r->s->prog;
    struct starpu_data_descr descr[72];
    size_t block_bytes = (size_t)p->lu_b * (size_t)p->lu_b * sizeof(float);
    for (size_t i = begin; i < end; i++) {
        const bench_op *o = &p->ops[i];
        const int32_t *v = p->vars + o->first;
        int n = o->nreads + o->nwrites + o->naccs;
        if (p->lu_nb) {
            int made = bench_op_alloc(r->s, i);
            if (made == -2)
                return -1;
            if (made >= 0)
                starpu_variable_data_register(
                    &r->handles[made], STARPU_MAIN_RAM,
                    (uintptr_t)r->s->lu.blk[made], block_bytes);
        }
        if (n > (int)(sizeof descr / sizeof descr[0]))
            return -1;
        for (int k = 0; k < n; k++) {
            descr[k].handle = r->handles[v[k]];
            descr[k].mode = k < o->nreads ? STARPU_R : STARPU_RW;
        }
        int rc = starpu_task_insert(&spu_codelet, STARPU_DATA_MODE_ARRAY, descr,
                                    n, STARPU_CL_ARGS_NFREE, &r->tasks[i],
                                    sizeof r->tasks[i], 0);
        if (rc != 0) {
            fprintf(stderr, "bench: starpu_task_insert: %d\n", rc);
            return -1;
        }
    }
    return 0;
}

static int spu_run_all(void *run_, double *seconds)
{
    spu_run *r = run_;
    const bench_prog *p = r->s->prog;
    double t0;
    int rc;
    if (p->npushers == 1) {
        t0 = bench_now();
        rc = spu_push(r, 0, 0, p->nops);
    } else {
        rc = bench_run_pushers(p, spu_push, r, &t0);
    }
    starpu_task_wait_for_all();
    *seconds = bench_now() - t0;
    if (p->lu_nb)
        for (int v = 0; v < p->nvars; v++)
            if (!bench_var_at_start(p, v) && r->handles[v]) {
                starpu_data_unregister(r->handles[v]);
                r->handles[v] = NULL;
            }
    return rc;
}

static const char *spu_unsupported(const bench_prog *p)
{
    return p->rec_kind
               ? "W10 (recursive, nested waits) is not written for StarPU"
               : NULL;
}

#define SPU_ADAPTER(var, label, start_fn)                                      \
    const bench_adapter var = {                                                \
        .name = label,                                                         \
        .family = "starpu",                                                    \
        .threaded = 1,                                                         \
        .unsupported = spu_unsupported,                                        \
        .start = start_fn,                                                     \
        .stop = spu_stop,                                                      \
        .prepare = spu_prepare,                                                \
        .run = spu_run_all,                                                    \
        .release = spu_release,                                                \
    }

SPU_ADAPTER(bench_starpu_eager, "spu-eager", spu_start_eager);
SPU_ADAPTER(bench_starpu_lws, "spu-lws", spu_start_lws);
