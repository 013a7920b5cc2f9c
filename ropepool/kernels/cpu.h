// cpu.h: what ropepool's kernel body (rope_rows.inc) needs, in C++ (g++), for the grid
// emulator that verifies the body on a machine without Metal or CUDA.
// float16 is the compiler's _Float16; bfloat16 is bit manipulation with round-to-nearest-even,
// the rounding MLX uses.
#include <cmath>
#include <cstdint>
#include <cstring>

typedef unsigned int rp_uint;

struct rp_bfloat16 {
  uint16_t bits;
};

inline float rp_to_float(float x) { return x; }
inline float rp_to_float(_Float16 x) { return static_cast<float>(x); }
inline float rp_to_float(rp_bfloat16 x) {
  uint32_t u = uint32_t(x.bits) << 16;
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
  if (std::isnan(x)) {
    return rp_bfloat16{uint16_t(0x7fc0u)};  // MLX's canonical NaN
  }
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return rp_bfloat16{uint16_t(u >> 16)};
}

#define RP_COS(x) std::cos(x)
#define RP_SIN(x) std::sin(x)
