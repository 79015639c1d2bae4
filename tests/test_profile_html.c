/*
 * test_profile_html: the HTML report is one self-contained file that a
 * browser renders.
 *
 * A known run on the per-device engine with 2 + 2 workers: ops on the CPU
 * pool, one on the priority pool, a failed op and the op it makes skip,
 * an async op that runs inline (ready at its push from this thread), so
 * the timeline has one row per worker plus an "inline" row, and device ops
 * on the emulated device (copies in, compute, copies out, a batch each,
 * 300 us of emulated latency a piece), whose work the device timed on the
 * streams of their workers.
 *
 * Checked without a browser: the file refers to nothing outside itself
 * (no http:, https:, src= or <link), its embedded data parses as JSON
 * (cJSON) with the right counts (the device ops with their device and
 * span, the skipped op an instant), the page holds the script that draws
 * a skipped op as a hatched mark SKIP_W pixels wide and its legend, and a
 * name holding "</script>" cannot end the data element early.
 *
 * Then headless Chromium (VF_CHROMIUM, else chromium, chromium-browser or
 * google-chrome on PATH) loads the file: --dump-dom must show the marker
 * the report's script sets once it has drawn everything without an error
 * (data-vf-rendered="ok", #vf-rendered "N rows, M ops, K streams"), one
 * .vf-row per worker plus the inline one, one device group holding a
 * .vf-stream lane per device worker that ran device work (K of them), the
 * row of the skipped op saying it drew one skipped mark
 * (data-skipped="1", every other row and lane "0"), the legend's hatched
 * "skipped" swatch, and no #vf-error; --screenshot writes
 * profile-report.png in the test's directory (kept when a check fails),
 * or where VF_REPORT_SCREENSHOT names, for a person to look at (it wrote
 * it into the working directory, over a tracked copy when run from the
 * source tree). Without Chromium that case (browser) is skipped (exit 77) with
 * a message saying how to install it (apt-get install chromium; .ci/run
 * does); the case report_file checks the file without a browser.
 */
#include "runner.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <varflow_profile.h>

#define NBATCH 6 /* device batches */

static char dir[64];

static int work_fn(vf_run *run, void *arg)
{
    (void)run;
    tu_spin_us(arg ? 300 : 150);
    return 0;
}

static int failing_fn(vf_run *run, void *arg)
{
    (void)arg;
    vf_run_set_error(run, "on purpose");
    return 3;
}

static int device_work(void *arg) /* the stream's latency is its time */
{
    (void)arg;
    return 0;
}

static int device_fn(vf_run *run, void *arg)
{
    return vf_run_submit(run, device_work, arg, 0);
}

static void async_fn(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    (void)arg;
    CHECK_OK(vf_completion_finish(done, 0, NULL));
}

/* Runs the known program; returns its snapshot. */
static vf_profile *known_run(void)
{
    tu_kind kind = tu_kinds[4];         /* perdevice, 2 + 2 */
    kind.cfg.emulated_latency_us = 300; /* device work sleeps, a pipeline */
    vf_engine *e = tu_engine(&kind);
    vf_var a = tu_var(e), b = tu_var(e), c = tu_var(e), d = tu_var(e);
    CHECK_OK(vf_profile_start(e));
    static const vf_property props[] = {VF_PROP_COPY_TO_DEVICE, VF_PROP_NORMAL,
                                        VF_PROP_COPY_FROM_DEVICE};
    static const char *const dev_names[] = {"copy in", "compute", "copy out"};
    for (int i = 0; i < NBATCH; i++) {
        vf_var buf = tu_var(e);
        for (int k = 0; k < 3; k++)
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.fn = device_fn,
                                           .writes = VF_VARS(buf),
                                           .device = {VF_DEVICE_EMULATED, 0},
                                           .property = props[k],
                                           .name = dev_names[k]}));
    }
    for (int i = 0; i < 40; i++) {
        vf_var w = i % 3 == 0 ? a : i % 3 == 1 ? b : c;
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = work_fn,
                                            .arg = i % 4 ? NULL : e,
                                            .reads = VF_VARS(a),
                                            .writes = VF_VARS(w),
                                            .name = i % 4 ? "small" : "big"}));
    }
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = work_fn,
                                        .reads = VF_VARS(b),
                                        .property = VF_PROP_CPU_PRIORITIZED,
                                        .name = "prio </script><b>x</b>"}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = failing_fn, .writes = VF_VARS(d), .name = "fails"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = work_fn,
                                        .reads = VF_VARS(d),
                                        .writes = VF_VARS(c),
                                        .name = "skipped"}));
    vf_var lone = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = async_fn,
                                        .writes = VF_VARS(lone),
                                        .name = "async"}));
    CHECK_ERR(vf_engine_wait_all(e, NULL), VF_EOPFAILED);
    vf_profile *p = NULL;
    CHECK_OK(vf_profile_take(e, &p));
    REQUIRE(p != NULL);
    CHECK_OK(vf_engine_destroy(e));
    return p;
}

static char *read_all(const char *path)
{
    char *text = tu_read_file(path);
    if (text == NULL)
        CHECK_REPORT_("cannot read %s", path);
    return text;
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *s = text; (s = strstr(s, what)) != NULL; s++)
        n++;
    return n;
}

/* The number at `key` of object o, or -1e300 when absent or not a number. */
static double number(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1e300;
}

/* The data object embedded in the report `html` (cut out of it in place),
 * parsed; NULL (a check failed) when it is not valid JSON. *end (if not
 * NULL) is where the data's element ends. */
static cJSON *embedded_data(char *html, char **end_out)
{
    const char *open = "<script id=\"vf-data\" type=\"application/json\">";
    char *data = strstr(html, open);
    REQUIRE(data != NULL);
    data += strlen(open);
    char *end = strstr(data, "</script>");
    REQUIRE(end != NULL);
    *end = '\0';
    if (end_out != NULL)
        *end_out = end;
    const char *stop = data;
    cJSON *doc = cJSON_ParseWithOpts(data, &stop, 1);
    if (doc == NULL)
        CHECK_REPORT_("embedded data: invalid JSON at byte %zu",
                      (size_t)(stop - data));
    return doc;
}

/* Checks that need no browser. */
static void check_file(const char *path, const vf_profile *p)
{
    char *html = read_all(path);
    REQUIRE(html != NULL);
    CHECK(strncmp(html, "<!DOCTYPE html>", 15) == 0);
    CHECK(strstr(html, "http:") == NULL && strstr(html, "https:") == NULL);
    CHECK(strstr(html, "src=") == NULL && strstr(html, "<link") == NULL);
    CHECK_EQ(count(html, "</script>"), 2); /* data + script, no more */
    char *end;
    cJSON *doc = embedded_data(html, &end);
    REQUIRE(doc != NULL);
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(doc, "ops");
    CHECK(cJSON_IsArray(ops) &&
          cJSON_GetArraySize(ops) == (int)vf_profile_count(p));
    CHECK_EQ(number(doc, "records"), vf_profile_count(p));
    CHECK_EQ(number(doc, "shown"), vf_profile_count(p));
    CHECK_EQ(number(doc, "workers"), vf_profile_num_workers(p));
    /* big small prio fails skipped async, copy in, compute, copy out */
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(doc, "summary");
    CHECK(cJSON_IsArray(sum) && cJSON_GetArraySize(sum) == 9);
    /* Device ops: three more, device 0 ("emulated 0"), its start and end. */
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(doc, "devices");
    CHECK(cJSON_IsArray(devs) && cJSON_GetArraySize(devs) == 1 &&
          cJSON_IsString(devs->child) &&
          strcmp(devs->child->valuestring, "emulated 0") == 0);
    int ndevice = 0;
    const cJSON *op;
    cJSON_ArrayForEach(op, ops)
    {
        int n = cJSON_GetArraySize(op);
        CHECK(n == 9 || n == 12);
        const vf_profile_record *r = vf_profile_at(
            p, (size_t)cJSON_GetArrayItem(op, 0)->valuedouble - 1);
        REQUIRE(r != NULL);
        CHECK_EQ(n == 12, r->device_end_ns > 0);
        if (n != 12)
            continue;
        ndevice++;
        CHECK_EQ(cJSON_GetArrayItem(op, 9)->valuedouble, 0);
        CHECK_EQ(cJSON_GetArrayItem(op, 10)->valuedouble, r->device_start_ns);
        CHECK_EQ(cJSON_GetArrayItem(op, 11)->valuedouble, r->device_end_ns);
    }
    CHECK_EQ(ndevice, 3 * NBATCH);
    /* The skipped op: an instant (start = end) with status VF_ESKIPPED,
     * which the script draws SKIP_W pixels wide, hatched (the legend says
     * so); the data and the script the page holds. */
    int nskipped = 0;
    cJSON_ArrayForEach(op, ops)
    {
        if (cJSON_GetArrayItem(op, 7)->valuedouble != VF_ESKIPPED)
            continue;
        nskipped++;
        CHECK_EQ(cJSON_GetArrayItem(op, 3)->valuedouble,
                 cJSON_GetArrayItem(op, 4)->valuedouble);
    }
    CHECK_EQ(nskipped, 1);
    const char *script = end + strlen("</script>");
    CHECK(strstr(script, "SKIPPED = -12, SKIP_W = 7") != NULL);
    CHECK(strstr(script, "'skipped (never ran: a hatched mark '") != NULL);
    CHECK(strstr(script, "drawSkipped(ctx, x0, x1, y, h, g.w)") != NULL);
    CHECK(strstr(script, ".sw-skip") != NULL || strstr(html, ".sw-skip"));
    const cJSON *crit = cJSON_GetObjectItemCaseSensitive(doc, "crit");
    CHECK(cJSON_IsObject(crit) &&
          cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(crit, "ids")) >=
              1);
    cJSON_Delete(doc);
    free(html);
}

static const char *find_chromium(void)
{
    static char found[512];
    const char *env = getenv("VF_CHROMIUM");
    if (env && *env)
        return env;
    static const char *const names[] = {"chromium", "chromium-browser",
                                        "google-chrome", NULL};
    const char *path = getenv("PATH");
    for (int i = 0; names[i] && path; i++) {
        const char *s = path;
        while (*s) {
            size_t n = strcspn(s, ":");
            snprintf(found, sizeof found, "%.*s/%s", (int)n, s, names[i]);
            if (n > 0 && access(found, X_OK) == 0)
                return found;
            s += n + (s[n] == ':');
        }
    }
    return NULL;
}

/* Run the browser on `url` with `what` (--dump-dom or --screenshot=...),
 * standard output to `out` (may be NULL). Returns its exit status. */
static int browse(const char *chromium, const char *what, const char *url,
                  const char *out)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "timeout 90 '%s' --headless --no-sandbox --disable-gpu "
             "--disable-quic --no-first-run --disable-background-networking "
             "--disable-component-update --disable-sync "
             "--disable-dev-shm-usage --hide-scrollbars "
             "--user-data-dir='%s/chromium' --window-size=1400,1800 %s '%s' "
             ">'%s' 2>'%s/chromium.log'",
             chromium, dir, what, url, out ? out : "/dev/null", dir);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* The workers that ran device work (their streams), in *out; how many. */
static int streams_of(const vf_profile *p, int *out, int max)
{
    int n = 0;
    for (size_t i = 0; i < vf_profile_count(p); i++) {
        const vf_profile_record *r = vf_profile_at(p, i);
        int k = 0;
        while (k < n && out[k] != r->worker)
            k++;
        if (r->device_end_ns > 0 && k == n && n < max)
            out[n++] = r->worker;
    }
    return n;
}

static void check_browser(const char *chromium, const char *path,
                          int expected_rows, const vf_profile *p)
{
    size_t nops = vf_profile_count(p);
    int streams[64];
    int nstreams = streams_of(p, streams, 64);
    CHECK(nstreams >= 2); /* a copy stream and a compute stream at least */
    char url[600], dom[160], shot[600];
    snprintf(url, sizeof url, "file://%s", path);
    snprintf(dom, sizeof dom, "%s/dom.html", dir);
    tu_phase_limit("chromium --dump-dom", 120);
    int rc = browse(chromium, "--dump-dom", url, dom);
    CHECK_EQ(rc, 0);
    char *text = read_all(dom);
    REQUIRE(text != NULL);
    char marker[96];
    snprintf(marker, sizeof marker,
             "id=\"vf-rendered\" hidden=\"\">%d rows, "
             "%zu ops, %d streams<",
             expected_rows, nops, nstreams);
    if (strstr(text, "data-vf-rendered=\"ok\"") == NULL ||
        strstr(text, marker) == NULL) {
        const char *err = strstr(text, "id=\"vf-error\"");
        CHECK_REPORT_("the report did not render (want '%s'): %.300s", marker,
                      err ? err : "no error box either; see chromium.log");
    }
    CHECK(strstr(text, "id=\"vf-error\"") == NULL);
    CHECK_EQ(count(text, "class=\"vf-row\""), expected_rows);
    for (int w = 0; w < expected_rows; w++) {
        char row[64];
        snprintf(row, sizeof row, "class=\"vf-row\" data-track=\"%d\"", w);
        CHECK(strstr(text, row) != NULL);
    }
    /* Under the device's label, a lane per stream that ran device work. */
    CHECK_EQ(count(text, "class=\"vf-group\" data-device=\"emulated 0\""), 1);
    CHECK_EQ(count(text, "class=\"vf-row vf-stream\""), nstreams);
    for (int k = 0; k < nstreams; k++) {
        char lane[96];
        snprintf(lane, sizeof lane,
                 "class=\"vf-row vf-stream\" data-stream=\"%d\" "
                 "data-device=\"emulated 0\"",
                 streams[k]);
        if (strstr(text, lane) == NULL)
            CHECK_REPORT_("no lane for the stream of worker %d", streams[k]);
    }
    CHECK(strstr(text, "<b>x</b>") == NULL); /* the name stayed text */
    /* The skipped op drawn as a mark of its own, on one row, and the
     * legend saying what the mark is. */
    CHECK_EQ(count(text, "data-skipped=\"1\""), 1);
    CHECK_EQ(count(text, "data-skipped=\"0\""), expected_rows + nstreams - 1);
    CHECK(strstr(text, "data-legend=\"skipped\"><i class=\"sw sw-skip\"") !=
          NULL);
    free(text);

    tu_phase_limit("chromium --screenshot", 120);
    const char *keep = getenv("VF_REPORT_SCREENSHOT");
    if (keep != NULL && keep[0] != '\0')
        snprintf(shot, sizeof shot, "--screenshot=%s", keep);
    else
        snprintf(shot, sizeof shot, "--screenshot=%s/profile-report.png", dir);
    CHECK_EQ(browse(chromium, shot, url, NULL), 0);
    struct stat st;
    CHECK(stat(shot + strlen("--screenshot="), &st) == 0 && st.st_size > 20000);
    printf("test_profile_html: screenshot %s\n",
           shot + strlen("--screenshot="));
}

/* The known run, written as an HTML report into `path`. */
static vf_profile *written_report(char *path, size_t size)
{
    vf_profile *p = known_run();
    snprintf(path, size, "%s/report.html", dir);
    CHECK_OK(vf_profile_write(p, path, VF_PROFILE_AUTO));
    return p;
}

/* Ops this thread dispatched itself (worker -1: the "inline" row). */
static int inline_ops(const vf_profile *p)
{
    int n = 0;
    for (size_t i = 0; i < vf_profile_count(p); i++)
        n += vf_profile_at(p, i)->worker < 0;
    return n;
}

/* The report's work (data "busy") is the text summary's busy time: each
 * worker's time once, async ops' waits for their completions not at all.
 * Three async ops in flight at once for 30 ms, completed by this thread:
 * summed end - start, the page showed about 3 ops running on 2 workers
 * (5.6 in a user tester's program with nested waits). */
static vf_completion held[3];

static void hold_fn(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    held[(intptr_t)arg] = done;
}

TEST_CASE(work_as_the_summary_counts_it)
{
    vf_engine *e = tu_engine(&tu_kinds[2]); /* pooled, 2 workers */
    CHECK_OK(vf_profile_start(e));
    for (intptr_t i = 0; i < 3; i++) {
        vf_var v = tu_var(e);
        CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = hold_fn,
                                            .arg = (void *)i,
                                            .writes = VF_VARS(v),
                                            .name = "held"}));
    }
    CHECK_EQ(vf_engine_wait_all_timed(e, 30, NULL), VF_ETIMEDOUT);
    for (int i = 0; i < 3; i++)
        CHECK_OK(vf_completion_finish(held[i], 0, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    vf_profile *p = NULL;
    CHECK_OK(vf_profile_take(e, &p));
    REQUIRE(p != NULL);
    CHECK_OK(vf_engine_destroy(e));
    char html_path[600], json_path[600];
    snprintf(html_path, sizeof html_path, "%s/work.html", dir);
    snprintf(json_path, sizeof json_path, "%s/work.json", dir);
    CHECK_OK(vf_profile_write(p, html_path, VF_PROFILE_HTML));
    CHECK_OK(vf_profile_summary_write(p, json_path, VF_PROFILE_SUMMARY_JSON,
                                      VF_PROFILE_SORT_TOTAL));
    char *html = read_all(html_path), *json = read_all(json_path);
    REQUIRE(html != NULL && json != NULL);
    cJSON *data = embedded_data(html, NULL), *summary = cJSON_Parse(json);
    REQUIRE(data != NULL && summary != NULL);
    double busy = number(data, "busy"), span = number(data, "span");
    CHECK_EQ(busy, number(summary, "busy_ns"));
    CHECK(busy <= 2 * span); /* no more than the 2 workers could run */
    CHECK(number(data, "async") >= 3 * 30e6 * 0.9); /* beside it */
    CHECK_EQ(number(data, "device_beyond"), 0);
    cJSON_Delete(data);
    cJSON_Delete(summary);
    free(html);
    free(json);
    vf_profile_destroy(p);
}

TEST_CASE(report_file)
{
    char path[128];
    vf_profile *p = written_report(path, sizeof path);
    CHECK(inline_ops(p) >= 1); /* the async op, dispatched by this thread */
    check_file(path, p);
    vf_profile_destroy(p);
}

TEST_CASE(browser)
{
    const char *chromium = find_chromium();
    if (chromium == NULL)
        TEST_SKIP("no Chromium (apt-get install chromium, or set "
                  "VF_CHROMIUM)");
    char path[128];
    vf_profile *p = written_report(path, sizeof path);
    int nworkers = vf_profile_num_workers(p); /* device pools' included */
    check_browser(chromium, path, nworkers + (inline_ops(p) > 0), p);
    vf_profile_destroy(p);
}

/* The cases write their files into one temporary directory, removed
 * after a run where no check failed. */
int main(int argc, char **argv)
{
    snprintf(dir, sizeof dir, "%s/vf-html-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    REQUIRE(mkdtemp(dir) != NULL);
    int rc = runner_main(argc, argv, "test_profile_html", 240);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (atomic_load(&check_failures_) == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    else if (atomic_load(&check_failures_) != 0)
        fprintf(stderr, "test_profile_html: files kept in %s\n", dir);
    return rc;
}
