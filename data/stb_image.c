/* stb_image.c — the one translation unit that compiles stb_image (libstb-dev).
 *
 * stb libraries are single headers: exactly one .c file defines STB_IMAGE_IMPLEMENTATION before
 * including the header, and every other file includes it for the declarations only. The limits
 * below are shared with image_folder.c through data/stb_image_config.h. */
#include "data/stb_image_config.h"

#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>
