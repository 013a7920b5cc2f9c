// cpu.h: what ropepool's kernel body (rope_rows.inc) needs, in C++ (g++), for the C++ driver
// (driver.cpp): built as the grid emulator that verifies the body on a machine without Metal or
// CUDA (emulator.py), and with RP_HOST as the "cpu" backend (host.py).
// float16 and bfloat16 are their bits (a uint16_t), converted by bit manipulation: exact, rounded
// to nearest even as MLX rounds, without a branch so that loops over them vectorise (GCC 12 does
// not vectorise the compiler's _Float16 on x86, and converts it one element at a time). The
// "cpu" backend (RP_HOST) converts float16 with the CPU's F16C instructions where -march=native
// has them: the same bits, in one instruction.
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(RP_HOST) && defined(__F16C__)
#include <immintrin.h>
#endif

#ifdef RP_HOST
// 64-bit indices: a 32-bit unsigned index may wrap, so the compiler cannot treat
// q[base + i] as a plain stride along a loop, and does not vectorize it.
typedef unsigned long long rp_uint;
#else
typedef unsigned int rp_uint;  // as on the GPUs
#endif

typedef uint16_t rp_bfloat16;  // bfloat16's bits
typedef int16_t rp_float16;    // float16's bits (a signed type: another overload than bfloat16's)

inline float rp_bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint32_t rp_float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float rp_to_float(float x) { return x; }
#if defined(RP_HOST) && defined(__F16C__)
inline float rp_to_float(rp_float16 x) { return _cvtsh_ss(uint16_t(x)); }  // the CPU's own conversion
#else
inline float rp_to_float(rp_float16 x) {
  const uint32_t bits = uint16_t(x), sign = (bits & 0x8000u) << 16, em = bits & 0x7fffu;
  // Exponent and mantissa moved into float's place, scaled by 2**112: exact for normal and
  // subnormal halves; infinities and NaNs (em >= 0x7c00) keep their mantissa under an all-ones exponent.
  const uint32_t finite = rp_float_bits(rp_bits_float(em << 13) * 0x1p112f);
  return rp_bits_float(sign | (em >= 0x7c00u ? (em << 13) | 0x7f800000u : finite));
}
#endif
inline float rp_to_float(rp_bfloat16 x) {
  uint32_t u = uint32_t(x) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <typename DType>
inline DType rp_from_float(float x);
template <>
inline float rp_from_float<float>(float x) { return x; }
#if defined(RP_HOST) && defined(__F16C__)
template <>
inline rp_float16 rp_from_float<rp_float16>(float x) { return rp_float16(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)); }
#else
template <>
inline rp_float16 rp_from_float<rp_float16>(float x) {
  const uint32_t u = rp_float_bits(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  // |x| >= 2**-14: rebias the exponent and round the 13 dropped bits to nearest even (a carry
  // into the exponent gives the next binade, or infinity from 65520 on).
  const uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // |x| < 2**-14: adding 0.5f rounds |x| at the float16 subnormal step (2**-24), to nearest even.
  const uint32_t subnormal = rp_float_bits(rp_bits_float(a) + 0.5f) - 0x3f000000u;
  const uint32_t big = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u;  // NaN stays NaN, quiet
  const uint32_t h = a >= 0x47800000u ? big : (a < 0x38800000u ? subnormal : normal);
  return rp_float16(uint16_t(sign | h));
}
#endif
template <>
inline rp_bfloat16 rp_from_float<rp_bfloat16>(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // round to nearest, ties to even
  return rp_bfloat16(x != x ? 0x7fc0u : rounded);  // NaN: MLX's canonical NaN
}

inline float rp_inv_sqrt(float x) { return 1.0f / std::sqrt(x); }
inline float rp_div(float x, float y) { return x / y; }

#define RP_DEVICE
#include "e4m3.inc"

// cos and sin of pair i's angle for token t: the same angle as the GPU headers (float(position) *
// inv_freq[i] in float32), its cos and sin from the C library, as Metal's precise:: and CUDA's cosf/sinf
// are from theirs: each within an ulp or so, not bit for bit the same across platforms (the tolerance
// of ropepool.tolerance covers the difference).
inline void rp_cos_sin(const int32_t* positions, const float* inv_freq, unsigned long long t, unsigned long long i,
                       float& c, float& s) {
  const float theta = float(positions[t]) * inv_freq[i];
  c = std::cos(theta);
  s = std::sin(theta);
}

// The body's hook: `cos_sin` is the driver's source of rp_cos_sin's values, a parameter of each
// build of the body (computed per thread, or read from a table rp_cos_sin filled).
#define RP_COS_SIN(t, i, c, s) cos_sin.get(positions, inv_freq, t, i, c, s)
// ... and of a QK-norm head's 1 / RMS: computed per thread, or read from a table filled once per row.
#define RP_HEAD_INV_RMS(x, base, row, r) r = cos_sin.inv_rms(x, base, row, rp_uint(D), norm_eps[0]);
