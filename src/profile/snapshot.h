/*
 * snapshot.h: the profile snapshot, what every output reads.
 *
 * A snapshot is immutable once made (by vf_profile_take, or by a trace
 * loader): outputs read it without a lock and never touch an engine.
 */
#ifndef VF_SNAPSHOT_H
#define VF_SNAPSHOT_H

#include "base/common.h"
#include "varflow_profile.h"

/* A snapshot (vf_profile_take, or vf_profile_load from a file): records
 * sorted by id, names in `names`, deps in `deps`; worker_pool entries are
 * string literals or point into `names`. Defined here so that the trace
 * loader (trace_load.c) can build one. */
struct vf_profile {
    vf_engine_type kind;
    int nworkers;
    const char **worker_pool; /* per worker index */
    /* Per worker index, its pool's index in the engine; NULL in a
     * snapshot read back from a trace, which names the pools only. */
    int *worker_pool_index;
    size_t count;
    vf_profile_record *records;
    uint64_t *deps;
    char *names;
    uint64_t dropped;
    uint64_t span_ns;
};

#endif /* VF_SNAPSHOT_H */
