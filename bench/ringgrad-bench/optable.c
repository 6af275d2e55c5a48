/* optable.c — a training step's wall time per op at each thread count, from the trace recorder
 * (ringgrad/trace.h): where a second thread's time goes.
 *
 * The caller marks its step (category "step") and the step's parts (category "step part":
 * forward, backward, the optimizer, the scope's frees) with rg_trace_begin/end, and may mark its
 * own forward ops ("forward op"); under rg_trace_set_ops the library adds each layer's forward
 * ("forward op") and each autograd op's backward ("backward op"). rgb_ops_end reads the recorded
 * events back as the Chrome-trace JSON that rg_trace_format writes and adds each event's duration
 * to the row of its label: a part by its name at depth 1, an op as "fwd NAME" / "bwd NAME" at
 * depth 2 inside a part (1 outside any), numbered "#k" when the name occurs k times in a step
 * (the CNN's two "linear"s are fc2 then fc1 in backward), or, with t->by_name, one row per name
 * with its calls a step (a ResNet's 20 convolutions). A part's time outside its ops gets a row of
 * its own ("tape walk, hooks" in backward), and so does the step's outside its parts. A row's
 * figure is the mean over the traced steps (rgb_ops_end adds up, per column, every call's steps).
 * Ops that scale get a speed-up near the thread count; one that does not shows up as the time
 * "lost" at the higher count: its time there minus its one-thread time divided by the ratio of
 * the counts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ringgrad/trace.h"

typedef struct {
    char name[48], cat[24];
    double ts, dur; /* microseconds */
} op_event;

/* The events of phase "X" in the JSON text; *n of them (malloc'ed). */
static op_event *parse_events(const char *js, int *n) {
    int cap = 256, k = 0;
    op_event *ev = malloc(sizeof *ev * (size_t)cap);
    if (!ev) abort();
    for (const char *line = js; line && *line; line = strchr(line, '\n')) {
        if (*line == '\n') line++;
        const char *end = strchr(line, '\n');
        const char *x = strstr(line, "\"ph\":\"X\"");
        if (!x || (end && x > end)) continue;
        const char *name = strstr(line, "\"name\":\""), *cat = strstr(line, "\"cat\":\"");
        const char *ts = strstr(line, "\"ts\":"), *dur = strstr(line, "\"dur\":");
        if (!name || !cat || !ts || !dur) continue;
        if (k == cap) {
            cap *= 2;
            ev = realloc(ev, sizeof *ev * (size_t)cap);
            if (!ev) abort();
        }
        op_event *e = &ev[k];
        if (sscanf(name + 8, "%47[^\"]", e->name) != 1 ||
            sscanf(cat + 7, "%23[^\"]", e->cat) != 1 || sscanf(ts + 5, "%lf", &e->ts) != 1 ||
            sscanf(dur + 6, "%lf", &e->dur) != 1)
            continue;
        k++;
    }
    *n = k;
    return ev;
}

static int by_start(const void *a, const void *b) {
    const op_event *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* The row labelled `label` (added at the end when new). */
static rgb_op_row *row(rgb_op_table *t, const char *label, int depth) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->rows[i].label, label)) return &t->rows[i];
    if (t->n == RGB_MAX_OP_ROWS) return NULL;
    rgb_op_row *r = &t->rows[t->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->label, sizeof r->label, "%s", label);
    r->depth = depth;
    return r;
}

void rgb_ops_begin(void) {
    rg_trace_reset();
    rg_trace_set_ops(true);
    rg_trace_start();
}

void rgb_ops_end(rgb_op_table *t, int col) {
    rg_trace_stop();
    rg_trace_set_ops(false);
    size_t len = 0;
    char *js = rg_trace_format(0, &len);
    if (!js) abort();
    int n = 0;
    op_event *ev = parse_events(js, &n);
    free(js);
    rg_trace_reset();
    qsort(ev, (size_t)n, sizeof *ev, by_start);
    int steps = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(ev[i].cat, "step")) continue;
        steps++;
        const double t1 = ev[i].ts + ev[i].dur;
        rgb_op_row *r = row(t, "step", 0);
        if (r) r->ms[col] += ev[i].dur * 1e-3, r->calls[col]++;
        /* this step's events: parts (depth 1), ops inside a part (depth 2) or alone (depth 1),
         * labelled by name, and numbered by occurrence within the step unless t->by_name */
        char seen[RGB_MAX_OP_ROWS][64];
        int count[RGB_MAX_OP_ROWS], nseen = 0;
        double top = 0; /* the step's time in parts and ops of its own */
        const op_event *part = NULL;
        rgb_op_row *outside = NULL; /* the open part's time outside its ops */
        for (int j = i + 1; j < n && ev[j].ts < t1; j++) {
            const op_event *e = &ev[j];
            const bool is_part = !strcmp(e->cat, "step part"), bwd = !strcmp(e->cat, "backward op");
            if (is_part || (part && e->ts >= part->ts + part->dur)) part = NULL, outside = NULL;
            char label[64];
            snprintf(label, sizeof label, "%s%s", is_part ? "" : bwd ? "bwd " : "fwd ", e->name);
            int s = 0;
            while (s < nseen && strcmp(seen[s], label)) s++;
            if (s == nseen && nseen < RGB_MAX_OP_ROWS) {
                snprintf(seen[nseen], sizeof seen[0], "%s", label);
                count[nseen++] = 0;
            }
            const int k = s < nseen ? ++count[s] : 1;
            if (k > 1 && !t->by_name)
                snprintf(label + strlen(label), sizeof label - strlen(label), " #%d", k);
            if (part && !outside) { /* the first op inside this part: its "outside" row first */
                const char *what =
                    strcmp(part->name, "backward") ? "between its ops" : "tape walk, hooks";
                if ((outside = row(t, what, 2))) outside->ms[col] += part->dur * 1e-3;
            }
            if ((r = row(t, label, part ? 2 : 1))) r->ms[col] += e->dur * 1e-3, r->calls[col]++;
            if (part && outside)
                outside->ms[col] -= e->dur * 1e-3;
            else if (!part)
                top += e->dur;
            if (is_part) part = e;
        }
        if ((r = row(t, "step outside the rows above", 1))) r->ms[col] += (ev[i].dur - top) * 1e-3;
    }
    free(ev);
    t->steps[col] += steps;
}

void rgb_ops_print(const rgb_op_table *t, const int *threads, int ncols) {
    printf(
        "\nthe step's wall time per op, ms (mean of %d traced steps at each thread count)%s\n%-40s",
        t->steps[0],
        ncols > 1 ? "; lost: the time beyond a perfect split of the first column's" : "", "op");
    for (int c = 0; c < ncols; c++) printf(" %7d thr", threads[c]);
    if (ncols > 1) printf(" %9s %8s", "speed-up", "lost");
    printf("\n");
    for (int i = 0; i < t->n; i++) {
        const rgb_op_row *r = &t->rows[i];
        char label[80];
        int per_step = t->steps[0] ? r->calls[0] / t->steps[0] : 0;
        snprintf(label, sizeof label, per_step > 1 ? "%s (%d)" : "%s", r->label, per_step);
        printf("%*s%-*s", 2 * r->depth, "", 40 - 2 * r->depth, label);
        double ms[RGB_MAX_THREAD_COUNTS];
        for (int c = 0; c < ncols; c++) {
            ms[c] = r->ms[c] / (t->steps[c] ? t->steps[c] : 1);
            printf(" %11.2f", ms[c]);
        }
        if (ncols > 1 && ms[ncols - 1] > 0) {
            const double scale = (double)threads[ncols - 1] / threads[0];
            printf(" %8.2fx %8.2f", ms[0] / ms[ncols - 1], ms[ncols - 1] - ms[0] / scale);
        }
        printf("\n");
    }
}
