/* sanitize.h — hot loops that check their memory once a call, not at every access, under
 * AddressSanitizer (RG_SANITIZE builds).
 *
 * ASan checks each load and store, and UBSan each index and shift. In a register-tiled loop
 * those checks keep the accumulators in memory, and in the Philox generator they put its
 * state on the stack: the sanitized suite ran 4-10 times slower there than elsewhere. A function
 * marked RG_UNCHECKED runs without them, and must call rg_check_region on every span of memory
 * it touches before it starts, so that an overrun is still reported as an ordinary ASan error.
 * tests/tensor/asan_tile_check.c proves that it is. Outside sanitizer builds both are nothing. */
#ifndef RG_SANITIZE_H
#define RG_SANITIZE_H

#include <stddef.h>
#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__)
#define RG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RG_ASAN 1
#endif
#endif
#ifndef RG_ASAN
#define RG_ASAN 0
#endif

#if RG_ASAN
#include <sanitizer/asan_interface.h>
#define RG_UNCHECKED __attribute__((no_sanitize("address", "undefined")))

/* An ordinary ASan report if [p, p + bytes) is not all addressable. A span of up to 256 bytes
 * is checked byte by byte (__asan_region_is_poisoned; a report comes from an instrumented read
 * of the first bad byte, so that it names the allocation as any other does). A longer one is
 * checked at its first and last float only, by instrumented reads: the convolution tiles' rows
 * span whole images, and checking every byte of those at each call took longer than the tile
 * itself. Both ends inside one buffer mean the whole span is, unless the span runs past the
 * buffer's end into another live buffer. Call it from instrumented code (not from an
 * RG_UNCHECKED function, where those reads would go unchecked). */
static inline void rg_check_region(const void *p, size_t bytes) {
    const volatile char *c = p;
    if (bytes == 0) return;
    if (bytes > 256) {
        (void)*(const volatile float *)c;
        (void)*(const volatile float *)(c + bytes - sizeof(float));
        return;
    }
    const volatile char *bad = __asan_region_is_poisoned((void *)(uintptr_t)c, bytes);
    if (bad) (void)*bad;
}
#else
#define RG_UNCHECKED
static inline void rg_check_region(const void *p, size_t bytes) {
    (void)p, (void)bytes;
}
#endif

#endif
