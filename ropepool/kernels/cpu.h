// cpu.h: what ropepool's kernel body (rope_rows.inc) needs, in C++ (g++), for the C++ driver
// (driver.cpp): built as the grid emulator that verifies the body on a machine without Metal or
// CUDA (emulator.py), and with RP_HOST as the "cpu" backend (host.py).
// float16 is the compiler's _Float16; bfloat16 is its bits (uint16_t), rounded to nearest
// even, as MLX rounds, without a branch so that loops over it vectorize.
#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef RP_HOST
// 64-bit indices: a 32-bit unsigned index may wrap, so the compiler cannot treat
// q[base + i] as a plain stride along a loop, and does not vectorize it.
typedef unsigned long long rp_uint;
#else
typedef unsigned int rp_uint;  // as on the GPUs
#endif

typedef uint16_t rp_bfloat16;  // bfloat16's bits

inline float rp_to_float(float x) { return x; }
inline float rp_to_float(_Float16 x) { return static_cast<float>(x); }
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
template <>
inline _Float16 rp_from_float<_Float16>(float x) { return static_cast<_Float16>(x); }
template <>
inline rp_bfloat16 rp_from_float<rp_bfloat16>(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // round to nearest, ties to even
  return rp_bfloat16(x != x ? 0x7fc0u : rounded);  // NaN: MLX's canonical NaN
}

// cos and sin of pair i's angle for token t, exactly as the GPU headers compute them.
inline void rp_cos_sin(const int32_t* positions, const float* inv_freq, unsigned long long t, unsigned long long i,
                       float& c, float& s) {
  const float theta = float(positions[t]) * inv_freq[i];
  c = std::cos(theta);
  s = std::sin(theta);
}

// The body's hook: `cos_sin` is the driver's source of rp_cos_sin's values, a parameter of each
// build of the body (computed per thread, or read from a table rp_cos_sin filled).
#define RP_COS_SIN(t, i, c, s) cos_sin.get(positions, inv_freq, t, i, c, s)
