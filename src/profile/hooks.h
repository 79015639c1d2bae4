/*
 * hooks.h: the door between the core and the profiler. The core includes
 * this one header of profile/ and nothing else of it; nothing in profile/
 * includes a core header. What crosses the door: the per-op record space
 * the core keeps in each op block (vf__op_prof), what the core knows about
 * an op when it ends (vf__prof_op_desc) and about itself when a snapshot is
 * taken (vf__prof_engine_desc), and the calls below.
 *
 * Off (the default), the core pays one relaxed load per push (its hooks
 * byte) and one predictable branch per hook site, and calls nothing. On,
 * each user op gets an id at its push and its times are stamped in its
 * record space as it goes (push, ready, start, end); every op that
 * releases one of its vars adds its id to the op's dependency list (the
 * edges it actually had), and an op that holds a var at once at its push
 * gets the edge from the op that would have released it (the profiler
 * remembers the last ops to end on each var). At its end the op
 * is appended to the profile under the profile's mutex, once per op,
 * together with its edges; names are interned there. Records live in
 * chunks of VF__PROF_CHUNK, up to max_records; later ops are counted as
 * dropped. A restart begins a new session: ops pushed under an older one
 * are not recorded.
 *
 * Lock order: the profile mutex is taken under no other lock, and only
 * the spinlock of the vars' last ops under it (a restart's clear, fork);
 * that spinlock is a leaf, which a push takes under its vars' locks.
 */
#ifndef VF_PROFILE_HOOKS_H
#define VF_PROFILE_HOOKS_H

#include <stdbool.h>

#include "base/common.h"
#include "varflow_profile.h"

#define VF__PROF_INLINE_DEPS 8

/* What an op block carries while it is recorded. */
typedef struct vf__op_prof {
    uint64_t id; /* 0 until vf__prof_op_number */
    /* The first of its ids (a fused op's first op's), set with `id` and
     * never changed after: a fused op's `id` stands for one of its ops for
     * a moment as it lets go of vars (bulk_op.c: edges_from_item), and a
     * split gives its last ids to the rest, while a child pushed on another
     * thread looks up the id of the op that pushed it (its parent in the
     * profile: a race, and wrong parents; found trying features combined
     * as a user). */
    uint64_t first;
    uint32_t session;
    uint32_t nids; /* the ids it takes (vf__prof_op_pushed's `ids`) */
    int worker;
    uint64_t push, ready, start, end;  /* ns since the profile started */
    uint64_t device_start, device_end; /* the same; 0: none */
    uint64_t inside; /* ns of its run not its own (vf__prof_op_inside) */
    uint64_t parent; /* the id of the op that pushed it, or 0 */
    /* Its name in the profiler's names (vf__prof_op_name), or, while
     * VF__PROF_NAME_AT_RECORD, read from the op when it is recorded. */
    size_t name;
    int name_state;
    /* Ops released it so far; relaxed index claims, the op's acq_rel wait
     * counter orders the writes before the op runs. */
    atomic_int ndeps;
    int cap; /* room for deps: its nvars, at least the inline entries */
    uint64_t deps[VF__PROF_INLINE_DEPS];
    uint64_t *more_deps; /* nvars - inline entries, when nvars exceeds them */
} vf__op_prof;

/* What the core says of an op when it is recorded at its end. */
typedef struct vf__prof_op_desc {
    const char *name; /* never NULL */
    int pool;         /* index of the pool that ran it; -1: inline */
    vf_device device;
    vf_property property;
    bool async;
    int status; /* 0, the op's error code, or VF_ESKIPPED */
} vf__prof_op_desc;

/* What the core says of itself when a snapshot is taken: its kind and its
 * pools, each a name (a string literal: it outlives the engine) and a
 * range of worker indexes. */
#define VF__PROF_MAX_POOLS 64
typedef struct vf__prof_pool_desc {
    const char *name;
    int first_worker, nworkers;
} vf__prof_pool_desc;
typedef struct vf__prof_engine_desc {
    vf_engine_type kind;
    int npools;
    vf__prof_pool_desc pools[VF__PROF_MAX_POOLS];
} vf__prof_engine_desc;

typedef struct vf__profiler vf__profiler; /* opaque to the core */

/* --- the engine created and destroyed ------------------------------------ */

/* A profiler keeping up to `max_records` records; with a `path`, it records
 * from now on and vf__prof_destroy writes the profile there (format by
 * extension). VF_ENOMEM, VF_ESYSTEM. */
int vf__prof_create(vf__profiler **out, size_t max_records, const char *path);

/* Write the profile when created with a path and `engine` is given (a
 * failure is reported on stderr too: destroy's caller may not look), then
 * free everything. NULL `engine`: discard (the engine never ran). No op may
 * be recording any more. Returns 0 or the write's error. */
int vf__prof_destroy(vf__profiler *p, const vf__prof_engine_desc *engine);

/* --- control (the public vf_profile_* calls, forwarded by the core) ------ */

int vf__prof_start(vf__profiler *p);
/* In a child of fork(): what was recorded goes (its workers were the
 * parent's), and recording, when on or paused, goes on as from a start. */
void vf__prof_after_fork(vf__profiler *p);
/* Move from state `from` (VF__PROF_ON, VF__PROF_PAUSED; -1: any) to `to`;
 * VF_EINVAL with a detail naming `who` when not in `from`. */
int vf__prof_set_state(vf__profiler *p, const char *who, int from, int to);
/* Whether new ops are to be recorded (the core mirrors it in its hooks
 * byte). A seq_cst load, after the seq_cst store of every change of the
 * state: the core reads it again after it stored the byte, and relies on
 * that order (core/profiling.c: vf__profiling_update_hooks). */
bool vf__prof_recording(vf__profiler *p);
int vf__prof_take(vf__profiler *p, const vf__prof_engine_desc *engine,
                  vf_profile **out);

enum { VF__PROF_OFF = 0, VF__PROF_ON, VF__PROF_PAUSED };

/* Take (before a fork) or release (after it, in parent and child) the
 * profile's mutex, so no other thread holds it across the fork. */
void vf__prof_fork_lock(vf__profiler *p, bool lock);

/* --- an op's life (called only for ops whose hooks say "recorded") ------- */

/* Pushed: a new record for it (kept out of the op block, so an op nobody
 * records costs nothing for it), with its push time and the profile it
 * belongs to. `ids` > 1 for an op that stands for as many (below): the
 * ids before its own are theirs. NULL when it cannot be recorded (no
 * memory): the op itself is unaffected. */
vf__op_prof *vf__prof_op_pushed(vf__profiler *p, int nvars, uint32_t ids);
/* Its ids, taken while the vars it queues on are locked, so that of two
 * ops queued on a var one behind the other, the first has the smaller id,
 * whatever threads push them (a child placed ahead of ops queued before
 * it, as it runs within its parent, is the exception) (taken at
 * vf__prof_op_pushed, before the locks, an op could name a dep with a higher id
 * than its own: found trying two pushing threads with the profiler on as a
 * user). None when a start came since its push: the op is in neither profile.
 */
void vf__prof_op_number(vf__profiler *p, vf__op_prof *r);
/* r was pushed from inside the run of the op recorded by `parent` (a
 * child): r's record names it, when it is of the same profile. */
void vf__prof_op_parent(vf__op_prof *r, const vf__op_prof *parent);
/* The same for a parent that is one of the ops `parent` records (a fused
 * op's item), with id `id` (0: none). */
void vf__prof_op_parent_id(vf__op_prof *r, const vf__op_prof *parent,
                           uint64_t id);
/* An op recorded as `from` released one of its vars: false when `from`
 * names no op of r's profile (an op of an earlier one; id 0, a fused op
 * standing for none of its items), whose caller takes the table's edge
 * (vf__prof_var_edge) instead. */
bool vf__prof_op_edge(vf__op_prof *r, const vf__op_prof *from);

/* The edges of an op pushed after the ops it waits for ended (the naive
 * engine's every op; on a pool, one pushed after its inputs were made):
 * the edge the last of them to release the var would have recorded.
 * As an op releases a var (before it does: at its end, or a fused op's
 * early release; `slot`: the var's place in its engine's table, `gen`
 * its generation there, a var made in the slot since being another): it is
 * the last write to end, or a read that ended since. At a push, under the
 * var's lock, for each var the op holds at once, and as an op not
 * recorded releases a var a recorded op waited for: the edge from the
 * read that ended last since the last write, for a write, else from that
 * write (none when unknown or of an older profile). */
void vf__prof_var_used(vf__profiler *p, const vf__op_prof *r, uint32_t slot,
                       uint32_t gen, bool write);
void vf__prof_var_edge(vf__profiler *p, vf__op_prof *r, uint32_t slot,
                       uint32_t gen, bool write);
/* Its last dependency was released. */
void vf__prof_op_ready(vf__profiler *p, vf__op_prof *r);
/* Its function starts on `worker` (-1: not a worker). */
void vf__prof_op_started(vf__profiler *p, vf__op_prof *r, int worker);
/* A device op's work ran on its stream from `start_ns` to `end_ns`
 * (CLOCK_MONOTONIC, as the device tells: device/device.h). */
void vf__prof_op_device_span(vf__profiler *p, vf__op_prof *r, uint64_t start_ns,
                             uint64_t end_ns);
/* Its function spent `ns` of its run on what is not its own work: a wait,
 * ops run above it, a child run at its push (only its own thread calls
 * this, while its function runs). */
void vf__prof_op_inside(vf__op_prof *r, uint64_t ns);
/* Its function returned, or it was skipped (then its start is its end). */
void vf__prof_op_ended(vf__profiler *p, vf__op_prof *r, bool skipped);

/* vf__op_prof.name_state */
#define VF__PROF_NAME_AT_RECORD 0 /* the op's name is read at its record */
#define VF__PROF_NAME_INTERNED 1  /* r->name is its place in the names */
#define VF__PROF_NAME_LOST 2      /* no memory for it: not recorded */

/* Take the op's name into the profiler now (the lock): its record is made
 * after its done callback, which may free the name (with its `arg`). */
void vf__prof_op_name(vf__profiler *p, vf__op_prof *r, const char *name);
/* Finished: append its record (once; frees `r`). */
void vf__prof_op_finished(vf__profiler *p, vf__op_prof *r,
                          const vf__prof_op_desc *op);
/* Dropped without a record (a push that failed, or a block freed before
 * its finish was recorded): frees `r`. */
void vf__prof_op_dropped(vf__op_prof *r);

/* --- the ops a recorded op stands for (a bulk's batch: core/bulk_op.c) ----
 *
 * A fused op runs several ops of the program; each is recorded as its own
 * op, the fused op not at all (vf__prof_op_dropped). Its push took an id
 * for each (vf__prof_op_pushed's `ids`), in one step of the profile's
 * counter: its own is the last op's, so the edges later ops record from
 * it name that op, and the ops before take the ids before it, all in push
 * order and of the same profile. An early release records its edges from
 * the op that last used the var (core/bulk_op.c: edges_from_item), for a
 * split may give the last op's id to a fused op of its own
 * (vf__prof_op_split). */
/* A fused op whose record is `whole` ends early, its last `ids` ops made
 * a fused op of their own (core/bulk_op.c: split_after): that op's
 * record, pushed when `whole` was, takes whole's id (its last op's), and
 * `whole` the id of the op it ends with now. NULL out of memory (then
 * nothing changes). */
vf__op_prof *vf__prof_op_split(vf__profiler *p, vf__op_prof *whole, int nvars,
                               uint32_t ids);
/* Now, on the profile's clock (an op's start or end). */
uint64_t vf__prof_now(vf__profiler *p);
/* One of the ops `whole` stood for ended: `part` holds its id, worker,
 * ready, start and end times (its push is whole's), and its edges (at
 * most VF__PROF_INLINE_DEPS: the op before it) unless `deps_of_whole`,
 * which gives it whole's (copied). Appends its record; `part` may live on
 * the caller's stack. */
void vf__prof_part_finished(vf__profiler *p, const vf__op_prof *whole,
                            vf__op_prof *part, bool deps_of_whole,
                            const vf__prof_op_desc *desc);

#endif /* VF_PROFILE_HOOKS_H */
