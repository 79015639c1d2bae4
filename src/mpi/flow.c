/*
 * flow.c: where each op runs and which values must move for it.
 *
 * Every rank makes the same decisions from the same pushes: the op runs on
 * rank X (the owner of its first written variable, unless the push says);
 * for each variable it names, if X does not hold the current value, the
 * rank that does (the owner when it is current, else the rank that wrote
 * it last) sends it and X receives it. Only those two ranks push anything
 * for the transfer; every rank records that X now holds the value. After
 * the op, the variables it writes are current on X alone.
 *
 * Each transfer between a pair of ranks gets the next number of that pair
 * as its MPI tag, which both ends count alike, so a send matches its
 * receive whatever order the two ranks' ops start in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cancel.h"
#include "mpi/mpi_internal.h"

/* A variable an op names, once, as a write if any use writes. */
typedef struct vf__mpi_use {
    vf__mpi_var *mv;
    bool write;
} vf__mpi_use;

/* A transfer op's done. One that ran is freed by the communication
 * thread once vf_completion_finish returned (the engine reads the op's name,
 * which lives in it, after done). One that never ran (the shutdown notice skips
 * it) never reached that thread: it waits in `orphans` for finalize. */
static void xfer_done(void *arg, int status)
{
    (void)status;
    vf__mpi_xfer *x = arg;
    if (x->started)
        return;
    pthread_mutex_lock(&x->ctx->qlock);
    x->next = x->ctx->orphans;
    x->ctx->orphans = x;
    pthread_mutex_unlock(&x->ctx->qlock);
}

/* The async body of a send: note the failure the value carries, if any
 * (the op is no_skip, so it runs and sends even then), and hand the
 * transfer to the communication thread. */
static void send_fn(vf_run *run, void *arg, vf_completion done)
{
    vf__mpi_xfer *x = arg;
    vf_error cause;
    if (vf_run_input_failure(run, &cause) == 1) {
        x->hdr.code = cause.code;
        memcpy(x->text.op_name, cause.op_name, sizeof x->text.op_name);
        memcpy(x->text.message, cause.message, sizeof x->text.message);
    }
    x->done = done;
    x->started = true;
    vf__mpi_comm_post(x->ctx, x);
}

static void recv_fn(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    vf__mpi_xfer *x = arg;
    x->done = done;
    x->started = true;
    vf__mpi_comm_post(x->ctx, x);
}

/* Push this rank's half of a transfer of `mv` with `peer`. */
static int push_half(vf__mpi *ctx, vf__mpi_var *mv, vf__mpi_dir dir, int peer)
{
    vf__mpi_xfer *x = calloc(1, sizeof *x);
    if (x == NULL)
        return VF_ENOMEM;
    if (dir == VF__MPI_RECV) {
        int rc = vf__mpi_var_buffer(ctx, mv);
        if (rc != 0) {
            free(x);
            return rc;
        }
    }
    uint32_t *seq = dir == VF__MPI_SEND ? ctx->send_seq : ctx->recv_seq;
    x->ctx = ctx;
    x->dir = dir;
    x->peer = peer;
    x->tag = (int)(seq[peer] % (uint32_t)ctx->tag_ub);
    x->index = mv->index;
    x->buf = mv->buf;
    x->size = mv->size;
    x->type = MPI_DATATYPE_NULL;
    x->hdr.size = mv->size;
    snprintf(x->name, sizeof x->name, "mpi %s v%llu %s %d",
             dir == VF__MPI_SEND ? "send" : "recv",
             (unsigned long long)mv->index, dir == VF__MPI_SEND ? "to" : "from",
             peer);
    vf_op op = {.async_fn = dir == VF__MPI_SEND ? send_fn : recv_fn,
                .arg = x,
                .done = xfer_done,
                .no_skip = true,
                .name = x->name};
    if (dir == VF__MPI_SEND)
        op.reads = (vf_var_list){&mv->var, 1};
    else
        op.writes = (vf_var_list){&mv->var, 1};
    int rc = vf_engine_push(ctx->engine, &op);
    if (rc != 0) {
        free(x);
        return rc;
    }
    seq[peer]++;
    pthread_mutex_lock(&ctx->data_lock);
    if (dir == VF__MPI_SEND) {
        ctx->stats.sends++;
        ctx->stats.bytes_sent += mv->size;
    } else {
        ctx->stats.recvs++;
        ctx->stats.bytes_received += mv->size;
    }
    pthread_mutex_unlock(&ctx->data_lock);
    return 0;
}

/* Move the current value of `mv` to rank `to`, which lacks it (called
 * alike on every rank). A rank that cannot push its half has cut the
 * flow: its peer would wait forever, so every later call here fails. */
static int transfer(vf__mpi *ctx, vf__mpi_var *mv, int to, const char *caller)
{
    int from = vf__mpi_valid_at(mv, mv->owner) ? mv->owner : mv->holder;
    int rc = 0;
    if (ctx->rank == from)
        rc = push_half(ctx, mv, VF__MPI_SEND, to);
    else if (ctx->rank == to)
        rc = push_half(ctx, mv, VF__MPI_RECV, from);
    vf__mpi_valid_add(mv, to);
    if (rc != 0) {
        ctx->broken = rc;
        return vf__mpi_error(rc,
                             "%s: the transfer of variable %llu from rank %d "
                             "to rank %d could not be pushed here (%s); the "
                             "data flow is cut on rank %d",
                             caller, (unsigned long long)mv->index, from, to,
                             vf_error_string(rc), ctx->rank);
    }
    return 0;
}

static int check_broken(const vf__mpi *ctx, const char *caller)
{
    if (ctx->broken == 0)
        return 0;
    return vf__mpi_error(VF_ESYSTEM,
                         "%s: an earlier transfer could not be pushed on "
                         "rank %d (%s): its data flow is cut",
                         caller, ctx->rank, vf_error_string(ctx->broken));
}

static int check_list(vf_var_list l, const char *caller, const char *what)
{
    if (l.count < 0 || (l.count > 0 && l.vars == NULL))
        return vf__mpi_error(VF_EINVAL, "%s: op->%s: %s", caller, what,
                             l.count < 0 ? "negative count" : "vars is NULL");
    return 0;
}

/* The op's variables as records, each once (`*uses`: `buf` when they fit,
 * else malloc'd). Fails, alike on every rank, on a variable that is not
 * distributed. */
static int resolve(vf__mpi *ctx, const vf_op *op, const char *caller,
                   vf__mpi_use *buf, int cap, vf__mpi_use **uses, int *n,
                   int *first_owner)
{
    if (op == NULL)
        return vf__mpi_error(VF_EINVAL, "%s: op is NULL", caller);
    if ((op->fn == NULL) == (op->async_fn == NULL))
        return vf__mpi_error(VF_EINVAL,
                             "%s: exactly one of fn and "
                             "async_fn must be set",
                             caller);
    if (op->nonblocking)
        return vf__mpi_error(VF_EINVAL,
                             "%s: op->nonblocking: VF_EAGAIN would come on "
                             "the running rank alone, and the ranks must "
                             "push alike",
                             caller);
    /* What vf_engine_push() refuses on any engine, checked here so that
     * every rank refuses it alike (not the running rank alone). */
    if (op->arg_size > VF_MAX_OP_ARG_SIZE)
        return vf__mpi_error(VF_EINVAL,
                             "%s: arg_size %zu is over VF_MAX_OP_ARG_SIZE "
                             "(%d)",
                             caller, op->arg_size, VF_MAX_OP_ARG_SIZE);
    if (op->arg_size > 0 && op->arg == NULL)
        return vf__mpi_error(VF_EINVAL, "%s: arg is NULL with arg_size %zu",
                             caller, op->arg_size);
    int rc = check_list(op->reads, caller, "reads");
    if (rc == 0)
        rc = check_list(op->writes, caller, "writes");
    if (rc != 0)
        return rc;
    /* As vf_engine_push() refuses it, here on every rank alike (on the
     * running rank alone it cut that rank's data flow for good: found by a
     * user tester). */
    if (op->reads.count > VF_MAX_OP_VARS - op->writes.count)
        return vf__mpi_error(VF_EINVAL,
                             "%s: op->reads and op->writes hold %lld "
                             "handles, over VF_MAX_OP_VARS (%d)",
                             caller,
                             (long long)op->reads.count + op->writes.count,
                             VF_MAX_OP_VARS);
    int total = op->reads.count + op->writes.count;
    vf__mpi_use *u = buf;
    if (total > cap && (u = malloc(sizeof *u * (size_t)total)) == NULL)
        return vf__mpi_error(VF_ENOMEM, "%s: out of memory", caller);
    int count = 0;
    *first_owner = 0; /* an op with no variable runs on rank 0 */
    for (int w = 0; w < 2; w++) {
        vf_var_list l = w ? op->writes : op->reads;
        for (int i = 0; i < l.count; i++) {
            char what[32];
            snprintf(what, sizeof what, "%s[%d]", w ? "writes" : "reads", i);
            vf__mpi_var *mv = vf__mpi_var_live(ctx, l.vars[i], caller, what,
                                               &rc);
            if (mv == NULL) {
                if (u != buf)
                    free(u);
                return rc;
            }
            /* The default rank: the owner of the first written variable,
             * else of the first read one. */
            if (i == 0 && (w == 1 || op->writes.count == 0))
                *first_owner = mv->owner;
            int k = 0;
            while (k < count && u[k].mv != mv)
                k++;
            if (k == count)
                u[count++] = (vf__mpi_use){mv, false};
            u[k].write |= w;
        }
    }
    *uses = u;
    *n = count;
    return 0;
}

/* Where the op runs: `rank`, or with VF_MPI_OWNER the default rank that
 * resolve() found. */
static int runs_on(const vf__mpi *ctx, int rank, int first_owner,
                   const char *caller)
{
    if (rank == VF_MPI_OWNER)
        return first_owner;
    if (rank < 0 || rank >= ctx->size)
        return vf__mpi_error(VF_EINVAL,
                             "%s: rank %d (0 to %d, or "
                             "VF_MPI_OWNER)",
                             caller, rank, ctx->size - 1);
    return rank;
}

VF_API int vf_mpi_runs_on(vf_engine *e, const vf_op *op, int rank)
{
    vf__mpi *ctx = vf__mpi_of(e, "vf_mpi_runs_on");
    if (ctx == NULL)
        return VF_EINVAL;
    vf__mpi_use local[16], *uses;
    int n;
    /* A query, not a call in sequence: owners never change, and the
     * records are read under data_lock (resolve). */
    int first_owner;
    int rc = resolve(ctx, op, "vf_mpi_runs_on", local, 16, &uses, &n,
                     &first_owner);
    if (rc == 0) {
        rc = runs_on(ctx, rank, first_owner, "vf_mpi_runs_on");
        if (uses != local)
            free(uses);
    }
    return rc;
}

/* What a stand-in op fails with. */
typedef struct stand_in {
    int code;
    char message[256];
    char name[]; /* the op's, whole (the caller may free its own once the
                    push returned an error): cut at 63 bytes, a name could
                    end in half a UTF-8 character (found by an auditor) */
} stand_in;

static int stand_in_fn(vf_run *run, void *arg)
{
    const stand_in *s = arg;
    vf_run_set_error(run, "%s", s->message);
    return s->code;
}

static void stand_in_done(void *arg, int status)
{
    (void)status;
    free(arg);
}

/*
 * The running rank could not push the op (an error only it met: no memory,
 * its device, the engine shutting down, a property its vf_engine_push refused),
 * while every other rank counts on the op's writes. Push in its place an
 * op on the same variables that fails with that error, so the failure
 * travels with the data and the waits report it on every rank. When even
 * that cannot be pushed, the flow is cut here.
 */
static void push_stand_in(vf__mpi *ctx, const vf_op *op, int code)
{
    char detail[256]; /* the push's: returned to the caller as it was */
    snprintf(detail, sizeof detail, "%s", vf_error_detail());
    const char *name = op->name ? op->name : "";
    size_t name_size = strlen(name) + 1;
    stand_in *s = malloc(sizeof *s + name_size);
    int rc = VF_ENOMEM;
    if (s != NULL) {
        s->code = code;
        memcpy(s->name, name, name_size);
        snprintf(s->message, sizeof s->message,
                 "vf_mpi_push could not push it on rank %d: %.200s", ctx->rank,
                 detail);
        vf_op in = {.fn = stand_in_fn,
                    .arg = s,
                    .done = stand_in_done,
                    .reads = op->reads,
                    .writes = op->writes,
                    /* Skipped where the op would be (an input failed
                     * before it), carrying that failure instead (found
                     * trying MPI as a user: a second stand-in ran and
                     * its failure overtook the first's). */
                    .no_skip = op->no_skip,
                    .name = s->name};
        rc = vf_engine_push(ctx->engine, &in);
        if (rc != 0)
            free(s);
    }
    if (rc != 0)
        ctx->broken = rc;
    vf_error_set_detail(code, "%s", detail);
}

VF_API int vf_mpi_push(vf_engine *e, const vf_op *op, int rank)
{
    vf__mpi *ctx = vf__mpi_of(e, "vf_mpi_push");
    if (ctx == NULL)
        return VF_EINVAL;
    vf__mpi_use local[16], *uses = NULL;
    int n = 0, first_owner = 0;
    int rc = vf__mpi_enter(ctx, "vf_mpi_push");
    if (rc != 0)
        return rc;
    rc = check_broken(ctx, "vf_mpi_push");
    if (rc == 0)
        rc = resolve(ctx, op, "vf_mpi_push", local, 16, &uses, &n,
                     &first_owner);
    int x = rc == 0 ? runs_on(ctx, rank, first_owner, "vf_mpi_push") : rc;
    if (x < 0) {
        rc = x;
        goto out;
    }
    int reused = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (!vf__mpi_valid_at(uses[i].mv, x))
            rc = transfer(ctx, uses[i].mv, x, "vf_mpi_push");
        else if (x == ctx->rank)
            reused++;
    }
    if (rc != 0)
        goto out;
    for (int i = 0; i < n; i++) {
        vf__mpi_var *mv = uses[i].mv;
        if (!uses[i].write)
            continue;
        vf__mpi_valid_only(ctx, mv, x);
        if (x != mv->owner && !mv->away) {
            if (ctx->naway == ctx->away_cap) {
                size_t cap = ctx->away_cap ? ctx->away_cap * 2 : 64;
                vf__mpi_var **a = realloc(ctx->away, cap * sizeof *a);
                if (a == NULL) {
                    ctx->broken = VF_ENOMEM;
                    rc = vf__mpi_error(VF_ENOMEM, "vf_mpi_push: out of "
                                                  "memory");
                    goto out;
                }
                ctx->away = a;
                ctx->away_cap = cap;
            }
            ctx->away[ctx->naway++] = mv;
            mv->away = true;
        }
    }
    bool elsewhere = x != ctx->rank;
    if (!elsewhere && (rc = vf_engine_push(e, op)) != 0)
        push_stand_in(ctx, op, rc);
    pthread_mutex_lock(&ctx->data_lock);
    if (x == ctx->rank) {
        ctx->stats.ops_here += rc == 0;
        ctx->stats.reuses += (uint64_t)reused;
    } else {
        ctx->stats.ops_elsewhere++;
    }
    pthread_mutex_unlock(&ctx->data_lock);
    vf__mpi_leave(ctx);
    if (uses != local)
        free(uses);
    /* Unlocked: done may push (with vf_engine_push) or free what it likes. */
    if (elsewhere && op->done != NULL)
        vf__mpi_done_elsewhere(e, op);
    return rc;
out:
    vf__mpi_leave(ctx);
    if (uses != NULL && uses != local)
        free(uses);
    return rc;
}

/* Whether the value of `mv`, written away, must go back to its owner: not
 * when the owner has it, nor when the core's vf_var_destroy deleted the
 * variable (against the rules; alike on every rank), where the transfer
 * could not be pushed and would cut the flow (found by a reviewer). */
static bool goes_home(const vf__mpi *ctx, const vf__mpi_var *mv)
{
    return !vf__mpi_valid_at(mv, mv->owner) &&
           !vf__mpi_core_deleted(ctx, mv->var);
}

int vf__mpi_bring_home(vf__mpi *ctx, vf__mpi_var *mv, const char *caller)
{
    if (!mv->away)
        return 0;
    bool home = goes_home(ctx, mv);
    int rc = home ? check_broken(ctx, caller) : 0;
    if (rc != 0)
        return rc;
    size_t at = 0;
    while (ctx->away[at] != mv)
        at++;
    memmove(&ctx->away[at], &ctx->away[at + 1],
            (ctx->naway - at - 1) * sizeof *ctx->away);
    ctx->naway--;
    mv->away = false;
    return home ? transfer(ctx, mv, mv->owner, caller) : 0;
}

int vf__mpi_write_back(vf__mpi *ctx)
{
    int rc = 0;
    for (size_t i = 0; i < ctx->naway && rc == 0; i++) {
        vf__mpi_var *mv = ctx->away[i];
        mv->away = false;
        if (goes_home(ctx, mv))
            rc = transfer(ctx, mv, mv->owner, "vf_mpi_wait_all");
    }
    ctx->naway = 0;
    return rc;
}

static int mpi_get(vf_engine *e, vf_var v, int rank, vf_error *err);

VF_API int vf_mpi_get(vf_engine *e, vf_var v, int rank, vf_error *err)
{
    return VF__UNCANCELLED(mpi_get(e, v, rank, err)); /* base/cancel.h */
}

static int mpi_get(vf_engine *e, vf_var v, int rank, vf_error *err)
{
    vf__mpi *ctx = vf__mpi_of(e, "vf_mpi_get");
    if (ctx == NULL)
        return VF_EINVAL;
    int rc = vf__mpi_enter(ctx, "vf_mpi_get");
    if (rc != 0)
        return rc;
    rc = check_broken(ctx, "vf_mpi_get");
    vf__mpi_var *mv = NULL;
    if (rc == 0)
        mv = vf__mpi_var_live(ctx, v, "vf_mpi_get", "v", &rc);
    if (rc == 0 && rank != VF_MPI_ALL && (rank < 0 || rank >= ctx->size))
        rc = vf__mpi_error(VF_EINVAL,
                           "vf_mpi_get: rank %d (0 to %d, or "
                           "VF_MPI_ALL)",
                           rank, ctx->size - 1);
    int first = rank == VF_MPI_ALL ? 0 : rank;
    int last = rank == VF_MPI_ALL ? ctx->size - 1 : rank;
    for (int to = first; rc == 0 && to <= last; to++)
        if (!vf__mpi_valid_at(mv, to))
            rc = transfer(ctx, mv, to, "vf_mpi_get");
    vf_var local = mv ? mv->var : v;
    vf__mpi_leave(ctx);
    if (rc == 0 && ctx->rank >= first && ctx->rank <= last)
        rc = vf_var_wait(e, local, err);
    return rc;
}

int vf__mpi_wait(vf__mpi *ctx, vf_error *err, bool *refused)
{
    *refused = false;
    /* From inside an op (on a worker, on the communication thread, or
     * inside another call of ours on this thread): no other rank makes
     * this call, so this rank joins no agreement; it says so at once and
     * the other ranks are not disturbed (varflow_mpi.h). */
    int rc = vf__mpi_enter(ctx, "vf_mpi_wait_all");
    if (rc != 0)
        return rc;
    rc = check_broken(ctx, "vf_mpi_wait_all");
    if (rc == 0)
        rc = vf__mpi_write_back(ctx);
    vf__mpi_leave(ctx);
    vf_error mine;
    memset(&mine, 0, sizeof mine);
    if (rc == 0)
        rc = vf_engine_wait_all(ctx->engine, &mine);
    /* A rank that could not wait (a cut data flow, a stopped engine)
     * still joins the agreement, or the others would wait for it forever;
     * every rank then returns its code. */
    vf__mpi_agree a;
    memset(&a, 0, sizeof a);
    a.kind = VF__MPI_AGREE_FAILURE;
    a.refused_rank = ctx->size;
    a.failed_rank = ctx->size;
    if (rc == VF_EOPFAILED) {
        a.failed_rank = ctx->rank;
        a.err = mine;
    } else if (rc != 0) {
        a.refused_rank = ctx->rank;
        a.err.code = rc;
        snprintf(a.err.op_name, sizeof a.err.op_name, "vf_mpi_wait_all");
        snprintf(a.err.message, sizeof a.err.message, "%s", vf_error_detail());
    }
    vf__mpi_comm_agree(ctx, &a);
    if (a.rc != 0)
        return vf__mpi_error(a.rc, "vf_mpi_wait_all: %s", a.detail);
    if (a.refused_rank < ctx->size) {
        *refused = true;
        return vf__mpi_error(a.err.code,
                             "vf_mpi_wait_all: rank %d could not wait (%s)%s%s",
                             a.refused_rank, vf_error_string(a.err.code),
                             a.err.message[0] ? ": " : "", a.err.message);
    }
    if (a.failed_rank >= ctx->size)
        return 0;
    if (err != NULL)
        *err = a.err;
    return vf__mpi_error(VF_EOPFAILED,
                         "vf_mpi_wait_all: op '%s' failed (reported on "
                         "rank %d)%s%s",
                         a.err.op_name, a.failed_rank,
                         a.err.message[0] ? ": " : "", a.err.message);
}

static int mpi_wait_all(vf_engine *e, vf_error *err)
{
    vf__mpi *ctx = vf__mpi_of(e, "vf_mpi_wait_all");
    if (ctx == NULL)
        return VF_EINVAL;
    bool refused;
    return vf__mpi_wait(ctx, err, &refused);
}

VF_API int vf_mpi_wait_all(vf_engine *e, vf_error *err)
{
    return VF__UNCANCELLED(mpi_wait_all(e, err)); /* base/cancel.h */
}
