/* cluster_smoke — an MPI allreduce across the hosts of a simulated cluster, checked exactly.
 *
 *   scripts/sim-cluster.sh run 2 --rate 1gbit -- -np 2 build/tests/cluster_smoke --hosts 2
 *
 * Each rank prints where it ran (hostname, network namespace, address), then the ranks allreduce
 * vectors of 1, 1000 and 1.2M floats (4.8 MB: many TCP segments through the shaped links) and check
 * every element. It also checks that the ranks really ran on --hosts different hosts: a launcher
 * that quietly put every rank on one host would pass the allreduce but prove nothing about the
 * network. A host is a network namespace, read from /proc/self/ns/net (its inode number).
 * And it checks that the ranks are not all bound to one and the same CPU: Open MPI binds the
 * ranks of each rsh-launched host from that host's core 0, so without --bind-to none (which
 * scripts/rg-mpirun adds) every simulated host's rank would run on core 0 of the shared machine.
 * Exit status 0 when everything holds, 1 otherwise (mpirun passes it on). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { NAME_LEN = 64 };

/* Where this rank runs: the network namespace's inode and the first IPv4 address that is not
 * loopback. Either field may be 0 / "?" when unknown. */
typedef struct {
    uint64_t netns;
    char host[NAME_LEN];
    char addr[NAME_LEN];
    int cpus;      /* CPUs this rank may run on (0: unknown) */
    int first_cpu; /* the lowest of them */
} place;

static place where_am_i(void) {
    place p = {0};
    struct stat st;
    if (stat("/proc/self/ns/net", &st) == 0) p.netns = (uint64_t)st.st_ino;
    if (gethostname(p.host, sizeof p.host - 1) != 0) strcpy(p.host, "?");
    strcpy(p.addr, "?");
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        p.cpus = CPU_COUNT(&set);
        for (p.first_cpu = 0; p.first_cpu < CPU_SETSIZE && !CPU_ISSET(p.first_cpu, &set);)
            p.first_cpu++;
    }
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
            const struct in_addr *a = &((const struct sockaddr_in *)i->ifa_addr)->sin_addr;
            if ((ntohl(a->s_addr) >> 24) == 127) continue;
            inet_ntop(AF_INET, a, p.addr, sizeof p.addr);
            break;
        }
        freeifaddrs(ifs);
    }
    return p;
}

/* Allreduce (sum) n floats where rank r holds (r+1)*(i%1000+1); every element must come back as
 * (i%1000+1)*W(W+1)/2. Small integers are exact in float, so any difference is a real error.
 * Returns the number of wrong elements on this rank. */
static int64_t check_allreduce(int64_t n, int rank, int world) {
    float *x = malloc((size_t)n * sizeof *x);
    if (!x) {
        fprintf(stderr, "cluster_smoke: out of memory for %lld floats\n", (long long)n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int64_t i = 0; i < n; i++) x[i] = (float)(rank + 1) * (float)(i % 1000 + 1);
    double t = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t = MPI_Wtime() - t;
    int64_t wrong = 0;
    const float ranks_sum = (float)world * (float)(world + 1) / 2.0f;
    for (int64_t i = 0; i < n; i++) {
        const float want = (float)(i % 1000 + 1) * ranks_sum;
        if (x[i] != want && wrong++ < 3)
            fprintf(stderr, "rank %d: allreduce of %lld floats: x[%lld] = %g, want %g\n", rank,
                    (long long)n, (long long)i, x[i], want);
    }
    if (rank == 0)
        printf("allreduce %9lld floats: %s (%.2f ms)\n", (long long)n, wrong ? "WRONG" : "ok",
               1e3 * t);
    free(x);
    return wrong;
}

/* Rank 0 prints every rank's place and counts the distinct namespaces; *one_cpu is set when
 * there are several ranks, the machine has several CPUs, and every rank may run only on the
 * same single CPU. Collective. */
static int count_hosts(int rank, int world, int *one_cpu) {
    place me = where_am_i();
    place *all = malloc((size_t)world * sizeof *all);
    if (!all) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, MPI_COMM_WORLD);
    int distinct = 0;
    *one_cpu = world > 1 && sysconf(_SC_NPROCESSORS_ONLN) > 1;
    for (int r = 0; r < world; r++) {
        *one_cpu &= all[r].cpus == 1 && all[r].first_cpu == all[0].first_cpu;
        int seen = 0;
        for (int q = 0; q < r; q++) seen |= all[q].netns == all[r].netns;
        distinct += !seen;
        if (rank == 0)
            printf("rank %d on host %s, address %s, net namespace %llu, %d CPUs allowed\n", r,
                   all[r].host, all[r].addr, (unsigned long long)all[r].netns, all[r].cpus);
    }
    free(all);
    return distinct;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int want_hosts = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--hosts") && i + 1 < argc) want_hosts = atoi(argv[++i]);

    int failed = 0;
    int one_cpu;
    const int hosts = count_hosts(rank, world, &one_cpu);
    if (rank == 0) printf("%d ranks on %d hosts\n", world, hosts);
    if (one_cpu) {
        if (rank == 0)
            fprintf(stderr,
                    "cluster_smoke: every rank is bound to CPU %d alone; launch with "
                    "--bind-to none (scripts/rg-mpirun does)\n",
                    where_am_i().first_cpu);
        failed = 1;
    }
    if (want_hosts > 0 && hosts != want_hosts) {
        if (rank == 0)
            fprintf(stderr, "cluster_smoke: ranks ran on %d hosts, want %d\n", hosts, want_hosts);
        failed = 1;
    }
    const int64_t sizes[] = {1, 1000, 1200 * 1000};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        failed |= check_allreduce(sizes[s], rank, world) != 0;

    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("cluster_smoke: %s\n", failed ? "FAILED" : "passed");
    MPI_Finalize();
    return failed;
}
