/*
 * test_conformance: MXNet's engine conformance workload.
 *
 * 5 repeats of 10 000 ops over 100 vars. Each op writes one var and reads
 * 2..19 vars drawn with replacement (so a var may be read twice, and the
 * written var may be read too); it sets data[write] = (sum of the reads, in
 * list order) / (reads + 1), in doubles, after 1..9 us of busy work. The
 * serial program computes the same expressions in the same order, so the
 * engine's results must be bitwise equal to it, on every engine kind, with
 * one and with two workers. Every op must run exactly once.
 *
 * VF_TEST_SCALE shrinks the op count (default 1; 0.2 under TSan).
 */
#include "runner.h"

#define NVARS 100
#define REPEATS 5

typedef struct work {
    int write;
    int nreads;
    int reads[19];
    vf_var vreads[19];
    int us;
} work;

typedef struct run_state {
    double *data;
    atomic_long ran;
} run_state;

typedef struct op_arg {
    const work *w;
    run_state *st;
} op_arg;

static void evaluate(const work *w, double *data)
{
    double tmp = 0;
    for (int i = 0; i < w->nreads; i++)
        tmp += data[w->reads[i]];
    data[w->write] = tmp / (w->nreads + 1);
}

static int op_fn(vf_run *run, void *arg)
{
    (void)run;
    op_arg *a = arg;
    evaluate(a->w, a->st->data);
    tu_spin_us(a->w->us);
    atomic_fetch_add_explicit(&a->st->ran, 1, memory_order_relaxed);
    return 0;
}

static void init_data(double *d, tu_rng *r)
{
    for (int i = 0; i < NVARS; i++)
        d[i] = (double)(tu_next(r) % 1000000) / 1000.0;
}

/* Every repeat on every engine kind, against the serial program. */
TEST_CASE(mxnet_workload)
{
    const long nops = tu_scaled(10000, 500);
    work *wl = calloc((size_t)nops, sizeof *wl);
    op_arg *args = calloc((size_t)nops, sizeof *args);
    double *init = calloc(NVARS, sizeof *init);
    double *serial = calloc(NVARS, sizeof *serial);
    double *data = calloc(NVARS, sizeof *data);
    REQUIRE(wl && args && init && serial && data);

    for (int rep = 0; rep < REPEATS; rep++) {
        /* A fresh workload and start values per repeat. */
        tu_rng r = tu_rng_make((uint64_t)rep);
        for (long i = 0; i < nops; i++) {
            wl[i].write = tu_below(&r, NVARS);
            wl[i].nreads = tu_range(&r, 2, 19);
            for (int j = 0; j < wl[i].nreads; j++)
                wl[i].reads[j] = tu_below(&r, NVARS);
            wl[i].us = tu_range(&r, 1, 9);
        }
        init_data(init, &r);
        memcpy(serial, init, NVARS * sizeof *serial);
        for (long i = 0; i < nops; i++)
            evaluate(&wl[i], serial);

        for (int ki = 0; ki < TU_NKINDS; ki++) {
            const tu_kind *k = &tu_kinds[ki];
            check_context_ = k->name;
            tu_phase(k->name);
            run_state st = {data, 0};
            memcpy(data, init, NVARS * sizeof *data);
            vf_engine *e = tu_engine(k);
            vf_var vars[NVARS];
            for (int i = 0; i < NVARS; i++)
                vars[i] = tu_var(e);
            int push_errors = 0;
            for (long i = 0; i < nops; i++) {
                work *w = &wl[i];
                for (int j = 0; j < w->nreads; j++)
                    w->vreads[j] = vars[w->reads[j]];
                args[i].w = w;
                args[i].st = &st;
                vf_op op = {.fn = op_fn,
                            .arg = &args[i],
                            .reads = tu_list(w->vreads, w->nreads),
                            .writes = tu_list(&vars[w->write], 1),
                            .name = "conformance"};
                int rc = vf_engine_push(e, &op);
                if (rc != 0 && push_errors++ == 0)
                    CHECK_OK(rc);
            }
            CHECK_EQ(push_errors, 0);
            CHECK_OK(vf_engine_wait_all(e, NULL));
            CHECK_EQ(atomic_load(&st.ran), nops);
            int bad = 0;
            for (int i = 0; i < NVARS; i++) {
                if (memcmp(&data[i], &serial[i], sizeof(double)) != 0) {
                    if (bad++ < 5)
                        CHECK_REPORT_(
                            "repeat %d var %d: engine %.17g != serial "
                            "%.17g",
                            rep, i, data[i], serial[i]);
                }
            }
            CHECK_EQ(bad, 0);
            vf_stats s;
            CHECK_OK(vf_engine_stats(e, &s));
            CHECK_EQ(s.ran, nops);
            CHECK_EQ(s.completed, nops);
            CHECK_EQ(s.pending, 0);
            for (int i = 0; i < NVARS; i++)
                CHECK_OK(vf_var_destroy(e, vars[i], NULL, NULL));
            CHECK_OK(vf_engine_destroy(e));
        }
    }
    check_context_ = NULL;
    free(wl);
    free(args);
    free(init);
    free(serial);
    free(data);
}

TEST_MAIN("test_conformance", 240)
