/* The timeline of one process: events from several threads, nested begin/end pairs, explicit
 * and async events and the comm thread's own, written as JSON that a viewer accepts (checked by
 * check_timeline.py with python3's json module). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "rgtest.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc(n + 1);
    cr_assert_eq(fread(s, 1, n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
    return n;
}

static void check_with_python(const char *path, const char *extra) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "python3 %s/tests/dist/check_timeline.py '%s' --ranks 1 %s",
             RG_SOURCE_DIR, path, extra);
    cr_assert_eq(system(cmd), 0, "check_timeline.py rejected %s", path);
}

static void *worker(void *arg) {
    rg_trace_name_thread("worker");
    for (int i = 0; i < 3000; i++) { /* more than one block of events */
        rg_trace_begin("work", "compute");
        rg_trace_end();
    }
    return NULL;
}

Test(dist_timeline, writes_valid_json_with_every_thread_and_event) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    cr_assert(d, "%s", rg_last_error());
    rg_comm *c = rg_dist_comm(d);
    cr_assert_eq(rg_timeline_start(c), RG_OK);
    rg_trace_begin("step", "compute");
    rg_trace_begin("forward \"quoted\"\n", "compute"); /* escaped in the JSON */
    rg_trace_end();
    float x[1000] = {0};
    cr_assert_eq(rg_comm_allreduce(c, x, 1000, RG_COMM_F32, RG_REDUCE_SUM), RG_OK);
    rg_trace_end();
    int64_t t = rg_trace_now();
    rg_trace_complete("explicit", "compute", t, t + 5000, 2,
                         (rg_trace_arg[]){{"a", 1}, {"b", -2}});
    rg_trace_async("pending", "queue", 7, t, t + 9000, 0, NULL);
    pthread_t th;
    pthread_create(&th, NULL, worker, NULL);
    pthread_join(th, NULL);

    char path[4200];
    snprintf(path, sizeof path, "%s/t.json", rgt_tmpdir("timeline_threads"));
    cr_assert_eq(rg_timeline_write(c, path), RG_OK, "%s", rg_last_error());
    check_with_python(path, "--thread main --thread comm --thread worker --expect step "
                            "--expect explicit --expect allreduce --expect work");
    char *s = slurp(path);
    cr_assert_eq(count(s, "\"name\":\"work\""), 3000);
    cr_assert_eq(count(s, "\"name\":\"step\""), 1);
    cr_assert(strstr(s, "forward \\\"quoted\\\"\\u000a"), "name escaped");
    cr_assert(strstr(s, "\"args\":{\"a\":1,\"b\":-2}"));
    cr_assert(strstr(s, "\"name\":\"allreduce\",\"cat\":\"comm\",\"ph\":\"X\""));
    cr_assert(strstr(s, "\"args\":{\"bytes\":4000,\"seq\":"), "bytes of the allreduce");
    cr_assert(strstr(s, "\"cat\":\"comm.queue\",\"ph\":\"b\""), "queue time as async event");
    cr_assert(strstr(s, "\"cat\":\"queue\",\"ph\":\"e\",\"id\":\"0x7\""));
    free(s);
    remove(path);
    rg_trace_stop();
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}

Test(dist_timeline, records_nothing_while_stopped) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    cr_assert(d);
    rg_trace_begin("before", "compute"); /* begun while stopped: its end records nothing */
    cr_assert_eq(rg_timeline_start(NULL), RG_OK);
    rg_trace_end();
    rg_trace_begin("during", "compute");
    rg_trace_end();
    rg_trace_stop();
    rg_trace_begin("after", "compute");
    rg_trace_end();
    char path[4200];
    snprintf(path, sizeof path, "%s/t.json", rgt_tmpdir("timeline_stopped"));
    cr_assert_eq(rg_timeline_write(rg_dist_comm(d), path), RG_OK);
    check_with_python(path, "--expect during");
    char *s = slurp(path);
    cr_assert(!strstr(s, "before") && !strstr(s, "after"));
    free(s);
    remove(path);
    rg_trace_reset();
    cr_assert_eq(rg_timeline_write(rg_dist_comm(d), path), RG_OK);
    s = slurp(path);
    cr_assert(!strstr(s, "during"), "reset drops the events");
    free(s);
    remove(path);
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}

Test(dist_timeline, unwritable_path_is_an_io_error) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    cr_assert(d);
    rg_status s = rg_timeline_write(rg_dist_comm(d), "/nonexistent-dir/t.json");
    cr_assert_eq(s, RG_EIO);
    cr_assert(strstr(rg_last_error(), "/nonexistent-dir/t.json"), "%s", rg_last_error());
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}

Test(dist_timeline, end_without_begin_is_misuse, .signal = SIGABRT) {
    rg_trace_end();
}
