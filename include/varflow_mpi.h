/**
 * @file varflow_mpi.h
 * @brief libvarflow-mpi: one varflow program on many MPI processes.
 *
 * The calls are in the @ref mpi "MPI" module.
 */

/**
 * @defgroup mpi MPI
 * @brief One varflow program on many MPI processes (libvarflow-mpi,
 * varflow_mpi.h).
 *
 *
 * The model is StarPU-MPI's. Every rank runs the same program: it creates
 * the same distributed variables in the same order and pushes the same ops
 * in the same order. Each distributed variable has an owner rank, which
 * holds its buffer. An op runs on one rank only: the owner of the first
 * variable it writes, unless the push names another. Because every rank
 * sees every push, every rank knows where each op runs and which rank holds
 * the current value of each variable, so the data flow is agreed without a
 * message about it: when the rank that runs an op lacks the current value
 * of a variable the op reads or writes, the rank that has it sends it
 * (an async op that reads the variable there) and the running rank receives
 * it into a cached copy (an async op that writes the variable here). Both
 * are ordered by the variables' queues like any other op, so the user
 * writes no send, no receive and no synchronisation. A cached copy is used
 * until some rank writes the variable again; a value written away from its
 * owner goes back to the owner when the owner next needs it (an op there,
 * vf_mpi_get(), or vf_mpi_wait_all(), after which every owner's buffer holds
 * the current value of what it owns). Exactly one message moves a value to
 * a rank that lacks it, and none moves otherwise (vf_mpi_stats counts them).
 *
 * An op that writes a variable may read it too (varflow's writes are
 * read-modify-write), so the running rank needs the current value of every
 * variable the op names.
 *
 * MPI calls are made by one communication thread per engine (so MPI need
 * only provide MPI_THREAD_SERIALIZED), with nonblocking sends and receives
 * that complete their async ops when MPI reports them done. It is a service
 * thread (vf_thread_set_service()): an async op that such a completion
 * makes ready starts on a worker, never on it, and may wait there. A failure
 * travels with the data: a value whose producing op failed is sent with
 * that failure instead, the receiving op completes as failed (see
 * vf_completion_fail()), the ops that need it are skipped there too, and the
 * failure reaches vf_mpi_wait_all() on every rank.
 *
 * Rules of use:
 * - vf_mpi_create(), vf_mpi_var_create(s), vf_mpi_var_destroy(), vf_mpi_push(),
 *   vf_mpi_get(), vf_mpi_wait_all(), vf_mpi_stats_total() and vf_mpi_destroy()
 *   (the calls in sequence) are called by every rank of the communicator,
 *   in the same order, with the same arguments (the buffers excepted),
 *   from one thread at a time, and never from inside an op: an op runs on
 *   one rank, so what it calls is seen by that rank alone. Made from
 *   inside an op of the engine anyway (vf_engine_in_op(): its function, an
 *   async op's start, a done callback, an op the communication thread
 *   runs; vf_mpi_create() included), each of them returns VF_EDEADLK at
 *   once on the calling rank, having sent nothing and entered no
 *   collective: the other ranks are not disturbed and never learn of it.
 *   So does one made from a `done` that vf_mpi_push() calls with
 *   VF_MPI_ELSEWHERE: the op's `done` refuses it alike on every rank.
 *   Made while the thread captures a graph on the engine (vf_graph_begin()),
 *   vf_mpi_var_create(s), vf_mpi_var_destroy(), vf_mpi_push(), vf_mpi_get()
 *   and vf_mpi_wait_all() return VF_EINVAL, the detail naming the capture,
 *   and the capture goes on: their transfers are made once, for the values
 *   of the moment, and cannot be replayed.
 * - A call in sequence that one rank refuses for what only that rank can
 *   see (a NULL `ptr` on the owner, an error only the running rank meets:
 *   see each call) is refused on that rank alone: its program then differs
 *   from the others', which may wait for it for ever. Treat such an error
 *   as fatal for the whole job (MPI_Abort()), as a failed collective is.
 * - Ops pushed with vf_mpi_push() name distributed variables only (made by
 *   vf_mpi_var_create()); plain vf_engine_push() stays available for ops on
 *   rank-local variables, which never cross ranks, and must not name a
 *   distributed one: the core cannot tell them apart, and such an op's
 *   write is lost when the value comes back from another rank. Likewise a
 *   distributed variable is deleted with vf_mpi_var_destroy(), never
 *   vf_var_destroy(): deleted so, every later call in sequence naming it
 *   refuses it (VF_ESTALE, the detail saying so).
 * - While an engine is attached, its communication thread makes MPI calls:
 *   the program's own MPI calls then need MPI_THREAD_MULTIPLE (or wait
 *   until vf_mpi_destroy()).
 * - An op finds its data with vf_mpi_data() (the owner's buffer on the owner,
 *   the cached copy elsewhere), not through pointers of its own.
 * - No fork() while attached (MPI does not support it).
 * - pthread_cancel() of a thread inside vf_mpi_wait_all(), vf_mpi_get(),
 *   vf_mpi_stats_total() or vf_mpi_destroy() acts once the call has
 *   returned, as in the core's blocking calls (varflow.h): the call, and
 *   the other ranks', end as they would have, and the engine goes on.
 *
 * Every call returns 0 (or a count) or a negative `VF_E*` code, and sets
 * vf_error_detail() as the core does.
 * @{
 */
#ifndef VARFLOW_MPI_H
#define VARFLOW_MPI_H

/* MPI's C API only: a C++ program would otherwise get the deprecated MPI
 * C++ bindings of Open MPI and MPICH from <mpi.h>, whose library neither
 * varflow::mpi nor varflow-mpi.pc links (undefined MPI::Comm::Comm()).
 * A program that wants them includes <mpi.h> first and links them. */
/** @cond */
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
/** @endcond */
#include <mpi.h>

#include <varflow.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The major version of libvarflow-mpi's header: varflow's own. */
#define VF_MPI_VERSION_MAJOR VF_VERSION_MAJOR
/** The minor version of libvarflow-mpi's header: varflow's own. */
#define VF_MPI_VERSION_MINOR VF_VERSION_MINOR

/** vf_mpi_push(): run the op where the default rule puts it (the owner of its
 * first written variable; with no written variable, of its first read one;
 * with no variable at all, rank 0). */
#define VF_MPI_OWNER (-1)

/** vf_mpi_get(): bring the value to every rank. */
#define VF_MPI_ALL (-2)

/** The status `done` gets on the ranks that do not run the op (there it is
 * called inside vf_mpi_push(), so `arg` can be freed on every rank alike). */
#define VF_MPI_ELSEWHERE (-2147483647 - 1)

/**
 * Attach engine `e` to the communicator `comm` (collective over it). The
 * engine's transfers use a duplicate of `comm`, so they never mix with the
 * program's messages. When MPI is not initialized yet, this initializes it
 * (MPI_THREAD_SERIALIZED) and vf_mpi_destroy() finalizes it. VF_ENOTSUP
 * when MPI provides less than MPI_THREAD_SERIALIZED or was finalized, or
 * for the naive engine (it runs each op inside its push, so an op could
 * not wait there for another rank's value), VF_EINVAL
 * when `e` is attached already or `comm` is MPI_COMM_NULL, VF_ESYSTEM when an
 * MPI call or the thread start fails, VF_ENOMEM. MPI initialized by a call that
 * then failed stays initialized (a later vf_mpi_create() may succeed, and its
 * vf_mpi_destroy() finalizes it).
 */
VF_API int vf_mpi_create(vf_engine *e, MPI_Comm comm);

/**
 * Detach (collective): vf_mpi_wait_all(), then stop the communication thread
 * and free the cached copies; returns what that wait returned (`err` as
 * there). The distributed variables stay plain variables of the engine
 * (delete them with vf_var_destroy()), and each owner's buffer holds the
 * current value of what it owns. Finalizes MPI when vf_mpi_create()
 * initialized it (the last engine attached to go). When a rank could not
 * wait (see vf_mpi_wait_all()), every rank stays attached and returns that
 * code.
 */
VF_API int vf_mpi_destroy(vf_engine *e, vf_error *err);

/** @name Rank and size
 * @{ */
/** This rank and the number of ranks of the engine's communicator. */
VF_API int vf_mpi_rank(vf_engine *e);
VF_API int vf_mpi_size(vf_engine *e);
/** @} */

/**
 * Create a distributed variable of `size` bytes owned by rank `owner`.
 * On the owner, `ptr` is its buffer (the caller's, never freed by varflow);
 * on the other ranks `ptr` may be NULL, and a cached copy is allocated when
 * the value first comes here (a non-NULL `ptr` is used as that copy).
 * VF_EINVAL for a bad owner, a zero size or one above INT_MAX - 16 (one
 * MPI message with its header), or a NULL `ptr` on the owner (on the owner
 * alone, which the others cannot see: see "Rules of use").
 */
VF_API int vf_mpi_var_create(vf_engine *e, vf_var *out, void *ptr, size_t size,
                             int owner);

/** Who owns item `index` (0..count-1) of a set of variables. */
typedef int (*vf_mpi_map_fn)(int index, void *map_arg);

/**
 * Create `count` distributed variables of `size` bytes each, variable i
 * owned by map(i, map_arg), with buffer ptrs[i] (`ptrs` may be NULL, or
 * its entries, on ranks that do not own them). All or nothing: on error no
 * variable was created.
 */
VF_API int vf_mpi_vars_create(vf_engine *e, vf_var *out, int count,
                              void *const *ptrs, size_t size, vf_mpi_map_fn map,
                              void *map_arg);

/** @name The 2D block-cyclic mapping
 * @{ */
/**
 * The 2D block-cyclic mapping of tile (i, j) onto a grid of p x q ranks,
 * p * q = size, p <= q and as square as `size` allows (ScaLAPACK's
 * distribution): rank (i % p) * q + (j % q). `vf_mpi_grid` says p and q
 * (1 x 1 for a `size` below 1).
 */
VF_API int vf_mpi_owner_2d(int size, int i, int j);
VF_API void vf_mpi_grid(int size, int *p, int *q);
/** @} */

/** The variable's owner rank (>= 0), or a negative code. */
VF_API int vf_mpi_var_owner(vf_engine *e, vf_var v);

/**
 * This rank's buffer of `v`: the owner's `ptr` on the owner, the cached
 * copy elsewhere (the `ptr` this rank gave, if any, before the value
 * came). NULL when the value never came to this rank and it gave no `ptr`,
 * or `v` is not a distributed variable (the detail says which). Meant for ops:
 * when an op runs, the buffers of its variables hold the values it needs.
 */
VF_API void *vf_mpi_data(vf_engine *e, vf_var v);

/**
 * Delete a distributed variable on every rank (in sequence): its value,
 * when written away from its owner, goes back to the owner first (as
 * vf_mpi_wait_all() brings it), then a delete op is pushed after
 * everything pushed on it; the cached copy varflow allocated is freed
 * then. The owner's buffer is the caller's, and holds the last value. Ops
 * pushed before still find their buffers (vf_mpi_data()); later calls in
 * sequence refuse the variable with VF_ESTALE, a second delete too.
 */
VF_API int vf_mpi_var_destroy(vf_engine *e, vf_var v);

/**
 * Push `op` (in sequence on every rank) to run on rank `rank`, or on the
 * default rank with VF_MPI_OWNER. The ranks that must move a value for it
 * push the transfers first. On the running rank the op is pushed as with
 * vf_engine_push(); on the others it is not run, and its `done` is called
 * before this returns, with status VF_MPI_ELSEWHERE (and, with `arg_size`,
 * a copy of `arg`, as on the running rank; out of memory for a copy of
 * more than 256 bytes, `arg` itself). Refused alike on every
 * rank, before anything is pushed: VF_EINVAL for no or two functions, a bad
 * list (more than VF_MAX_OP_VARS handles in the two), a variable that is not
 * distributed, a bad rank, a nonblocking op (VF_EAGAIN would come on one rank
 * only); VF_ESTALE for a deleted variable. An error only the running rank meets
 * in vf_engine_push() (no memory, its device, a property it refuses, the
 * shutdown notice) is returned there, with `done` not called there (as for any
 * refused push: what `done` would free, the caller frees), and the op is
 * replaced there by one that fails with that error on the same variables
 * (skipped, as the op would be, when an input failed before it: that failure
 * travels on), so the failure travels with the data and the waits report it on
 * every rank.
 */
VF_API int vf_mpi_push(vf_engine *e, const vf_op *op, int rank);

/** The rank vf_mpi_push(e, op, rank) would run `op` on (>= 0). */
VF_API int vf_mpi_runs_on(vf_engine *e, const vf_op *op, int rank);

/**
 * Bring the current value of `v` to rank `rank`, or to every rank with
 * VF_MPI_ALL (in sequence on every rank). A receiving rank returns once
 * the value is in its buffer (vf_mpi_data()), with VF_EOPFAILED and `err`
 * as vf_var_wait() when the value's op failed; the others return once their
 * part is pushed. Each rank reports its own copy of a failure: the rank
 * where the op failed reports it too, here when it is among the receivers
 * (VF_MPI_ALL), else at its next wait.
 */
VF_API int vf_mpi_get(vf_engine *e, vf_var v, int rank, vf_error *err);

/**
 * Collective wait: every value written away from its owner goes back to it,
 * then every rank waits for all its ops, then the ranks agree on the
 * outcome. Returns 0 on every rank, or VF_EOPFAILED on every rank when an
 * op failed on any of them; `err` is then the failure of the lowest rank
 * that had one, the same on every rank. Called from inside an op:
 * VF_EDEADLK at once on the calling rank, which joins no agreement (see
 * "Rules of use"). When a rank could not wait (its engine is stopped with
 * ops held: VF_ESTOPPED; its data flow was cut by an earlier error:
 * VF_ESYSTEM), it still joins the agreement, and every rank returns that rank's
 * code (the detail names it), provided no other rank waits for a transfer
 * with it: a rank that waits for a value the refusing rank was to send
 * waits until it is sent, and that rank waits in the agreement for it (a
 * stopped engine must then be started by another thread of that rank); a
 * rank whose send the cut rank never received (a transfer its push could
 * not make, out of memory say) waits for ever, and so does the cut rank,
 * in the agreement: treat a cut data flow as fatal (MPI_Abort()). The
 * failures the other ranks' local waits cleared meanwhile are not
 * reported again. VF_ESYSTEM when an MPI call fails.
 */
VF_API int vf_mpi_wait_all(vf_engine *e, vf_error *err);

/** What this rank's side of the data flow did. */
typedef struct vf_mpi_stats {
    uint64_t ops_here;       /**< ops pushed that run on this rank */
    uint64_t ops_elsewhere;  /**< ops pushed that run on another rank */
    uint64_t sends;          /**< messages this rank sent (values) */
    uint64_t recvs;          /**< messages this rank received */
    uint64_t bytes_sent;     /**< payload bytes of the messages sent */
    uint64_t bytes_received; /**< payload bytes of the messages received */
    uint64_t reuses;         /**< values an op here needed and the cached copy
                                  (or the owner's buffer) already held */
    uint64_t failures_sent;  /**< of the sends, values that carried a failure
                                  (each followed by a second message, the
                                  failure's text) */
} vf_mpi_stats;

/** This rank's counts. */
VF_API int vf_mpi_stats_local(vf_engine *e, vf_mpi_stats *out);

/** The same counts summed over every rank (collective, in sequence):
 * sends and recvs are then both the messages the program moved. */
VF_API int vf_mpi_stats_total(vf_engine *e, vf_mpi_stats *out);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* VARFLOW_MPI_H */
