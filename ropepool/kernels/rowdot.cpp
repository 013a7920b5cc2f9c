// Batch-invariant dot products: c[b, m, n] = sum_k a[b, m, k] * w[index[b], n, k], float32.
//
// Every element is summed in one order that depends on K alone: eight lanes, lane l taking
// k = l, l + 8, l + 16, ... in turn, the lanes added as ((0+1)+(2+3))+((4+5)+(6+7)), then the last
// K % 8 products one after another. Each product is added with a fused multiply-add where the build
// has one (-march=native on a CPU with FMA: ROPEPOOL_FUSED 1), else a multiply then an add (built with
// -ffp-contract=off, so the compiler fuses nothing on its own): one rule per library, never mixed.
// The tiles (3 rows of a by 4 of w, and their edges) and the threads (contiguous ranges of n)
// only choose which elements are computed together, never how one is summed: a row's result
// does not depend on M, on its place among the rows, on the batch or on the thread count.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
#if defined(__FMA__)
#include <immintrin.h>
#define ROPEPOOL_FUSED 1
#else
#define ROPEPOOL_FUSED 0
#endif

typedef float v8 __attribute__((vector_size(32)));

static inline v8 madd(v8 acc, v8 x, v8 y) {  // acc + x * y
#if ROPEPOOL_FUSED
  return (v8)_mm256_fmadd_ps((__m256)x, (__m256)y, (__m256)acc);
#else
  return acc + x * y;
#endif
}

static inline float madd1(float acc, float x, float y) {
#if ROPEPOOL_FUSED
  return __builtin_fmaf(x, y, acc);
#else
  return acc + x * y;
#endif
}

static inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

static inline float finish(v8 s, const float* a, const float* w, int64_t tail) {
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (int64_t t = 0; t < tail; ++t) r = madd1(r, a[t], w[t]);
  return r;
}

// c[i, j] for MB rows of a and NB rows of w.
template <int MB, int NB>
static void tile(const float* a, const float* w, float* c, int64_t K, int64_t N) {
  v8 acc[MB][NB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) acc[i][j] = v8{0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t K8 = K & ~int64_t(7);
  for (int64_t k = 0; k < K8; k += 8) {
    v8 x[MB], y[NB];
    for (int i = 0; i < MB; ++i) x[i] = load8(a + i * K + k);
    for (int j = 0; j < NB; ++j) y[j] = load8(w + j * K + k);
    for (int i = 0; i < MB; ++i)
      for (int j = 0; j < NB; ++j) acc[i][j] = madd(acc[i][j], x[i], y[j]);
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) c[i * N + j] = finish(acc[i][j], a + i * K + K8, w + j * K + K8, K - K8);
}

template <int MB>
static void tile_n(int nb, const float* a, const float* w, float* c, int64_t K, int64_t N) {
  switch (nb) {
    case 4: tile<MB, 4>(a, w, c, K, N); break;
    case 3: tile<MB, 3>(a, w, c, K, N); break;
    case 2: tile<MB, 2>(a, w, c, K, N); break;
    default: tile<MB, 1>(a, w, c, K, N); break;
  }
}

// Columns [n0, n1) of every row of one batch entry.
static void columns(const float* a, const float* w, float* c, int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; n += 4) {
    const int nb = int(n1 - n < 4 ? n1 - n : 4);
    int64_t m = 0;
    for (; m + 3 <= M; m += 3) tile_n<3>(nb, a + m * K, w + n * K, c + m * N + n, K, N);
    for (; m < M; ++m) tile_n<1>(nb, a + m * K, w + n * K, c + m * N + n, K, N);
  }
}

extern "C" int ropepool_rowdot_fused() { return ROPEPOOL_FUSED; }

extern "C" int ropepool_rowdot(const float* a, const float* w, const int32_t* index, float* c, int64_t B, int64_t M,
                               int64_t N, int64_t K, int64_t E, int threads) {
  for (int64_t b = 0; b < B; ++b)
    if (index[b] < 0 || index[b] >= E) return 1;
  auto run = [&](int64_t n0, int64_t n1) {
    for (int64_t b = 0; b < B; ++b)
      columns(a + b * M * K, w + int64_t(index[b]) * N * K, c + b * M * N, M, N, K, n0, n1);
  };
  if (threads <= 1 || N < 8) {
    run(0, N);
    return 0;
  }
  const int64_t blocks = (N + 3) / 4;
  const int64_t t = threads < blocks ? threads : blocks;
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < t; ++i) pool.emplace_back(run, 4 * (blocks * i / t), std::min(N, 4 * (blocks * (i + 1) / t)));
  run(0, std::min(N, 4 * (blocks / t)));
  for (auto& p : pool) p.join();
  return 0;
}
