/*
 * fuzz_trace.c: a libFuzzer harness for the trace reader and the report
 * (fuzz_trace.h), which `make fuzz` runs after fuzz_engine.c (found
 * fuzzing varflow-report's input: negative counts read as 2^64 - 1, a
 * 20 GB allocation, minutes for one op's deps; RELIABILITY.md row 310).
 * vf_profile_load takes a path: each input goes through a file of this
 * process's in $TMPDIR.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char in[256], again[256];
    if (in[0] == '\0') {
        const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(in, sizeof in, "%s/vf-fuzz-trace.%d.json", tmp, (int)getpid());
        snprintf(again, sizeof again, "%s/vf-fuzz-trace.%d.again.json", tmp,
                 (int)getpid());
    }
    FILE *f = fopen(in, "wb");
    if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    const char *broke = vf__fuzz_trace_check(in, again);
    if (broke != NULL) {
        fprintf(stderr, "fuzz_trace: %s\n", broke);
        abort();
    }
    return 0;
}
