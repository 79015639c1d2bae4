/*
 * varflow-report: turn a Chrome trace written by varflow into its other
 * outputs, after the run, without the program that made it.
 *
 *   varflow-report TRACE.json [-o OUT] [-f FORMAT] [-s COLUMN] [-c]
 *   varflow-report -h | --help
 *
 * TRACE.json is what VF_PROFILE=trace.json (or vf_profile_write) wrote ("-":
 * standard input); it is read back exactly by vf_profile_load (trace_load.h,
 * on cJSON). The
 * output goes to OUT ("-" is standard output; default: TRACE with the
 * format's extension in place of ".json": .html, .dot, .txt, .summary.json,
 * .trace.json) in FORMAT: html (the self-contained report), dot
 * (Graphviz), summary (the per-name table as text), summary-json, or chrome
 * (the trace again); default: by OUT's extension, as vf_profile_write
 * decides. -s sorts the summary by a column (total, name, count, skipped,
 * failed, mean, min, max, queued); with another format it is bad usage. -c also
 * prints the critical path, one op a line, on standard output (names as the
 * text summary writes them). Each option has a long name too (--output,
 * --format, --sort, --critical-path; getopt_long), and options may come before
 * or after TRACE.json. Exit status 0, 1 on an error (the message names the
 * file; standard output that could not be written is one), 2 on bad usage (said
 * on stderr, with the usage).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <varflow.h>
#include <varflow_profile.h>

#include "profile/out.h"
#include "profile/trace_load.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: varflow-report TRACE.json [-o OUT] [-f FORMAT] [-s COLUMN] "
            "[-c]\n"
            "  -o, --output OUT       output file, '-' for standard output "
            "(default: TRACE with the format's extension)\n"
            "  -f, --format FORMAT    html, dot, summary, summary-json or "
            "chrome (default: by OUT's extension)\n"
            "  -s, --sort COLUMN      sort the summary by total, name, count, "
            "skipped, failed, mean, min, max or queued (a summary only)\n"
            "  -c, --critical-path    print the critical path on standard "
            "output\n"
            "  -h, --help             print this and exit\n");
}

static int parse_format(const char *s, vf_profile_format *out)
{
    static const struct {
        const char *name;
        vf_profile_format format;
    } formats[] = {{"html", VF_PROFILE_HTML},
                   {"dot", VF_PROFILE_DOT},
                   {"summary", VF_PROFILE_SUMMARY_TEXT},
                   {"summary-json", VF_PROFILE_SUMMARY_JSON},
                   {"chrome", VF_PROFILE_CHROME_JSON}};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(s, formats[i].name) == 0) {
            *out = formats[i].format;
            return 0;
        }
    return -1;
}

/* The path in path order, which need not be id order (two threads pushing
 * at once can make an edge go from a larger id to a smaller one): each op
 * found by its id. Names as the text summary writes them (a control
 * character or a byte that is not UTF-8 as U+FFFD), so a trace from
 * elsewhere cannot split a line or send the terminal escapes. */
static int print_critical(const vf_profile *p)
{
    vf_profile_path path;
    int rc = vf_profile_critical_path(p, &path);
    if (rc != 0) {
        fprintf(stderr, "varflow-report: %s\n", vf_error_detail());
        return rc;
    }
    printf("critical path: %zu ops, %.3f ms of run time in a %.3f ms span "
           "(%.1f%%); %.3f ms from its first start to its last end\n",
           path.count, path.length_ns / 1e6, path.span_ns / 1e6,
           path.span_ns ? 100.0 * path.length_ns / path.span_ns : 0.0,
           path.elapsed_ns / 1e6);
    for (size_t i = 0; i < path.count; i++) {
        ptrdiff_t at = vf__prof_find(p, path.ids[i]);
        const vf_profile_record *r = at < 0 ? NULL
                                            : vf_profile_at(p, (size_t)at);
        if (r == NULL) { /* the path names only the snapshot's ops */
            fprintf(stderr,
                    "varflow-report: the critical path names op "
                    "#%llu, which the trace does not hold\n",
                    (unsigned long long)path.ids[i]);
            vf_profile_path_destroy(&path);
            return VF_EINVAL;
        }
        char label[32];
        snprintf(label, sizeof label, "op #%llu", (unsigned long long)r->id);
        printf("  #%-8llu ", (unsigned long long)r->id);
        int width = vf__prof_text_string(stdout, r->name[0] ? r->name : label,
                                         -1, 0);
        printf("%*s worker %-3d start %12.3f us  run %10.3f us\n",
               width < 32 ? 32 - width : 0, "", r->worker, r->start_ns / 1e3,
               (r->end_ns - r->start_ns) / 1e3);
    }
    vf_profile_path_destroy(&path);
    return 0;
}

/* The output's name when -o is not given: TRACE with its ".json" replaced
 * by the format's extension (chrome: ".trace.json", never TRACE itself). */
static char *default_output(const char *in, vf_profile_format format)
{
    const char *ext = format == VF_PROFILE_DOT            ? ".dot"
                      : format == VF_PROFILE_SUMMARY_TEXT ? ".txt"
                      : format == VF_PROFILE_SUMMARY_JSON ? ".summary.json"
                      : format == VF_PROFILE_CHROME_JSON  ? ".trace.json"
                                                          : ".html";
    size_t n = strlen(in);
    char *out = malloc(n + strlen(ext) + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, in, n + 1);
    if (n > 5 && strcmp(in + n - 5, ".json") == 0)
        out[n - 5] = '\0';
    strcat(out, ext);
    return out;
}

int main(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"output", required_argument, NULL, 'o'},
        {"format", required_argument, NULL, 'f'},
        {"sort", required_argument, NULL, 's'},
        {"critical-path", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *in = NULL, *out = NULL, *format_arg = NULL;
    vf_profile_format format = VF_PROFILE_AUTO;
    vf_profile_sort sort = VF_PROFILE_SORT_TOTAL;
    int critical = 0, sorted = 0, c;
    while ((c = getopt_long(argc, argv, "o:f:s:ch", long_options, NULL)) !=
           -1) {
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case 'f':
            if (parse_format(optarg, &format) != 0) {
                fprintf(stderr, "varflow-report: unknown format '%s'\n",
                        optarg);
                return 2;
            }
            format_arg = optarg;
            break;
        case 's':
            if (vf_profile_sort_parse(optarg, &sort) != 0) {
                fprintf(stderr, "varflow-report: unknown column '%s'\n",
                        optarg);
                return 2;
            }
            sorted = 1;
            break;
        case 'c':
            critical = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* getopt_long said what was wrong */
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc)
        in = argv[optind++];
    if (in == NULL || optind < argc) {
        if (in == NULL)
            fprintf(stderr, "varflow-report: no trace to read\n");
        else
            fprintf(stderr,
                    "varflow-report: one trace at a time ('%s' is "
                    "a second)\n",
                    argv[optind]);
        usage(stderr);
        return 2;
    }
    char *default_out = NULL;
    if (out == NULL) {
        if (format == VF_PROFILE_AUTO)
            format = VF_PROFILE_HTML;
        if ((default_out = default_output(in, format)) == NULL) {
            fprintf(stderr, "varflow-report: out of memory\n");
            return 1;
        }
        out = default_out;
    }
    if (format == VF_PROFILE_AUTO) /* what vf_profile_write would pick */
        format = strcmp(out, "-") == 0 ? VF_PROFILE_CHROME_JSON
                                       : vf__prof_format_of(out);
    if (sorted && format != VF_PROFILE_SUMMARY_TEXT &&
        format != VF_PROFILE_SUMMARY_JSON) {
        /* The format given, or else the output's (a user tester's
         * `-f dot -o /dev/null` blamed /dev/null). */
        if (format_arg != NULL)
            fprintf(stderr,
                    "varflow-report: -s sorts the summary, and -f %s is "
                    "not one (-f summary or summary-json)\n",
                    format_arg);
        else
            fprintf(stderr,
                    "varflow-report: -s sorts the summary, and %s is "
                    "not one (-f summary or summary-json)\n",
                    out);
        usage(stderr);
        free(default_out);
        return 2;
    }
    vf_profile *p = NULL;
    /* "-": the trace comes on standard input. */
    int rc = vf_profile_load(strcmp(in, "-") == 0 ? "/dev/stdin" : in, &p);
    if (rc == 0) {
        if (format == VF_PROFILE_SUMMARY_TEXT ||
            format == VF_PROFILE_SUMMARY_JSON)
            rc = vf_profile_summary_write(p, out, format, sort);
        else
            rc = vf_profile_write(p, out, format);
    }
    if (rc != 0) {
        fprintf(stderr, "varflow-report: %s\n", vf_error_detail());
    } else {
        if (strcmp(out, "-") != 0)
            fprintf(stderr, "varflow-report: wrote %s (%zu ops)\n", out,
                    vf_profile_count(p));
        if (critical)
            rc = print_critical(p);
    }
    /* What went to standard output (the output, the path) must have got
     * there: a full disk or a closed pipe is an error, not a success. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "varflow-report: writing to standard output: %s\n",
                strerror(errno));
        rc = VF_ESYSTEM;
    }
    vf_profile_destroy(p);
    free(default_out);
    return rc == 0 ? 0 : 1;
}
