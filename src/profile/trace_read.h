/*
 * trace_read.h: the trace loader's insides, shared by its two halves:
 * trace_load.c walks the file and makes the snapshot (vf_profile_load),
 * trace_read.c reads each event and otherData into the loader, field by
 * field (the list of trace_fields.h). Both are the static library
 * varflow_trace, on cJSON, never part of libvarflow (trace_load.h).
 */
#ifndef VF_PROFILE_TRACE_READ_H
#define VF_PROFILE_TRACE_READ_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include <varflow.h>
#include <varflow_profile.h>

/* One load: the file, the first error, and what has been gathered. */
typedef struct vf__trace_loader {
    const char *text, *end; /* the file, NUL-terminated at end */
    /* The first error (VF_EINVAL): why, at which key (or ""), in which
     * event (-1: none) and at which byte (NULL: none). */
    const char *why, *at;
    char key[32];
    long event;
    char buf[64]; /* for a `why` with a number in it */
    /* Gathered: records with offsets into names[] and deps[] */
    vf_profile_record *recs;
    size_t nrecs, recs_cap;
    uint64_t *deps;
    size_t ndeps, deps_cap;
    char *names; /* NUL-terminated names, one after the other */
    size_t names_len, names_cap;
    /* otherData */
    int have_meta, workers;
    vf_engine_type kind;
    uint64_t dropped, span_ns;
    int64_t records; /* otherData's "records", or -1 */
    size_t *pools;   /* per worker: offset of its pool's name in names[] */
    size_t npools, pools_cap;
} vf__trace_loader;

/* Records the first error of a load (later ones are consequences): why,
 * and at which key (NULL: none); returns VF_EINVAL. */
int vf__trace_bad(vf__trace_loader *ld, const char *key, const char *what);

/* The same, at a byte of the file (a JSON error, where cJSON stopped). */
int vf__trace_bad_at(vf__trace_loader *ld, const char *at, const char *what);

/* Room for `need` elements of `size` bytes in *arr, *cap of them now
 * (vf__malloc and copy: the allocation funnel has no realloc). 0 or
 * VF_ENOMEM (*arr as it was). */
int vf__trace_grow(void **arr, size_t *cap, size_t need, size_t size);

/* Copies a name into ld->names; its offset into *off. 0 or VF_ENOMEM. */
int vf__trace_add_name(vf__trace_loader *ld, const char *name, size_t *off);

/* One element of traceEvents: a record (an "X" event whose args hold an
 * "id") is added to the gathered ones; other events are checked and
 * dropped. 0, VF_EINVAL (vf__trace_bad) or VF_ENOMEM. */
int vf__trace_event(vf__trace_loader *ld, const cJSON *ev);

/* otherData into the loader. 0, VF_EINVAL or VF_ENOMEM. */
int vf__trace_meta(vf__trace_loader *ld, const cJSON *o);

#endif /* VF_PROFILE_TRACE_READ_H */
