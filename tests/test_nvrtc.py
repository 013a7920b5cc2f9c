"""NVIDIA's runtime compiler (NVRTC) on the CUDA kernel, exactly as ``mx.fast.cuda_kernel`` assembles it.

Every dtype, the (Hq, Hkv, D) of every preset (plus D = 2 MQA), for sm_80 (A100) and sm_90
(H100), to SASS: no error, no warning, no spill. The text comes from ``benchmarks/nvrtc.py``,
which builds it from the kernel's own source (body, header, names, template arguments), so
whatever the kernel gains is compiled here too. Run with ``-s`` to see the register table; it is
also written to ``artifacts/nvrtc_resources_<arch>.txt``. Select with ``-k nvrtc``.
"""

import os
import threading
from functools import lru_cache
from pathlib import Path

import pytest

from ropepool import models
from benchmarks import nvrtc
from ropepool.kernels import source

pytestmark = pytest.mark.skipif(
    nvrtc.unavailable_reason() is not None, reason=f"NVRTC unavailable: {nvrtc.unavailable_reason()}"
)

DTYPES = ("float32", "float16", "bfloat16")
VARIANTS = {"mlx": False, "pool": True}  # the text MLX compiles; the guarded in-kernel pool write

# (name, Hq, Hkv, D, RD, NEOX): every preset's heads and rotation (Phi-2 rotates 32 of 80), GPT-J's
# pairs, and the awkward corner.
CASES = [
    (n, p.num_qo_heads, p.num_kv_heads, p.head_dim, p.rope().rotary_dim, p.rope().is_neox)
    for n, p in ((n, models.preset(n)) for n in models.preset_names())
]
CASES += [
    ("gpt-j-6b", 16, 16, 256, 64, False),
    ("mqa-d2", 2, 1, 2, 2, True),
    ("deepseek-v3-mla", 128, 1, 64, 64, False),
]  # rope_pool_fused_mla: q_pe [T, 128, 64], k_pe [T, 1, 64]
SPECS = tuple(sorted({(dt, *case[1:], wp) for dt in DTYPES for case in CASES for wp in VARIANTS.values()}))
ALONE = ("bfloat16", 32, 8, 128, "sm_80")  # also compiled alone: the exact text MLX compiles, nothing else
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def _build(arch):
    """Every specialisation for ``arch``, batched (one program, the headers parsed once); cached."""
    return nvrtc.compile_specialisations(SPECS, arch)


@lru_cache(maxsize=1)
def _alone():
    return nvrtc.compile_cuda([nvrtc.kernel_text(*ALONE[:4])], ALONE[4])


@pytest.fixture(scope="module")
def both_archs_at_once():
    """Without xdist, compile both architectures side by side (NVRTC releases the GIL); under
    xdist each worker compiles only the architecture of the test it runs."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None and nvrtc.unavailable_reason() is None:
        threads = [threading.Thread(target=lambda a=a: _safe_build(a)) for a in nvrtc.ARCHS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def _safe_build(arch):
    try:
        _build(arch)
        if arch == ALONE[4]:
            _alone()
    except nvrtc.NvrtcError:
        pass  # the test itself calls _build again and shows the error


@pytest.mark.parametrize("arch", nvrtc.ARCHS)
def test_nvrtc_compiles_every_specialisation_clean(arch, both_archs_at_once):
    """Every dtype x preset heads x variant: a cubin, no warning, no spill; the register table."""
    programs = _build(arch)
    found = {name: r for c in programs for name, r in c.resources.items()}
    problems, rows = [], []
    for compiled in programs:
        if compiled.cubin[:4] != b"\x7fELF":
            problems.append("NVRTC gave no cubin (SASS)")
        problems += [f"warning: {w}" for w in compiled.warnings]
    for dtype in DTYPES:
        for variant, wp in VARIANTS.items():
            res = []
            for case, hq, hkv, d, rd, neox in CASES:
                r = found[nvrtc.kernel_text(dtype, hq, hkv, d, rotary_dim=rd, is_neox=neox, write_pool=wp).name]
                res.append(r)
                if r.spills or not 0 < r.registers <= 255:
                    problems.append(
                        f"{case} {dtype} {variant}: {r.registers} registers, {r.spill_stores} B spill "
                        f"stores, {r.spill_loads} B spill loads"
                    )
            rows.append((arch, dtype, variant, list({r.kernel: r for r in res}.values())))
    major, minor = nvrtc.version()
    table = f"NVRTC {major}.{minor}, kernel {source.kernel_name('cuda')}\n" + nvrtc.resource_table(rows)
    print("\n" + table)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"nvrtc_resources_{arch}.txt").write_text(table + "\n")
    assert not problems, "\n".join(problems)


# QK-norm and the FP8 cache: each a kernel text of its own (its #define lines, its inputs and outputs).
FUSED_VARIANTS = {
    "qk-norm": source.Variant(True, True),
    "q-norm only": source.Variant(qnorm=True),
    "fp8": source.Variant(fp8=True),
    "qk-norm+fp8": source.Variant(True, True, True),
}
# Qwen3-0.6B's heads (16 q, 8 kv, D 128) and the smallest corner.
FUSED_CASES = [(16, 8, 128, 128, True), (2, 1, 2, 2, True)]


def test_nvrtc_compiles_the_fused_variants_clean():
    """QK-norm, FP8 and both, every dtype, with and without the in-kernel pool write, for sm_90:
    a cubin, no warning, no spill; the FP8 text names the uint8 code outputs."""
    specs = tuple(
        (dt, *case, wp, v)
        for dt in DTYPES
        for case in FUSED_CASES
        for wp in (False, True)
        for v in FUSED_VARIANTS.values()
    )
    programs = nvrtc.compile_specialisations(specs, "sm_90")
    assert len(programs) == len(FUSED_VARIANTS)  # one program per variant's prologue
    problems = []
    for compiled in programs:
        assert compiled.cubin[:4] == b"\x7fELF"
        problems += [f"warning: {w}" for w in compiled.warnings]
        problems += [f"{name}: spills" for name, r in compiled.resources.items() if r.spills]
    assert not problems, "\n".join(problems)
    fp8 = nvrtc.kernel_text("bfloat16", 16, 8, 128, variant=FUSED_VARIANTS["qk-norm+fp8"], write_pool=True)
    assert "    uint8_t* k_fp8" in fp8.kernel and "    uint8_t* k_pool" in fp8.kernel
    assert fp8.prologue.startswith(nvrtc.DEFAULT_HEADER + "#define RP_QK_NORM\n")
    assert [p for p, _ in fp8.params][6:11] == ["q_norm_weight", "k_norm_weight", "norm_eps", "v", "kv_scale"]


def test_nvrtc_full_text_alone_compiles_the_same(both_archs_at_once):
    """The whole text MLX compiles for one specialisation, alone in its program: no warning, and
    the same code (registers, spills, stack) as in the batched program."""
    alone = _alone()
    name = nvrtc.kernel_text(*ALONE[:4]).name
    assert alone.warnings == [], alone.log
    batched = next(c.resources[name] for c in _build(ALONE[4]) if name in c.resources)
    assert alone.resources[name] == batched


def test_nvrtc_text_is_mlx_layout():
    k = nvrtc.kernel_text("bfloat16", 32, 8, 128)
    assert k.name == f"custom_kernel_{source.kernel_name('cuda')}_bfloat16_t_32_8_128_128_t"
    assert k.text.startswith(nvrtc.DEFAULT_HEADER + source.header("cuda") + "namespace mlx::core::cu {")
    signature = k.kernel.split(") {\n")[0].split("(\n", 1)[1].split(",\n")
    assert signature == [
        "    const __nv_bfloat16* q",
        "    const __nv_bfloat16* k",
        "    const int32_t* positions",
        "    const __grid_constant__ Shape positions_shape",
        "    const float* inv_freq",
        "    const float* cos_sin_scale",
        "    __nv_bfloat16* q_rot",
        "    __nv_bfloat16* k_rot",
    ]
    assert (
        "  using DType = __nv_bfloat16;\n  constexpr int Hq = 32;\n  constexpr int Hkv = 8;\n"
        "  constexpr int D = 128;\n  constexpr int RD = 128;\n  constexpr bool NEOX = true;\n\n" + source.body("cuda")
    ) in k.kernel
    pool = nvrtc.kernel_text("bfloat16", 32, 8, 128, write_pool=True)
    assert pool.prologue == k.prologue and pool.kernel.startswith("#define RP_WRITE_POOL\n")
    assert [p for p, _ in pool.params] == [
        "q",
        "k",
        "positions",
        "positions_shape",
        "inv_freq",
        "cos_sin_scale",
        "v",
        "slots",
        "q_rot",
        "k_rot",
        "k_pool",
        "v_pool",
        "k_pool_shape",
    ]


def test_nvrtc_text_takes_template_and_inputs_from_source(monkeypatch):
    """A template argument or an input the kernel gains reaches the compiled text with no edit here."""
    base = source.template_args
    monkeypatch.setattr(source, "template_args", lambda *a: base(*a) + [("Gptj", True), ("RotaryDim", 64)])
    monkeypatch.setattr(source, "INPUT_NAMES", source.INPUT_NAMES + ("scale",))
    monkeypatch.setitem(source.INPUT_DTYPES, "scale", "float32")
    k = nvrtc.kernel_text("float16", 4, 2, 8)
    assert k.name.endswith("_float16_t_4_2_8_8_t_t_64")
    assert "  constexpr bool Gptj = true;\n  constexpr int RotaryDim = 64;\n" in k.kernel
    assert "    const float* scale,\n" in k.kernel


def test_nvrtc_names_an_input_without_dtype(monkeypatch):
    monkeypatch.setattr(source, "INPUT_NAMES", source.INPUT_NAMES + ("cos_sin",))
    with pytest.raises(ValueError, match=r"source.INPUT_DTYPES has no dtype for input\(s\) \['cos_sin'\]"):
        nvrtc.kernel_text("float16", 4, 2, 8)


def _tiny(code: str) -> nvrtc.KernelText:
    """A small kernel without headers (a program without CCCL compiles in a fraction of a second)."""
    return nvrtc.KernelText(
        "tiny", "", f"namespace mlx::core::cu {{\n__global__ void tiny(float* y) {{ {code} }}\n}}\n", ()
    )


def test_nvrtc_error_carries_the_log():
    with pytest.raises(nvrtc.NvrtcError, match=r'identifier "undeclared" is undefined'):
        nvrtc.compile_cuda([_tiny("y[0] = undeclared;")], "sm_90")


def test_nvrtc_warning_is_seen():
    compiled = nvrtc.compile_cuda([_tiny("int unused; y[0] = 1.0f;")], "sm_90")
    assert any('variable "unused" was declared but never referenced' in w for w in compiled.warnings)


def test_a_libnvrtc_on_the_path_outside_site_packages_is_not_loaded(tmp_path, monkeypatch):
    import importlib

    planted = tmp_path / "nvidia" / "cu13" / "lib" / "libnvrtc.so.13"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"\x7fELF not a library")
    monkeypatch.syspath_prepend(str(tmp_path))  # as the current directory or PYTHONPATH would
    importlib.invalidate_caches()
    spec = importlib.util.find_spec("nvidia")
    assert spec is not None and str(tmp_path / "nvidia") in list(spec.submodule_search_locations or [])
    found = nvrtc.library_path()
    assert found is None or tmp_path not in found.parents
