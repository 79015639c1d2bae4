/*
 * hooks.h: recording what every op did, for the profiler's outputs.
 *
 * Off (the default), the engine pays one relaxed load per push and a test
 * of `op->prof.id` (zero) at each hook. On, each user op gets an id at its
 * push and its times are stamped in the op block as it goes (push, ready,
 * start, end); every op that releases one of its vars adds its id to the
 * op's dependency list (the edges it actually had: an op ready at push has
 * none). At its end the op is appended to the profile under the profile's
 * mutex, once per op, together with its edges; names are interned there.
 * Records live in chunks of VF__PROF_CHUNK, up to max_records; later ops
 * are counted as dropped. A restart begins a new session: ops pushed under
 * an older one are not recorded.
 *
 * Lock order: the profile mutex is a leaf (taken under no other lock, and
 * nothing is taken under it).
 */
#ifndef VF_PROFILE_H
#define VF_PROFILE_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "base/common.h"

#define VF__PROF_INLINE_DEPS 8

typedef struct vf__op vf__op;

/* What an op block carries while it is recorded (id 0: not recorded). */
typedef struct vf__op_prof {
    uint64_t id;
    uint32_t session;
    int worker;
    uint64_t push, ready, start; /* ns since the profile started */
    /* Ops released it so far; relaxed index claims, the op's acq_rel wait
     * counter orders the writes before the op runs. */
    atomic_int ndeps;
    uint64_t deps[VF__PROF_INLINE_DEPS];
    uint64_t *more_deps; /* nvars - inline entries, when nvars exceeds them */
} vf__op_prof;

typedef enum vf__prof_state {
    VF__PROF_OFF = 0,
    VF__PROF_ON,
    VF__PROF_PAUSED
} vf__prof_state;

typedef struct vf__prof_entry vf__prof_entry;

typedef struct vf__profiler {
    _Atomic int state;        /* relaxed: read on every push */
    pthread_mutex_t lock;     /* everything below unless marked */
    /* Written under the lock at start, read unlocked (relaxed) by stamps:
     * a stamp made with an older value belongs to an older session, whose
     * ops are not recorded. */
    _Atomic uint32_t session;
    _Atomic uint64_t t0;      /* CLOCK_MONOTONIC ns at start */
    _Atomic uint64_t next_id; /* relaxed: ids in push order */
    size_t max_records;
    size_t count;             /* lock */
    uint64_t dropped;         /* lock */
    vf__prof_entry **chunks;  /* lock */
    size_t nchunks;           /* lock */
    char **names;             /* lock: interned names (open addressing) */
    size_t names_cap, names_len;
} vf__profiler;

int vf__prof_init(vf__profiler *p, size_t max_records);
void vf__prof_destroy(vf__profiler *p);

static inline uint64_t vf__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline bool vf__prof_on(vf__profiler *p)
{
    return VF__UNLIKELY(atomic_load_explicit(&p->state,
                                             memory_order_relaxed) ==
                        VF__PROF_ON);
}

/* At push, profiling on: give the op an id and its push time. May fail to
 * allocate the extra dependency slots: then the op is simply not recorded. */
void vf__prof_push(vf__profiler *p, vf__op *op);

/* `from` (recorded) released one of `to`'s vars. */
void vf__prof_edge(vf__op *to, const vf__op *from);

/* Time stamps, relative to the profile's start. */
uint64_t vf__prof_now(vf__profiler *p);

/* At the op's end: append its record (and free its extra dep slots). */
void vf__prof_record(vf__profiler *p, vf__op *op, uint64_t end);

/* Drop an op's profiling state without recording (failed push). */
void vf__prof_forget(vf__op *op);

#endif /* VF_PROFILE_H */
