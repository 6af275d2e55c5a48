/* version.c — the library's version (include/ringgrad/version.h). */
#include "ringgrad/version.h"

const char *rg_version(void) {
    return RG_VERSION_STRING;
}
