/* path.c — what a writer that renames a new file over a path would destroy (path.h). */
#include "core/path.h"

#include <sys/stat.h>
#include <unistd.h>

const char *rg_path_not_regular(const char *path, char *target, size_t cap) {
    if (cap) target[0] = '\0';
    struct stat sb;
    if (lstat(path, &sb) != 0 || S_ISREG(sb.st_mode)) return NULL;
    if (S_ISLNK(sb.st_mode)) {
        ssize_t n = cap > 1 ? readlink(path, target, cap - 1) : -1;
        if (cap) target[n > 0 ? n : 0] = '\0';
        return "a symbolic link";
    }
    return S_ISFIFO(sb.st_mode)                         ? "a FIFO"
           : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
           : S_ISSOCK(sb.st_mode)                       ? "a socket"
           : S_ISDIR(sb.st_mode)                        ? "a folder"
                                                        : "not a regular file";
}
