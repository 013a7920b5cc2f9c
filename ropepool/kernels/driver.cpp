// driver.cpp: the one C++ driver of the kernel body (rope_rows.inc), built by g++ (build.py) as
//   - the grid emulator (emulator.py, `ropepool_emulate`): every thread of whole blocks, in order
//     or reversed, cos and sin computed per thread as on the GPUs, the body's own pool write;
//   - the "cpu" backend (host.py, `ropepool_rope`, with RP_HOST: 64-bit indices, -O3
//     -march=native): rows of tokens over a few std::threads, cos and sin read from a table
//     filled once per (token, pair) by the same function, a QK-norm head's 1 / RMS from a table
//     filled once per (token, head) by the same steps, k_rot and v rows copied into the pools.
// Built with ROPEPOOL_SHAPE=Hq,Hkv,D,RD,NEOX, `ropepool_rope` runs that one shape with its sizes
// compiled in (the compiler then vectorises the row loops) and nothing else; host.py builds such
// a library for a shape on its first use. Nothing here changes what the body computes: both
// builds run with -ffp-contract=off and agree bit for bit (tests/test_kernel_host.py).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "cpu.h"

// ---- what the driver chooses for the body: thread index, cos/sin source, shape -------------

// The fast path's thread index row * HALF + i, kept as (row, i). Only the body's three uses are
// defined: gid % HALF, gid / HALF, and gid >= n with n a multiple of HALF (then row >= n / HALF).
// Plain loops over (row, i) are then what the compiler sees, and vectorises.
struct rp_gid {
  rp_uint row, i, half;
  friend rp_uint operator%(rp_gid g, rp_uint /* HALF */) { return g.i; }
  friend rp_uint operator/(rp_gid g, rp_uint /* HALF */) { return g.row; }
  friend bool operator>=(rp_gid g, rp_uint n /* T * H * HALF */) { return g.row >= n / g.half; }
};

// A QK-norm head's 1 / RMS: the squares of x[base .. base + D) summed in order, as the GPUs do.
template <typename DType>
static inline float rp_head_inv_rms(const DType* x, rp_uint base, rp_uint D, float eps) {
  float ss = 0.0f;
  for (rp_uint j = 0; j < D; ++j) {
    const float xj = rp_to_float(x[base + j]);
    ss += xj * xj;
  }
  return rp_inv_sqrt(ss / float(D) + eps);
}

struct PerThreadCosSin {  // as the GPUs: every thread computes its pair's cos and sin, and its head's sum
  void get(const int32_t* positions, const float* inv_freq, rp_uint t, rp_uint i, float& c, float& s) const {
    rp_cos_sin(positions, inv_freq, t, i, c, s);
  }
  template <typename DType>
  float inv_rms(const DType* x, rp_uint base, rp_uint, rp_uint D, float eps) const {
    return rp_head_inv_rms(x, base, D, eps);
  }
};

struct TableCosSin {  // cos, sin [T, HALF] filled by rp_cos_sin; inv_rms [T * H] by rp_head_inv_rms (run_tokens)
  const float* __restrict cos;
  const float* __restrict sin;
  rp_uint half;
  const float* __restrict scales;
  void get(const int32_t*, const float*, rp_uint t, rp_uint i, float& c, float& s) const {
    c = cos[t * half + i];
    s = sin[t * half + i];
  }
  template <typename DType>
  float inv_rms(const DType*, rp_uint, rp_uint row, rp_uint, float) const {
    return scales[row];
  }
};

struct Shape {
  int Hq, Hkv, D, RD, NEOX;
  int QNORM, KNORM;  // QK-norm of q, of k (run-time flags: the body's RP_QK_NORM blocks are always built here)
};

// One thread of the kernel. The sizes are template arguments where FD > 0 (a specialised
// build), else the run-time `run`'s: the body sees constants in the first case.
#define RP_ROWS_TEMPLATE                                                                           \
  template <typename DType, int FHq, int FHkv, int FD, int FRD, bool FNEOX, typename Gid, typename CosSin, \
            typename PoolT>
#define RP_ROWS_PARAMS                                                                                    \
  const Gid rp_thread_index, const CosSin cos_sin, const Shape run, const DType* __restrict q,            \
      const DType* __restrict k, const DType* v, const int32_t* __restrict positions, const int32_t* slots, \
      const float* __restrict inv_freq, const float* __restrict cos_sin_scale, const int* positions_shape, \
      const int* k_pool_shape, DType* __restrict q_rot, DType* __restrict k_rot, PoolT* k_pool, PoolT* v_pool,  \
      const float* __restrict q_norm_weight, const float* __restrict k_norm_weight,                          \
      const float* __restrict norm_eps, const float* __restrict kv_scale, unsigned char* __restrict k_fp8, \
      unsigned char* __restrict v_fp8
#define RP_ROWS_LOCALS                                                       \
  const int Hq = FD ? FHq : run.Hq, Hkv = FD ? FHkv : run.Hkv, D = FD ? FD : run.D; \
  const int RD = FD ? FRD : run.RD;                                          \
  const bool NEOX = FD ? FNEOX : run.NEOX != 0;                              \
  const bool RP_QNORM_ON = run.QNORM != 0, RP_KNORM_ON = run.KNORM != 0;     \
  const Gid gid = rp_thread_index;

struct Extra {  // QK-norm's and FP8's arguments (null where off)
  const float *q_norm_weight, *k_norm_weight, *norm_eps, *kv_scale;
  void *k_fp8, *v_fp8;
};

// The plain body (no QK-norm, no FP8): what most calls run, with no run-time flag in its loop.
RP_ROWS_TEMPLATE static inline void rope_rows_plain(RP_ROWS_PARAMS) {
  const int Hq = FD ? FHq : run.Hq, Hkv = FD ? FHkv : run.Hkv, D = FD ? FD : run.D;
  const int RD = FD ? FRD : run.RD;
  const bool NEOX = FD ? FNEOX : run.NEOX != 0;
  const Gid gid = rp_thread_index;
#include "rope_rows.inc"
}

// Four builds of the body with QK-norm: with or without the in-kernel pool write, with or without FP8 codes.
#define RP_QK_NORM
RP_ROWS_TEMPLATE static inline void rope_rows(RP_ROWS_PARAMS) {
  RP_ROWS_LOCALS
#include "rope_rows.inc"
}

#define RP_WRITE_POOL
RP_ROWS_TEMPLATE static inline void rope_rows_pool(RP_ROWS_PARAMS) {
  RP_ROWS_LOCALS
#include "rope_rows.inc"
}

#define RP_FP8
RP_ROWS_TEMPLATE static inline void rope_rows_pool_fp8(RP_ROWS_PARAMS) {
  RP_ROWS_LOCALS
#include "rope_rows.inc"
}
#undef RP_WRITE_POOL

RP_ROWS_TEMPLATE static inline void rope_rows_fp8(RP_ROWS_PARAMS) {
  RP_ROWS_LOCALS
#include "rope_rows.inc"
}
#undef RP_FP8

#ifndef ROPEPOOL_SHAPE
// ---- the emulator: the grid as a GPU launches it ----------------------------------------------

template <typename DType>
static void emulate(int write_pool, int fp8, int reverse, rp_uint grid, rp_uint block, const void* q, const void* k,
                    const void* v, const int32_t* positions, const int32_t* slots, const float* inv_freq,
                    const float* cos_sin_scale, const int* positions_shape, const int* k_pool_shape, void* q_rot,
                    void* k_rot, void* k_pool, void* v_pool, const Shape run, const Extra& x) {
  const rp_uint launched = (grid + block - 1) / block * block;  // whole blocks, as CUDA launches
  for (rp_uint n = 0; n < launched; ++n) {
    const rp_uint g = reverse ? launched - 1 - n : n;
#define RP_EMULATE(f, PoolT)                                                                                     \
  f<DType, 0, 0, 0, 0, true, rp_uint, PerThreadCosSin, PoolT>(                                                     \
      g, PerThreadCosSin{}, run, (const DType*)q, (const DType*)k, (const DType*)v, positions, slots, inv_freq,   \
      cos_sin_scale, positions_shape, k_pool_shape, (DType*)q_rot, (DType*)k_rot, (PoolT*)k_pool, (PoolT*)v_pool, \
      x.q_norm_weight, x.k_norm_weight, x.norm_eps, x.kv_scale, (unsigned char*)x.k_fp8, (unsigned char*)x.v_fp8)
    if (fp8) {
      if (write_pool) RP_EMULATE(rope_rows_pool_fp8, unsigned char);
      else RP_EMULATE(rope_rows_fp8, unsigned char);
    } else {
      if (write_pool) RP_EMULATE(rope_rows_pool, DType);
      else RP_EMULATE(rope_rows, DType);
    }
#undef RP_EMULATE
  }
}

#endif  // ROPEPOOL_SHAPE

// ---- the "cpu" backend: rows of tokens, a cos/sin table, row copies into the pools ----------

struct Launch {
  int T;
  Shape shape;
  int P;
  const void *q, *k, *v;
  const int32_t *positions, *slots;
  const float *inv_freq, *cos_sin_scale;
  void *q_rot, *k_rot, *k_pool, *v_pool;  // pools: only when writing them
  Extra x;                                // QK-norm weights; FP8 scales and code buffers [T, Hkv, D]
};

// Tokens [t0, t1): fill their part of the cos/sin table, then run every thread of their rows;
// with WritePool, copy each token's k_rot and v rows (FP8: their code rows) into pool row slots[t],
// skipping a slot outside [0, P) (the body's RP_WRITE_POOL guard; as row copies the rotation loop
// stays vectorised).
template <typename DType, int FHq, int FHkv, int FD, int FRD, bool FNEOX, bool WritePool, bool FP8>
static void run_tokens(const Launch& L, float* __restrict cos, float* __restrict sin, float* __restrict sums, int t0,
                       int t1) {
  const Shape& S = L.shape;
  const rp_uint HALF = rp_uint(S.D) / 2u, H = rp_uint(S.Hq + S.Hkv), RHALF = rp_uint(S.RD) / 2u;
  const int32_t* __restrict positions = L.positions;  // locals: no aliasing with the stores
  const float* __restrict inv_freq = L.inv_freq;
  for (rp_uint t = rp_uint(t0); t < rp_uint(t1); ++t) {
    for (rp_uint i = 0; i < RHALF; ++i) rp_cos_sin(positions, inv_freq, t, i, cos[t * HALF + i], sin[t * HALF + i]);
  }
  const DType* __restrict q = static_cast<const DType*>(L.q);
  const DType* __restrict k = static_cast<const DType*>(L.k);
  if (S.QNORM || S.KNORM) {  // each head's 1 / RMS once, not once per thread of the head
    const float eps = L.x.norm_eps[0];
    for (rp_uint row = rp_uint(t0) * H; row < rp_uint(t1) * H; ++row) {
      const rp_uint t = row / H, h = row % H, D = rp_uint(S.D);
      if (h < rp_uint(S.Hq)) {
        if (S.QNORM) sums[row] = rp_head_inv_rms(q, (t * rp_uint(S.Hq) + h) * D, D, eps);
      } else if (S.KNORM) {
        sums[row] = rp_head_inv_rms(k, (t * rp_uint(S.Hkv) + (h - rp_uint(S.Hq))) * D, D, eps);
      }
    }
  }
  const TableCosSin table{cos, sin, HALF, sums};
  const int shape[1] = {L.T};
  DType* __restrict q_rot = static_cast<DType*>(L.q_rot);
  DType* __restrict k_rot = static_cast<DType*>(L.k_rot);
  const DType* v = static_cast<const DType*>(L.v);
  unsigned char* k_fp8 = static_cast<unsigned char*>(L.x.k_fp8);
  unsigned char* v_fp8 = static_cast<unsigned char*>(L.x.v_fp8);
  if (!FP8 && !S.QNORM && !S.KNORM) {  // the plain body: no QK-norm or FP8 flag tested per element
    for (rp_uint row = rp_uint(t0) * H; row < rp_uint(t1) * H; ++row) {
      for (rp_uint i = 0; i < HALF; ++i) {
        rope_rows_plain<DType, FHq, FHkv, FD, FRD, FNEOX, rp_gid, TableCosSin, DType>(
            rp_gid{row, i, HALF}, table, S, q, k, v, positions, nullptr, inv_freq, L.cos_sin_scale, shape, nullptr,
            q_rot, k_rot, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
      }
    }
  } else {
    for (rp_uint row = rp_uint(t0) * H; row < rp_uint(t1) * H; ++row) {
      for (rp_uint i = 0; i < HALF; ++i) {
        auto f = FP8 ? rope_rows_fp8<DType, FHq, FHkv, FD, FRD, FNEOX, rp_gid, TableCosSin, DType>
                     : rope_rows<DType, FHq, FHkv, FD, FRD, FNEOX, rp_gid, TableCosSin, DType>;
        f(rp_gid{row, i, HALF}, table, S, q, k, v, positions, nullptr, inv_freq, L.cos_sin_scale, shape, nullptr,
          q_rot, k_rot, nullptr, nullptr, L.x.q_norm_weight, L.x.k_norm_weight, L.x.norm_eps, L.x.kv_scale, k_fp8,
          v_fp8);
      }
    }
  }
  if constexpr (WritePool) {
    const size_t row_bytes = size_t(S.Hkv) * size_t(S.D) * (FP8 ? 1 : sizeof(DType));
    const char* k_rows = FP8 ? reinterpret_cast<const char*>(k_fp8) : reinterpret_cast<const char*>(k_rot);
    const char* v_rows = FP8 ? reinterpret_cast<const char*>(v_fp8) : static_cast<const char*>(L.v);
    for (int t = t0; t < t1; ++t) {
      const int slot = L.slots[t];
      if (slot < 0 || slot >= L.P) continue;
      const size_t src = size_t(t) * row_bytes, dst = size_t(slot) * row_bytes;
      std::memcpy(static_cast<char*>(L.k_pool) + dst, k_rows + src, row_bytes);
      std::memcpy(static_cast<char*>(L.v_pool) + dst, v_rows + src, row_bytes);
    }
  }
}

// The whole grid, over `threads` workers when there is enough work to pay for starting them.
template <typename DType, int FHq, int FHkv, int FD, int FRD, bool FNEOX, bool WritePool, bool FP8>
static void launch(const Launch& L, int threads) {
  const rp_uint HALF = rp_uint(L.shape.D) / 2u;
  const long pairs = long(L.T) * (L.shape.Hq + L.shape.Hkv) * long(HALF);
  const long min_pairs_per_thread = 1L << 18;  // below this, starting a thread costs more than it saves
  int n = int(std::min<long>(threads, std::max<long>(1, pairs / min_pairs_per_thread)));
  n = std::max(1, std::min(n, L.T));
  constexpr size_t kStack = 2 * 256 + 64;  // cos and sin of up to 256 pairs (e.g. one token, D <= 512), 64 heads
  float stack[kStack];
  std::vector<float> heap;
  const size_t rows = size_t(L.T) * size_t(L.shape.Hq + L.shape.Hkv);
  const size_t need = 2 * size_t(L.T) * HALF + rows;  // cos [T, HALF], sin [T, HALF], heads' 1 / RMS [T * H]
  float* cos = stack;
  if (need > kStack) {
    heap.resize(need);
    cos = heap.data();
  }
  float* sin = cos + size_t(L.T) * HALF;
  float* sums = sin + size_t(L.T) * HALF;
  auto run = run_tokens<DType, FHq, FHkv, FD, FRD, FNEOX, WritePool, FP8>;
  std::vector<std::thread> workers;
  for (int w = 1; w < n; ++w) {
    workers.emplace_back(run, std::cref(L), cos, sin, sums, int(long(L.T) * w / n), int(long(L.T) * (w + 1) / n));
  }
  run(L, cos, sin, sums, 0, int(long(L.T) / n));
  for (auto& w : workers) w.join();
}

// dtype 0: float32, 1: float16, 2: bfloat16.
template <int FHq, int FHkv, int FD, int FRD, bool FNEOX>
static void launch_dtype(int dtype, bool pool, bool fp8, const Launch& L, int threads) {
#define RP_LAUNCH(DType)                                                                                          \
  (fp8 ? (pool ? launch<DType, FHq, FHkv, FD, FRD, FNEOX, true, true> : launch<DType, FHq, FHkv, FD, FRD, FNEOX, false, true>) \
       : (pool ? launch<DType, FHq, FHkv, FD, FRD, FNEOX, true, false>                                            \
               : launch<DType, FHq, FHkv, FD, FRD, FNEOX, false, false>))(L, threads)
  if (dtype == 0) RP_LAUNCH(float);
  if (dtype == 1) RP_LAUNCH(rp_float16);
  if (dtype == 2) RP_LAUNCH(rp_bfloat16);
#undef RP_LAUNCH
}

#define RP_DISPATCH(DType)                                                                                  \
  emulate<DType>(write_pool, fp8, reverse, grid, block, q, k, v, positions, slots, inv_freq, cos_sin_scale, \
                 positions_shape, k_pool_shape, q_rot, k_rot, k_pool, v_pool, run, x)

extern "C" {

#ifndef ROPEPOOL_SHAPE
// One launch of the kernel over `grid` threads in whole blocks of `block` (dtype as above).
void ropepool_emulate(int dtype, int write_pool, int reverse, rp_uint grid, rp_uint block, const void* q,
                      const void* k, const void* v, const int32_t* positions, const int32_t* slots,
                      const float* inv_freq, const float* cos_sin_scale, const int* positions_shape,
                      const int* k_pool_shape, void* q_rot, void* k_rot, void* k_pool, void* v_pool, int Hq, int Hkv,
                      int D, int RD, int NEOX, int qnorm, int knorm, const float* q_norm_weight,
                      const float* k_norm_weight, const float* norm_eps, int fp8, const float* kv_scale,
                      void* k_fp8, void* v_fp8) {
  const Shape run{Hq, Hkv, D, RD, NEOX, qnorm, knorm};
  const Extra x{q_norm_weight, k_norm_weight, norm_eps, kv_scale, k_fp8, v_fp8};
  if (dtype == 0) RP_DISPATCH(float);
  if (dtype == 1) RP_DISPATCH(rp_float16);
  if (dtype == 2) RP_DISPATCH(rp_bfloat16);
}
#endif  // ROPEPOOL_SHAPE

// Rotate q [T, Hq, D] and k [T, Hkv, D] into q_rot and k_rot (row-contiguous buffers), each
// head first RMS-normalised where qnorm / knorm say so; with fp8, also write the e4m3 codes of
// k_rot and v (times kv_scale) into k_fp8 and v_fp8 [T, Hkv, D]; with write_pool, also write
// k_rot and v (fp8: their codes) into rows slots[t] of k_pool and v_pool [P, Hkv, D] in place,
// skipping any slot outside [0, P). Returns 1 if this library's compiled-in shape ran, 0 if the
// run-time-shape build did, -1 if this library holds another shape only (nothing ran).
int ropepool_rope(int dtype, int T, int Hq, int Hkv, int D, int RD, int neox, const void* q, const void* k,
                  const int32_t* positions, const float* inv_freq, const float* cos_sin_scale, void* q_rot,
                  void* k_rot, int threads, int write_pool, const void* v, const int32_t* slots, void* k_pool,
                  void* v_pool, int P, int qnorm, int knorm, const float* q_norm_weight, const float* k_norm_weight,
                  const float* norm_eps, int fp8, const float* kv_scale, void* k_fp8, void* v_fp8) {
  const Launch L{T, Shape{Hq, Hkv, D, RD, neox, qnorm, knorm}, P, q, k, v, positions, slots, inv_freq, cos_sin_scale,
                 q_rot, k_rot, k_pool, v_pool, Extra{q_norm_weight, k_norm_weight, norm_eps, kv_scale, k_fp8, v_fp8}};
#ifdef ROPEPOOL_SHAPE
  constexpr int fixed[5] = {ROPEPOOL_SHAPE};
  if (Hq != fixed[0] || Hkv != fixed[1] || D != fixed[2] || RD != fixed[3] || (neox != 0) != (fixed[4] != 0)) return -1;
  launch_dtype<ROPEPOOL_SHAPE>(dtype, write_pool != 0, fp8 != 0, L, threads);
  return 1;
#else
  launch_dtype<0, 0, 0, 0, true>(dtype, write_pool != 0, fp8 != 0, L, threads);
  return 0;
#endif
}

}  // extern "C"
