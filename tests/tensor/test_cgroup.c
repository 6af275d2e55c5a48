/* Tests for rg_cpu_cgroup_available (tensor/cpu/alloc.c): what a container's memory cgroup still
 * allows, read from fake /proc/self/cgroup and /sys/fs/cgroup trees in a temporary folder. The CPU
 * allocator takes the smaller of it and MemAvailable + SwapFree before a large block, so that a
 * run in a memory-limited container stops with a message instead of the OOM killer's SIGKILL. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rgtest.h"
#include "tensor/cpu/cpu.h"

#define GiB (UINT64_C(1) << 30)

static char root[256];

/* Writes text into root/rel, making the folders on the way. */
static void put(const char *rel, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static void make_root(void) {
    snprintf(root, sizeof root, "/tmp/rg-cgroup-XXXXXX");
    cr_assert(mkdtemp(root), "mkdtemp");
}

static void remove_root(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(cgroup, .init = make_root, .fini = remove_root);

Test(cgroup, v2_limit_less_usage_plus_page_cache) {
    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/memory.max", "8589934592\n");
    put("sys/fs/cgroup/memory.current", "6442450944\n");
    put("sys/fs/cgroup/memory.stat", "anon 5368709120\nfile 1073741824\nkernel 1\n");
    cr_assert_eq(rg_cpu_cgroup_available(root), 3 * GiB); /* 8 - 6 + 1 GiB */
}

Test(cgroup, v2_an_ancestor_with_a_tighter_limit_wins) {
    put("proc/self/cgroup", "0::/a/b\n");
    put("sys/fs/cgroup/a/b/memory.max", "max\n");
    put("sys/fs/cgroup/a/b/memory.current", "1073741824\n");
    put("sys/fs/cgroup/a/b/memory.stat", "file 0\n");
    put("sys/fs/cgroup/a/memory.max", "2147483648\n");
    put("sys/fs/cgroup/a/memory.current", "1610612736\n");
    put("sys/fs/cgroup/a/memory.stat", "file 0\n");
    cr_assert_eq(rg_cpu_cgroup_available(root), GiB / 2);
}

Test(cgroup, v2_no_limit_anywhere) {
    put("proc/self/cgroup", "0::/a\n");
    put("sys/fs/cgroup/a/memory.max", "max\n");
    put("sys/fs/cgroup/a/memory.current", "1073741824\n");
    cr_assert_eq(rg_cpu_cgroup_available(root), SIZE_MAX);
}

Test(cgroup, v1_hierarchical_limit_and_total_cache) {
    put("proc/self/cgroup", "5:cpu,cpuacct:/x\n4:memory:/x\n0::/\n");
    put("sys/fs/cgroup/memory/x/memory.stat",
        "cache 5\nhierarchical_memory_limit 4294967296\ntotal_cache 1073741824\n");
    put("sys/fs/cgroup/memory/x/memory.usage_in_bytes", "3221225472\n");
    cr_assert_eq(rg_cpu_cgroup_available(root), 2 * GiB); /* 4 - 3 + 1 GiB */
}

Test(cgroup, v1_unlimited_and_a_namespace_root) {
    /* the path names a cgroup that the container's view does not show: its root is ours */
    put("proc/self/cgroup", "4:memory:/docker/abc\n");
    put("sys/fs/cgroup/memory/memory.stat",
        "hierarchical_memory_limit 9223372036854771712\ntotal_cache 0\n");
    put("sys/fs/cgroup/memory/memory.usage_in_bytes", "1000\n");
    cr_assert_eq(rg_cpu_cgroup_available(root), SIZE_MAX);
    put("sys/fs/cgroup/memory/memory.stat", "hierarchical_memory_limit 1000000\ntotal_cache 0\n");
    cr_assert_eq(rg_cpu_cgroup_available(root), 1000000 - 1000);
}

Test(cgroup, over_the_limit_is_zero_and_missing_files_are_no_limit) {
    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/memory.max", "1000\n");
    put("sys/fs/cgroup/memory.current", "5000\n");
    cr_assert_eq(rg_cpu_cgroup_available(root), 0);
    char empty[300];
    snprintf(empty, sizeof empty, "%s/nothing-here", root);
    cr_assert_eq(rg_cpu_cgroup_available(empty), SIZE_MAX);
}
