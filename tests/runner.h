/*
 * runner.h: named test cases, each runnable alone (libuv's runner).
 *
 * A test program defines its cases once, and main runs them:
 *
 *   TEST_CASE(append_read) { ... }           a case
 *   TEST_KIND_CASE(holds_vars, k) { ... }    a case run once per engine kind
 *                                            (tu_kinds, util.h): `k` is the
 *                                            kind, check_context_ its name
 *   TEST_MAIN("test_async", 120)             main (the watchdog's seconds;
 *                                            0: none, the program starts
 *                                            its own)
 *   TEST_SKIP("no GPU: %s", why);            in a case: it cannot run here;
 *                                            says why and returns from it
 *
 * Running it:
 *
 *   test_async                  every case, in the order of the file
 *   test_async NAME...          only the cases these name; a NAME may be a
 *                               shell pattern ("holds_*", fnmatch)
 *   VF_TEST_FILTER=NAME         the same as one NAME argument
 *   test_async --list           the case names, one a line
 *
 * A NAME that matches no case is an error (exit 2), so a stale name in a
 * script or in CTest fails loudly instead of running nothing.
 *
 * Exit status: 1 when a check failed; else 77 when a case that ran was
 * skipped (TEST_SKIP), so that CTest, which tests/CMakeLists.txt tells
 * that 77 is a skip (SKIP_RETURN_CODE), reports it as skipped, never as
 * passed; else 0.
 *
 * CTest: tests/CMakeLists.txt reads the TEST_CASE / TEST_KIND_CASE lines
 * of a program's source at configure time (vf_add_cases) and adds
 * one CTest test per case, named PROGRAM.CASE and running `PROGRAM CASE`:
 * `ctest -R test_async` runs all of the program's cases, `ctest -R
 * 'test_async\.holds_vars$'` one. So each case line must start a line and
 * name the case on it, as above.
 *
 * Cases register themselves before main (a constructor each, GCC and
 * Clang) and run in the order they appear in the file.
 */
#ifndef VF_TEST_RUNNER_H
#define VF_TEST_RUNNER_H

#include "util.h" /* first: it sets the feature macros */

#include <fnmatch.h>
#include <stdarg.h>

#define RUNNER_MAX_CASES 256

typedef struct runner_case_ {
    const char *name;
    void (*fn)(void);                 /* TEST_CASE */
    void (*kind_fn)(const tu_kind *); /* TEST_KIND_CASE */
    int line;
} runner_case_;

static runner_case_ runner_cases_[RUNNER_MAX_CASES];
static int runner_ncases_;
static const runner_case_ *runner_current_; /* the case running now */
static int runner_skips_;                   /* TEST_SKIPs so far */

static inline void runner_register_(const char *name, void (*fn)(void),
                                    void (*kind_fn)(const tu_kind *), int line)
{
    if (runner_ncases_ == RUNNER_MAX_CASES) {
        fprintf(stderr, "runner.h: more than %d cases\n", RUNNER_MAX_CASES);
        abort();
    }
    /* Keep them in file order (constructors may run in any order). */
    int i = runner_ncases_++;
    while (i > 0 && runner_cases_[i - 1].line > line) {
        runner_cases_[i] = runner_cases_[i - 1];
        i--;
    }
    runner_cases_[i] = (runner_case_){name, fn, kind_fn, line};
}

#define TEST_CASE(name)                                                        \
    static void test_case_##name(void);                                        \
    __attribute__((constructor)) static void test_register_##name(void)        \
    {                                                                          \
        runner_register_(#name, test_case_##name, NULL, __LINE__);             \
    }                                                                          \
    static void test_case_##name(void)

#define TEST_KIND_CASE(name, k)                                                \
    static void test_case_##name(const tu_kind *k);                            \
    __attribute__((constructor)) static void test_register_##name(void)        \
    {                                                                          \
        runner_register_(#name, NULL, test_case_##name, __LINE__);             \
    }                                                                          \
    static void test_case_##name(const tu_kind *k)

/* TEST_SKIP's message; the case returns after it. */
__attribute__((format(printf, 1, 2))) static inline void
runner_skip_(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: %s: SKIPPED: ", tu_test_name_,
           runner_current_ != NULL ? runner_current_->name : "?");
    vprintf(fmt, ap);
    if (check_context_ != NULL)
        printf(" [%s]", check_context_);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    runner_skips_++;
}

/* In a case: it cannot run here (no device, a sanitizer's limit). Prints
 * the reason, makes the program exit 77 (unless a check failed) and
 * returns from the case's function: call it there, not in a helper. */
#define TEST_SKIP(...)                                                         \
    do {                                                                       \
        runner_skip_(__VA_ARGS__);                                             \
        return;                                                                \
    } while (0)

static inline void runner_run_case_(const runner_case_ *c)
{
    runner_current_ = c;
    if (c->fn != NULL) {
        tu_phase(c->name);
        c->fn();
        return;
    }
    for (int i = 0; i < TU_NKINDS; i++) {
        check_context_ = tu_kinds[i].name;
        tu_phase(c->name);
        c->kind_fn(&tu_kinds[i]);
    }
    check_context_ = NULL;
}

/*
 * The whole main of a test program: --list, or run the cases `argv` (and
 * VF_TEST_FILTER) name, or all of them; `test` names the program in its
 * messages, `watchdog_s` bounds the whole run (tu_init; 0: no watchdog,
 * a case starts its own). A program with setup of its own calls it from
 * its own main.
 */
static inline int runner_main(int argc, char **argv, const char *test,
                              double watchdog_s)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < runner_ncases_; i++)
            printf("%s\n", runner_cases_[i].name);
        return 0;
    }
    const char *env = getenv("VF_TEST_FILTER");
    int nfilters = 0;
    const char *filters[64];
    if (env != NULL && *env != '\0')
        filters[nfilters++] = env;
    for (int i = 1; i < argc && nfilters < 64; i++) {
        if (argv[i][0] == '-') {
            fprintf(stderr,
                    "usage: %s [--list] [CASE...] (a CASE may be a "
                    "shell pattern)\n",
                    test);
            return 2;
        }
        filters[nfilters++] = argv[i];
    }
    bool selected[RUNNER_MAX_CASES] = {false};
    for (int f = 0; f < nfilters; f++) {
        bool any = false;
        for (int i = 0; i < runner_ncases_; i++) {
            if (fnmatch(filters[f], runner_cases_[i].name, 0) == 0) {
                selected[i] = true;
                any = true;
            }
        }
        if (!any) {
            fprintf(stderr, "%s: no case named \"%s\" (--list shows them)\n",
                    test, filters[f]);
            return 2;
        }
    }
    tu_init(test, watchdog_s);
    int ran = 0, skipped = 0;
    for (int i = 0; i < runner_ncases_; i++) {
        if (nfilters > 0 && !selected[i])
            continue;
        int skips = runner_skips_;
        runner_run_case_(&runner_cases_[i]);
        ran++;
        skipped += runner_skips_ != skips; /* on one kind or more */
    }
    runner_current_ = NULL;
    if (nfilters > 0)
        printf("%s: ran %d of %d cases\n", test, ran, runner_ncases_);
    if (skipped > 0 && atomic_load(&check_failures_) == 0) {
        printf("%s: skipped: %d of the %d case(s) run could not run here "
               "(the rest passed)\n",
               test, skipped, ran);
        return 77;
    }
    return check_finish(test);
}

#define TEST_MAIN(test, watchdog_s)                                            \
    int main(int argc, char **argv)                                            \
    {                                                                          \
        return runner_main(argc, argv, test, watchdog_s);                      \
    }

#endif /* VF_TEST_RUNNER_H */
