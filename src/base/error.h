/*
 * error.h: error codes for callers.
 *
 * A call that fails (bad argument, out of memory, ...) returns a negative
 * VF_E* code, and vf__fail() also leaves a sentence for
 * vf_error_detail() in a thread-local buffer (only on the error path,
 * so it costs nothing otherwise). What an op's failure becomes is the
 * core's business (core/failure.h).
 */
#ifndef VF_ERROR_H
#define VF_ERROR_H

#include "base/common.h"

/* What vf_error_detail() holds, its end included: a longer detail is cut. */
#define VF__DETAIL_MAX 256

/* Record `code` and a printf-style detail for vf_error_detail();
 * returns `code` so call sites read `return vf__fail(VF_EINVAL, ...)`. */
int vf__fail(int code, const char *fmt, ...) VF_PRINTF_LIKE(2, 3);

/* An op's message `src` into dst[cap] (vf_error.message's size): whole
 * when it fits, else its beginning and its end with " [...] " between,
 * cut between UTF-8 characters. A failure that fails its parent's wait
 * becomes the start of the parent's message, over and over: the end of
 * a long chain is its cause (cut off at 255 bytes, 20 levels of waits
 * hid it: found by a user tester). */
void vf__message_fit(char *dst, size_t cap, const char *src);

/* A name `src` into dst[cap] (vf_error.op_name's size): whole when it fits,
 * else its beginning, cut between UTF-8 characters (cut at the byte, a
 * name ended in a lone lead byte: found by a user tester). */
void vf__name_fit(char *dst, size_t cap, const char *src);

#endif /* VF_ERROR_H */
