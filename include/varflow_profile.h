/**
 * @file varflow_profile.h
 * @brief The profiler, and the analysis of what it recorded.
 *
 * varflow_profile.h: the profiler of a varflow engine, and the analysis of
 * what it recorded (summary, critical path, the report's verdict) that
 * varflow-report and the HTML report are made of.
 *
 * Same conventions as varflow.h (its naming rule, error codes and details);
 * a program that profiles includes this header beside varflow.h, one that
 * does not never sees it. Link: libvarflow, as for varflow.h.
 */
#ifndef VARFLOW_PROFILE_H
#define VARFLOW_PROFILE_H

#include "varflow.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Profiling                                                                 */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup profiling Profiling
 * @brief Record what ran where and when; summaries, the critical path, the
 * HTML report (varflow_profile.h).
 *
 * The profiler records every op pushed while it is on: its name, where and
 * when it ran, how it ended, and the ops it actually waited for. It is off
 * by default and then costs a branch per op. Memory is bounded
 * (profile_max_records): the first ops pushed are kept, whenever they
 * finish, and the later ones are counted as dropped.
 * @{
 */

/** One op as recorded. Times are nanoseconds since the profile started. */
typedef struct vf_profile_record {
    uint64_t id;              /**< 1, 2, ... in push order within the profile */
    const char *name;         /**< "" when unnamed (the outputs show such an op
                                   as `op #<id>`, and a summary adds them up in
                                   one "(unnamed)" row); owned by the
                                   snapshot */
    int pool;                 /**< the pool it was queued to: 0 the CPU
                                   pool, then the per-device engine's CPU
                                   priority pool (1), then a device's pools
                                   in the order they were made (from 2 there,
                                   from 1 on the pooled engine); an op routed
                                   inline (async, the naive engine's) runs
                                   where it was made ready: its worker's
                                   pool, or -1 on a thread of the program */
    int worker;               /**< as vf_run_worker(); -1 inline */
    vf_device device;         /**< the device it was pushed for */
    vf_property property;     /**< its vf_op.property */
    bool async;               /**< pushed with an async_fn */
    int status;               /**< 0, the op's error code, or VF_ESKIPPED */
    uint64_t push_ns;         /**< it entered the engine: vf_engine_push()
                                   called; an op a stopped engine held, when
                                   the start (or a stop's drain) pushed it;
                                   a bulked op, when its batch was flushed */
    uint64_t ready_ns;        /**< its last dependency was released */
    uint64_t start_ns;        /**< its function started (= end when skipped;
                                   a device op whose function ran before an
                                   input's work failed keeps its host span,
                                   its own work skipped) */
    uint64_t end_ns;          /**< it finished (async: vf_completion_finish()
                                   called; a device op: its function
                                   returned) */
    uint64_t device_start_ns; /**< a device op: its work began on its stream
                                   (the worker's), as the device tells, and
                                   not before its function first put work
                                   there (vf_run_submit(), vf_run_stream());
                                   0 when unknown */
    uint64_t device_end_ns;   /**< and ended (as device_start_ns); 0 when
                                   unknown or when its work was skipped */
    uint64_t inside_ns;       /**< of its run (start .. end), the time not
                                   its own: its function waiting (a var
                                   wait, a wait for its children, a wait
                                   on another engine), ops run above those
                                   waits included, and its children run at
                                   their push, inside it (a sync op's; 0
                                   for an async op) */
    int ndeps;                /**< ops it depends on, each once, one per
                                   var at most:
                                   whose finishing released it, or, for a
                                   var it held at once at its push, would
                                   have (the last write of the var to end
                                   before it; for a write, the last read to
                                   end since that write), so every engine
                                   (the naive one too) records the
                                   program's edges; past an op not
                                   recorded (a wait's marker, one pushed
                                   while paused or before the latest
                                   start), the last recorded op on the
                                   var; from a fused batch (bulking), its
                                   last op, even once it has ended (for a
                                   var it let go of early, its last op to
                                   use it; none of its ops for a var only
                                   the ops a split moved out use) */
    const uint64_t *deps;     /**< their ids (ops recorded in this profile) */
    uint64_t parent;          /**< the sync op whose function pushed it
                                   (one op of a bulk batch, not the
                                   batch), when recorded in this profile;
                                   else 0 (pushed from outside the
                                   engine's ops, from an async op's
                                   function, whose record spans its
                                   completion, from a `done` callback or
                                   an op of another engine, or its parent
                                   was not recorded) */
} vf_profile_record;

/** A snapshot of a profile: immutable, independent of the engine. */
typedef struct vf_profile vf_profile;

/** Start recording (clearing what an earlier profile recorded). The new
 * profile holds the ops pushed from then on, numbered from 1, each id
 * once, and no push time later than its op's start, even while other
 * threads push; an op pushed before the start, still queued or running,
 * is in neither profile, and no record of the new one names it among its
 * deps. */
VF_API int vf_profile_start(vf_engine *e);

/** Stop recording; what was recorded stays until the next start. In a
 * child of fork(), an engine's profile starts again, empty, as from a
 * start (recording if it was): the records made before the fork name the
 * parent's workers, not the child's (vf_config.fork_child_workers). */
VF_API int vf_profile_stop(vf_engine *e);

/** @name Pause and resume
 * @{ */
/** Pause and resume recording: ops pushed while paused are not recorded
 * (with bulking too: a start, stop, pause or resume first pushes every
 * thread's open batch). Pausing a profile that is not recording (stopped, or
 * paused already), or resuming one that is not paused, is VF_EINVAL, its detail
 * saying which; a NULL or destroyed engine is VF_EINVAL. */
VF_API int vf_profile_pause(vf_engine *e);
VF_API int vf_profile_resume(vf_engine *e);
/** @} */

/** Copy what has been recorded so far (ops that have finished), sorted by
 * id. Free with vf_profile_destroy(). */
VF_API int vf_profile_take(vf_engine *e, vf_profile **out);
/** Free a snapshot (NULL: nothing). */
VF_API void vf_profile_destroy(vf_profile *p);

/* The snapshot's records, and what it knows of the engine. */
/** The number of records (0 for NULL). */
VF_API size_t vf_profile_count(const vf_profile *p);
/** Record `i` (0 to count - 1), or NULL. */
VF_API const vf_profile_record *vf_profile_at(const vf_profile *p, size_t i);
VF_API uint64_t vf_profile_dropped(const vf_profile *p); /**< ops not kept */
/** The kind of the engine recorded (VF_ENGINE_INVALID for NULL, with a
 * detail). */
VF_API vf_engine_type vf_profile_engine_type(const vf_profile *p);
/** The engine's workers the snapshot knows: indices 0 to n - 1, whose pools
 * vf_profile_worker_pool() names (0 for NULL). */
VF_API int vf_profile_num_workers(const vf_profile *p);
/** Name of the pool a worker index belongs to ("cpu", "prio"), or NULL. */
VF_API const char *vf_profile_worker_pool(const vf_profile *p, int worker);
/** Wall time the profile covers (start to the latest end, a device op's
 * device_end_ns included), in ns. */
VF_API uint64_t vf_profile_span_ns(const vf_profile *p);

/** What vf_profile_write() writes. */
typedef enum vf_profile_format {
    VF_PROFILE_AUTO = 0,     /**< by the path's extension: .html/.htm HTML,
                                  .dot/.gv Graphviz, .txt summary text,
                                  .summary.json summary JSON, anything else
                                  Chrome JSON */
    VF_PROFILE_CHROME_JSON,  /**< Chrome trace (Perfetto, chrome://tracing): a
                                  track per worker, a slice per op, flow arrows
                                  for dependency edges, counters of ready and
                                  running ops; varflow-report reads it back */
    VF_PROFILE_SUMMARY_TEXT, /**< the per-name table (vf_profile_summary()),
                                  sorted by total time, as aligned text */
    VF_PROFILE_SUMMARY_JSON, /**< the same table as JSON */
    VF_PROFILE_DOT,          /**< Graphviz dot: ops, dependency edges, each
                                  child's from its parent dashed, the
                                  critical path in red; above 1000 ops only the
                                  first 1000 (by id), with a note */
    VF_PROFILE_HTML          /**< one self-contained page, no network: timeline
                                  per worker with the critical path, running and
                                  ready ops over time, top ops, summary */
} vf_profile_format;

/** Write the snapshot to `path` ("-": standard output) in `format`. A
 * regular file (or a new one) is written whole into a temporary file beside
 * it that then replaces it, with its mode and owner, so a reader, or
 * another writer of the same path, never sees part of it (a device, a
 * pipe, a symbolic link or a file with other hard links is written in
 * place). A name is the program's bytes: the JSON outputs escape it,
 * and the text ones (the summary's table, the dot graph) write its control
 * characters and bytes that are not UTF-8 as U+FFFD, one table row a line.
 * VF_EINVAL for a NULL snapshot or a NULL or empty path, VF_ESYSTEM when
 * the file cannot be written (the detail names it), VF_ENOTSUP for an
 * unknown format, VF_ENOMEM. */
VF_API int vf_profile_write(const vf_profile *p, const char *path,
                            vf_profile_format format);

/**
 * Summary per op name. Timing columns count the ops that ran (ok or
 * failed); skipped ops count in `count` and `skipped` only.
 */
typedef struct vf_profile_row {
    const char *name;   /**< owned by the snapshot */
    uint64_t count;     /**< ops of this name recorded */
    uint64_t skipped;   /**< of them, skipped (an input had failed) */
    uint64_t failed;    /**< of them, ran and failed */
    uint64_t total_ns;  /**< sum of end - start of those that ran */
    uint64_t mean_ns;   /**< total_ns / ops that ran (0 when none ran) */
    uint64_t min_ns;    /**< shortest run (0 when none ran) */
    uint64_t max_ns;    /**< longest run */
    uint64_t queued_ns; /**< sum of start - ready: ready, waiting for a
                             worker */
} vf_profile_row;

/** The column a summary is sorted by: names A to Z, numbers largest first;
 * ties by name. */
typedef enum vf_profile_sort {
    VF_PROFILE_SORT_TOTAL = 0, /**< by total_ns */
    VF_PROFILE_SORT_NAME,      /**< by name */
    VF_PROFILE_SORT_COUNT,     /**< by count */
    VF_PROFILE_SORT_SKIPPED,   /**< by skipped */
    VF_PROFILE_SORT_FAILED,    /**< by failed */
    VF_PROFILE_SORT_MEAN,      /**< by mean_ns */
    VF_PROFILE_SORT_MIN,       /**< by min_ns */
    VF_PROFILE_SORT_MAX,       /**< by max_ns */
    VF_PROFILE_SORT_QUEUED     /**< by queued_ns */
} vf_profile_sort;

/** The column's name as the text and JSON summaries print it ("total",
 * "name", "count", ...), or NULL for an unknown value. */
VF_API const char *vf_profile_sort_name(vf_profile_sort by);

/** The sort key whose vf_profile_sort_name() is `name`. VF_EINVAL if none. */
VF_API int vf_profile_sort_parse(const char *name, vf_profile_sort *out);

/** One row per distinct op name, sorted `by`. `*rows` (NULL when there are
 * none) is freed with vf_profile_summary_destroy(); its names stay valid while
 * the snapshot lives. VF_EINVAL for a bad argument, VF_ENOMEM. */
VF_API int vf_profile_summary(const vf_profile *p, vf_profile_sort by,
                              vf_profile_row **rows, size_t *nrows);
/** Free a summary's rows (NULL: nothing). */
VF_API void vf_profile_summary_destroy(vf_profile_row *rows);

/** Write the summary sorted `by` to `path` ("-": standard output) as
 * VF_PROFILE_SUMMARY_TEXT or VF_PROFILE_SUMMARY_JSON (VF_ENOTSUP for any
 * other format). Errors as vf_profile_write(). */
VF_API int vf_profile_summary_write(const vf_profile *p, const char *path,
                                    vf_profile_format format,
                                    vf_profile_sort by);

/**
 * The critical path: the chain of recorded dependency edges (each op's
 * `deps`, and each child's edge to its `parent`: before the parent when
 * it ended first, after it when it outlived it) whose ops' run times
 * (end - start) add up to the most; no schedule of the same DAG, on any
 * number of workers, can finish sooner (with children, an upper bound:
 * a parent's own time counts after its children's, docs/PROFILING.md).
 * A device op with a device span also counts its work on the stream: its
 * work follows its own function and the work of the device ops it depends
 * on (the stream wait), and a host op depending on it follows that work
 * (docs/PROFILING.md, "Critical path").
 * Waiting is not counted in the length: an op weighs its run less the part
 * of it not its own (inside_ns: its waits, what ran inside it), and the
 * time the chain spent between one op's end and the next one's start
 * (release, queueing behind other ready ops, dispatch) is
 * `elapsed_ns - length_ns` (with children that ran beside their parent,
 * the upper bound above, length_ns may pass elapsed_ns). Ties go to the
 * predecessor that finished last, then to the smaller id. Edges to ops not
 * in the snapshot (dropped) are ignored.
 */
typedef struct vf_profile_path {
    size_t count;        /**< ops on the path */
    uint64_t *ids;       /**< their ids, first to last (NULL when count 0) */
    uint64_t length_ns;  /**< sum of their run times (and device work) */
    uint64_t elapsed_ns; /**< first op's start to last op's end (its device end
                              when its work is on the path) */
    uint64_t span_ns;    /**< the profile's span (vf_profile_span_ns()) */
} vf_profile_path;

/** Compute the critical path into `*out` (free with vf_profile_path_destroy()).
 * An empty snapshot gives an empty path. VF_EINVAL for a bad argument or
 * edges that form a cycle (a corrupt file), VF_ENOMEM. */
VF_API int vf_profile_critical_path(const vf_profile *p, vf_profile_path *out);
/** Free a path's ids and zero it (NULL: nothing). */
VF_API void vf_profile_path_destroy(vf_profile_path *path);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* VARFLOW_PROFILE_H */
