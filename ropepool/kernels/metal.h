// metal.h: what ropepool's kernel body (rope_rows.inc) needs, in Metal's terms.
// MLX prepends its own utils (metal_stdlib, `using namespace metal`) before this header.
typedef uint rp_uint;
#define RP_DEVICE

inline uint rp_float_bits(float x) { return as_type<uint>(x); }
inline float rp_inv_sqrt(float x) { return metal::precise::divide(1.0f, metal::precise::sqrt(x)); }
inline float rp_div(float x, float y) { return metal::precise::divide(x, y); }

template <typename X>
inline float rp_to_float(X x) {
  return static_cast<float>(x);
}

template <typename DType>
inline DType rp_from_float(float x) {
  return static_cast<DType>(x);  // round to nearest even, as MLX's astype
}

// precise::, not the fast variants: angles reach 2**24 radians, far outside fast cos's range.
// The body's hook (rope_rows.inc): cos and sin of pair i's angle for token t, computed per thread.
#define RP_COS_SIN(t, i, c, s)                                       \
  {                                                                  \
    const float rp_theta = float(positions[t]) * inv_freq[i];        \
    c = metal::precise::cos(rp_theta);                               \
    s = metal::precise::sin(rp_theta);                               \
  }
