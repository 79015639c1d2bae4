/*
 * trace_load.h: reading a Chrome trace that varflow wrote back into a
 * profile snapshot, for varflow-report and the tests.
 *
 * It sits beside the writer (trace_write.c), with which it shares the
 * list of the trace's fields (trace_fields.h), but it is not part of the
 * engine library, which needs libc and pthreads only: reading JSON is
 * cJSON's job, so trace_load.c is built as the static library
 * varflow_trace (tools/CMakeLists.txt), on cJSON and on the static
 * libvarflow (it makes the library's struct vf_profile, freed with
 * vf_profile_destroy, and leaves its error detail for vf_error_detail).
 */
#ifndef VF_TRACE_LOAD_H
#define VF_TRACE_LOAD_H

#include <varflow.h>
#include <varflow_profile.h>

/*
 * Read back a Chrome trace JSON that vf_profile_write wrote (any varflow
 * version with the same "varflow" field in otherData): the snapshot is the
 * one that was written, to the nanosecond (times under 2^43 us, 101 days;
 * ids and counts under 2^53). Free with vf_profile_destroy. VF_ESYSTEM when
 * the file cannot be read, VF_EINVAL when it is not such a trace, or holds
 * what no run writes (negative counts, ids or deps; ints past int; device
 * ids past 63; an end past 2^43 us; edges in a cycle: see
 * docs/PROFILING.md), vf_error_detail() saying where it went wrong,
 * VF_ENOMEM. A record's deps are each kept once. *out is NULL after a
 * failure.
 *
 * The first call points cJSON's allocator at varflow's (cJSON_InitHooks,
 * once per process), so that vf__testing_fail_alloc reaches the parse too and
 * an allocation failing inside cJSON is VF_ENOMEM, not a bad file.
 */
int vf_profile_load(const char *path, vf_profile **out);

#endif /* VF_TRACE_LOAD_H */
