// cpu.h: what ropepool's kernel body (rope_rows.inc) needs, in C++ (g++): for the grid
// emulator that verifies the body on a machine without Metal or CUDA (emulator.py), and for
// the host build that runs it as the "cpu" backend (host.cpp, which defines RP_HOST).
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

#define RP_COS(x) std::cos(x)
#define RP_SIN(x) std::sin(x)
