/*
 * bulk_op.h: the fused op (bulk_op.c): a batch sealed and pushed as one op,
 * or op by op when it cannot be (bulk.h: the batches).
 */
#ifndef VF_BULK_OP_H
#define VF_BULK_OP_H

#include "core/bulk.h"

/* Push a batch taken out of its thread's state (that state's lock held,
 * so the next batch cannot overtake it) as one fused op, or op by op when
 * it cannot be; the batch goes with it (freed with the op, or here). */
void vf__bulk_batch_push(vf_engine *e, vf__bulk_batch *b);

#endif /* VF_BULK_OP_H */
