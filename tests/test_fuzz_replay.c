/*
 * test_fuzz_replay: the fuzz harness (fuzz/fuzz_engine.c) as a regular
 * test, so `make test` covers it without clang or libFuzzer.
 *
 * It runs every input of the checked-in corpus (fuzz/corpus, found beside
 * this file's source: the case corpus), then random inputs made from the
 * run's seed (400 of up to 600 bytes; fewer under sanitizers: tu_scale();
 * the case random_inputs). Each input is a
 * program checked against the serial oracle of issue 17's failure
 * semantics (tests/failure_oracle.h; see the comment at the top of
 * fuzz/fuzz_engine.c). Unlike the fuzzer, which aborts at the first input
 * that differs, the test runs them all, prints the differences of the
 * first few (naming the input: a random one is replayed with VF_TEST_SEED
 * and VF_FUZZ_INPUT=<index>) and fails with the count.
 */
#include "runner.h"

#include <dirent.h>

#define VF_FUZZ_NO_MAIN 1
#include "../fuzz/fuzz_engine.c"

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        CHECK_REPORT_("cannot open %s", path);
        return;
    }
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    fuzz_context = path;
    LLVMFuzzerTestOneInput(buf, n);
}

/* Every input of the checked-in corpus (none with VF_FUZZ_INPUT, which
 * names one random input). */
TEST_CASE(corpus)
{
    if (getenv("VF_FUZZ_INPUT") != NULL) {
        printf("test_fuzz_replay: VF_FUZZ_INPUT is set: no corpus input\n");
        return;
    }
    long differing = fuzz_differing;
    /* __FILE__ is .../tests/test_fuzz_replay.c */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, "../fuzz/corpus");
    else
        snprintf(slash, sizeof dir - (size_t)(slash - dir), "/../fuzz/corpus");
    DIR *d = opendir(dir);
    if (d == NULL) {
        CHECK_REPORT_("no corpus at %s", dir);
        return;
    }
    int count = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (ent->d_name[0] == '.')
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        tu_phase_limit(path, 60);
        run_file(path);
        count++;
    }
    closedir(d);
    printf("test_fuzz_replay: %d corpus inputs: %ld differ from the serial "
           "oracle\n",
           count, fuzz_differing - differing);
    CHECK_EQ(fuzz_differing - differing, 0);
}

static void random_input(int i, uint8_t *buf, size_t *n)
{
    tu_rng rng = tu_rng_make(1000 + (uint64_t)i);
    *n = (size_t)tu_range(&rng, 2, 600);
    for (size_t j = 0; j < *n; j++)
        buf[j] = (uint8_t)tu_next(&rng);
}

/* Random inputs made from the run's seed. */
TEST_CASE(random_inputs)
{
    long differing = fuzz_differing;
    const char *only = getenv("VF_FUZZ_INPUT");
    int nrandom = (int)tu_scaled(400, 40);
#if defined(TU_ASAN)
    nrandom = nrandom / 4 > 40 ? nrandom / 4 : 40;
#endif
    static uint8_t buf[600];
    size_t n;
    for (int i = 0; i < nrandom; i++) {
        if (only && atoi(only) != i)
            continue;
        char phase[64];
        snprintf(phase, sizeof phase, "random input %d", i);
        tu_phase_limit(phase, 60);
        random_input(i, buf, &n);
        static char ctx[96];
        snprintf(ctx, sizeof ctx,
                 "random input %d (VF_TEST_SEED=%llu "
                 "VF_FUZZ_INPUT=%d)",
                 i, (unsigned long long)check_seed(), i);
        fuzz_context = ctx;
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("test_fuzz_replay: %d random inputs (seed %llu): %ld differ from "
           "the serial oracle\n",
           nrandom, (unsigned long long)check_seed(),
           fuzz_differing - differing);
    CHECK_EQ(fuzz_differing - differing, 0);
}

/* The harness's settings, then the cases. */
int main(int argc, char **argv)
{
    fuzz_keep_going = true;
    fuzz_dump = getenv("VF_FUZZ_DUMP") != NULL; /* programs, as decoded */
    if (getenv("VF_FUZZ_PRINT")) /* how many differing inputs to show */
        fuzz_print = atol(getenv("VF_FUZZ_PRINT"));
    return runner_main(argc, argv, "test_fuzz_replay", 200);
}
