"""The text MLX would compile for Metal and for CUDA, compiled by g++ against stand-ins and run.

No Metal or CUDA here, so this checks the next best thing: the full kernel source as
``mx.fast.metal_kernel`` / ``mx.fast.cuda_kernel`` assemble it (signature generated from the
argument names and dtypes, template arguments, our header, the body with its thread-index
line), with each back-end's names stood in for by small C++ definitions: Metal's address
spaces and attributes vanish, ``uint3 thread_position_in_grid`` becomes a parameter;
CUDA's ``__half``/``__nv_bfloat16`` become structs with the conversion intrinsics our header
calls (round to nearest even), ``blockIdx``/``threadIdx`` become globals set by a launch loop
over whole blocks. The generated kernels then run on NumPy buffers and must agree with the
float64 reference. This catches errors in the GPU headers and in how the pieces fit together;
it cannot catch a difference in the real compilers or math libraries.

The assembly mirrors MLX 0.32's ``write_signature`` (mlx/backend/metal/custom_kernel.cpp) and
``build_kernel`` (mlx/backend/cuda/custom_kernel.cpp).
"""

import ctypes
import subprocess

import numpy as np
import pytest

from ropepool.kernels import emulator, source
from ropepool.reference import rotate
from ropepool.rope import rope_table
from ropepool.tolerance import error_bound

pytestmark = pytest.mark.skipif(emulator.compiler() is None, reason="no C++ compiler on this machine")

# (name, T, Hq, Hkv, D, the op's RoPE keywords)
CONFIGS = [
    ("gqa", 5, 8, 2, 16, {}),
    ("mqa-d6", 3, 3, 1, 6, {}),
    ("partial-gptj", 4, 4, 2, 20, {"rotary_dim": 8, "is_neox": False}),  # Phi-2-like slice, GPT-J pairs
    (
        "yarn-partial",
        3,
        2,
        1,
        12,
        {"rotary_dim": 8, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}},
    ),
]
DTYPES = ["float32", "float16", "bfloat16"]
METAL_TYPE = {"float32": "float", "float16": "float16_t", "bfloat16": "bfloat16_t"}
CUDA_TYPE = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16"}

ROUND_BF16 = """
static inline uint16_t mock_bf16_bits(float x) {
  uint32_t u; std::memcpy(&u, &x, 4);
  if (std::isnan(x)) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
static inline float mock_bf16_float(uint16_t b) { uint32_t u = uint32_t(b) << 16; float f; std::memcpy(&f, &u, 4); return f; }
"""

METAL_PRELUDE = (
    """#include <cmath>
#include <cstdint>
#include <cstring>
// Stand-ins for what metal_stdlib and MLX's metal::utils() give a custom kernel.
#define device
#define constant
typedef unsigned int uint;
struct uint3 { uint x, y, z; };
namespace metal { namespace precise {
inline float cos(float x) { return std::cos(x); }
inline float sin(float x) { return std::sin(x); }
inline float sqrt(float x) { return std::sqrt(x); }
inline float divide(float x, float y) { return x / y; }
} }
template <typename T> inline T as_type(float x) { T t; std::memcpy(&t, &x, sizeof t); return t; }
using namespace metal;
typedef _Float16 float16_t;
"""
    + ROUND_BF16
    + """
struct bfloat16_t {
  uint16_t bits;
  bfloat16_t() = default;
  explicit bfloat16_t(float x) : bits(mock_bf16_bits(x)) {}
  explicit operator float() const { return mock_bf16_float(bits); }
};
"""
)

CUDA_PRELUDE = (
    """#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
// Stand-ins for CUDA and for mlx/backend/cuda/device/utils.cuh.
#define __device__
#define __global__
#define __grid_constant__
struct mock_dim3 { unsigned int x, y, z; };
static mock_dim3 blockIdx, blockDim, threadIdx;
"""
    + ROUND_BF16
    + """
struct __half { _Float16 v; };
struct __nv_bfloat16 { uint16_t bits; };
inline float __half2float(__half h) { return float(h.v); }
inline __half __float2half_rn(float x) { return __half{(_Float16)x}; }
inline float __bfloat162float(__nv_bfloat16 b) { return mock_bf16_float(b.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float x) { return __nv_bfloat16{mock_bf16_bits(x)}; }
inline unsigned int __float_as_uint(float x) { unsigned int u; std::memcpy(&u, &x, 4); return u; }
// sqrtf: the C library's, through <cmath>
namespace cooperative_groups {}
namespace mlx { namespace core { namespace cu {
using Shape = std::array<int32_t, 8>;
} } }
"""
)


def _suffix(dtype, Hq, Hkv, rope):
    return f"{dtype}_{Hq}_{Hkv}_{rope.head_dim}_{rope.rotary_dim}_{int(rope.is_neox)}"


def metal_source(name, dtype, Hq, Hkv, rope):
    """What mx.fast.metal_kernel compiles after metal::utils() and our header, for our inputs and template.

    (MLX builds one library per template instantiation, each with its own copy of the header;
    here all instantiations share one translation unit, so the fixture writes the header once.)
    """
    t = METAL_TYPE[dtype]
    kernel = f"custom_kernel_{name}_{_suffix(t, Hq, Hkv, rope)}"
    args = [
        f"const device {t}* q [[buffer(0)]]",
        f"const device {t}* k [[buffer(1)]]",
        "const device int32_t* positions [[buffer(2)]]",
        "const constant int* positions_shape [[buffer(3)]]",
        "const device float* inv_freq [[buffer(4)]]",
        "const device float* cos_sin_scale [[buffer(5)]]",
        f"device {t}* q_rot [[buffer(6)]]",
        f"device {t}* k_rot [[buffer(7)]]",
        "uint3 thread_position_in_grid [[thread_position_in_grid]]",
    ]
    text = (
        "template <typename DType, int Hq, int Hkv, int D, int RD, bool NEOX>\n[[kernel]] void "
        + kernel
        + "(\n  "
        + ",\n  ".join(args)
        + ") {\n"
        + source.body("metal")
        + "\n}\n"
    )
    launch = f"""
extern "C" void launch_{_suffix(dtype, Hq, Hkv, rope)}(unsigned grid, unsigned block, const void* q,
    const void* k, const int32_t* positions, const int* positions_shape, const float* inv_freq,
    const float* cos_sin_scale, void* q_rot, void* k_rot) {{
  (void)block;  // Metal dispatches exactly `grid` threads (non-uniform threadgroups)
  for (unsigned g = 0; g < grid; ++g)
    {kernel}<{t}, {Hq}, {Hkv}, {rope.head_dim}, {rope.rotary_dim}, {str(rope.is_neox).lower()}>(({t}*)q,
        ({t}*)k, positions, positions_shape, inv_freq, cos_sin_scale, ({t}*)q_rot, ({t}*)k_rot, uint3{{g, 0, 0}});
}}
"""
    return text + launch


def cuda_source(name, dtype, Hq, Hkv, rope):
    """What mx.fast.cuda_kernel compiles, for our inputs and template."""
    t = CUDA_TYPE[dtype]
    kernel = f"{name}_{_suffix(dtype, Hq, Hkv, rope)}"
    args = [
        f"const {t}* q",
        f"const {t}* k",
        "const int32_t* positions",
        "const __grid_constant__ Shape positions_shape",
        "const float* inv_freq",
        "const float* cos_sin_scale",
        f"{t}* q_rot",
        f"{t}* k_rot",
    ]
    text = (
        "namespace mlx::core::cu {\n\nnamespace cg = cooperative_groups;\n\n__global__ void "
        + kernel
        + "(\n    "
        + ",\n    ".join(args)
        + ") {\n"
        + f"  using DType = {t};\n  constexpr int Hq = {Hq};\n  constexpr int Hkv = {Hkv};\n"
        + f"  constexpr int D = {rope.head_dim};\n  constexpr int RD = {rope.rotary_dim};\n"
        + f"  constexpr bool NEOX = {str(rope.is_neox).lower()};\n\n"
        + source.body("cuda")
        + "\n}\n\n} // namespace mlx::core::cu\n"
    )
    launch = f"""
extern "C" void launch_{_suffix(dtype, Hq, Hkv, rope)}(unsigned grid, unsigned block, const void* q,
    const void* k, const int32_t* positions, const int* positions_shape, const float* inv_freq,
    const float* cos_sin_scale, void* q_rot, void* k_rot) {{
  mlx::core::cu::Shape shape{{}};
  shape[0] = positions_shape[0];
  blockDim = mock_dim3{{block, 1, 1}};
  for (unsigned b = 0; b < (grid + block - 1) / block; ++b)  // whole blocks, as CUDA launches them
    for (unsigned i = 0; i < block; ++i) {{
      blockIdx = mock_dim3{{b, 0, 0}};
      threadIdx = mock_dim3{{i, 0, 0}};
      mlx::core::cu::{kernel}((const {t}*)q, (const {t}*)k, positions, shape, inv_freq, cos_sin_scale, ({t}*)q_rot,
                              ({t}*)k_rot);
    }}
}}
"""
    return text + launch


@pytest.fixture(scope="module", params=["metal", "cuda"])
def built(request, tmp_path_factory):
    backend = request.param
    tmp = tmp_path_factory.mktemp(backend)
    (tmp / "cuda_fp16.h").write_text("// stand-in\n")
    (tmp / "cuda_bf16.h").write_text("// stand-in\n")
    make = metal_source if backend == "metal" else cuda_source
    parts = [METAL_PRELUDE if backend == "metal" else CUDA_PRELUDE, source.header(backend)]
    name = source.kernel_name(backend)
    parts += [
        make(name, dt, Hq, Hkv, rope_table(D, 10000.0, **kw)) for _, _, Hq, Hkv, D, kw in CONFIGS for dt in DTYPES
    ]
    src = tmp / f"{backend}.cpp"
    src.write_text("\n".join(parts))
    lib = tmp / f"{backend}.so"
    cmd = [
        emulator.compiler(),
        "-std=c++17",
        "-O1",
        "-shared",
        "-fPIC",
        "-Wno-attributes",
        f"-I{tmp}",
        "-o",
        str(lib),
        str(src),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"the generated {backend} source does not compile:\n{proc.stderr[-3000:]}"
    return backend, ctypes.CDLL(str(lib))


def _values(store, dtype):
    return emulator.to_float64(store, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,T,Hq,Hkv,D,variant", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_generated_kernel_matches_reference(built, name, T, Hq, Hkv, D, variant, dtype):
    backend, lib = built
    rng = np.random.default_rng(T * D)
    raw = {
        "q": rng.standard_normal((T, Hq, D)).astype(np.float32),
        "k": rng.standard_normal((T, Hkv, D)).astype(np.float32),
    }
    store = {
        n: (emulator.float32_to_bfloat16_bits(x) if dtype == "bfloat16" else x.astype(dtype)) for n, x in raw.items()
    }
    positions = np.asarray(rng.integers(0, 3000, T), np.int32)
    rope = rope_table(D, 10000.0, **variant)
    inv_freq = np.ascontiguousarray(rope.inv_freq32())
    scale = np.array([rope.scale], np.float32)
    out = {n: np.full(store[n].nbytes, 0xFF, np.uint8).view(store[n].dtype).reshape(store[n].shape) for n in store}
    grid = source.grid_size(T, Hq, Hkv, D)
    fn = getattr(lib, f"launch_{_suffix(dtype, Hq, Hkv, rope)}")
    p = ctypes.c_void_p
    fn.argtypes = [ctypes.c_uint, ctypes.c_uint] + [p] * 8
    fn(
        grid,
        source.BLOCK,
        store["q"].ctypes.data,
        store["k"].ctypes.data,
        positions.ctypes.data,
        np.array([T], np.int32).ctypes.data,
        inv_freq.ctypes.data,
        scale.ctypes.data,
        out["q"].ctypes.data,
        out["k"].ctypes.data,
    )
    for n in ("q", "k"):
        x = _values(store[n], dtype)
        want = rotate(x, positions, rope)
        r = np.abs(x).max() * 2 * max(rope.scale, 1.0)
        tol = error_bound(dtype, positions.max(), r)
        got = _values(out[n], dtype)
        assert np.all(np.abs(got - want) <= tol), f"{backend} {n}_rot: max error {np.nanmax(np.abs(got - want))}"
        rest = slice(rope.rotary_dim, None)  # the pass-through dimensions: copied bit for bit
        assert np.array_equal(out[n][..., rest], store[n][..., rest]), f"{backend} {n}_rot changed unrotated dims"


# --- The QK-norm + FP8 kernel text, as nvrtc.kernel_text assembles it for mx.fast.cuda_kernel -------


def test_generated_cuda_qk_norm_fp8_kernel_matches_reference(tmp_path):
    """The exact CUDA text of the QK-norm + FP8 variant (its #define lines, inputs and uint8 outputs),
    compiled by g++ against the stand-ins and run over whole blocks: q_rot and k_rot within the
    normalised bound of the reference, k_fp8 and v_fp8 the reference codes of k_rot and v."""
    from benchmarks import nvrtc
    from ropepool.reference import quantize_rows, rms_norm

    T, Hq, Hkv, D, dtype = 3, 4, 2, 16, "float16"
    variant = source.Variant(qnorm=True, knorm=True, fp8=True)
    kt = nvrtc.kernel_text(dtype, Hq, Hkv, D, variant=variant)
    (tmp_path / "cuda_fp16.h").write_text("// stand-in\n")
    (tmp_path / "cuda_bf16.h").write_text("// stand-in\n")
    (tmp_path / "cooperative_groups.h").write_text("// stand-in\n")
    utils = tmp_path / "mlx" / "backend" / "cuda" / "device" / "utils.cuh"
    utils.parent.mkdir(parents=True)
    utils.write_text("// stand-in: CUDA_PRELUDE declares what the signature names\n")
    ctype = {"float16": "__half", "float32": "float", "int32": "int32_t", "uint8": "uint8_t"}
    dtypes = {**source.INPUT_DTYPES, **source.OUTPUT_DTYPES}
    args = []
    for n, (name, kind) in enumerate(kt.params):
        if kind == "shape":
            args.append("shape")
            continue
        t = ctype[dtype if dtypes[name] == "DType" else dtypes[name]]
        args.append(f"({'const ' if kind == 'input' else ''}{t}*)ptrs[{n}]")
    launch = f"""
extern "C" void launch(unsigned grid, unsigned block, void** ptrs, int T) {{
  mlx::core::cu::Shape shape{{}};
  shape[0] = T;
  blockDim = mock_dim3{{block, 1, 1}};
  for (unsigned b = 0; b < (grid + block - 1) / block; ++b)
    for (unsigned i = 0; i < block; ++i) {{
      blockIdx = mock_dim3{{b, 0, 0}};
      threadIdx = mock_dim3{{i, 0, 0}};
      mlx::core::cu::{kt.name}({", ".join(args)});
    }}
}}
"""
    src = tmp_path / "fused.cpp"
    src.write_text(CUDA_PRELUDE + kt.text + launch)
    lib = tmp_path / "fused.so"
    proc = subprocess.run(
        [
            emulator.compiler(),
            "-std=c++17",
            "-O1",
            "-shared",
            "-fPIC",
            "-Wno-attributes",
            f"-I{tmp_path}",
            "-o",
            str(lib),
            str(src),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"the generated QK-norm + FP8 CUDA source does not compile:\n{proc.stderr[-3000:]}"
    fn = ctypes.CDLL(str(lib)).launch
    fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_int]
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((T, h, D)).astype(np.float16) * 4 for h in (Hq, Hkv, Hkv))
    positions = np.array([0, 9, 300], np.int32)
    rope = rope_table(D, 10000.0)
    qw, kw = rng.uniform(0.5, 1.5, D).astype(np.float32), rng.uniform(0.5, 1.5, D).astype(np.float32)
    buffers = {
        "q": q,
        "k": k,
        "positions": positions,
        "inv_freq": np.ascontiguousarray(rope.inv_freq32()),
        "cos_sin_scale": np.array([rope.scale], np.float32),
        "q_norm_weight": qw,
        "k_norm_weight": kw,
        "norm_eps": np.array([1e-6], np.float32),
        "v": v,
        "kv_scale": np.array([0.5, 2.0], np.float32),
        "q_rot": np.full_like(q, np.nan),
        "k_rot": np.full_like(k, np.nan),
        "k_fp8": np.full(k.shape, 0xAA, np.uint8),
        "v_fp8": np.full(k.shape, 0xAA, np.uint8),
    }
    ptrs = (ctypes.c_void_p * len(kt.params))(
        *(buffers[name].ctypes.data if kind != "shape" else None for name, kind in kt.params)
    )
    fn(source.grid_size(T, Hq, Hkv, D), source.BLOCK, ptrs, T)
    for x, w, out in ((q, qw, buffers["q_rot"]), (k, kw, buffers["k_rot"])):
        normed = rms_norm(x, w, 1e-6)
        want = rotate(normed, positions, rope)
        tol = error_bound(dtype, positions.max(), 2 * np.abs(normed).max(), norm_dim=D)
        assert np.all(np.abs(out.astype(np.float64) - want) <= tol)
    assert np.array_equal(buffers["k_fp8"], quantize_rows(buffers["k_rot"], 0.5))
    assert np.array_equal(buffers["v_fp8"], quantize_rows(v, 2.0))
