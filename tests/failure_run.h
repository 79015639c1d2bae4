/*
 * failure_run.h: run a program of failure_oracle.h on a real engine and
 * compare what happened with the oracle's result. Shared by
 * tests/test_failure_diff.c and fuzz/fuzz_engine.c; needs only varflow,
 * libc and pthreads (no test helpers), so the fuzz build can include it.
 *
 * The engine side of each op kind:
 * - FO_SYNC: fn computes and stores the values, pushes its children and
 *   waits on its scratch vars (nested waits), and returns its code (with
 *   vf_run_set_error when it has a message);
 * - FO_ASYNC_INLINE: the same, then vf_completion_finish (or
 * vf_completion_fail) before async_fn returns;
 * - FO_ASYNC_THREAD: async_fn hands the op to a completer thread, which
 *   computes, stores and completes it later;
 * - FO_DEVICE: fn submits the work to the emulated device's stream, where
 *   it computes and stores, or fails with the op's code.
 * What happened is recorded in the oracle's result shape (fo_result): each
 * op's done calls, status and body runs; each wait's code, error, and the
 * var's value and version right after it; each var's final value and
 * version (a deleted var: the value its free callback saw); the stats.
 * A call that should not have failed (a push, a completion, a stale push
 * that was not refused) is counted as an API error.
 *
 * The chaos moves (failure_oracle.h) run here too: FO_ADDR (vf_var_of of
 * the var's data cell), FO_STOP / FO_START, handshake pushers and a destroy
 * racing pushes (failure_chaos.h, fr_run_opts).
 */
#ifndef VF_TEST_FAILURE_RUN_H
#define VF_TEST_FAILURE_RUN_H

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <time.h>

#include "failure_oracle.h"

typedef struct fr_run fr_run;

typedef struct fr_opctx {
    fr_run *R;
    int i;
    int thread;    /* a top-level op: the thread that pushes it */
    uint64_t down; /* set by the parent before the push */
} fr_opctx;

typedef struct fr_varctx {
    fr_run *R;
    int v;
} fr_varctx;

typedef struct fr_job {
    int i;
    vf_completion done;
} fr_job;

struct fr_run {
    const fo_prog *p;
    fo_result *got;
    vf_engine *e, *other;
    vf_var vars[FO_MAXVARS], foreign;
    uint64_t val[FO_MAXVARS]; /* the data; plain, so TSan sees races */
    fr_opctx ops[FO_MAXOPS];
    fr_varctx varctx[FO_MAXVARS];
    atomic_int body[FO_MAXOPS], fn[FO_MAXOPS];
    atomic_int done[FO_MAXOPS], status[FO_MAXOPS];
    atomic_int freed[FO_MAXVARS];
    uint64_t freed_value[FO_MAXVARS];
    /* the completer thread (mu guards jobs, njobs, taken, stop) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    fr_job jobs[FO_MAXOPS];
    int njobs, taken;
    bool stop;
    pthread_t completer;
    /* settle: before a wait, its thread's ops finish (pending: top-level
     * ops pushed and not done, per pushing thread) */
    bool settle;
    atomic_int pending[FO_MAXTHREADS];
    /* graphs: each run of the main thread's pushes is captured into a
     * graph, launched once and destroyed at once (a launch is the pushes
     * it recorded); `capturing` while one is open */
    bool graphs, capturing;
    long launched, dev_replays; /* graphs launched; of them, device replays */
    /* handshake pushers: step `turn` may be made (tok_mu guards turn) */
    pthread_mutex_t tok_mu;
    pthread_cond_t tok_cv;
    int turn;
    /* calls that failed and should not have (api_mu guards api_error) */
    atomic_int api_errors;
    pthread_mutex_t api_mu;
    char api_error[256];
};

static inline void fr_api_error(fr_run *R, const char *fmt, ...)
    VF_PRINTF_LIKE(2, 3);

static inline void fr_api_error(fr_run *R, const char *fmt, ...)
{
    if (atomic_fetch_add(&R->api_errors, 1) != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&R->api_mu);
    vsnprintf(R->api_error, sizeof R->api_error, fmt, ap);
    pthread_mutex_unlock(&R->api_mu);
    va_end(ap);
}

/* ------------------------------------------------------------ op bodies */

static inline int fr_push(fr_run *R, vf_engine *e, int i);

static inline void fr_wait_var(fr_run *R, vf_engine *e, int v, int wait)
{
    fo_xwait *w = &R->got->waits[wait];
    w->happened++;
    w->rc = vf_var_wait(e, R->vars[v], &w->err);
    if (w->rc != VF_EOPFAILED)
        memset(&w->err, 0, sizeof w->err);
    if (w->rc != 0 && w->rc != VF_EOPFAILED)
        return; /* the var may still be written: leave it */
    w->value = R->val[fo_cell(R->p, v)];
    int rc = vf_var_version(e, R->vars[v], &w->version);
    if (rc != 0)
        fr_api_error(R, "vf_var_version(var %d): %s", v, vf_error_name(rc));
}

/* A parent's children and nested waits (see fo_run_kids). */
static inline void fr_kids(vf_run *run, fr_opctx *c, uint64_t h, int *code,
                           char *msg)
{
    fr_run *R = c->R;
    const fo_op *o = &R->p->ops[c->i];
    vf_engine *e = vf_run_engine(run);
    for (int j = 0; j < o->nkids; j++) {
        R->ops[o->kid0 + j].down = fo_down(h, j);
        (void)fr_push(R, e, o->kid0 + j);
    }
    if (o->kidwait) {
        fo_xwait *w = &R->got->waits[o->kwait];
        w->happened++;
        w->rc = vf_run_wait_children(run, &w->err);
        if (w->rc != VF_EOPFAILED)
            memset(&w->err, 0, sizeof w->err);
        fo_nested_result(w->rc, &w->err, code, msg);
    }
    for (int k = 0; k < o->nwait; k++) {
        fr_wait_var(R, e, o->wvar[k], o->wait0 + k);
        const fo_xwait *w = &R->got->waits[o->wait0 + k];
        fo_nested_result(w->rc, &w->err, code, msg);
    }
}

/* What the op does on the host: values, children, waits; its code. */
static inline int fr_body(vf_run *run, fr_opctx *c, char *msg)
{
    fr_run *R = c->R;
    const fo_op *o = &R->p->ops[c->i];
    uint64_t h = fo_hash(R->p, c->i, R->val, c->down);
    int code = o->code;
    fo_message(R->p, c->i, msg);
    if (o->nkids)
        fr_kids(run, c, h, &code, msg);
    fo_store(R->p, o, h, code, R->val);
    return code;
}

static inline void fr_complete(fr_opctx *c, vf_completion done, int code,
                               const char *msg)
{
    int rc;
    if (c->R->p->ops[c->i].cause) {
        vf_error cause = fo_cause(c->R->p, c->i);
        rc = vf_completion_fail(done, &cause);
    } else {
        rc = vf_completion_finish(done, code, code && msg[0] ? msg : NULL);
    }
    if (rc != 0)
        fr_api_error(c->R, "completing op %d: %s", c->i, vf_error_name(rc));
}

static inline int fr_sync(vf_run *run, void *arg)
{
    fr_opctx *c = arg;
    char msg[256];
    atomic_fetch_add(&c->R->body[c->i], 1);
    int code = fr_body(run, c, msg);
    if (code != 0 && msg[0])
        vf_run_set_error(run, "%s", msg);
    return code;
}

static inline void fr_async_inline(vf_run *run, void *arg, vf_completion d)
{
    fr_opctx *c = arg;
    char msg[256];
    atomic_fetch_add(&c->R->body[c->i], 1);
    int code = fr_body(run, c, msg);
    fr_complete(c, d, code, msg);
}

static inline void fr_async_thread(vf_run *run, void *arg, vf_completion d)
{
    (void)run;
    fr_opctx *c = arg;
    fr_run *R = c->R;
    atomic_fetch_add(&R->body[c->i], 1);
    pthread_mutex_lock(&R->mu);
    R->jobs[R->njobs++] = (fr_job){c->i, d};
    pthread_cond_signal(&R->cv);
    pthread_mutex_unlock(&R->mu);
}

/* The completer: FO_ASYNC_THREAD ops, in the order they started. */
static inline void *fr_completer(void *arg)
{
    fr_run *R = arg;
    pthread_mutex_lock(&R->mu);
    for (;;) {
        while (R->taken == R->njobs && !R->stop)
            pthread_cond_wait(&R->cv, &R->mu);
        if (R->taken == R->njobs)
            break;
        fr_job job = R->jobs[R->taken++];
        pthread_mutex_unlock(&R->mu);
        char msg[256];
        int code = fr_body(NULL, &R->ops[job.i], msg); /* no children */
        fr_complete(&R->ops[job.i], job.done, code, msg);
        pthread_mutex_lock(&R->mu);
    }
    pthread_mutex_unlock(&R->mu);
    return NULL;
}

static inline int fr_device_work(void *arg)
{
    fr_opctx *c = arg;
    fr_run *R = c->R;
    const fo_op *o = &R->p->ops[c->i];
    atomic_fetch_add(&R->body[c->i], 1);
    uint64_t h = fo_hash(R->p, c->i, R->val, c->down);
    if (o->code != 0)
        return o->code;
    fo_store(R->p, o, h, 0, R->val);
    return 0;
}

static inline int fr_device_fn(vf_run *run, void *arg)
{
    fr_opctx *c = arg;
    const fo_op *o = &c->R->p->ops[c->i];
    atomic_fetch_add(&c->R->fn[c->i], 1);
    bool copy = o->property == VF_PROP_COPY_TO_DEVICE ||
                o->property == VF_PROP_COPY_FROM_DEVICE;
    return vf_run_submit(run, fr_device_work, arg, copy ? 64 : 0);
}

static inline void fr_done(void *arg, int status)
{
    fr_opctx *c = arg;
    atomic_store(&c->R->status[c->i], status);
    atomic_fetch_add(&c->R->done[c->i], 1);
    if (c->R->p->ops[c->i].parent < 0)
        atomic_fetch_sub(&c->R->pending[c->thread], 1);
}

/* ------------------------------------------------------------ steps */

static inline int fr_push(fr_run *R, vf_engine *e, int i)
{
    const fo_op *o = &R->p->ops[i];
    vf_var rl[FO_MAXR], wl[FO_MAXW];
    for (int k = 0; k < o->nr; k++)
        rl[k] = R->vars[o->r[k]];
    for (int k = 0; k < o->nw; k++)
        wl[k] = R->vars[o->w[k]];
    vf_op op = {.arg = &R->ops[i],
                .done = fr_done,
                .reads = {o->nr ? rl : NULL, o->nr},
                .writes = {o->nw ? wl : NULL, o->nw},
                .property = (vf_property)o->property,
                .priority = o->priority,
                .no_skip = o->no_skip,
                .name = o->name[0] ? o->name
                        : (i & 1)  ? ""
                                   : NULL};
    if (o->how == FO_SYNC) {
        op.fn = fr_sync;
    } else if (o->how == FO_ASYNC_INLINE) {
        op.async_fn = fr_async_inline;
    } else if (o->how == FO_ASYNC_THREAD) {
        op.async_fn = fr_async_thread;
    } else {
        op.fn = fr_device_fn;
        op.device = (vf_device){VF_DEVICE_EMULATED, o->device};
    }
    if (o->parent < 0)
        atomic_fetch_add(&R->pending[R->ops[i].thread], 1);
    int rc = vf_engine_push(e, &op);
    if (rc != 0) {
        fr_api_error(R, "push of op %d: %s (%s)", i, vf_error_name(rc),
                     vf_error_detail());
        if (o->parent < 0)
            atomic_fetch_sub(&R->pending[R->ops[i].thread], 1);
    }
    return rc;
}

static inline void fr_free(void *arg)
{
    fr_varctx *c = arg;
    c->R->freed_value[c->v] = c->R->val[fo_cell(c->R->p, c->v)];
    atomic_fetch_add(&c->R->freed[c->v], 1);
}

static inline int fr_never(vf_run *run, void *arg)
{
    (void)run;
    fr_api_error(arg, "a refused push ran");
    return 0;
}

static inline void fr_stale(fr_run *R, int v)
{
    vf_var bad = v < 0 ? R->foreign : R->vars[v];
    int want = v < 0 ? VF_EXDEV : VF_ESTALE;
    int rc = vf_engine_push(R->e, &(vf_op){.fn = fr_never,
                                           .arg = R,
                                           .writes = {&bad, 1},
                                           .name = "stale"});
    if (rc != want)
        fr_api_error(R, "push with a bad handle (var %d): %s, expected %s", v,
                     vf_error_name(rc), vf_error_name(want));
}

/* Settle (a debugging aid): before a wait of the main thread, every
 * top-level op pushed so far finishes (the second thread's included);
 * before one of the second thread, its own ops. A wait then runs at its
 * place in push order (nested waits excepted). */
static inline void fr_settle(fr_run *R, int thread)
{
    (void)vf_bulk_flush(R->e);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&R->pending[thread]) != 0 ||
           (thread == 0 && atomic_load(&R->pending[1]) != 0)) {
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 30) {
            fr_api_error(R, "settle: ops never finished");
            return;
        }
    }
}

/* FO_ADDR: the var of v's data cell's address; the first lookup of an
 * incarnation makes its handle, a later one must return it again. */
static inline void fr_addr(fr_run *R, int v)
{
    vf_var got = {0};
    int rc = vf_var_of(R->e, &R->val[fo_cell(R->p, v)], &got);
    if (rc != 0)
        fr_api_error(R, "vf_var_of(var %d): %s (%s)", v, vf_error_name(rc),
                     vf_error_detail());
    else if (R->vars[v].id == 0)
        R->vars[v] = got;
    else if (got.id != R->vars[v].id)
        fr_api_error(R, "vf_var_of(var %d) returned another handle", v);
}

static inline void fr_check(fr_run *R, const char *call, int rc)
{
    if (rc != 0)
        fr_api_error(R, "%s: %s (%s)", call, vf_error_name(rc),
                     vf_error_detail());
}

static inline void fr_step(fr_run *R, int s)
{
    const fo_step *st = &R->p->steps[s];
    int rc = 0;
    fo_xwait *w = &R->got->waits[st->wait];
    if (R->settle && (st->kind == FO_WAIT_VAR || st->kind == FO_WAIT_ALL))
        fr_settle(R, st->thread);
    switch (st->kind) {
    case FO_PUSH:
        R->ops[st->arg].thread = st->thread;
        (void)fr_push(R, R->e, st->arg);
        break;
    case FO_DELETE:
        rc = vf_var_destroy(R->e, R->vars[st->arg], fr_free,
                            &R->varctx[st->arg]);
        if (rc != 0)
            fr_api_error(R, "delete of var %d: %s", st->arg, vf_error_name(rc));
        break;
    case FO_WAIT_VAR:
        fr_wait_var(R, R->e, st->arg, st->wait);
        break;
    case FO_WAIT_ALL:
        w->happened++;
        w->rc = vf_engine_wait_all(R->e, &w->err);
        if (w->rc != VF_EOPFAILED)
            memset(&w->err, 0, sizeof w->err);
        break;
    case FO_STALE:
        fr_stale(R, st->arg);
        break;
    case FO_ADDR:
        fr_addr(R, st->arg);
        break;
    case FO_STOP:
        fr_check(R, "vf_engine_stop", vf_engine_stop(R->e));
        break;
    case FO_START:
        fr_check(R, "vf_engine_start", vf_engine_start(R->e));
        break;
    default:
        break;
    }
}

typedef struct fr_seg {
    fr_run *R;
    int from, to;
} fr_seg;

/* The second pusher: the steps marked thread 1 of one segment. */
static inline void *fr_second(void *arg)
{
    fr_seg *g = arg;
    for (int s = g->from; s < g->to; s++)
        if (g->R->p->steps[s].thread == 1)
            fr_step(g->R, s);
    int rc = vf_bulk_flush(g->R->e);
    if (rc != 0)
        fr_api_error(g->R, "vf_bulk_flush: %s", vf_error_name(rc));
    return NULL;
}

static inline int fr_join_of(const fo_prog *p, int fork)
{
    int s = fork;
    while (s < p->nsteps && p->steps[s].kind != FO_JOIN)
        s++;
    return s;
}

/* Graphs: end the main thread's capture, launch its graph and destroy it
 * while the launch runs (it is freed after). */
static inline void fr_launch(fr_run *R)
{
    if (!R->capturing)
        return;
    R->capturing = false;
    vf_graph *g = NULL;
    fr_check(R, "vf_graph_end", vf_graph_end(R->e, &g));
    if (g == NULL)
        return;
    /* A graph of one device's ops replays as a device graph (its one
     * launch records it: each function is called once, as pushed); any
     * other refuses, and pushes or replays on the CPU as it would. */
    int rc = vf_graph_device_replay(R->e, g, true);
    if (rc != 0 && rc != VF_ENOTSUP)
        fr_api_error(R, "vf_graph_device_replay returned %s",
                     vf_error_name(rc));
    R->dev_replays += rc == 0;
    fr_check(R, "vf_graph_launch", vf_graph_launch(R->e, g));
    fr_check(R, "vf_graph_destroy", vf_graph_destroy(R->e, g));
    R->launched++;
}

/* The main thread's steps; a FORK starts the second pusher (after
 * flushing this thread's batch: its ops come first), JOIN joins it. With
 * `graphs`, each run of its pushes is captured and launched (fr_launch). */
static inline void fr_steps(fr_run *R)
{
    pthread_t second;
    fr_seg seg;
    for (int s = 0; s < R->p->nsteps; s++) {
        const fo_step *st = &R->p->steps[s];
        bool push = st->kind == FO_PUSH && st->thread == 0;
        if (R->graphs && !push)
            fr_launch(R);
        else if (R->graphs && push && !R->capturing) {
            fr_check(R, "vf_graph_begin", vf_graph_begin(R->e));
            R->capturing = true;
        }
        if (st->kind == FO_FORK) {
            (void)vf_bulk_flush(R->e);
            seg = (fr_seg){R, s + 1, fr_join_of(R->p, s)};
            if (pthread_create(&second, NULL, fr_second, &seg) != 0)
                abort();
        } else if (st->kind == FO_JOIN) {
            pthread_join(second, NULL);
        } else if (st->thread == 0) {
            fr_step(R, s);
        }
    }
    fr_launch(R);
}

/* ------------------------------------------------------------ a run */

static inline fr_run *fr_new(const fo_prog *p, fo_result *got)
{
    fr_run *R = calloc(1, sizeof *R);
    if (R == NULL)
        abort();
    R->p = p;
    R->got = got;
    memset(got, 0, sizeof *got);
    pthread_mutex_init(&R->mu, NULL);
    pthread_cond_init(&R->cv, NULL);
    pthread_mutex_init(&R->api_mu, NULL);
    pthread_mutex_init(&R->tok_mu, NULL);
    pthread_cond_init(&R->tok_cv, NULL);
    for (int i = 0; i < p->nops; i++)
        R->ops[i] = (fr_opctx){R, i, 0, 0};
    for (int v = 0; v < p->nvars; v++) {
        R->varctx[v] = (fr_varctx){R, v};
        R->val[v] = fo_init_value(p, v);
    }
    return R;
}

static inline bool fr_needs_other(const fo_prog *p)
{
    for (int s = 0; s < p->nsteps; s++)
        if (p->steps[s].kind == FO_STALE && p->steps[s].arg < 0)
            return true;
    return false;
}

static inline void fr_stop_completer(fr_run *R)
{
    pthread_mutex_lock(&R->mu);
    R->stop = true;
    pthread_cond_signal(&R->cv);
    pthread_mutex_unlock(&R->mu);
    pthread_join(R->completer, NULL);
}

/* The completer thread, engine and vars; false when they cannot be made. */
static inline bool fr_start(fr_run *R, const vf_config *cfg)
{
    if (pthread_create(&R->completer, NULL, fr_completer, R) != 0)
        abort();
    int rc = vf_engine_create(&R->e, cfg);
    if (rc != 0) {
        R->e = NULL;
        fr_api_error(R, "vf_engine_create: %s (%s)", vf_error_name(rc),
                     vf_error_detail());
        return false;
    }
    for (int v = 0; v < R->p->nvars && rc == 0; v++)
        if (R->p->addr[v] == 0) /* address vars: their FO_ADDR steps */
            rc = vf_var_create(R->e, &R->vars[v]);
    if (rc == 0 && fr_needs_other(R->p)) {
        rc = vf_engine_create(&R->other, &(vf_config){.type = VF_ENGINE_NAIVE});
        if (rc == 0)
            rc = vf_var_create(R->other, &R->foreign);
    }
    if (rc != 0)
        fr_api_error(R, "making vars: %s", vf_error_name(rc));
    return rc == 0;
}

/* After the last step (a wait_all): stats, vars, then stop and destroy. */
static inline void fr_finish(fr_run *R)
{
    fo_result *got = R->got;
    vf_stats st;
    int rc = vf_engine_stats(R->e, &st);
    if (rc != 0 || st.pending != 0)
        fr_api_error(R, "stats: %s, pending %llu", vf_error_name(rc),
                     (unsigned long long)st.pending);
    got->ran = st.ran;
    got->failed = st.failed;
    got->skipped = st.skipped;
    for (int v = 0; v < R->p->nvars; v++) {
        fo_xvar *x = &got->vars[v];
        x->deleted = atomic_load(&R->freed[v]) != 0;
        if (x->deleted) {
            x->value = R->freed_value[v];
        } else {
            x->value = R->val[fo_cell(R->p, v)];
            if (vf_var_version(R->e, R->vars[v], &x->version) != 0)
                fr_api_error(R, "vf_var_version(var %d) failed", v);
        }
    }
}

/* Each op's record, once the engine is gone (every done has fired). */
static inline void fr_collect(fr_run *R)
{
    for (int i = 0; i < R->p->nops; i++) {
        fo_xop *x = &R->got->ops[i];
        x->done = atomic_load(&R->done[i]);
        x->status = atomic_load(&R->status[i]);
        x->body = atomic_load(&R->body[i]);
        if (R->p->ops[i].how == FO_DEVICE && atomic_load(&R->fn[i]) > 1)
            fr_api_error(R, "device op %d: fn ran %d times", i,
                         atomic_load(&R->fn[i]));
    }
    for (int v = 0; v < R->p->nvars; v++)
        if (atomic_load(&R->freed[v]) > 1)
            fr_api_error(R, "var %d freed %d times", v,
                         atomic_load(&R->freed[v]));
}

#include "failure_chaos.h"

/* How to run a program: settle (see fr_settle); racers > 0: destroy the
 * engine while that many threads push (fr_race_destroy; race, if not
 * NULL, adds up what they did). */
typedef struct fr_run_opts {
    bool settle;
    bool graphs; /* see fr_run: one-thread programs only */
    /* out, with graphs: launches made, and those the engine replayed */
    long launched, replayed, dev_replays;
    int racers;
    fr_race_stats *race;
} fr_run_opts;

/*
 * Run `p` on an engine made from `cfg`; what happened goes to `got`.
 * Returns the number of API errors (the first one's text in why[256]);
 * with o->graphs, o->launched and o->replayed say what the launches did.
 */
static inline int fr_run_program_opts(const fo_prog *p, const vf_config *cfg,
                                      fr_run_opts *o, fo_result *got, char *why)
{
    fr_run *R = fr_new(p, got);
    R->settle = o->settle;
    R->graphs = o->graphs;
    if (fr_start(R, cfg)) {
        if (p->nthreads > 1)
            fr_hand_steps(R);
        else
            fr_steps(R);
        fr_finish(R);
    }
    fr_stop_completer(R);
    if (R->e != NULL && o->graphs) {
        vf_stats st;
        if (vf_engine_stats(R->e, &st) == 0)
            o->replayed = (long)st.replays;
        o->launched = R->launched;
        o->dev_replays = R->dev_replays;
    }
    if (R->e != NULL && o->racers > 0)
        fr_race_destroy(R, o->racers, o->race);
    else if (R->e != NULL && vf_engine_destroy(R->e) != 0)
        fr_api_error(R, "vf_engine_destroy failed");
    if (R->other != NULL)
        (void)vf_engine_destroy(R->other);
    fr_collect(R);
    int n = atomic_load(&R->api_errors);
    snprintf(why, 256, "%s", R->api_error);
    pthread_mutex_destroy(&R->mu);
    pthread_cond_destroy(&R->cv);
    pthread_mutex_destroy(&R->api_mu);
    pthread_mutex_destroy(&R->tok_mu);
    pthread_cond_destroy(&R->tok_cv);
    free(R);
    return n;
}

/* The same with only `settle` (see fr_settle). */
static inline int fr_run_program(const fo_prog *p, const vf_config *cfg,
                                 bool settle, fo_result *got, char *why)
{
    fr_run_opts o = {.settle = settle};
    return fr_run_program_opts(p, cfg, &o, got, why);
}

#include "failure_diff.h"

#endif /* VF_TEST_FAILURE_RUN_H */
