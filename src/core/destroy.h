/*
 * destroy.h: the end of an engine (destroy.c has vf_engine_destroy and
 * vf_engine_destroy_timed, and what they wait for).
 */
#ifndef VF_DESTROY_H
#define VF_DESTROY_H

#include <stdint.h>

/* Destroy's report of what it waits for : first after
 * `grace_ms`, then every `period_ms` (defaults 2000 and 10000; tests
 * shorten them). */
void vf__destroy_report_times(uint32_t grace_ms, uint32_t period_ms);

#endif /* VF_DESTROY_H */
