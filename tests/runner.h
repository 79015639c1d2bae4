/*
 * runner.h: named test cases, each runnable alone (libuv's runner).
 *
 * A test program defines its cases once, and main runs them:
 *
 *   TEST_CASE(append_read) { ... }           a case
 *   TEST_KIND_CASE(holds_vars, k) { ... }    a case run once per engine kind
 *                                            (tu_kinds, util.h): `k` is the
 *                                            kind, check_context_ its name
 *   TEST_MAIN("test_async", 120)             main (the watchdog's seconds)
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
 * CTest: tests/CMakeLists.txt reads the TEST_CASE / TEST_KIND_CASE lines
 * of a program's source at configure time (vf_add_test_program) and adds
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

#define RUNNER_MAX_CASES 256

typedef struct runner_case_ {
    const char *name;
    void (*fn)(void);                /* TEST_CASE */
    void (*kind_fn)(const tu_kind *); /* TEST_KIND_CASE */
    int line;
} runner_case_;

static runner_case_ runner_cases_[RUNNER_MAX_CASES];
static int runner_ncases_;

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
    static void test_case_##name(void);                                       \
    __attribute__((constructor)) static void test_register_##name(void)       \
    {                                                                          \
        runner_register_(#name, test_case_##name, NULL, __LINE__);            \
    }                                                                          \
    static void test_case_##name(void)

#define TEST_KIND_CASE(name, k)                                                \
    static void test_case_##name(const tu_kind *k);                           \
    __attribute__((constructor)) static void test_register_##name(void)       \
    {                                                                          \
        runner_register_(#name, NULL, test_case_##name, __LINE__);            \
    }                                                                          \
    static void test_case_##name(const tu_kind *k)

static inline void runner_run_case_(const runner_case_ *c)
{
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
 * messages, `watchdog_s` bounds the whole run (tu_init). A program with
 * setup of its own calls it from its own main.
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
            fprintf(stderr, "usage: %s [--list] [CASE...] (a CASE may be a "
                            "shell pattern)\n", test);
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
    int ran = 0;
    for (int i = 0; i < runner_ncases_; i++) {
        if (nfilters > 0 && !selected[i])
            continue;
        runner_run_case_(&runner_cases_[i]);
        ran++;
    }
    if (nfilters > 0)
        printf("%s: ran %d of %d cases\n", test, ran, runner_ncases_);
    return check_finish(test);
}

#define TEST_MAIN(test, watchdog_s)                                            \
    int main(int argc, char **argv)                                            \
    {                                                                          \
        return runner_main(argc, argv, test, watchdog_s);                      \
    }

#endif /* VF_TEST_RUNNER_H */
