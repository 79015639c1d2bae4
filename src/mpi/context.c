/*
 * context.c: which engine is attached to which communicator.
 *
 * The public calls take the engine, as the core's do, so the library finds
 * its context in a small process-wide registry (a handful of engines at
 * most; a mutex and a linear scan). vf_mpi_create makes the context and
 * starts the communication thread; vf_mpi_destroy drains, stops it and
 * frees everything.
 *
 * MPI calls from varflow's threads go through one process-wide lock, so
 * that two attached engines (two communication threads) still make their
 * calls one at a time, as MPI_THREAD_SERIALIZED requires.
 */
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cancel.h"
#include "mpi/mpi_internal.h"

#define MAX_ENGINES 64

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static vf__mpi *registry[MAX_ENGINES];
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
/* vf_mpi_create initialized MPI: the last vf_mpi_destroy finalizes it. */
static bool mpi_is_ours;

void vf__mpi_lock_global(void)
{
    pthread_mutex_lock(&mpi_lock);
}

void vf__mpi_unlock_global(void)
{
    pthread_mutex_unlock(&mpi_lock);
}

int vf__mpi_error(int code, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return vf_error_set_detail(code, "%s", text);
}

void vf__mpi_error_text(int mpi_rc, char *out, size_t size)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", mpi_rc);
    snprintf(out, size, "%.*s", (int)(size > 0 ? size - 1 : 0), text);
}

/* The context whose lock this thread holds, inside a call in sequence. */
static _Thread_local const vf__mpi *lock_held;

/* The engine whose op's `done` vf_mpi_push calls on this thread, with
 * VF_MPI_ELSEWHERE (vf__mpi_done_elsewhere), or NULL. */
static _Thread_local const vf_engine *done_elsewhere;

void vf__mpi_done_elsewhere(vf_engine *e, const vf_op *op)
{
    /* With arg_size, `done` gets a copy, as on the running rank (it got
     * the caller's arg, and a done that wrote there changed the program
     * on every rank but that one: found by a user tester). A copy of this
     * call's own: the op never runs here. */
    _Alignas(max_align_t) unsigned char local[256];
    void *arg = op->arg;
    if (op->arg_size != 0 && op->arg != NULL) {
        arg = op->arg_size <= sizeof local ? local : malloc(op->arg_size);
        if (arg == NULL)
            arg = op->arg; /* out of memory: the caller's, as before */
        else
            memcpy(arg, op->arg, op->arg_size);
    }
    const vf_engine *outer = done_elsewhere;
    done_elsewhere = e;
    op->done(arg, VF_MPI_ELSEWHERE);
    done_elsewhere = outer;
    if (arg != op->arg && arg != (void *)local)
        free(arg);
}

/* From inside an op of `e`: an op runs on one rank, so no other rank
 * makes the call; refused before anything is sent, locked or joined, so
 * that the other ranks go on undisturbed. So from its `done` where
 * vf_mpi_push calls it (VF_MPI_ELSEWHERE): the rank that runs the op
 * refuses the call there, so every rank must (found trying MPI as a
 * user: a wait from such a done was joined on one rank only, and the
 * ranks hung out of step). */
static int in_op(vf_engine *e, const char *caller)
{
    if (!vf_engine_in_op(e) && done_elsewhere != e)
        return 0;
    return vf__mpi_error(VF_EDEADLK,
                         "%s: called from inside an op (an op runs on one "
                         "rank, and the calls in sequence are every rank's "
                         "program's, never an op's); nothing was done and "
                         "no other rank was involved",
                         caller);
}

int vf__mpi_check_thread(const vf__mpi *ctx, const char *caller)
{
    if (lock_held == ctx)
        return vf__mpi_error(VF_EDEADLK,
                             "%s: called from an op that runs inside "
                             "another varflow-mpi call on this thread "
                             "(the calls in sequence are the program's, "
                             "never an op's)",
                             caller);
    if (pthread_equal(pthread_self(), ctx->thread))
        return vf__mpi_error(VF_EDEADLK,
                             "%s: called from an op that the communication "
                             "thread runs (the calls in sequence are the "
                             "program's, never an op's)",
                             caller);
    return in_op(ctx->engine, caller);
}

int vf__mpi_enter(vf__mpi *ctx, const char *caller)
{
    int rc = vf__mpi_check_thread(ctx, caller);
    if (rc != 0)
        return rc;
    /* Each call in sequence pushes transfers, waits, or makes or deletes
     * variables, made once for the values of the moment: a graph
     * launched twice replayed a transfer whose record the first launch
     * had freed (found by a user tester: every rank crashed). */
    if (vf_graph_capturing(ctx->engine))
        return vf__mpi_error(VF_EINVAL,
                             "%s: this thread captures a graph on the "
                             "engine (vf_graph_begin): a call of "
                             "varflow-mpi cannot be captured (its transfers "
                             "are made once); the capture goes on",
                             caller);
    pthread_mutex_lock(&ctx->lock);
    lock_held = ctx;
    return 0;
}

void vf__mpi_leave(vf__mpi *ctx)
{
    lock_held = NULL;
    pthread_mutex_unlock(&ctx->lock);
}

vf__mpi *vf__mpi_of(vf_engine *e, const char *caller)
{
    if (e == NULL) {
        vf__mpi_error(VF_EINVAL, "%s: engine is NULL", caller);
        return NULL;
    }
    vf__mpi *found = NULL;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < MAX_ENGINES && found == NULL; i++)
        if (registry[i] != NULL && registry[i]->engine == e)
            found = registry[i];
    pthread_mutex_unlock(&registry_lock);
    if (found == NULL)
        vf__mpi_error(VF_EINVAL,
                      "%s: the engine is not attached to MPI (vf_mpi_create)",
                      caller);
    return found;
}

static int registry_add(vf__mpi *ctx)
{
    int rc = VF_EINVAL;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < MAX_ENGINES; i++)
        if (registry[i] != NULL && registry[i]->engine == ctx->engine)
            goto out; /* attached already */
    rc = VF_ENOMEM;
    for (int i = 0; i < MAX_ENGINES; i++) {
        if (registry[i] == NULL) {
            registry[i] = ctx;
            rc = 0;
            break;
        }
    }
out:
    pthread_mutex_unlock(&registry_lock);
    if (rc == VF_EINVAL)
        return vf__mpi_error(rc, "vf_mpi_create: the engine is attached "
                                 "already");
    if (rc == VF_ENOMEM)
        return vf__mpi_error(rc,
                             "vf_mpi_create: more than %d engines "
                             "attached",
                             MAX_ENGINES);
    return 0;
}

/* Returns how many engines stay attached. */
static int registry_remove(vf__mpi *ctx)
{
    int left = 0;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < MAX_ENGINES; i++) {
        if (registry[i] == ctx)
            registry[i] = NULL;
        else if (registry[i] != NULL)
            left++;
    }
    pthread_mutex_unlock(&registry_lock);
    return left;
}

/* Initialize MPI if nobody did, and check it can serve a second thread. */
static int mpi_ready(void)
{
    int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
    MPI_Finalized(&finalized);
    if (finalized)
        return vf__mpi_error(VF_ENOTSUP, "vf_mpi_create: MPI was finalized "
                                         "already");
    MPI_Initialized(&initialized);
    if (!initialized) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) !=
            MPI_SUCCESS)
            return vf__mpi_error(VF_ESYSTEM, "vf_mpi_create: MPI_Init_thread "
                                             "failed");
        mpi_is_ours = true;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED)
        return vf__mpi_error(
            VF_ENOTSUP,
            "vf_mpi_create: MPI provides thread level %d; varflow's "
            "communication thread needs MPI_THREAD_SERIALIZED (initialize "
            "MPI with MPI_Init_thread, or let vf_mpi_create do it)",
            provided);
    return 0;
}

/*
 * Duplicate `comm` (collective). Nonblocking, the process-wide lock taken
 * for each call only: another attached engine's communication thread may
 * hold a transfer that a peer needs before it reaches its own dup, and it
 * must be able to start it meanwhile.
 */
static int comm_dup(MPI_Comm comm, MPI_Comm *out)
{
    MPI_Request req = MPI_REQUEST_NULL;
    vf__mpi_lock_global();
    int mrc = MPI_Comm_idup(comm, out, &req);
    vf__mpi_unlock_global();
    for (int done = 0; mrc == MPI_SUCCESS && !done;) {
        vf__mpi_lock_global();
        mrc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        vf__mpi_unlock_global();
        if (mrc == MPI_SUCCESS && !done)
            sched_yield();
    }
    if (mrc != MPI_SUCCESS) {
        char text[160];
        vf__mpi_error_text(mrc, text, sizeof text);
        *out = MPI_COMM_NULL;
        return vf__mpi_error(VF_ESYSTEM, "vf_mpi_create: MPI_Comm_idup: %s",
                             text);
    }
    return 0;
}

static void ctx_free(vf__mpi *ctx)
{
    while (ctx->orphans != NULL) {
        vf__mpi_xfer *x = ctx->orphans;
        ctx->orphans = x->next;
        free(x);
    }
    vf__mpi_vars_free(ctx);
    free(ctx->away);
    free(ctx->send_seq);
    free(ctx->recv_seq);
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->data_lock);
    pthread_mutex_destroy(&ctx->qlock);
    pthread_cond_destroy(&ctx->qcond);
    pthread_cond_destroy(&ctx->agreed);
    free(ctx);
}

VF_API int vf_mpi_create(vf_engine *e, MPI_Comm comm)
{
    if (e == NULL)
        return vf__mpi_error(VF_EINVAL, "vf_mpi_create: engine is NULL");
    if (comm == MPI_COMM_NULL)
        return vf__mpi_error(VF_EINVAL, "vf_mpi_create: comm is "
                                        "MPI_COMM_NULL");
    int rc = in_op(e, "vf_mpi_create");
    if (rc != 0)
        return rc;
    if (vf_engine_type_of(e) == VF_ENGINE_NAIVE)
        return vf__mpi_error(VF_ENOTSUP,
                             "vf_mpi_create: the naive engine runs each op "
                             "inside its push, so it cannot wait for a "
                             "value from another rank; use the pooled or "
                             "per-device engine");
    vf__mpi *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return vf__mpi_error(VF_ENOMEM, "vf_mpi_create: out of memory");
    ctx->engine = e;
    ctx->comm = MPI_COMM_NULL;
    vf__mpi_vars_init(ctx);
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->data_lock, NULL);
    pthread_mutex_init(&ctx->qlock, NULL);
    pthread_cond_init(&ctx->qcond, NULL);
    pthread_cond_init(&ctx->agreed, NULL);
    rc = registry_add(ctx);
    if (rc != 0) {
        ctx_free(ctx);
        return rc;
    }
    vf__mpi_lock_global();
    rc = mpi_ready();
    vf__mpi_unlock_global();
    if (rc == 0)
        rc = comm_dup(comm, &ctx->comm);
    vf__mpi_lock_global();
    if (rc == 0) {
        MPI_Comm_set_errhandler(ctx->comm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(ctx->comm, &ctx->rank);
        MPI_Comm_size(ctx->comm, &ctx->size);
        int *ub = NULL, flag = 0;
        MPI_Comm_get_attr(ctx->comm, MPI_TAG_UB, &ub, &flag);
        ctx->tag_ub = flag && ub != NULL ? *ub : 32767;
    }
    vf__mpi_unlock_global();
    if (rc == 0) {
        ctx->words = (ctx->size + 63) / 64;
        ctx->send_seq = calloc((size_t)ctx->size, sizeof *ctx->send_seq);
        ctx->recv_seq = calloc((size_t)ctx->size, sizeof *ctx->recv_seq);
        if (ctx->send_seq == NULL || ctx->recv_seq == NULL)
            rc = vf__mpi_error(VF_ENOMEM, "vf_mpi_create: out of memory");
    }
    if (rc == 0)
        rc = vf__mpi_comm_start(ctx);
    if (rc != 0) {
        registry_remove(ctx);
        vf__mpi_lock_global();
        if (ctx->comm != MPI_COMM_NULL)
            MPI_Comm_free(&ctx->comm);
        vf__mpi_unlock_global();
        ctx_free(ctx);
    }
    return rc;
}

static int mpi_destroy(vf_engine *e, vf_error *err);

VF_API int vf_mpi_destroy(vf_engine *e, vf_error *err)
{
    return VF__UNCANCELLED(mpi_destroy(e, err)); /* base/cancel.h */
}

static int mpi_destroy(vf_engine *e, vf_error *err)
{
    vf__mpi *ctx = vf__mpi_of(e, "vf_mpi_destroy");
    if (ctx == NULL)
        return VF_EINVAL;
    int rc = vf__mpi_check_thread(ctx, "vf_mpi_destroy");
    if (rc != 0)
        return rc; /* it would wait for, or join, its own thread */
    bool refused;
    rc = vf__mpi_wait(ctx, err, &refused);
    /* Some rank could not wait (a stopped engine, a cut data flow): its ops may
     * still need the communication thread and the records, and the ranks must
     * stay in step, so every rank stays attached (they all know: the wait
     * agreed on it). */
    if (refused)
        return vf__mpi_error(rc,
                             "vf_mpi_destroy: %s; the engine stays "
                             "attached",
                             vf_error_detail());
    vf__mpi_comm_stop(ctx);
    bool last = registry_remove(ctx) == 0;
    vf__mpi_lock_global();
    MPI_Comm_free(&ctx->comm);
    if (last && mpi_is_ours) {
        MPI_Finalize();
        mpi_is_ours = false;
    }
    vf__mpi_unlock_global();
    ctx_free(ctx);
    return rc;
}

VF_API int vf_mpi_rank(vf_engine *e)
{
    vf__mpi *ctx = vf__mpi_of(e, "vf_mpi_rank");
    return ctx ? ctx->rank : VF_EINVAL;
}

VF_API int vf_mpi_size(vf_engine *e)
{
    vf__mpi *ctx = vf__mpi_of(e, "vf_mpi_size");
    return ctx ? ctx->size : VF_EINVAL;
}

VF_API int vf_mpi_stats_local(vf_engine *e, vf_mpi_stats *out)
{
    vf__mpi *ctx = vf__mpi_of(e, "vf_mpi_stats_local");
    if (ctx == NULL)
        return VF_EINVAL;
    if (out == NULL)
        return vf__mpi_error(VF_EINVAL, "vf_mpi_stats_local: out is NULL");
    pthread_mutex_lock(&ctx->data_lock);
    *out = ctx->stats;
    pthread_mutex_unlock(&ctx->data_lock);
    return 0;
}

static int mpi_stats_total(vf_engine *e, vf_mpi_stats *out)
{
    vf__mpi *ctx = vf__mpi_of(e, "vf_mpi_stats_total");
    if (ctx == NULL)
        return VF_EINVAL;
    if (out == NULL)
        return vf__mpi_error(VF_EINVAL, "vf_mpi_stats_total: out is NULL");
    int rc = vf__mpi_check_thread(ctx, "vf_mpi_stats_total");
    if (rc != 0)
        return rc;
    enum { N = sizeof(vf_mpi_stats) / sizeof(uint64_t) };
    _Static_assert(sizeof(vf_mpi_stats) == N * sizeof(uint64_t),
                   "vf_mpi_stats holds uint64_t counts only");
    uint64_t mine[N], all[N];
    pthread_mutex_lock(&ctx->data_lock);
    memcpy(mine, &ctx->stats, sizeof mine);
    pthread_mutex_unlock(&ctx->data_lock);
    vf__mpi_agree a;
    memset(&a, 0, sizeof a);
    a.kind = VF__MPI_AGREE_SUM;
    a.sum_in = mine;
    a.sum_out = all;
    a.count = N;
    vf__mpi_comm_agree(ctx, &a);
    if (a.rc != 0)
        return vf__mpi_error(a.rc, "vf_mpi_stats_total: %s", a.detail);
    memcpy(out, all, sizeof all);
    return 0;
}

/* The ranks' agreement waits on a condition with the context's queue lock
 * held: a cancel acting there left it locked and the call never returned
 * (the reviewer of vf_mpi_wait_all's hold). */
VF_API int vf_mpi_stats_total(vf_engine *e, vf_mpi_stats *out)
{
    return VF__UNCANCELLED(mpi_stats_total(e, out)); /* base/cancel.h */
}
