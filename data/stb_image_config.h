/* stb_image_config.h — the stb_image options ringgrad uses, set before every include of
 * <stb/stb_image.h> so that the declarations and the implementation (data/stb_image.c) agree.
 * Only the 8-bit formats an image folder holds are compiled in, and images wider or taller than
 * 16384 pixels are refused before anything is allocated for them. */
#ifndef RG_STB_IMAGE_CONFIG_H
#define RG_STB_IMAGE_CONFIG_H

#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_ONLY_TGA
#define STBI_ONLY_PNM
#define STBI_MAX_DIMENSIONS (1 << 14)

#endif
