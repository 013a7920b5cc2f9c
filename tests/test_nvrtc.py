"""NVIDIA's runtime compiler (NVRTC) on the CUDA kernel, exactly as ``mx.fast.cuda_kernel`` assembles it.

Every dtype, the (Hq, Hkv, D) of every preset (plus D = 2 MQA), for sm_80 (A100) and sm_90
(H100), to SASS: no error, no warning, no spill. The text comes from :mod:`ropepool.kernels.nvrtc`,
which builds it from the kernel's own source (body, header, names, template arguments), so
whatever the kernel gains is compiled here too. Run with ``-s`` to see the register table; it is
also written to ``artifacts/nvrtc_resources.txt``. Select with ``-k nvrtc``.
"""

import threading
from pathlib import Path

import pytest

from ropepool import models
from ropepool.kernels import nvrtc, source

pytestmark = pytest.mark.skipif(nvrtc.unavailable_reason() is not None,
                                reason=f"NVRTC unavailable: {nvrtc.unavailable_reason()}")

DTYPES = ("float32", "float16", "bfloat16")
VARIANTS = {"mlx": False, "pool": True}  # the text MLX compiles; the guarded in-kernel pool write

# (name, Hq, Hkv, D): every preset's heads, and the awkward corner.
CASES = [(n, models.preset(n).num_qo_heads, models.preset(n).num_kv_heads, models.preset(n).head_dim)
         for n in models.preset_names()] + [("mqa-d2", 2, 1, 2)]
SPECS = tuple(sorted({(dt, hq, hkv, d, wp) for dt in DTYPES for _, hq, hkv, d in CASES for wp in VARIANTS.values()}))
REPORT = Path(__file__).resolve().parents[1] / "artifacts" / "nvrtc_resources.txt"


@pytest.fixture(scope="module")
def builds():
    """``{arch: (Compiled, ...)}``: both architectures compiled side by side (NVRTC releases the GIL)."""
    out, errors = {}, {}

    def work(arch):
        try:
            out[arch] = nvrtc.compile_specialisations(SPECS, arch)
        except nvrtc.NvrtcError as err:
            errors[arch] = err

    threads = [threading.Thread(target=work, args=(a,)) for a in nvrtc.ARCHS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        pytest.fail("\n".join(f"{a}: {e}" for a, e in errors.items()))
    rows = []
    for arch in nvrtc.ARCHS:
        found = {name: r for c in out[arch] for name, r in c.resources.items()}
        for dtype in DTYPES:
            for variant, wp in VARIANTS.items():
                names = {nvrtc.kernel_text(dtype, hq, hkv, d, write_pool=wp).name for _, hq, hkv, d in CASES}
                rows.append((arch, dtype, variant, [found[n] for n in sorted(names)]))
    major, minor = nvrtc.version()
    table = f"NVRTC {major}.{minor}, kernel {source.kernel_name('cuda')}\n" + nvrtc.resource_table(rows)
    print("\n" + table)
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(table + "\n")
    return out


def _resources(builds, arch, dtype, hq, hkv, d, write_pool):
    name = nvrtc.kernel_text(dtype, hq, hkv, d, write_pool=write_pool).name
    return next(c.resources[name] for c in builds[arch] if name in c.resources)


@pytest.mark.parametrize("arch", nvrtc.ARCHS)
def test_nvrtc_compiles_without_warnings(builds, arch):
    for compiled in builds[arch]:
        assert compiled.cubin[:4] == b"\x7fELF", "NVRTC gave no cubin (SASS)"
        assert compiled.warnings == [], "NVRTC or ptxas warned:\n" + compiled.log


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", nvrtc.ARCHS)
@pytest.mark.parametrize("name,hq,hkv,d", CASES, ids=[c[0] for c in CASES])
def test_nvrtc_no_spills(builds, arch, dtype, variant, name, hq, hkv, d):
    res = _resources(builds, arch, dtype, hq, hkv, d, VARIANTS[variant])
    assert res.spills == 0, f"{res.kernel} on {arch} spills {res.spill_stores} B stored, {res.spill_loads} B loaded"
    assert 0 < res.registers <= 255, f"{res.kernel} on {arch}: {res.registers} registers per thread"


def test_nvrtc_full_text_alone_compiles_the_same(builds):
    """The whole text MLX compiles for one specialisation, alone in its program: same code as batched."""
    kernel = nvrtc.kernel_text("bfloat16", 32, 8, 128)
    alone = nvrtc.compile_cuda([kernel], "sm_80")
    assert alone.warnings == [], alone.log
    assert alone.resources[kernel.name] == _resources(builds, "sm_80", "bfloat16", 32, 8, 128, False)


def test_nvrtc_text_is_mlx_layout():
    k = nvrtc.kernel_text("bfloat16", 32, 8, 128)
    assert k.name == f"custom_kernel_{source.kernel_name('cuda')}_bfloat16_t_32_8_128"
    assert k.text.startswith(nvrtc.DEFAULT_HEADER + source.header("cuda") + "namespace mlx::core::cu {")
    signature = k.kernel.split(") {\n")[0].split("(\n", 1)[1].split(",\n")
    assert signature == ["    const __nv_bfloat16* q", "    const __nv_bfloat16* k", "    const int32_t* positions",
                         "    const __grid_constant__ Shape positions_shape", "    const float* inv_freq",
                         "    __nv_bfloat16* q_rot", "    __nv_bfloat16* k_rot"]
    assert ("  using DType = __nv_bfloat16;\n  constexpr int Hq = 32;\n  constexpr int Hkv = 8;\n"
            "  constexpr int D = 128;\n\n" + source.body("cuda")) in k.kernel


def test_nvrtc_text_takes_template_and_inputs_from_source(monkeypatch):
    """A template argument or an input the kernel gains reaches the compiled text with no edit here."""
    base = source.template_args
    monkeypatch.setattr(source, "template_args", lambda *a: base(*a) + [("Gptj", True), ("RotaryDim", 64)])
    monkeypatch.setattr(source, "INPUT_NAMES", source.INPUT_NAMES + ("scale",))
    monkeypatch.setitem(source.INPUT_DTYPES, "scale", "float32")
    k = nvrtc.kernel_text("float16", 4, 2, 8)
    assert k.name.endswith("_float16_t_4_2_8_t_64")
    assert "  constexpr bool Gptj = true;\n  constexpr int RotaryDim = 64;\n" in k.kernel
    assert "    const float* scale,\n" in k.kernel


def test_nvrtc_names_an_input_without_dtype(monkeypatch):
    monkeypatch.setattr(source, "INPUT_NAMES", source.INPUT_NAMES + ("cos_sin",))
    with pytest.raises(ValueError, match=r"source.INPUT_DTYPES has no dtype for input\(s\) \['cos_sin'\]"):
        nvrtc.kernel_text("float16", 4, 2, 8)


def _tiny(code: str) -> nvrtc.KernelText:
    """A small kernel without headers (a program without CCCL compiles in a fraction of a second)."""
    return nvrtc.KernelText("tiny", "", f"namespace mlx::core::cu {{\n__global__ void tiny(float* y) {{ {code} }}\n}}\n", ())


def test_nvrtc_error_carries_the_log():
    with pytest.raises(nvrtc.NvrtcError, match=r'identifier "undeclared" is undefined'):
        nvrtc.compile_cuda([_tiny("y[0] = undeclared;")], "sm_90")


def test_nvrtc_warning_is_seen():
    compiled = nvrtc.compile_cuda([_tiny("int unused; y[0] = 1.0f;")], "sm_90")
    assert any('variable "unused" was declared but never referenced' in w for w in compiled.warnings)
