/* error.c: error names and messages, call details, internal panics. */
#include "base/error.h"

#include <stdarg.h>
#include <string.h>

static _Thread_local char detail[VF__DETAIL_MAX];

VF_API const char *vf_error_string(int code)
{
    switch (code) {
    case 0:
        return "success";
#define VF_STRERROR_CASE_(name, value, message)                                \
    case value:                                                                \
        return message;
        VF_ERRNO_MAP(VF_STRERROR_CASE_)
#undef VF_STRERROR_CASE_
    default:
        return "unknown error";
    }
}

VF_API const char *vf_error_name(int code)
{
    switch (code) {
    case 0:
        return "0";
#define VF_ERRNAME_CASE_(name, value, message)                                 \
    case value:                                                                \
        return "VF_" #name;
        VF_ERRNO_MAP(VF_ERRNAME_CASE_)
#undef VF_ERRNAME_CASE_
    default:
        return "VF_UNKNOWN";
    }
}

VF_API const char *vf_error_detail(void)
{
    return detail;
}

/* Format into a buffer of its own, then copy: an argument may be the
 * detail itself (`vf_error_set_detail(rc, "mylib: %s", vf_error_detail())`,
 * how a library over varflow prefixes it), which vsnprintf straight into
 * `detail` overwrote as it read it (found by a user tester). */
static void set_detail(const char *fmt, va_list ap)
{
    char made[sizeof detail];
    vsnprintf(made, sizeof made, fmt, ap);
    memcpy(detail, made, strlen(made) + 1);
}

int vf__fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_detail(fmt, ap);
    va_end(ap);
    return code;
}

VF_API int vf_error_set_detail(int code, const char *fmt, ...)
{
    if (fmt == NULL)
        fmt = "";
    va_list ap;
    va_start(ap, fmt);
    set_detail(fmt, ap);
    va_end(ap);
    return code;
}

_Noreturn void vf__panic(const char *file, int line, const char *what)
{
    fprintf(stderr, "varflow: internal error at %s:%d: %s\n", file, line, what);
    abort();
}

void vf__message_fit(char *dst, size_t cap, const char *src)
{
    static const char gap[] = " [...] ";
    size_t len = strlen(src);
    if (len < cap) {
        memcpy(dst, src, len + 1);
        return;
    }
    size_t room = cap - 1 - (sizeof gap - 1); /* for the two ends */
    size_t head = room / 3, tail = room - head;
    while (head > 0 && ((unsigned char)src[head] & 0xC0) == 0x80)
        head--; /* src[head], the first byte left out, starts a character */
    size_t from = len - tail;
    while (from < len && ((unsigned char)src[from] & 0xC0) == 0x80)
        from++;
    memcpy(dst, src, head);
    memcpy(dst + head, gap, sizeof gap - 1);
    memcpy(dst + head + sizeof gap - 1, src + from, len - from + 1);
}

void vf__name_fit(char *dst, size_t cap, const char *src)
{
    size_t len = strlen(src);
    if (len >= cap) {
        len = cap - 1;
        while (len > 0 && ((unsigned char)src[len] & 0xC0) == 0x80)
            len--; /* src[len], the first byte left out, starts a character */
    }
    memcpy(dst, src, len);
    dst[len] = '\0';
}
