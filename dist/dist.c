/* dist.c — joining the job and leaving it: launcher detection, MPI start-up with the thread
 * level the comm thread needs, ranks on this host, options from the environment, and the fatal
 * handler that takes the whole job down with a rank that stops on RG_CHECK. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/comm_impl.h"
#include "ringgrad/timeline.h"

/* ---- options ---- */

/* A positive or negative number of seconds from $name; *out untouched if the variable is unset. */
RG_NODISCARD static rg_status env_seconds(const char *name, double *out) {
    const char *v = getenv(name);
    if (!v || !*v) return RG_OK;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || x != x)
        return rg_error(RG_EINVAL, "rg_dist_init: $%s=\"%s\" is not a number of seconds", name, v);
    *out = x;
    return RG_OK;
}

/* Fills in the defaults: the option if given, else the environment, else the built-in value. */
RG_NODISCARD
static rg_status resolve_opts(const rg_dist_opts *in, rg_dist_opts *o, rg_comm_backend *backend) {
    *o = in ? *in : (rg_dist_opts){0};
    if (!o->comm) o->comm = getenv("RG_COMM");
    if (!o->comm || !*o->comm) o->comm = "mpi";
    RG_TRY(rg_comm_backend_parse(o->comm, backend));
    if (o->stall_seconds == 0) {
        o->stall_seconds = 60;
        RG_TRY(env_seconds("RG_STALL_SECONDS", &o->stall_seconds));
    }
    if (o->stall_abort_seconds == 0) {
        o->stall_abort_seconds = 600;
        RG_TRY(env_seconds("RG_STALL_ABORT_SECONDS", &o->stall_abort_seconds));
    }
    return RG_OK;
}

/* ---- MPI ---- */

/* Open MPI's mpirun (ORTE or PRRTE) and PMIx launchers set these in every rank. */
static bool launched_by_mpirun(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

/* RG_CHECK under MPI: end every rank, not just this one, so none is left waiting for it. The
 * job's exit status is 134 (SIGABRT's) for a failed check, 1 for running out of memory or a
 * collective that never finished (errors of the run, not bugs). */
static void abort_job(void) {
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    rg_status why = rg_fatal_status();
    if (up && !down) MPI_Abort(MPI_COMM_WORLD, why == RG_ENOMEM || why == RG_ETIMEDOUT ? 1 : 134);
    abort();
}

RG_NODISCARD static rg_status start_mpi(rg_dist *d, int *argc, char ***argv) {
    int up = 0, provided = 0;
    MPI_Initialized(&up);
    if (up) {
        MPI_Query_thread(&provided); /* the program started MPI itself; it finalises it too */
    } else {
        MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
        d->owns_mpi = true;
    }
    if (provided < MPI_THREAD_SERIALIZED)
        return rg_error(RG_ENOTSUP,
                        "rg_dist_init: MPI provides thread level %d, but ringgrad's "
                        "comm thread needs MPI_THREAD_SERIALIZED (%d)",
                        provided, MPI_THREAD_SERIALIZED);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    MPI_Comm host;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &host);
    MPI_Comm_rank(host, &d->local_rank);
    MPI_Comm_size(host, &d->local_size);
    MPI_Comm_free(&host);
    rg_set_fatal_handler(abort_job);
    return RG_OK;
}

/* ---- init and finalize ---- */

static void teardown(rg_dist *d) {
    rg_comm_thread_stop(d);
    if (d->owns_mpi) MPI_Finalize();
    if (d->launched) rg_set_fatal_handler(NULL);
    free(d);
}

rg_dist *rg_dist_init(int *argc, char ***argv) {
    return rg_dist_init_opts(argc, argv, NULL);
}

/* rg_dist_init_opts's failure: rg_last_error() to opts->on_init_error, if any; returns NULL. */
static rg_dist *init_failed(const rg_dist_opts *opts) {
    if (opts && opts->on_init_error) opts->on_init_error(rg_last_error(), opts->on_init_error_ctx);
    return NULL;
}

rg_dist *rg_dist_init_opts(int *argc, char ***argv, const rg_dist_opts *opts) {
    rg_dist_opts o;
    rg_comm_backend backend;
    if (resolve_opts(opts, &o, &backend) != RG_OK) return init_failed(opts);
    rg_dist *d = calloc(1, sizeof *d);
    if (!d) {
        rg_error(RG_ENOMEM, "rg_dist_init: out of memory");
        return init_failed(opts);
    }
    *d = (rg_dist){.size = 1,
                   .local_size = 1,
                   .stall = {o.stall_seconds, o.stall_abort_seconds, o.on_stall, o.on_stall_ctx}};
    int up = 0;
    MPI_Initialized(&up);
    d->launched = up || launched_by_mpirun();
    rg_trace_name_thread("main");
    rg_status s = d->launched ? start_mpi(d, argc, argv) : RG_OK;
    if (s == RG_OK) {
        /* over MPI, before the chosen communicator exists: ranks on different backends must
         * still be able to tell each other so */
        size_t cap = strlen(o.comm) + (o.agree ? strlen(o.agree) : 0) + 96;
        char *config = malloc(cap);
        RG_CHECK(config, "rg_dist_init: out of memory");
        snprintf(config, cap, "--comm/$RG_COMM %s\n$RG_MPI_RING %s\n%s", o.comm,
                 rg_comm_mpi_ring_enabled() ? "1" : "0", o.agree ? o.agree : "");
        s = rg_dist_agree_config(d, config);
        free(config);
    }
    if (s == RG_OK) s = rg_comm_thread_start(d);
    if (s == RG_OK) s = rg_comm_new(d, backend, &d->comm);
    if (s != RG_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", rg_last_error());
        init_failed(opts); /* before MPI_Finalize */
        teardown(d);
        rg_error(s, "%s", why);
        return NULL;
    }
    return d;
}

rg_status rg_dist_finalize(rg_dist *d) {
    if (!d) return RG_OK;
    rg_status s = rg_comm_close(d->comm);
    char why[1024];
    snprintf(why, sizeof why, "%s", rg_last_error());
    if (s == RG_ETIMEDOUT && d->launched) {
        /* A rank never came; MPI_Finalize would wait for it forever. */
        fprintf(stderr, "ringgrad: rank %d: %s; aborting the job\n", d->rank, why);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    teardown(d);
    return s == RG_OK ? RG_OK : rg_error(s, "%s", why);
}

rg_comm *rg_dist_comm(rg_dist *d) {
    return d->comm;
}
int rg_dist_rank(const rg_dist *d) {
    return d->rank;
}
int rg_dist_size(const rg_dist *d) {
    return d->size;
}
int rg_dist_local_rank(const rg_dist *d) {
    return d->local_rank;
}
int rg_dist_local_size(const rg_dist *d) {
    return d->local_size;
}
bool rg_dist_launched(const rg_dist *d) {
    return d->launched;
}
