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
#include <cstring>
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

// One "thread" of the kernel. Hq, Hkv and D are template arguments for a shape compiled in
// (FD > 0, which also means the whole head rotates with NeoX pairs: RD = D, NEOX), else
// run-time values: the body sees constants in the first case, so the compiler specialises it.
template <typename DType, int FHq, int FHkv, int FD>
static inline void rope_rows(const rp_gid gid, const DType* __restrict q, const DType* __restrict k,
                             const int32_t* __restrict positions, const float* __restrict inv_freq,
                             const float* __restrict cos_sin_scale, const int* positions_shape,
                             DType* __restrict q_rot, DType* __restrict k_rot, const float* __restrict rp_cos,
                             const float* __restrict rp_sin, const int run_Hq, const int run_Hkv, const int run_D,
                             const int run_RD, const bool run_NEOX) {
  const int Hq = FD ? FHq : run_Hq, Hkv = FD ? FHkv : run_Hkv, D = FD ? FD : run_D;
  const int RD = FD ? FD : run_RD;
  const bool NEOX = FD ? true : run_NEOX;
#include "rope_rows.inc"
}

struct Launch {
  int T, Hq, Hkv, D, RD, neox, P;
  const void *q, *k, *v;
  const int32_t *positions, *slots;
  const float *inv_freq, *cos_sin_scale;
  void *q_rot, *k_rot, *k_pool, *v_pool;  // pools: only when writing them
};

// Tokens [t0, t1): fill their part of the cos/sin tables ([T, D/2] each), then run every
// thread of their rows.
template <typename DType, int FHq, int FHkv, int FD, bool WritePool>
static void run_tokens(const Launch& L, float* __restrict rp_cos, float* __restrict rp_sin, int t0, int t1) {
  const rp_uint HALF = rp_uint(L.D) / 2u, H = rp_uint(L.Hq + L.Hkv);
  const int32_t* __restrict positions = L.positions;  // locals: no aliasing with the stores
  const float* __restrict inv_freq = L.inv_freq;
  const rp_uint RHALF = rp_uint(L.RD) / 2u;  // inv_freq's length; the body reads the table below it only
  for (rp_uint t = rp_uint(t0); t < rp_uint(t1); ++t) {
    for (rp_uint i = 0; i < RHALF; ++i) {
      const float theta = float(positions[t]) * inv_freq[i];  // the body's formula
      rp_cos[t * HALF + i] = std::cos(theta);
      rp_sin[t * HALF + i] = std::sin(theta);
    }
  }
  const int shape[1] = {L.T};
  const DType* __restrict q = static_cast<const DType*>(L.q);
  const DType* __restrict k = static_cast<const DType*>(L.k);
  DType* __restrict q_rot = static_cast<DType*>(L.q_rot);
  DType* __restrict k_rot = static_cast<DType*>(L.k_rot);
  for (rp_uint row = rp_uint(t0) * H; row < rp_uint(t1) * H; ++row) {
    for (rp_uint i = 0; i < HALF; ++i) {
      rope_rows<DType, FHq, FHkv, FD>(rp_gid{row, i, HALF}, q, k, positions, inv_freq, L.cos_sin_scale, shape,
                                      q_rot, k_rot, rp_cos, rp_sin, L.Hq, L.Hkv, L.D, L.RD, L.neox != 0);
    }
  }
  if constexpr (WritePool) {
    // inplace=True: each token's k_rot and v rows copied into pool row slots[t], guarded: a
    // slot outside [0, P) writes nothing. (The body's own RP_WRITE_POOL does the same per
    // thread, the emulator checks it; as row copies here the compiler keeps the rotation
    // loop vectorised, measured 2-3.5x faster than the body's write on this CPU.)
    const size_t row_bytes = size_t(L.Hkv) * size_t(L.D) * sizeof(DType);
    for (int t = t0; t < t1; ++t) {
      const int slot = L.slots[t];
      if (slot < 0 || slot >= L.P) continue;
      const size_t src = size_t(t) * row_bytes, dst = size_t(slot) * row_bytes;
      std::memcpy(static_cast<char*>(L.k_pool) + dst, reinterpret_cast<const char*>(k_rot) + src, row_bytes);
      std::memcpy(static_cast<char*>(L.v_pool) + dst, static_cast<const char*>(L.v) + src, row_bytes);
    }
  }
}

// The whole grid, over `threads` workers when there is enough work to pay for starting them.
template <typename DType, int FHq, int FHkv, int FD, bool WritePool>
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
    workers.emplace_back(run_tokens<DType, FHq, FHkv, FD, WritePool>, std::cref(L), rp_cos, rp_sin,
                         int(long(L.T) * w / n), int(long(L.T) * (w + 1) / n));
  }
  run_tokens<DType, FHq, FHkv, FD, WritePool>(L, rp_cos, rp_sin, 0, int(long(L.T) / n));
  for (auto& w : workers) w.join();
}

// dtype 0: float32, 1: float16, 2: bfloat16.
template <int FHq, int FHkv, int FD>
static void launch_dtype(int dtype, bool write_pool, const Launch& L, int threads) {
  if (dtype == 0) (write_pool ? launch<float, FHq, FHkv, FD, true> : launch<float, FHq, FHkv, FD, false>)(L, threads);
  if (dtype == 1)
    (write_pool ? launch<_Float16, FHq, FHkv, FD, true> : launch<_Float16, FHq, FHkv, FD, false>)(L, threads);
  if (dtype == 2)
    (write_pool ? launch<rp_bfloat16, FHq, FHkv, FD, true> : launch<rp_bfloat16, FHq, FHkv, FD, false>)(L, threads);
}

#ifndef ROPEPOOL_SHAPES
#define ROPEPOOL_SHAPES
#endif

extern "C" {

// Rotate q [T, Hq, D] and k [T, Hkv, D] into q_rot and k_rot (row-contiguous buffers); with
// write_pool, also write k_rot and v into rows slots[t] of k_pool and v_pool [P, Hkv, D] in
// place, skipping any slot outside [0, P). Returns 1 if a compiled-in shape ran, 0 if the
// run-time-shape build did (always 0 when allow_fixed is 0, which tests use to run both builds
// on one shape). The compiled-in shapes rotate the whole head with NeoX pairs (RD = D, neox).
int ropepool_host_rope(int dtype, int T, int Hq, int Hkv, int D, int RD, int neox, const void* q, const void* k,
                       const int32_t* positions, const float* inv_freq, const float* cos_sin_scale, void* q_rot,
                       void* k_rot, int threads, int allow_fixed, int write_pool, const void* v,
                       const int32_t* slots, void* k_pool, void* v_pool, int P) {
  const Launch L{T, Hq, Hkv, D, RD, neox, P, q, k, v, positions, slots, inv_freq, cos_sin_scale,
                 q_rot, k_rot, k_pool, v_pool};
  if (allow_fixed && RD == D && neox) {
#define X(FHq, FHkv, FD)                                        \
  if (Hq == FHq && Hkv == FHkv && D == FD) {                      \
    launch_dtype<FHq, FHkv, FD>(dtype, write_pool != 0, L, threads); \
    return 1;                                                     \
  }
    ROPEPOOL_SHAPES
#undef X
  }
  launch_dtype<0, 0, 0>(dtype, write_pool != 0, L, threads);
  return 0;
}

}  // extern "C"
