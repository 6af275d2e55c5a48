/* path.h — what a writer that renames a new file over a path would destroy.
 *
 * Checkpoints are written next to their path and renamed over it (models/safetensors_write.c),
 * so that a crash never leaves half a file. A rename replaces whatever the path names: a symbolic
 * link itself rather than its target, and a FIFO or a device by a regular file (as root,
 * saving to /dev/full turned it into a 1 MB file). Writers refuse those paths up front. */
#ifndef RG_CORE_PATH_H
#define RG_CORE_PATH_H

#include <stddef.h>

/* NULL when path does not exist or is a regular file; else what it is ("a symbolic link", "a
 * FIFO", "a device", "a socket", "a folder", "not a regular file"), and for a symbolic link its
 * target in target (cap bytes; "" otherwise, or when it cannot be read). */
const char *rg_path_not_regular(const char *path, char *target, size_t cap);

#endif
