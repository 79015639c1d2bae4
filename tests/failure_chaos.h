/*
 * failure_chaos.h: the chaos moves of issue 27 on a real engine, for
 * failure_run.h (included by it; shared by tests/test_chaos.c and
 * fuzz/fuzz_engine.c, so only varflow, libc and pthreads).
 *
 * Handshake pushers (fo_prog.nthreads > 1): one thread per pusher, the
 * main thread being pusher 0. A token (fr_run.turn) passes from step to
 * step: step s is made by its thread once step s - 1 has returned, and
 * the token goes on when it returns. The program's order between threads
 * is thus established by ordinary synchronization (a mutex and a
 * condition variable), as a program hands data from thread to thread, and
 * nothing else is done for the engine: no flush, no wait. Whatever the
 * bulk size, engine kind or worker count, the result must be the serial
 * program's in step order (DESIGN.md, rules 10 and 13).
 *
 * A destroy racing pushes (fr_run_opts.racers > 0): once the program ran
 * and its result was read, racers push ops on vars of their own (an op
 * may push a child from inside), look up an address and wait on their
 * var, while the main thread calls vf_engine_destroy once each has had a
 * push accepted (a racer makes 256 calls, then waits for destroy to begin
 * and goes on until it returned: the last call may begin after that). Each call
 * must return 0 or VF_ESHUTDOWN, or VF_EINVAL once destroy has begun (a call
 * that begins while destroy frees the engine); every push accepted runs once,
 * with its done, before destroy returns; nothing crashes.
 */
#ifndef VF_TEST_FAILURE_CHAOS_H
#define VF_TEST_FAILURE_CHAOS_H

/* ------------------------------------------------------------ switches */

/* The moves, each behind a switch: VF_CHAOS_MOVES=threads,nest,... turns
 * on only those named (default: all), in tests/test_chaos.c and in
 * fuzz/fuzz_engine.c alike, so a run can leave out a move whose fix is
 * not there yet. */
enum {
    FR_M_THREADS = 1,  /* handshake pushers */
    FR_M_NEST = 2,     /* children pushing children, waits at each level */
    FR_M_ADDR = 4,     /* vf_var_of, vf_var_destroy, lookup again */
    FR_M_STOP = 8,     /* vf_engine_stop / vf_engine_start */
    FR_M_BULK = 16,    /* VF_BULK_SIZE (and config.bulk_size) */
    FR_M_DESTROY = 32, /* destroy racing pushes (tests/test_chaos.c) */
    FR_M_ALL = 63
};

static const char *const fr_move_names[6] = {"threads", "nest", "addr",
                                             "stop",    "bulk", "destroy"};

/* VF_CHAOS_MOVES as a mask (FR_M_ALL when unset or "all"); -1 when it
 * names something else. */
static inline int fr_moves_from_env(void)
{
    const char *s = getenv("VF_CHAOS_MOVES");
    if (s == NULL || *s == '\0' || strcmp(s, "all") == 0)
        return FR_M_ALL;
    int mask = 0;
    while (*s) {
        size_t n = strcspn(s, ",");
        int bit = -1;
        for (int k = 0; k < 6; k++)
            if (strlen(fr_move_names[k]) == n &&
                strncmp(s, fr_move_names[k], n) == 0)
                bit = 1 << k;
        if (bit < 0 && n > 0)
            return -1;
        mask |= bit > 0 ? bit : 0;
        s += n + (s[n] == ',');
    }
    return mask;
}

/* ------------------------------------------------------------ handshake */

typedef struct fr_hand {
    fr_run *R;
    int t;
} fr_hand;

/* Pusher t: its steps, each when the token reaches it. */
static inline void *fr_hand_thread(void *arg)
{
    fr_hand *h = arg;
    fr_run *R = h->R;
    for (int s = 0; s < R->p->nsteps; s++) {
        if (R->p->steps[s].thread != h->t)
            continue;
        pthread_mutex_lock(&R->tok_mu);
        while (R->turn != s)
            pthread_cond_wait(&R->tok_cv, &R->tok_mu);
        pthread_mutex_unlock(&R->tok_mu);
        fr_step(R, s);
        pthread_mutex_lock(&R->tok_mu);
        R->turn = s + 1;
        pthread_cond_broadcast(&R->tok_cv);
        pthread_mutex_unlock(&R->tok_mu);
    }
    return NULL;
}

/* Every step, each by its pusher, in program order. */
static inline void fr_hand_steps(fr_run *R)
{
    int n = R->p->nthreads;
    pthread_t th[FO_MAXTHREADS];
    fr_hand h[FO_MAXTHREADS];
    for (int t = 0; t < n; t++)
        h[t] = (fr_hand){R, t};
    for (int t = 1; t < n; t++)
        if (pthread_create(&th[t], NULL, fr_hand_thread, &h[t]) != 0)
            abort();
    (void)fr_hand_thread(&h[0]);
    for (int t = 1; t < n; t++)
        pthread_join(th[t], NULL);
}

/* ------------------------------------------------------------ racing */

typedef struct fr_race_stats {
    long accepted; /* pushes accepted (children included) */
    long refused;  /* calls answered VF_ESHUTDOWN or VF_EINVAL */
} fr_race_stats;

typedef struct fr_race fr_race;

typedef struct fr_racer {
    fr_race *g;
    int t;
    vf_var var;
    uint64_t ran; /* ops run: plain, ordered by var (TSan sees a race) */
    long refused;
    pthread_t th;
} fr_racer;

struct fr_race {
    fr_run *R;
    fr_racer r[FO_MAXTHREADS];
    int n;
    atomic_int started;   /* racers with a push accepted */
    atomic_int begun;     /* destroy was called */
    atomic_int destroyed; /* destroy returned */
    atomic_long accepted, done;
};

/* rc of `call` in a racer (or an op of one): fine, or an API error. */
static inline bool fr_race_rc(fr_racer *x, const char *call, int rc)
{
    if (rc == 0)
        return true;
    x->refused += rc == VF_ESHUTDOWN || rc == VF_EINVAL;
    if (rc == VF_ESHUTDOWN || (rc == VF_EINVAL && atomic_load(&x->g->begun)))
        return false;
    fr_api_error(x->g->R, "racing destroy: %s: %s (%s)%s", call,
                 vf_error_name(rc), vf_error_detail(),
                 atomic_load(&x->g->begun) ? "" : ", before destroy began");
    return false;
}

static inline void fr_race_done(void *arg, int status)
{
    fr_racer *x = arg;
    if (status != 0)
        fr_api_error(x->g->R, "racing destroy: an op ended with %s",
                     vf_error_name(status));
    atomic_fetch_add(&x->g->done, 1);
}

static inline int fr_race_kid(vf_run *run, void *arg)
{
    (void)run;
    fr_racer *x = arg;
    x->ran++;
    return 0;
}

/* A racer's op: counts itself, and every fourth pushes a child. */
static inline int fr_race_op(vf_run *run, void *arg)
{
    fr_racer *x = arg;
    if (x->ran++ % 4 != 0)
        return 0;
    int rc = vf_engine_push(vf_run_engine(run), &(vf_op){.fn = fr_race_kid,
                                                         .arg = x,
                                                         .done = fr_race_done,
                                                         .writes = {&x->var, 1},
                                                         .name = "race-kid"});
    if (rc == 0)
        atomic_fetch_add(&x->g->accepted, 1);
    else
        (void)fr_race_rc(x, "a push from inside an op", rc);
    return 0;
}

static inline void *fr_racer_main(void *arg)
{
    fr_racer *x = arg;
    fr_race *g = x->g;
    vf_engine *e = g->R->e;
    for (long k = 0; k < 1000000 && !atomic_load(&g->destroyed); k++) {
        int rc;
        while (k == 256 && !atomic_load(&g->begun)) /* then race destroy */
            sched_yield();
        if (k % 8 == 5) {
            vf_var v;
            rc = vf_var_of(e, &g->R->val[0], &v);
            (void)fr_race_rc(x, "vf_var_of", rc);
            continue;
        }
        if (k % 8 == 7) {
            rc = vf_var_wait(e, x->var, NULL);
            (void)fr_race_rc(x, "vf_var_wait", rc);
            continue;
        }
        rc = vf_engine_push(e, &(vf_op){.fn = fr_race_op,
                                        .arg = x,
                                        .done = fr_race_done,
                                        .writes = {&x->var, 1},
                                        .name = "race"});
        if (!fr_race_rc(x, "vf_engine_push", rc)) {
            sched_yield(); /* let destroy go on */
            continue;
        }
        atomic_fetch_add(&g->accepted, 1);
        if (k == 0)
            atomic_fetch_add(&g->started, 1);
    }
    return NULL;
}

/* Destroy R->e while n racers push (see the top of the file). */
static inline void fr_race_destroy(fr_run *R, int n, fr_race_stats *out)
{
    fr_race *g = calloc(1, sizeof *g);
    if (g == NULL)
        abort();
    g->R = R;
    g->n = n < FO_MAXTHREADS ? n : FO_MAXTHREADS;
    for (int t = 0; t < g->n; t++) {
        g->r[t] = (fr_racer){.g = g, .t = t};
        fr_check(R, "vf_var_create", vf_var_create(R->e, &g->r[t].var));
    }
    for (int t = 0; t < g->n; t++)
        if (pthread_create(&g->r[t].th, NULL, fr_racer_main, &g->r[t]) != 0)
            abort();
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&g->started) < g->n) { /* each has pushed once */
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 30)
            break;
    }
    atomic_store(&g->begun, 1);
    fr_check(R, "vf_engine_destroy with pushes racing it",
             vf_engine_destroy(R->e));
    atomic_store(&g->destroyed, 1);
    uint64_t ran = 0;
    long refused = 0;
    for (int t = 0; t < g->n; t++) {
        pthread_join(g->r[t].th, NULL);
        ran += g->r[t].ran;
        refused += g->r[t].refused;
    }
    long acc = atomic_load(&g->accepted), done = atomic_load(&g->done);
    if (done != acc || (long)ran != acc)
        fr_api_error(R,
                     "racing destroy: %ld pushes accepted, %ld done "
                     "callbacks, %llu ran",
                     acc, done, (unsigned long long)ran);
    if (out != NULL) {
        out->accepted += acc;
        out->refused += refused;
    }
    free(g);
}

#endif /* VF_TEST_FAILURE_CHAOS_H */
