/* CRC-32 (zlib's, java.util.zip.CRC32's) folded with carry-less multiplication where the CPU has it.
 *
 * Every stored message carries the CRC-32 of its body (BODYCRC). zlib 1.2's table-driven CRC costs about
 * half a microsecond per KiB, ~5 % of the broker's CPU in batch sends; Java's CRC32 is a PCLMULQDQ
 * intrinsic. Here 64-byte blocks are folded four 128-bit lanes at a time, the lanes folded into one,
 * and the result reduced to 32 bits (Barrett), the method of Intel's "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ" (2009) for the bit-reflected polynomial 0xEDB88320; the folding constants
 * are powers of x modulo that polynomial. Shorter inputs, the tail under 16 bytes and CPUs without
 * PCLMULQDQ/SSE4.1 go to zlib. Included by the C extensions that need it (wire/_crc.c, wire/_batchc.c).
 */
#ifndef FERRYMQ_CRC32_FAST_H
#define FERRYMQ_CRC32_FAST_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FERRYMQ_CRC_CLMUL 1

/* The raw (not inverted) CRC register over n bytes, n >= 64 and a multiple of 16. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc32_clmul_raw(uint32_t crc, const uint8_t *p, size_t n) {
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL); /* fold by 512 bits */
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL); /* fold by 128 bits */
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);                /* 64 -> 32 bits */
    const __m128i poly = _mm_set_epi64x(0x1f7011641LL, 0x1db710641LL);  /* Barrett: mu', P' */
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1 = _mm_loadu_si128((const __m128i *)p), x2 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32)), x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    __m128i t1, t2, t3, t4;
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    p += 64;
    n -= 64;
    while (n >= 64) {
        t1 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
        t2 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
        t3 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
        t4 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
        x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, k1k2, 0x11), t1), _mm_loadu_si128((const __m128i *)p));
        x2 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x2, k1k2, 0x11), t2), _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x3, k1k2, 0x11), t3), _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x4, k1k2, 0x11), t4), _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
#define FOLD128(acc, next)                                                  \
    do {                                                                    \
        __m128i lo_ = _mm_clmulepi64_si128((acc), k3k4, 0x00);              \
        (acc) = _mm_xor_si128(_mm_clmulepi64_si128((acc), k3k4, 0x11), lo_); \
        (acc) = _mm_xor_si128((acc), (next));                               \
    } while (0)
    FOLD128(x1, x2);
    FOLD128(x1, x3);
    FOLD128(x1, x4);
    while (n >= 16) {
        FOLD128(x1, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
#undef FOLD128
    /* 128 -> 64 bits: the low half times x^64 mod P, plus the high half */
    x2 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
    /* 64 -> 32 bits */
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    /* Barrett reduction to the 32-bit remainder */
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly, 0x10);
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x2, mask32), poly, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

static int crc32_has_clmul = -1;

static int crc32_clmul_usable(void) {
    if (crc32_has_clmul < 0) {
        __builtin_cpu_init();
        crc32_has_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    return crc32_has_clmul;
}
#endif

/* zlib.crc32(data, start): CRC-32 of n bytes continuing from ``start`` (0 for a fresh one). */
static uint32_t crc32_fast(uint32_t start, const uint8_t *p, size_t n) {
    uLong crc = start;
#ifdef FERRYMQ_CRC_CLMUL
    if (n >= 64 && crc32_clmul_usable()) {
        size_t folded = n & ~(size_t)15;
        crc = ~crc32_clmul_raw(~(uint32_t)crc, p, folded) & 0xFFFFFFFFu;
        p += folded;
        n -= folded;
    }
#endif
    while (n > 0) { /* zlib takes a uInt length */
        uInt chunk = n > 0x40000000u ? 0x40000000u : (uInt)n;
        crc = crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

#endif
