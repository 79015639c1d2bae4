/*
 * comm.c: the communication thread, the only thread of an attached engine
 * that calls MPI (so MPI_THREAD_SERIALIZED is enough).
 *
 * The async bodies of transfer ops post their transfer here and return;
 * the thread starts each one with MPI_Isend / MPI_Irecv, using a derived
 * datatype that joins the header and the value's own buffer (one message,
 * no copy), and polls the requests in flight with MPI_Testsome. A finished
 * transfer completes its op with vf_completion_finish, or with
 * vf_completion_fail when the value came with a failure, and that release may
 * make more transfers ready, posted the same way.
 *
 * MPI has no way to wait on requests and on a condition variable at once,
 * so while requests are in flight the thread polls: yielding at first,
 * then sleeping on its condition variable with a growing timeout (up to
 * POLL_MAX_US), which a new post cuts short. With nothing in flight it
 * sleeps until a post comes.
 *
 * The collectives (vf_mpi_wait_all's agreement on which rank failed
 * first, then that failure to everyone; vf_mpi_stats_total's sum) run here
 * too, as nonblocking collectives, so that no thread blocks inside MPI
 * while holding the process-wide lock.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi/mpi_internal.h"

#define POLL_SPINS 64   /* idle rounds that only yield */
#define POLL_MAX_US 200 /* the longest sleep with requests in flight */

/* The requests in flight and their transfers, side by side, and room for
 * what MPI_Testsome reports (indices, statuses, the finished transfers).
 * Oldest first, in slots 0 to n - 1: a finished one leaves its slot
 * empty (xs NULL, its request MPI_REQUEST_NULL), and the slots are
 * packed once more are empty than not; `first` is the
 * oldest slot not empty. A poll tests the oldest POLL_OLDEST slots and a
 * slice of POLL_SLICE of the others, from `cursor` on, which moves on at
 * every poll: every request is tested within n / POLL_SLICE polls, and a
 * chain's next transfer, the oldest, at each. Testing them all at every
 * poll, and packing the slots at every finish, cost time quadratic in
 * those in flight: a chain of 40,000 values pushed ahead over 2 ranks
 * waited 20-40 s (found by a user tester). */
typedef struct inflight {
    MPI_Request *reqs;
    vf__mpi_xfer **xs;
    int *idx;
    MPI_Status *st;
    vf__mpi_xfer **fin;
    int n, cap;
    int live;          /* requests in flight (slots not empty) */
    int first, cursor; /* see above */
} inflight;

#define POLL_OLDEST 64
#define POLL_SLICE 64

/* The agreement in progress. */
typedef struct agreement {
    vf__mpi_agree *a;
    int stage;        /* 0 to post, 1 reducing, 2 broadcasting */
    int ranks[2];     /* in: this rank's refused and failed ranks */
    int lowest[2];    /* out: the lowest over all ranks */
    const char *what; /* the nonblocking call stage 2 tests */
    MPI_Request req;
} agreement;

void vf__mpi_comm_post(vf__mpi *ctx, vf__mpi_xfer *x)
{
    pthread_mutex_lock(&ctx->qlock);
    x->next = ctx->posted;
    ctx->posted = x;
    pthread_cond_signal(&ctx->qcond);
    pthread_mutex_unlock(&ctx->qlock);
}

void vf__mpi_comm_agree(vf__mpi *ctx, vf__mpi_agree *a)
{
    pthread_mutex_lock(&ctx->qlock);
    while (ctx->agree != NULL) /* another thread's wait_all: after it */
        pthread_cond_wait(&ctx->agreed, &ctx->qlock);
    ctx->agree = a;
    pthread_cond_signal(&ctx->qcond);
    while (!a->done)
        pthread_cond_wait(&ctx->agreed, &ctx->qlock);
    pthread_mutex_unlock(&ctx->qlock);
}

/* Room for `need` more requests. */
static int inflight_reserve(inflight *f, int need)
{
    if (f->n + need <= f->cap)
        return 0;
    int cap = f->cap ? f->cap * 2 : 64;
    if (cap < f->n + need)
        cap = f->n + need;
    MPI_Request *reqs = realloc(f->reqs, sizeof *reqs * (size_t)cap);
    if (reqs != NULL)
        f->reqs = reqs;
    vf__mpi_xfer **xs = realloc(f->xs, sizeof *xs * (size_t)cap);
    if (xs != NULL)
        f->xs = xs;
    int *idx = realloc(f->idx, sizeof *idx * (size_t)cap);
    if (idx != NULL)
        f->idx = idx;
    MPI_Status *st = realloc(f->st, sizeof *st * (size_t)cap);
    if (st != NULL)
        f->st = st;
    vf__mpi_xfer **fin = realloc(f->fin, sizeof *fin * (size_t)cap);
    if (fin != NULL)
        f->fin = fin;
    if (reqs == NULL || xs == NULL || idx == NULL || st == NULL || fin == NULL)
        return VF_ENOMEM;
    f->cap = cap;
    return 0;
}

/* A finished (or never started) transfer, to complete once the global
 * lock is let go: `status` 0 or a VF_E* code with `text`. */
typedef struct finished {
    vf__mpi_xfer *x;
    int status;
    char text[200];
} finished;

typedef struct finished_list {
    finished *items;
    int n, cap;
} finished_list;

/* Complete a finished transfer's op: with `status` and `text` when the
 * transfer itself failed, as failed elsewhere when the value came with a
 * failure, else as done. Then free it: its op has finished (the profiler
 * read its name in there), and nothing else holds it. */
static void complete_xfer(vf__mpi_xfer *x, int status, const char *text)
{
    if (status != 0) {
        vf_completion_finish(x->done, status, text);
    } else if (x->dir == VF__MPI_RECV && x->hdr.code != 0) {
        vf_error cause;
        memset(&cause, 0, sizeof cause);
        cause.code = x->hdr.code;
        memcpy(cause.op_name, x->text.op_name, sizeof cause.op_name);
        memcpy(cause.message, x->text.message, sizeof cause.message);
        cause.op_name[sizeof cause.op_name - 1] = '\0';
        cause.message[sizeof cause.message - 1] = '\0';
        vf_completion_fail(x->done, &cause);
    } else {
        if (x->dir == VF__MPI_SEND && x->hdr.code != 0) {
            pthread_mutex_lock(&x->ctx->data_lock);
            x->ctx->stats.failures_sent++;
            pthread_mutex_unlock(&x->ctx->data_lock);
        }
        vf_completion_finish(x->done, 0, NULL);
    }
    free(x);
}

static void finished_add(finished_list *l, vf__mpi_xfer *x, int status,
                         const char *text)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        finished *items = realloc(l->items, sizeof *items * (size_t)cap);
        if (items == NULL) {
            /* Complete it at once rather than lose it (under the global
             * lock, but completing makes no MPI call: posts only queue). */
            complete_xfer(x, status, text);
            return;
        }
        l->items = items;
        l->cap = cap;
    }
    finished *f = &l->items[l->n++];
    f->x = x;
    f->status = status;
    snprintf(f->text, sizeof f->text, "%s", text ? text : "");
}

/* Add a request of `x` to those in flight (room was reserved before it was
 * posted, so a posted request is never lost). */
static void track(inflight *f, vf__mpi_xfer *x, MPI_Request req)
{
    f->reqs[f->n] = req;
    f->xs[f->n] = x;
    f->n++;
    f->live++;
    x->parts++;
}

/* Fail a transfer none of whose requests is in flight. */
static void fail_now(vf__mpi_xfer *x, int mpi_rc, const char *call,
                     finished_list *done)
{
    char text[160], msg[200];
    vf__mpi_error_text(mpi_rc, text, sizeof text);
    snprintf(msg, sizeof msg, "%s of variable %llu: %s", call,
             (unsigned long long)x->index, text);
    if (x->type != MPI_DATATYPE_NULL)
        MPI_Type_free(&x->type);
    finished_add(done, x, VF_ESYSTEM, msg);
}

/* Start one transfer (global lock held): the header and the value as one
 * message, and for a failed value the failure's text after it. */
static void start(vf__mpi *ctx, inflight *f, vf__mpi_xfer *x,
                  finished_list *done)
{
    if (inflight_reserve(f, 2) != 0) { /* the value, a failure's text */
        finished_add(done, x, VF_ENOMEM, "varflow-mpi: out of memory");
        return;
    }
    MPI_Aint disp[2];
    int len[2] = {(int)sizeof x->hdr, (int)x->size};
    MPI_Datatype types[2] = {MPI_BYTE, MPI_BYTE};
    MPI_Get_address(&x->hdr, &disp[0]);
    MPI_Get_address(x->buf, &disp[1]);
    int mrc = MPI_Type_create_struct(2, len, disp, types, &x->type);
    if (mrc == MPI_SUCCESS)
        mrc = MPI_Type_commit(&x->type);
    MPI_Request req = MPI_REQUEST_NULL;
    bool send = x->dir == VF__MPI_SEND;
    if (mrc == MPI_SUCCESS)
        mrc = send ? MPI_Isend(MPI_BOTTOM, 1, x->type, x->peer, x->tag,
                               ctx->comm, &req)
                   : MPI_Irecv(MPI_BOTTOM, 1, x->type, x->peer, x->tag,
                               ctx->comm, &req);
    if (mrc != MPI_SUCCESS) {
        fail_now(x, mrc, send ? "MPI_Isend" : "MPI_Irecv", done);
        return;
    }
    track(f, x, req);
    if (send && x->hdr.code != 0) {
        mrc = MPI_Isend(&x->text, (int)sizeof x->text, MPI_BYTE, x->peer,
                        x->tag, ctx->comm, &req);
        if (mrc == MPI_SUCCESS)
            track(f, x, req);
        else
            x->mpi_error = mrc; /* reported when the value's send ends */
    }
}

/* One of a transfer's requests finished (global lock held); once none is
 * left, what it means for its op. */
static void conclude(vf__mpi *ctx, inflight *f, vf__mpi_xfer *x,
                     const MPI_Status *st, int mpi_error, finished_list *done)
{
    char text[160], msg[200];
    x->parts--;
    if (mpi_error != MPI_SUCCESS && x->mpi_error == MPI_SUCCESS)
        x->mpi_error = mpi_error;
    bool value_part = x->dir == VF__MPI_RECV && !x->text_posted;
    int err_class = MPI_SUCCESS;
    if (x->mpi_error != MPI_SUCCESS)
        MPI_Error_class(x->mpi_error, &err_class);
    /* Ranks that made the variable with different sizes: a longer value
     * than this rank's is truncated by MPI, a shorter one caught by its
     * count and header. Either way, say so. */
    bool too_long = value_part && err_class == MPI_ERR_TRUNCATE;
    if (value_part && (x->mpi_error == MPI_SUCCESS || too_long)) {
        int count = 0;
        MPI_Get_count(st, MPI_BYTE, &count);
        if (too_long || (size_t)count != sizeof x->hdr + x->size ||
            x->hdr.size != x->size) {
            if (too_long)
                snprintf(msg, sizeof msg,
                         "variable %llu: rank %d sent more than the %zu "
                         "bytes this rank made it (every rank must create "
                         "the same variables)",
                         (unsigned long long)x->index, x->peer, x->size);
            else
                snprintf(msg, sizeof msg,
                         "variable %llu: rank %d sent %llu bytes, this rank "
                         "made it %zu bytes (every rank must create the "
                         "same variables)",
                         (unsigned long long)x->index, x->peer,
                         (unsigned long long)x->hdr.size, x->size);
            /* (A failed value's text, sent after it, is left unreceived:
             * the value is refused whatever it carried.) */
            MPI_Type_free(&x->type);
            finished_add(done, x, VF_EINVAL, msg);
            return;
        }
        if (x->hdr.code != 0) { /* the failure's text comes next */
            MPI_Request req = MPI_REQUEST_NULL;
            x->text_posted = true;
            int mrc = inflight_reserve(f, 1) != 0
                          ? MPI_ERR_NO_MEM
                          : MPI_Irecv(&x->text, (int)sizeof x->text, MPI_BYTE,
                                      x->peer, x->tag, ctx->comm, &req);
            if (mrc == MPI_SUCCESS) {
                track(f, x, req);
                return;
            }
            x->mpi_error = mrc;
        }
    }
    if (x->parts > 0)
        return;
    MPI_Type_free(&x->type);
    if (x->mpi_error != MPI_SUCCESS) {
        vf__mpi_error_text(x->mpi_error, text, sizeof text);
        snprintf(msg, sizeof msg, "%s variable %llu %s rank %d: %s",
                 x->dir == VF__MPI_SEND ? "sending" : "receiving",
                 (unsigned long long)x->index,
                 x->dir == VF__MPI_SEND ? "to" : "from", x->peer, text);
        finished_add(done, x, VF_ESYSTEM, msg);
        return;
    }
    finished_add(done, x, 0, NULL);
}

/* Complete the finished transfers' ops (no lock held: vf_completion_finish may
 * run ready async bodies, which post). */
static void complete_all(finished_list *l)
{
    for (int i = 0; i < l->n; i++)
        complete_xfer(l->items[i].x, l->items[i].status, l->items[i].text);
    l->n = 0;
}

/* Pack the slots in flight (their order kept). */
static void pack(inflight *f)
{
    int kept = 0;
    for (int i = 0; i < f->n; i++) {
        if (f->xs[i] != NULL) {
            f->reqs[kept] = f->reqs[i];
            f->xs[kept] = f->xs[i];
            kept++;
        }
    }
    f->n = kept;
    f->first = f->cursor = 0;
}

/* Test the slots [lo, lo + count): the finished requests' transfers go to
 * f->fin from *nfin on, their statuses to f->st there (MPI_ERROR set for
 * each), their slots emptied. MPI_SUCCESS, or MPI's code when MPI itself
 * failed (not a request: MPI_ERR_IN_STATUS is theirs). */
static int test_slots(inflight *f, int lo, int count, int *nfin)
{
    if (count <= 0)
        return MPI_SUCCESS;
    int out = 0;
    int rc = MPI_Testsome(count, f->reqs + lo, &out, f->idx, f->st + *nfin);
    int rc_class = MPI_SUCCESS; /* an MPI may return codes, not classes */
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &rc_class);
    if (rc != MPI_SUCCESS && rc_class != MPI_ERR_IN_STATUS)
        return rc;
    if (out == MPI_UNDEFINED)
        return MPI_SUCCESS;
    for (int k = 0; k < out; k++) {
        int i = lo + f->idx[k];
        MPI_Status *st = &f->st[*nfin + k];
        if (rc_class != MPI_ERR_IN_STATUS)
            st->MPI_ERROR = MPI_SUCCESS;
        f->fin[*nfin + k] = f->xs[i];
        f->xs[i] = NULL;
        f->live--;
    }
    *nfin += out;
    return MPI_SUCCESS;
}

/* Poll the requests in flight (global lock held). True if any finished. */
static bool poll_inflight(vf__mpi *ctx, inflight *f, finished_list *done)
{
    if (f->live == 0) {
        f->n = f->first = f->cursor = 0;
        return false;
    }
    if (f->n - f->live > f->live)
        pack(f);
    while (f->xs[f->first] == NULL)
        f->first++;
    int oldest_end = f->n - f->first < POLL_OLDEST ? f->n
                                                   : f->first + POLL_OLDEST;
    if (f->cursor < oldest_end || f->cursor >= f->n)
        f->cursor = oldest_end;
    int slice = f->n - f->cursor < POLL_SLICE ? f->n - f->cursor : POLL_SLICE;
    int nfin = 0;
    int rc = test_slots(f, f->first, oldest_end - f->first, &nfin);
    if (rc == MPI_SUCCESS)
        rc = test_slots(f, f->cursor, slice, &nfin);
    f->cursor += slice;
    if (rc != MPI_SUCCESS) {
        /* MPI itself failed: no request can be trusted to finish. Fail
         * every op in flight, so no rank hangs on them silently; their
         * transfers stay allocated, as MPI may still touch their buffers.
         * Those finished before it are failed with them. */
        char text[160], msg[200];
        vf__mpi_error_text(rc, text, sizeof text);
        snprintf(msg, sizeof msg, "MPI_Testsome: %s", text);
        for (int i = 0; i < nfin + f->n; i++) {
            vf__mpi_xfer *x = i < nfin ? f->fin[i] : f->xs[i - nfin];
            if (x != NULL && x->parts > 0) {
                x->parts = 0; /* a two-part send appears twice */
                vf_completion_finish(x->done, VF_ESYSTEM, msg);
            }
        }
        f->n = f->live = f->first = f->cursor = 0;
        return true;
    }
    if (nfin == 0)
        return false;
    /* Then conclude them: a conclusion may append a request (a failure's
     * text), which may move the arrays, and f->st and f->fin with them:
     * each is read before. */
    for (int k = 0; k < nfin; k++) {
        MPI_Status st = f->st[k];
        vf__mpi_xfer *x = f->fin[k];
        conclude(ctx, f, x, &st, st.MPI_ERROR, done);
    }
    return true;
}

/* An MPI call of the agreement returned `rc`: true, and the agreement
 * ended with VF_ESYSTEM, when it failed. */
static bool agree_failed(agreement *g, int rc, const char *what)
{
    if (rc == MPI_SUCCESS)
        return false;
    char text[160];
    vf__mpi_error_text(rc, text, sizeof text);
    snprintf(g->a->detail, sizeof g->a->detail, "%s: %s", what, text);
    g->a->rc = VF_ESYSTEM;
    return true;
}

/*
 * Move the agreement on (global lock held). True when it has ended.
 * A sum is one all-reduce (stage 0, then 2). The failure agreement reduces
 * the lowest refusing and the lowest failing rank (stage 0, 1), then, when
 * there is one, broadcasts that rank's error (stage 2).
 */
static bool agree_step(vf__mpi *ctx, agreement *g)
{
    vf__mpi_agree *a = g->a;
    int flag = 0;
    switch (g->stage) {
    case 0:
        if (a->kind == VF__MPI_AGREE_SUM) {
            g->what = "MPI_Iallreduce";
            g->stage = 2; /* then only the test */
            return agree_failed(g,
                                MPI_Iallreduce(a->sum_in, a->sum_out, a->count,
                                               MPI_UINT64_T, MPI_SUM, ctx->comm,
                                               &g->req),
                                g->what);
        }
        g->ranks[0] = a->refused_rank;
        g->ranks[1] = a->failed_rank;
        g->stage = 1;
        return agree_failed(g,
                            MPI_Iallreduce(g->ranks, g->lowest, 2, MPI_INT,
                                           MPI_MIN, ctx->comm, &g->req),
                            "MPI_Iallreduce");
    case 1:
        if (agree_failed(g, MPI_Test(&g->req, &flag, MPI_STATUS_IGNORE),
                         "MPI_Iallreduce"))
            return true;
        if (!flag)
            return false;
        a->refused_rank = g->lowest[0];
        a->failed_rank = g->lowest[1];
        if (a->refused_rank >= ctx->size && a->failed_rank >= ctx->size)
            return true; /* every rank waited, none failed */
        /* A refusal says more than a failure: it is what every rank
         * reports then. */
        int root = a->refused_rank < ctx->size ? a->refused_rank
                                               : a->failed_rank;
        g->what = "MPI_Ibcast";
        g->stage = 2;
        return agree_failed(g,
                            MPI_Ibcast(&a->err, (int)sizeof a->err, MPI_BYTE,
                                       root, ctx->comm, &g->req),
                            g->what);
    default:
        if (agree_failed(g, MPI_Test(&g->req, &flag, MPI_STATUS_IGNORE),
                         g->what))
            return true;
        return flag != 0;
    }
}

/* Sleep up to `us`, unless work came that this thread has not taken yet:
 * a post, or an agreement other than `current` (the one it runs). */
static void sleep_on(vf__mpi *ctx, unsigned us, const vf__mpi_agree *current)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += (long)us * 1000;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&ctx->qlock);
    bool untaken = ctx->agree != NULL && !ctx->agree->done &&
                   ctx->agree != current;
    if (ctx->posted == NULL && !untaken)
        pthread_cond_timedwait(&ctx->qcond, &ctx->qlock, &t);
    pthread_mutex_unlock(&ctx->qlock);
}

static void *comm_main(void *arg)
{
    vf__mpi *ctx = arg;
    /* The only thread that tests requests: an async op a completion here
     * makes ready starts on a worker, where its function may wait for a
     * value still to be received (it waited here, and the job hung: found
     * by a user tester). */
    vf_thread_set_service(true);
    inflight f = {0};
    finished_list done = {0};
    agreement g = {0};
    unsigned idle = 0;
    for (;;) {
        pthread_mutex_lock(&ctx->qlock);
        while (ctx->posted == NULL && f.live == 0 && g.a == NULL &&
               (ctx->agree == NULL || ctx->agree->done) && !ctx->stop)
            pthread_cond_wait(&ctx->qcond, &ctx->qlock);
        if (ctx->stop && ctx->posted == NULL && f.live == 0 && g.a == NULL) {
            pthread_mutex_unlock(&ctx->qlock);
            break;
        }
        vf__mpi_xfer *posted = NULL;
        while (ctx->posted != NULL) { /* newest first: reverse */
            vf__mpi_xfer *x = ctx->posted;
            ctx->posted = x->next;
            x->next = posted;
            posted = x;
        }
        if (g.a == NULL && ctx->agree != NULL && !ctx->agree->done) {
            g.a = ctx->agree;
            g.stage = 0;
        }
        pthread_mutex_unlock(&ctx->qlock);

        bool progress = posted != NULL;
        bool agreed = false;
        vf__mpi_lock_global();
        for (vf__mpi_xfer *x = posted, *next; x != NULL; x = next) {
            next = x->next;
            start(ctx, &f, x, &done);
        }
        progress |= poll_inflight(ctx, &f, &done);
        if (g.a != NULL) {
            int stage = g.stage;
            agreed = agree_step(ctx, &g);
            progress |= agreed || g.stage != stage;
        }
        vf__mpi_unlock_global();

        complete_all(&done);
        if (agreed) {
            pthread_mutex_lock(&ctx->qlock);
            g.a->done = true;
            ctx->agree = NULL;
            pthread_cond_broadcast(&ctx->agreed);
            pthread_mutex_unlock(&ctx->qlock);
            g.a = NULL;
        }
        if (progress) {
            idle = 0;
        } else if (++idle < POLL_SPINS) {
            sched_yield();
        } else {
            unsigned us = 1u
                          << ((idle - POLL_SPINS) < 8 ? idle - POLL_SPINS : 8);
            sleep_on(ctx, us < POLL_MAX_US ? us : POLL_MAX_US, g.a);
        }
    }
    free(f.reqs);
    free(f.xs);
    free(f.idx);
    free(f.st);
    free(f.fin);
    free(done.items);
    return NULL;
}

int vf__mpi_comm_start(vf__mpi *ctx)
{
    int rc = pthread_create(&ctx->thread, NULL, comm_main, ctx);
    if (rc != 0)
        return vf__mpi_error(VF_ESYSTEM,
                             "vf_mpi_create: cannot start the communication "
                             "thread: %s",
                             strerror(rc));
    return 0;
}

void vf__mpi_comm_stop(vf__mpi *ctx)
{
    pthread_mutex_lock(&ctx->qlock);
    ctx->stop = true;
    pthread_cond_signal(&ctx->qcond);
    pthread_mutex_unlock(&ctx->qlock);
    pthread_join(ctx->thread, NULL);
}
