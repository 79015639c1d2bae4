/*
 * arg.h: arguments copied at push (vf_op.arg_size, vf_operator_push_arg).
 *
 * A push with arg_size > 0 copies that many bytes from `arg` into storage
 * the op owns, and the op's function and `done` get the copy, so the
 * caller's argument need not outlive the push (libgomp's GOMP_task does
 * the same with its arg_size). Up to VF_OP_ARG_INLINE bytes the copy is a
 * block from the per-thread free lists (freelist.h), so a push allocates
 * nothing; a larger one, up to VF_MAX_OP_ARG_SIZE, is malloc'd. Either is
 * aligned to max_align_t (blocks and malloc both are). The copy is freed
 * with its owner: the op block (op.c), a bulk item (bulk.c), an operator
 * (its create-time argument, push.c). arg_size 0 keeps `arg` a plain
 * pointer, and costs the hot path one test at push and one at free.
 */
#ifndef VF_ARG_H
#define VF_ARG_H

#include "base/common.h"

/* Check an argument: VF_EINVAL with a detail naming `who` for a NULL arg
 * with a size, or a size over VF_MAX_OP_ARG_SIZE. */
int vf__arg_check(const char *who, const void *arg, size_t size);

/* A copied argument and its size, as its owner keeps it (an op, an
 * operator, a bulk item); { NULL, 0 }: none. The size says where the copy
 * came from (free list or malloc), so the two travel together. */
typedef struct vf__argcopy {
    void *ptr;
    size_t size;
} vf__argcopy;

/* Make `c` a copy of `size` (1 .. VF_MAX_OP_ARG_SIZE, checked) bytes of
 * `arg`: true, or false without memory (`c` then none). Never blocks but
 * on the free lists' depot mutex. */
bool vf__argcopy_make(vf__argcopy *c, const void *arg, size_t size);

/* Free the copy, if any, and make `c` none. */
void vf__argcopy_free(vf__argcopy *c);

/* Where a copy came from, in the one byte an op block keeps of it (an op
 * knows its copy as its `arg`). */
#define VF__ARG_NONE 0   /* `arg` is the caller's pointer */
#define VF__ARG_LISTED 1 /* a free-list block (size <= VF_OP_ARG_INLINE) */
#define VF__ARG_HEAP 2   /* malloc'd */
static inline uint8_t vf__argcopy_origin(const vf__argcopy *c)
{
    return c->ptr == NULL                ? VF__ARG_NONE
           : c->size <= VF_OP_ARG_INLINE ? VF__ARG_LISTED
                                         : VF__ARG_HEAP;
}

/* Free a copy known by its pointer and origin (VF__ARG_*). */
void vf__argcopy_free_origin(void *ptr, uint8_t origin);

#endif /* VF_ARG_H */
