// metal.h: what ropepool's kernel body (rope_rows.inc) needs, in Metal's terms.
// MLX prepends its own utils (metal_stdlib, `using namespace metal`) before this header.
typedef uint rp_uint;

template <typename X>
inline float rp_to_float(X x) {
  return static_cast<float>(x);
}

template <typename DType>
inline DType rp_from_float(float x) {
  return static_cast<DType>(x);  // round to nearest even, as MLX's astype
}

// precise::, not the fast variants: angles reach 2**24 radians, far outside fast cos's range.
#define RP_COS(x) metal::precise::cos(x)
#define RP_SIN(x) metal::precise::sin(x)
