/* arg.c: arguments copied at push (see arg.h). */
#include "core/arg.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "core/freelist.h"

int vf__arg_check(const char *who, const void *arg, size_t size)
{
    if (size > VF_MAX_OP_ARG_SIZE)
        return vf__fail(VF_EINVAL,
                        "%s: arg_size %zu is over "
                        "VF_MAX_OP_ARG_SIZE (%d)",
                        who, size, VF_MAX_OP_ARG_SIZE);
    if (arg == NULL && size != 0)
        return vf__fail(VF_EINVAL, "%s: arg is NULL with arg_size %zu", who,
                        size);
    return 0;
}

bool vf__argcopy_make(vf__argcopy *c, const void *arg, size_t size)
{
    void *copy = size <= VF_OP_ARG_INLINE ? vf__fl_alloc(VF__FL_ARG)
                                          : vf__malloc(size);
    if (copy == NULL) {
        *c = (vf__argcopy){NULL, 0};
        return false;
    }
    memcpy(copy, arg, size);
    *c = (vf__argcopy){copy, size};
    return true;
}

void vf__argcopy_free(vf__argcopy *c)
{
    vf__argcopy_free_origin(c->ptr, vf__argcopy_origin(c));
    *c = (vf__argcopy){NULL, 0};
}

void vf__argcopy_free_origin(void *ptr, uint8_t origin)
{
    if (origin == VF__ARG_LISTED)
        vf__fl_free(VF__FL_ARG, ptr);
    else if (origin == VF__ARG_HEAP)
        free(ptr);
}
