/* keep_plugins.c — a preload for the sanitizer build's MPI tests: dlclose does nothing, so that
 * the shared objects a program unloads (Open MPI's plugins, in MPI_Finalize) stay mapped until
 * exit. LeakSanitizer then sees their allocations in named modules, which tests/lsan.supp
 * matches. Without it, each of their stack frames is an "<unknown module>" that no suppression
 * matches, and looking each one up reread /proc/self/maps: about a third of those tests' system
 * time. Built without sanitizers, and used only through LD_PRELOAD (cmake/tests.cmake). */
int dlclose(void *handle);

int dlclose(void *handle) {
    (void)handle;
    return 0;
}
