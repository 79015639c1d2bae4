/*
 * engine_type.h: the engine types' names, the one table of them: what
 * vf_engine_type_name returns, what VF_ENGINE_TYPE accepts, and what the
 * profile's outputs (reports, traces) write and read back. Inline, so the
 * profile room and the trace reader need no call into the core.
 */
#ifndef VF_ENGINE_TYPE_H
#define VF_ENGINE_TYPE_H

#include <string.h>

#include <varflow.h>

/* The name of `type` ("naive", "pooled", "perdevice", "default",
 * "invalid"), or "unknown" for a value that is none of them. */
static inline const char *vf__engine_type_name(vf_engine_type type)
{
    switch (type) {
    case VF_ENGINE_NAIVE:
        return "naive";
    case VF_ENGINE_POOLED:
        return "pooled";
    case VF_ENGINE_PERDEVICE:
        return "perdevice";
    case VF_ENGINE_DEFAULT:
        return "default";
    case VF_ENGINE_INVALID:
        return "invalid";
    }
    return "unknown";
}

/* The engine type an engine can be made as, by its exact (lower-case)
 * name: naive, pooled or perdevice; VF_ENGINE_INVALID for any other. */
static inline vf_engine_type vf__engine_type_parse(const char *s)
{
    static const vf_engine_type made[] = {VF_ENGINE_NAIVE, VF_ENGINE_POOLED,
                                          VF_ENGINE_PERDEVICE};
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
        if (strcmp(s, vf__engine_type_name(made[i])) == 0)
            return made[i];
    return VF_ENGINE_INVALID;
}

#endif /* VF_ENGINE_TYPE_H */
