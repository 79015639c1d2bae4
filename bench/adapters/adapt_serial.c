/*
 * The serial loop: every op of the program in push order on the calling
 * thread, no engine at all. The floor every engine must beat once ops carry
 * work, and the baseline of the speedup tables. W10: the plain recursion,
 * no tasks (recursive.h).
 */
#include "adapter.h"

static int serial_start(void **engine, int threads, char *version, size_t len)
{
    (void)threads, (void)version, (void)len;
    *engine = NULL;
    return 0;
}

static int serial_stop(void *engine)
{
    (void)engine;
    return 0;
}

static int serial_prepare(void *engine, bench_state *s, void **run)
{
    (void)engine;
    *run = s;
    return 0;
}

static int serial_run(void *run, double *seconds)
{
    bench_state *s = run;
    size_t n = s->prog->nops;
    double t0 = bench_now();
    if (s->prog->rec_kind) {
        bench_rec_run_serial(s);
    } else if (s->prog->lu_nb) {
        /* W8: a block absent at the start is allocated just before its
         * first op, as the other engines' pushers do. */
        for (size_t i = 0; i < n; i++)
            if (bench_op_alloc(s, i) == -2 || bench_op_run(s, i) != 0)
                return -1;
    } else {
        for (size_t i = 0; i < n; i++)
            if (bench_op_run(s, i) != 0)
                return -1;
    }
    *seconds = bench_now() - t0;
    return 0;
}

static void serial_release(void *run)
{
    (void)run;
}

const bench_adapter bench_serial = {
    .name = "serial",
    .family = "serial",
    .threaded = 0,
    .start = serial_start,
    .stop = serial_stop,
    .prepare = serial_prepare,
    .run = serial_run,
    .release = serial_release,
};
