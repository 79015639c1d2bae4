/*
 * mpi_internal.h: the insides of libvarflow-mpi (include/varflow_mpi.h).
 *
 * The library stands on varflow's public API only, so the core knows
 * nothing of MPI: each transfer is an ordinary async op, a send that reads
 * the variable on the rank that has its value, a receive that writes it on
 * the rank that needs it, and the variables' queues order them with the
 * user's ops. What the library adds is bookkeeping that every rank keeps
 * identically, because every rank sees the same pushes in the same order:
 * for each distributed variable, the ranks that hold its current value.
 *
 * The rooms:
 *   context.c  the engine -> context registry; init, finalize, rank, size,
 *              stats; the process-wide MPI lock
 *   vars.c     the variable records (a hash map on the handle), creation,
 *              deletion, buffers, the 2D block-cyclic mapping
 *   flow.c     where an op runs and which transfers it needs; push, get and
 *              the collective wait
 *   comm.c     the communication thread: the only thread that calls MPI
 *              while the engine is attached
 */
#ifndef VF_MPI_INTERNAL_H
#define VF_MPI_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/hashmap.h"
#include "varflow_mpi.h"

/* What travels in front of every value, in the same message (a derived
 * datatype joins the two buffers, so nothing is copied): the sender's
 * size, to catch ranks that disagree on it, and the code of the failure
 * the value carries (0: none). A failed value is followed by a second
 * message on the same tag, the failure's op name and message (MPI keeps
 * the order of two messages of one sender with one tag), so a good value
 * costs 16 bytes of header, not the 320 of the text. */
typedef struct vf__mpi_header {
    int32_t code;
    uint64_t size;
} vf__mpi_header;

typedef struct vf__mpi_failure_text {
    char op_name[64];
    char message[256];
} vf__mpi_failure_text;

/* One distributed variable, as this rank knows it. Every field but `cache`
 * is the same on every rank after the same pushes (cache is this rank's). */
typedef struct vf__mpi_var {
    vf_var var;     /* the engine's handle (this rank's own) */
    uint64_t index; /* creation order: the same on every rank */
    size_t size;
    int owner;
    int holder;   /* the rank whose op wrote the current value */
    void *buf;    /* this rank's buffer: the caller's, or `cache` */
    void *cache;  /* allocated here when the value first came */
    bool away;    /* written away from its owner, owner not current */
    bool deleted; /* vf_mpi_var_destroy was called: refused by the calls
                     in sequence; the record stays, for the ops pushed
                     before, until the engine's delete op frees it */
    struct vf__mpi *ctx;
    uint64_t *valid; /* bitset of the ranks holding the current value */
    uint64_t valid_inline;
} vf__mpi_var;

typedef enum vf__mpi_dir { VF__MPI_SEND, VF__MPI_RECV } vf__mpi_dir;

/* A transfer's half on this rank: the arg of its async op, then a request
 * of the communication thread, which frees it once its op finished. */
typedef struct vf__mpi_xfer {
    struct vf__mpi_xfer *next; /* the communication thread's queue */
    struct vf__mpi *ctx;
    vf__mpi_dir dir;
    int peer;
    int tag;
    uint64_t index; /* the variable's creation index */
    void *buf;
    size_t size;
    vf_completion done;
    MPI_Datatype type;
    int parts;        /* MPI requests of it in flight (a failed send: two) */
    int mpi_error;    /* the first MPI error of its requests */
    bool text_posted; /* a receive: the failure text's receive is posted */
    bool started;     /* its async body ran: the communication thread has it */
    vf__mpi_header hdr;
    vf__mpi_failure_text text;
    char name[48]; /* the op's name, e.g. "mpi send v12 to 1" */
} vf__mpi_xfer;

/* A collective for the communication thread to run: the failure agreement
 * of vf_mpi_wait_all, or the sum of vf_mpi_stats_total. */
typedef enum vf__mpi_agree_kind {
    VF__MPI_AGREE_FAILURE,
    VF__MPI_AGREE_SUM
} vf__mpi_agree_kind;

typedef struct vf__mpi_agree {
    vf__mpi_agree_kind kind;
    /* VF__MPI_AGREE_FAILURE: in, this rank if it could not wait (refused)
     * or had a failure, else size; out, the lowest such rank over all */
    int refused_rank;
    int failed_rank;
    vf_error err; /* in: this rank's refusal or failure; out: the lowest
                     refusing rank's, else the lowest failing rank's */
    const uint64_t *sum_in; /* VF__MPI_AGREE_SUM: `count` numbers */
    uint64_t *sum_out;
    int count;
    int rc; /* out: 0 or VF_ESYSTEM */
    bool done;
    char detail[200];
} vf__mpi_agree;

typedef struct vf__mpi {
    vf_engine *engine;
    MPI_Comm comm; /* our duplicate of the user's */
    int rank;
    int size;
    int words; /* uint64 words of a rank bitset */
    int tag_ub;

    /* The calls made in sequence on every rank (vf_mpi_push, get, wait,
     * var new and delete) one at a time: the flow state of the records
     * (holder, valid, away), the sequence numbers (lock). It is held
     * across vf_engine_push, which may block at the in-flight limit, so nothing
     * an op calls may take it. */
    pthread_mutex_t lock;
    uint64_t next_index;
    vf__mpi_var **away; /* vars written away from their owner, in order */
    size_t naway, away_cap;
    uint32_t *send_seq; /* per peer: transfers to it, so far (tags) */
    uint32_t *recv_seq; /* per peer: transfers from it */
    int broken; /* a transfer could not be pushed here: the flow is cut */

    /* The record table, the buffers and the stats, which ops read while
     * the pushing thread changes them (data_lock; changes hold both). */
    pthread_mutex_t data_lock;
    vf__hashmap records; /* the handle's id -> its vf__mpi_var * */
    vf_mpi_stats stats;

    /* The communication thread (qlock). */
    pthread_t thread;
    pthread_mutex_t qlock;
    pthread_cond_t qcond;  /* the thread sleeps here when idle */
    pthread_cond_t agreed; /* an agreement finished */
    vf__mpi_xfer *posted;  /* new transfers, newest first */
    vf__mpi_agree *agree;  /* a collective to run, or NULL */
    vf__mpi_xfer *orphans; /* transfers whose op never ran (freed at
                              finalize) */
    bool stop;
} vf__mpi;

/* context.c */
vf__mpi *vf__mpi_of(vf_engine *e, const char *caller);
/* A call in sequence made where it cannot work (from an op the
 * communication thread runs, or inside another call of ours on this
 * thread): VF_EDEADLK, else 0. */
int vf__mpi_check_thread(const vf__mpi *ctx, const char *caller);
/* Call op->done(op->arg, VF_MPI_ELSEWHERE), the thread marked as inside
 * an op of `e` meanwhile (vf__mpi_check_thread refuses a call in sequence
 * there, as the rank that runs the op refuses it in the op's done). */
void vf__mpi_done_elsewhere(vf_engine *e, const vf_op *op);
/* Take ctx->lock for a call in sequence (after that check). */
int vf__mpi_enter(vf__mpi *ctx, const char *caller);
void vf__mpi_leave(vf__mpi *ctx);
void vf__mpi_lock_global(void);
void vf__mpi_unlock_global(void);
int vf__mpi_error(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The text of an MPI error code. */
void vf__mpi_error_text(int mpi_rc, char *out, size_t size);

/* vars.c (ctx->lock held; the table's find: data_lock held, as the
 * engine's delete ops remove records on the workers) */
/* An empty record map, before anything can fail (vf__mpi_vars_free frees
 * it). */
void vf__mpi_vars_init(vf__mpi *ctx);
vf__mpi_var *vf__mpi_var_find(vf__mpi *ctx, vf_var v);
/* The record for a call in sequence, or NULL with `*rc` and the detail
 * set: VF_ESTALE for a deleted variable, VF_EINVAL for one that is not
 * distributed (`what` names the argument). */
vf__mpi_var *vf__mpi_var_live(vf__mpi *ctx, vf_var v, const char *caller,
                              const char *what, int *rc);
bool vf__mpi_valid_at(const vf__mpi_var *mv, int rank);
void vf__mpi_valid_add(vf__mpi_var *mv, int rank);
/* Only `rank` holds the current value now: it wrote it. */
void vf__mpi_valid_only(const vf__mpi *ctx, vf__mpi_var *mv, int rank);
/* Whether the engine says `v` was deleted (its delete pushed: the core's
 * vf_var_destroy, or ours). */
bool vf__mpi_core_deleted(const vf__mpi *ctx, vf_var v);
/* The buffer the value lands in here, allocated when needed. */
int vf__mpi_var_buffer(vf__mpi *ctx, vf__mpi_var *mv);
void vf__mpi_vars_free(vf__mpi *ctx);

/* flow.c */
/* The value of `mv`, when written away from its owner, sent back to it
 * (called alike on every rank, as vf__mpi_write_back does for them all):
 * 0, or the code of a transfer that cut the flow. */
int vf__mpi_bring_home(vf__mpi *ctx, vf__mpi_var *mv, const char *caller);
int vf__mpi_write_back(vf__mpi *ctx);
/* The collective wait; `*refused` when some rank could not wait (its ops
 * may still be pending: no rank may detach then). */
int vf__mpi_wait(vf__mpi *ctx, vf_error *err, bool *refused);

/* comm.c */
int vf__mpi_comm_start(vf__mpi *ctx);
void vf__mpi_comm_stop(vf__mpi *ctx);
void vf__mpi_comm_post(vf__mpi *ctx, vf__mpi_xfer *x);
/* Run a collective on the thread; blocks until it ended on this rank. */
void vf__mpi_comm_agree(vf__mpi *ctx, vf__mpi_agree *a);

#endif /* VF_MPI_INTERNAL_H */
