// cuda.h: what ropepool's kernel body (rope_rows.inc) needs, in CUDA's terms (NVRTC, via
// mx.fast.cuda_kernel). MLX's generated kernel sits in namespace mlx::core::cu; these helpers
// are global and found by ordinary lookup.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

typedef unsigned int rp_uint;
#define RP_DEVICE __device__

__device__ inline unsigned int rp_float_bits(float x) { return __float_as_uint(x); }
__device__ inline float rp_inv_sqrt(float x) { return 1.0f / sqrtf(x); }  // IEEE division and sqrt
__device__ inline float rp_div(float x, float y) { return x / y; }  // IEEE division (no fast math)

__device__ inline float rp_to_float(float x) { return x; }
__device__ inline float rp_to_float(__half x) { return __half2float(x); }
__device__ inline float rp_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename DType>
__device__ inline DType rp_from_float(float x);
template <>
__device__ inline float rp_from_float<float>(float x) { return x; }
template <>
__device__ inline __half rp_from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ inline __nv_bfloat16 rp_from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// cosf/sinf, not __cosf/__sinf: MLX compiles without fast math, and angles reach 2**24.
// The body's hook (rope_rows.inc): cos and sin of pair i's angle for token t, computed per thread.
#define RP_COS_SIN(t, i, c, s)                                \
  {                                                           \
    const float rp_theta = float(positions[t]) * inv_freq[i]; \
    c = cosf(rp_theta);                                       \
    s = sinf(rp_theta);                                       \
  }
