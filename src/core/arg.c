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

void *vf__arg_copy(const void *arg, size_t size)
{
    void *copy = size <= VF_OP_ARG_INLINE ? vf__fl_alloc(VF__FL_ARG)
                                          : vf__malloc(size);
    if (copy != NULL)
        memcpy(copy, arg, size);
    return copy;
}

void vf__arg_free(void *copy, size_t size)
{
    if (copy == NULL)
        return;
    if (size <= VF_OP_ARG_INLINE)
        vf__fl_free(VF__FL_ARG, copy);
    else
        free(copy);
}
