/*
 * stack.h: how much of the calling thread's stack is in use (stack.c).
 *
 * A thread that waits inside an op runs other ready ops on top of the wait
 * (wait.c, exec.c), and a push inside an inline op may run the pushed op
 * inside the push (the naive engine, exec.c): both nest frames on one
 * stack. They nest only while the stack has room, measured here, so no
 * program overflows a thread's stack through the engine, whatever it
 * nests (rule 10); past that, the work waits for a shallower frame.
 *
 * A thread's stack bounds come from pthread_getattr_np on its first check
 * (the main thread's too: glibc reads its mapping and RLIMIT_STACK),
 * cached thread-locally; a check then costs a compare and a subtraction.
 * The thread library puts a thread's static TLS at the top of its stack
 * mapping, and reports it as stack: a few KiB, but the better part of a
 * MiB under TSan. A worker marks its top itself as it starts
 * (vf__stack_mark_top), so what is counted is frames only; on another
 * thread the TLS counts as used, which errs toward "full".
 * Where the bounds cannot be had, or the first check runs on a stack the
 * program switched to, the stack is taken as VF__STACK_ASSUMED bytes from
 * that check's frame, which errs small.
 */
#ifndef VF_STACK_H
#define VF_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

/* What is assumed of a thread whose stack bounds are unknown. */
#define VF__STACK_ASSUMED ((size_t)256 << 10)

/* The calling thread's stack: the address its top is below, and an
 * eighth of its size (0 until vf__stack_find). */
extern _Thread_local uintptr_t vf__stack_top_;
extern _Thread_local uintptr_t vf__stack_eighth_;

/* Find the calling thread's stack bounds (once per thread). */
void vf__stack_find(void);

/* The same, taking the caller's frame as the stack's top: a thread the
 * engine starts calls it first thing. */
void vf__stack_mark_top(void);

/* Whether the calling thread uses less than `eighths`/8 of its stack. A
 * frame above the recorded top (a stack the program switched to after
 * the first check) counts as full. */
static inline bool vf__stack_below(unsigned eighths)
{
    if (VF__UNLIKELY(vf__stack_top_ == 0))
        vf__stack_find();
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    return here <= vf__stack_top_ &&
           vf__stack_top_ - here < vf__stack_eighth_ * eighths;
}

#endif /* VF_STACK_H */
