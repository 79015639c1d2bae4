/*
 * write.c: writing a snapshot to a file, by format, and the helpers the
 * outputs share (out.h). The Chrome trace is trace_write.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/hashmap.h"
#include "profile/out.h"
#include "varflow_profile.h"

/* --- shared helpers ---------------------------------------------------- */

ptrdiff_t vf__prof_find(const vf_profile *p, uint64_t id)
{
    size_t lo = 0, hi = p->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t m = p->records[mid].id;
        if (m == id)
            return (ptrdiff_t)mid;
        if (m < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

const char *vf__prof_name(const vf_profile_record *r)
{
    return vf__prof_unnamed(r) ? "(unnamed)" : r->name;
}

const char *vf__prof_label(const vf_profile_record *r,
                           char buf[VF__PROF_LABEL_MAX])
{
    if (!vf__prof_unnamed(r))
        return r->name;
    snprintf(buf, VF__PROF_LABEL_MAX, "op #%" PRIu64, r->id);
    return buf;
}

int vf__prof_deps_unique(uint64_t *deps, int n)
{
    /* A few by looking back; more through a set of those seen (an op of
     * a million vars has as many deps), or, out of memory for the set,
     * by looking back all the same. */
    vf__hashmap seen;
    vf__hashmap_init(&seen, vf__calloc);
    bool hashed = n > 16 && vf__hashmap_reserve(&seen, (size_t)n) == 0;
    int kept = 0;
    for (int k = 0; k < n; k++) {
        bool repeat = false;
        if (hashed) {
            /* ids are never 0 (hashmap.h's empty key): 1, 2, ... */
            repeat = deps[k] == 0 ||
                     vf__hashmap_put(&seen, deps[k], 0, NULL) != 0;
        } else {
            for (int j = 0; j < kept && !repeat; j++)
                repeat = deps[j] == deps[k];
        }
        if (!repeat)
            deps[kept++] = deps[k];
    }
    vf__hashmap_destroy(&seen);
    return kept;
}

const char *vf__prof_status_name(int status)
{
    return status == 0 ? "ok" : status == VF_ESKIPPED ? "skipped" : "failed";
}

static const char *const property_names[] = {
    "normal",          "copy_to_device",     "copy_from_device",
    "cpu_prioritized", "device_prioritized", "delete_var"};
#define NPROPS ((int)(sizeof property_names / sizeof property_names[0]))

const char *vf__prof_property_name(vf_property prop)
{
    return (int)prop >= 0 && (int)prop < NPROPS ? property_names[prop]
                                                : "unknown";
}

int vf__prof_property_parse(const char *name)
{
    for (int i = 0; i < NPROPS; i++)
        if (strcmp(name, property_names[i]) == 0)
            return i;
    return -1;
}

const char *vf__prof_device_name(vf_device d)
{
    return d.type == VF_DEVICE_CPU    ? "cpu"
           : d.type == VF_DEVICE_CUDA ? "cuda"
                                      : "emulated";
}

static int device_cmp(vf_device a, vf_device b)
{
    if (a.type != b.type)
        return (int)a.type < (int)b.type ? -1 : 1;
    return a.id < b.id ? -1 : a.id > b.id;
}

ptrdiff_t vf__prof_device_index(const vf_device *devs, size_t n, vf_device d)
{
    for (size_t i = 0; i < n; i++)
        if (device_cmp(devs[i], d) == 0)
            return (ptrdiff_t)i;
    return -1;
}

/* A handful of devices at most: a linear insertion per new one. */
int vf__prof_devices(const vf_profile *p, vf_device **out, size_t *n)
{
    vf_device *devs = NULL;
    size_t count = 0, cap = 0;
    for (size_t i = 0; i < p->count; i++) {
        const vf_profile_record *r = &p->records[i];
        if (!vf__prof_has_device_span(r) ||
            vf__prof_device_index(devs, count, r->device) >= 0)
            continue;
        if (count == cap) {
            cap = cap ? 2 * cap : 4;
            vf_device *t = vf__malloc(cap * sizeof *t);
            if (t == NULL) {
                free(devs);
                return VF_ENOMEM;
            }
            if (count > 0)
                memcpy(t, devs, count * sizeof *t);
            free(devs);
            devs = t;
        }
        size_t at = count;
        while (at > 0 && device_cmp(devs[at - 1], r->device) > 0) {
            devs[at] = devs[at - 1];
            at--;
        }
        devs[at] = r->device;
        count++;
    }
    *out = devs;
    *n = count;
    return 0;
}

/* The length of the well-formed UTF-8 sequence at `s` (its first byte
 * 0x80 or more), or 0: a stray continuation byte, a lead byte without its
 * continuations, an overlong form, a surrogate, or past U+10FFFF (RFC
 * 3629). */
static int utf8_length(const unsigned char *s)
{
    unsigned char c = s[0];
    int n = c >= 0xc2 && c <= 0xdf   ? 2
            : c >= 0xe0 && c <= 0xef ? 3
            : c >= 0xf0 && c <= 0xf4 ? 4
                                     : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) ||
        (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return n;
}

void vf__prof_json_string(FILE *f, const char *s, int html)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned char c = *p;
        int n = 1;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || (html && (c == '<' || c == '>' || c == '&')))
            fprintf(f, "\\u%04x", c);
        else if (c < 0x80)
            fputc(c, f);
        else if ((n = utf8_length(p)) != 0)
            fwrite(p, 1, (size_t)n, f);
        else { /* not UTF-8 (a name is the program's bytes), as JSON is */
            fputs("\\ufffd", f);
            n = 1;
        }
        p += n;
    }
    fputc('"', f);
}

int vf__prof_text_string(FILE *f, const char *s, int max, int dot)
{
    int chars = 0;
    for (const unsigned char *p = (const unsigned char *)s;
         *p && (max < 0 || chars < max); chars++) {
        unsigned char c = *p;
        int n = c < 0x80 ? 1 : utf8_length(p);
        if (c < 0x20 || c == 0x7f || n == 0) {
            if (f != NULL)
                fputs("\xef\xbf\xbd", f); /* U+FFFD */
            p += 1;
            continue;
        }
        if (f != NULL) {
            if (dot && (c == '"' || c == '\\'))
                fputc('\\', f);
            fwrite(p, 1, (size_t)n, f);
        }
        p += n;
    }
    return chars;
}

void vf__prof_print_us(FILE *f, uint64_t ns)
{
    fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

const char *vf__prof_human(char buf[32], uint64_t ns)
{
    if (ns < 1000)
        snprintf(buf, 32, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        snprintf(buf, 32, "%.2f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, 32, "%.3f ms", (double)ns / 1e6);
    else
        snprintf(buf, 32, "%.3f s", (double)ns / 1e9);
    return buf;
}

/* --- writing a file ---------------------------------------------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    if (k > n)
        return 0;
    for (size_t i = 0; i < k; i++) {
        char c = s[n - k + i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != suffix[i])
            return 0;
    }
    return 1;
}

vf_profile_format vf__prof_format_of(const char *path)
{
    if (ends_with(path, ".html") || ends_with(path, ".htm"))
        return VF_PROFILE_HTML;
    if (ends_with(path, ".dot") || ends_with(path, ".gv"))
        return VF_PROFILE_DOT;
    if (ends_with(path, ".txt"))
        return VF_PROFILE_SUMMARY_TEXT;
    if (ends_with(path, ".summary.json"))
        return VF_PROFILE_SUMMARY_JSON;
    return VF_PROFILE_CHROME_JSON;
}

/* --- the output file ----------------------------------------------------- */

/* The process's umask, for the mode fopen would have given a new file:
 * umask() itself sets it too (no thread may see it changed), so it is
 * read from /proc; 022 where that cannot tell. */
static mode_t umask_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    unsigned mask = 022;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "Umask: %o", &mask) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return (mode_t)mask;
}

/* Where emit writes `path`. A regular file, or none yet, is written whole
 * into a temporary file beside it that then replaces it (rename): two
 * writers of one path (every engine of a process that VF_PROFILE names
 * it to, destroyed at once) leave one whole output, the last, never two
 * interleaved (found trying the profiler as a user), and a reader never
 * finds half of one. The file it replaces keeps its mode and owner; one
 * this process may not write is refused as fopen would refuse it. Anything
 * else (a device, a pipe, a symbolic link, a file with other hard links, a
 * directory where no file can be made) is written in place. */
typedef struct out_file {
    FILE *f;
    char *tmp; /* the temporary file, or NULL: in place */
} out_file;

static int out_open(const char *path, out_file *o)
{
    o->tmp = NULL;
    struct stat st;
    bool exists = lstat(path, &st) == 0;
    if (exists && S_ISREG(st.st_mode) && access(path, W_OK) != 0)
        return errno; /* as fopen: no replacing a file it may not write */
    if (exists ? S_ISREG(st.st_mode) && st.st_nlink == 1 : errno == ENOENT) {
        size_t n = strlen(path);
        o->tmp = vf__malloc(n + sizeof ".XXXXXX");
        int fd = -1;
        if (o->tmp != NULL) {
            memcpy(o->tmp, path, n);
            memcpy(o->tmp + n, ".XXXXXX", sizeof ".XXXXXX");
            fd = mkostemp(o->tmp, O_CLOEXEC);
        }
        if (fd >= 0) {
            (void)fchmod(fd, exists ? st.st_mode & 07777 : 0666 & ~umask_now());
            /* As it was (root may write another's file). Tested, not cast
             * to void: glibc's fortified fchown warns on an unused result,
             * cast or not (-DVF_WERROR=ON with -D_FORTIFY_SOURCE failed:
             * found by a user tester). */
            if (exists && fchown(fd, st.st_uid, st.st_gid) != 0) {
                /* not ours to give away: the file is this process's */
            }
            if ((o->f = fdopen(fd, "w")) != NULL)
                return 0;
            close(fd);
            unlink(o->tmp);
        }
        free(o->tmp);
        o->tmp = NULL;
    }
    o->f = fopen(path, "w");
    return o->f != NULL ? 0 : errno;
}

/* Close it (`err`: what writing it met, 0 for nothing); a temporary file
 * replaces `path` now, or goes. Returns the first error, 0 for none. */
static int out_close(const char *path, out_file *o, int err)
{
    if (fclose(o->f) != 0 && err == 0)
        err = errno ? errno : EIO;
    if (o->tmp != NULL) {
        if (err == 0 && rename(o->tmp, path) != 0)
            err = errno;
        if (err != 0)
            unlink(o->tmp);
        free(o->tmp);
    }
    return err;
}

static int emit(const char *who, const vf_profile *p, const char *path,
                vf_profile_format format, vf_profile_sort by)
{
    if (p == NULL || path == NULL || path[0] == '\0')
        return vf__fail(VF_EINVAL, "%s: NULL profile, or NULL or empty path",
                        who);
    if (format == VF_PROFILE_AUTO)
        format = vf__prof_format_of(path);
    if (format < VF_PROFILE_CHROME_JSON || format > VF_PROFILE_HTML)
        return vf__fail(VF_ENOTSUP, "%s: unknown format %d", who, (int)format);
    if ((int)by < VF_PROFILE_SORT_TOTAL || by > VF_PROFILE_SORT_QUEUED)
        return vf__fail(VF_EINVAL, "%s: unknown sort key %d", who, (int)by);
    int to_stdout = strcmp(path, "-") == 0;
    out_file out = {stdout, NULL};
    int open_err = to_stdout ? 0 : out_open(path, &out);
    if (open_err != 0)
        return vf__fail(VF_ESYSTEM, "%s: %s: %s", who, path,
                        strerror(open_err));
    FILE *f = out.f;
    /* Standard output is one stream for the whole process: held for the
     * whole document, so two engines' profiles written there at once (two
     * destroys under VF_PROFILE=-) come out one after the other, each
     * whole, not interleaved mid-line (found by a user tester), and so
     * does the program's own stdio meanwhile. */
    if (to_stdout)
        flockfile(f);
    int rc;
    switch (format) {
    case VF_PROFILE_SUMMARY_TEXT:
    case VF_PROFILE_SUMMARY_JSON:
        rc = vf__prof_write_summary(p, f, format, by);
        break;
    case VF_PROFILE_DOT:
        rc = vf__prof_write_dot(p, f);
        break;
    case VF_PROFILE_HTML:
        rc = vf__prof_write_html(p, f);
        break;
    default:
        rc = vf__prof_write_chrome(p, f);
        break;
    }
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    if (to_stdout) {
        if (fflush(f) != 0 && err == 0)
            err = errno ? errno : EIO;
        funlockfile(f);
    } else {
        err = out_close(path, &out, rc != 0 ? ENOMEM : err);
    }
    if (rc != 0)
        return vf__fail(rc, "%s: %s: out of memory", who, path);
    if (err != 0)
        return vf__fail(VF_ESYSTEM, "%s: %s: %s", who, path, strerror(err));
    return 0;
}

VF_API int vf_profile_write(const vf_profile *p, const char *path,
                            vf_profile_format format)
{
    return emit("vf_profile_write", p, path, format, VF_PROFILE_SORT_TOTAL);
}

VF_API int vf_profile_summary_write(const vf_profile *p, const char *path,
                                    vf_profile_format format,
                                    vf_profile_sort by)
{
    if (format != VF_PROFILE_SUMMARY_TEXT && format != VF_PROFILE_SUMMARY_JSON)
        return vf__fail(VF_ENOTSUP,
                        "vf_profile_summary_write: format %d is "
                        "not a summary",
                        (int)format);
    return emit("vf_profile_summary_write", p, path, format, by);
}
