// host.cpp: the fused kernel's body (rope_rows.inc), compiled for this machine's CPU and run
// as a real backend ("cpu"). Built by ropepool/kernels/host.py with g++ -O3 -march=native.
//
// The grid becomes loops: thread g = row * HALF + i for each row (token t, head h of q or k) and
// pair i, the rows split into contiguous ranges of tokens over a few std::threads. Three things
// differ from a GPU launch, none in the body:
//   - the thread index is an rp_gid that carries its (row, pair): the body's `gid % HALF`,
//     `gid / HALF` and edge guard `gid >= T * H * HALF` (its only uses of gid, which
//     tests/test_kernel_host.py checks) cost nothing and do not change along a row, so for the
//     shapes compiled in (ROPEPOOL_SHAPES) the compiler sees plain loops over contiguous memory
//     and vectorises them (float32 and bfloat16; GCC 12 does not vectorise _Float16);
//   - indices are 64-bit (cpu.h under RP_HOST), for the same reason;
//   - RP_COS(theta) / RP_SIN(theta) read a table of cos and sin per (t, i) that each worker fills
//     first with exactly the body's formula, cos(float(positions[t]) * inv_freq[i]): the same
//     bits as computing them per thread, once per token instead of once per head.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#define RP_HOST
#include "cpu.h"

// The thread index row * HALF + i, kept as (row, i). Only the body's three uses are defined:
// gid % HALF, gid / HALF, and gid >= n with n a multiple of HALF (then it is row >= n / HALF).
// (Checking the divisor at run time instead keeps GCC from vectorising the bfloat16 loop.)
struct rp_gid {
  rp_uint row, i, half;
  friend rp_uint operator%(rp_gid g, rp_uint /* HALF */) { return g.i; }
  friend rp_uint operator/(rp_gid g, rp_uint /* HALF */) { return g.row; }
  friend bool operator>=(rp_gid g, rp_uint n /* T * H * HALF */) { return g.row >= n / g.half; }
};

#undef RP_COS
#undef RP_SIN
#define RP_COS(theta) rp_cos[t * HALF + i]
#define RP_SIN(theta) rp_sin[t * HALF + i]

// One "thread" of the kernel; Hq, Hkv, D as template arguments (a shape compiled in) ...
template <typename DType, int Hq, int Hkv, int D>
static inline void rope_rows_fixed(const rp_gid gid, const DType* __restrict q, const DType* __restrict k,
                                   const int32_t* __restrict positions, const float* __restrict inv_freq,
                                   const int* positions_shape, DType* __restrict q_rot, DType* __restrict k_rot,
                                   const float* __restrict rp_cos, const float* __restrict rp_sin) {
#include "rope_rows.inc"
}

// ... or as run-time values (any other shape).
template <typename DType>
static inline void rope_rows_any(const rp_gid gid, const DType* __restrict q, const DType* __restrict k,
                                 const int32_t* __restrict positions, const float* __restrict inv_freq,
                                 const int* positions_shape, DType* __restrict q_rot, DType* __restrict k_rot,
                                 const float* __restrict rp_cos, const float* __restrict rp_sin, const int Hq,
                                 const int Hkv, const int D) {
#include "rope_rows.inc"
}

struct Launch {
  int T, Hq, Hkv, D;
  const void *q, *k;
  const int32_t* positions;
  const float* inv_freq;
  void *q_rot, *k_rot;
};

// Tokens [t0, t1): fill their part of the cos/sin tables ([T, D/2] each), then run every
// thread of their rows.
template <typename DType, int FHq, int FHkv, int FD>
static void run_tokens(const Launch& L, float* __restrict rp_cos, float* __restrict rp_sin, int t0, int t1) {
  const rp_uint HALF = rp_uint(L.D) / 2u, H = rp_uint(L.Hq + L.Hkv);
  const int32_t* __restrict positions = L.positions;  // locals: no aliasing with the stores
  const float* __restrict inv_freq = L.inv_freq;
  for (rp_uint t = rp_uint(t0); t < rp_uint(t1); ++t) {
    for (rp_uint i = 0; i < HALF; ++i) {
      const float theta = float(positions[t]) * inv_freq[i];  // the body's formula
      rp_cos[t * HALF + i] = std::cos(theta);
      rp_sin[t * HALF + i] = std::sin(theta);
    }
  }
  const int shape[1] = {L.T}, Hq = L.Hq, Hkv = L.Hkv, D = L.D;
  const DType* __restrict q = static_cast<const DType*>(L.q);
  const DType* __restrict k = static_cast<const DType*>(L.k);
  DType* __restrict q_rot = static_cast<DType*>(L.q_rot);
  DType* __restrict k_rot = static_cast<DType*>(L.k_rot);
  for (rp_uint row = rp_uint(t0) * H; row < rp_uint(t1) * H; ++row) {
    for (rp_uint i = 0; i < HALF; ++i) {
      const rp_gid gid{row, i, HALF};
      if constexpr (FD > 0) {
        rope_rows_fixed<DType, FHq, FHkv, FD>(gid, q, k, positions, inv_freq, shape, q_rot, k_rot, rp_cos,
                                               rp_sin);
      } else {
        rope_rows_any<DType>(gid, q, k, positions, inv_freq, shape, q_rot, k_rot, rp_cos, rp_sin, Hq, Hkv, D);
      }
    }
  }
}

// The whole grid, over `threads` workers when there is enough work to pay for starting them.
template <typename DType, int FHq, int FHkv, int FD>
static void launch(const Launch& L, int threads) {
  const long pairs = long(L.T) * (L.Hq + L.Hkv) * (L.D / 2);
  const long min_pairs_per_thread = 1L << 18;  // below this, starting a thread (~70 us) costs more than it saves
  int n = int(std::min<long>(threads, std::max<long>(1, pairs / min_pairs_per_thread)));
  n = std::max(1, std::min(n, L.T));
  std::vector<float> table(2 * size_t(L.T) * size_t(L.D / 2));  // cos [T, D/2], then sin [T, D/2]
  float* rp_cos = table.data();
  float* rp_sin = table.data() + size_t(L.T) * size_t(L.D / 2);
  std::vector<std::thread> workers;
  for (int w = 1; w < n; ++w) {
    workers.emplace_back(run_tokens<DType, FHq, FHkv, FD>, std::cref(L), rp_cos, rp_sin, int(long(L.T) * w / n),
                         int(long(L.T) * (w + 1) / n));
  }
  run_tokens<DType, FHq, FHkv, FD>(L, rp_cos, rp_sin, 0, int(long(L.T) / n));
  for (auto& w : workers) w.join();
}

// 0: float32, 1: float16, 2: bfloat16.
template <int FHq, int FHkv, int FD>
static void launch_dtype(int dtype, const Launch& L, int threads) {
  if (dtype == 0) launch<float, FHq, FHkv, FD>(L, threads);
  if (dtype == 1) launch<_Float16, FHq, FHkv, FD>(L, threads);
  if (dtype == 2) launch<rp_bfloat16, FHq, FHkv, FD>(L, threads);
}

#ifndef ROPEPOOL_SHAPES
#define ROPEPOOL_SHAPES
#endif

extern "C" {

// Rotate q [T, Hq, D] and k [T, Hkv, D] into q_rot and k_rot (row-contiguous buffers).
// Returns 1 if a compiled-in shape ran, 0 if the run-time-shape build did (always 0 when
// allow_fixed is 0, which tests use to run both builds on one shape).
int ropepool_host_rope(int dtype, int T, int Hq, int Hkv, int D, const void* q, const void* k,
                       const int32_t* positions, const float* inv_freq, void* q_rot, void* k_rot, int threads,
                       int allow_fixed) {
  const Launch L{T, Hq, Hkv, D, q, k, positions, inv_freq, q_rot, k_rot};
  if (allow_fixed) {
#define X(FHq, FHkv, FD)                           \
  if (Hq == FHq && Hkv == FHkv && D == FD) {         \
    launch_dtype<FHq, FHkv, FD>(dtype, L, threads); \
    return 1;                                        \
  }
    ROPEPOOL_SHAPES
#undef X
  }
  launch_dtype<0, 0, 0>(dtype, L, threads);
  return 0;
}

}  // extern "C"
