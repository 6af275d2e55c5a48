/* version.h — which ringgrad this is. The one place the version is written: CMakeLists.txt reads
 * its project version from these lines. */
#ifndef RINGGRAD_VERSION_H
#define RINGGRAD_VERSION_H

#include "ringgrad/export.h"

#define RG_VERSION_MAJOR 0
#define RG_VERSION_MINOR 9
#define RG_VERSION_PATCH 0
#define RG_VERSION_STRING "0.9.0"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library the program runs with ("0.9.0"), which may differ from the
 * RG_VERSION_STRING it was compiled against when it links libringgrad.so. Static string. */
RG_API const char *rg_version(void);

#ifdef __cplusplus
}
#endif

#endif
