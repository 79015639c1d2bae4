/* stack.c: the calling thread's stack use (see stack.h). */
#include "base/stack.h"

#include <pthread.h>

_Thread_local uintptr_t vf__stack_top_;
_Thread_local uintptr_t vf__stack_eighth_;

/* Record the stack's bounds: below `here`, or below the top the thread
 * library reports when `from_here` is false. */
static void find_bounds(uintptr_t here, bool from_here)
{
    pthread_attr_t attr;
    void *lo = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        if (pthread_attr_getstack(&attr, &lo, &size) != 0)
            size = 0;
        pthread_attr_destroy(&attr);
    }
    uintptr_t top = (uintptr_t)lo + size;
    if (size != 0 && from_here && here > (uintptr_t)lo && here < top) {
        top = here;
        size = top - (uintptr_t)lo;
    }
    if (size == 0 || here < (uintptr_t)lo || here > top) {
        /* Unknown, or a stack the program switched to (a coroutine's):
         * count from here, assuming little. */
        top = here;
        size = VF__STACK_ASSUMED;
    }
    vf__stack_eighth_ = size / 8;
    vf__stack_top_ = top;
}

void vf__stack_find(void)
{
    find_bounds((uintptr_t)__builtin_frame_address(0), false);
}

void vf__stack_mark_top(void)
{
    find_bounds((uintptr_t)__builtin_frame_address(0), true);
}
