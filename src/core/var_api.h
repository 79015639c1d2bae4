/*
 * var_api.h: what var_api.c (the public var calls and the delete op's
 * kind) offers the rest of the core.
 */
#ifndef VF_VAR_API_H
#define VF_VAR_API_H

#include <stdint.h>

#include "core/var.h"

/* vf_var_create's body, inside the guard of the public call `who`, which
 * its error details name (vf_var_of's new vars: they named vf_var_create). */
int vf__var_api_create(vf_engine *e, vf_var *out, const char *who);

/* vf_var_of found the mark on a var whose delete is held by a
 * stopped engine (not queued): make the last held delete of `v` one that
 * leaves the var live (0); or 1 when a start is pushing the held ops (it
 * waited for the start to end: look again), 2 when the caller is inside
 * that start (the delete is still to come: return the var as it is).
 * VF_ENOMEM. The caller holds no stripe lock. */
int vf__var_api_revive_held(vf_engine *e, vf__var *v, uint32_t gen);

#endif /* VF_VAR_API_H */
