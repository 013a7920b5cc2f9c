"""The CPU side of benchmarks/cuda_check.py: arguments, storage formats, the reference comparison,
the guard-row pool check, the launch plumbing (with NumPy standing in for CuPy) and its outputs.

The GPU itself is not here; these make sure that a run on an NVIDIA machine fails only for
reasons that are the GPU's.
"""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from ropepool.kernels import source
from ropepool.reference import rotate, rotate_neox
from ropepool.rope import Rope, rope_table

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "cuda_check.py"


@pytest.fixture(scope="module")
def cc():
    spec = importlib.util.spec_from_file_location("cuda_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parse_args_defaults(cc):
    args = cc.parse_args([])
    assert (args.out, args.repeats, args.tokens, args.skip_mlx) == ("artifacts", 50, [1, 64, 2048], False)


def test_parse_args_quick_and_tokens(cc):
    args = cc.parse_args(["--quick", "--tokens", "1,64,4096", "--out", "x"])
    assert (args.repeats, args.tokens, args.out) == (10, [1, 64], "x")


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--repeats", "0"], "--repeats must be at least 1, got 0"),
        (["--tokens", "0,4"], r"--tokens must be positive, got \[0, 4\]"),
    ],
)
def test_parse_args_rejects(cc, capsys, argv, message):
    with pytest.raises(SystemExit):
        cc.parse_args(argv)
    assert re.search(message, capsys.readouterr().err)


def test_bfloat16_bits_match_mlx(cc):
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5e-3, 3.0e38, np.inf, 1e-40, np.nan], np.float32)
    want = np.array(mx.array(x).astype(mx.bfloat16).view(mx.uint16))
    assert np.array_equal(cc.bfloat16_bits(x), want)
    assert np.array_equal(cc.to_float64(cc.bfloat16_bits(x[:4]), "bfloat16"), [1.0, 1.0, 1 + 2**-6, -0.00250244140625])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_rotation_error_accepts_the_reference_rounded_to_dtype(cc, dtype):
    rng = np.random.default_rng(0)
    x = cc.to_float64(cc.to_storage(rng.standard_normal((5, 3, 8)).astype(np.float32), dtype), dtype)
    positions = np.array([0, 1, 7, 5000, 99_999])
    got = cc.to_float64(cc.to_storage(rotate_neox(x, positions, cc.ROPE_BASE).astype(np.float32), dtype), dtype)
    err, tol = cc.rotation_error(got, x, positions, dtype)
    assert 0 < tol and err <= tol


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_rotation_error_rejects_gptj_pairing_and_unwritten(cc, dtype):
    rng = np.random.default_rng(1)
    x = cc.to_float64(cc.to_storage(rng.standard_normal((4, 2, 8)).astype(np.float32), dtype), dtype)
    positions = np.array([3, 10, 100, 1000])
    gptj = np.empty_like(x)  # pairs (2i, 2i+1) instead of NeoX's (i, i + D/2)
    theta = positions[:, None, None] * cc.ROPE_BASE ** (-np.arange(4) / 4.0)[None, None, :]
    gptj[..., 0::2] = x[..., 0::2] * np.cos(theta) - x[..., 1::2] * np.sin(theta)
    gptj[..., 1::2] = x[..., 0::2] * np.sin(theta) + x[..., 1::2] * np.cos(theta)
    err, tol = cc.rotation_error(gptj, x, positions, dtype)
    assert err > tol
    unwritten = rotate_neox(x, positions, cc.ROPE_BASE)
    unwritten[2, 1, 5] = np.nan
    assert cc.rotation_error(unwritten, x, positions, dtype)[0] == float("inf")


def _pool_case(cc):
    rng = np.random.default_rng(2)
    g, P = cc.GUARD_ROWS, 6
    before = rng.standard_normal((g + P + g, 2, 4)).astype(np.float16)
    rows = rng.standard_normal((4, 2, 4)).astype(np.float16)
    slots = np.array([5, -1, 0, P], np.int32)
    after = before.copy()
    after[g + 5], after[g + 0] = rows[0], rows[2]
    return before, after, rows, slots, g


def test_pool_problems_clean(cc):
    before, after, rows, slots, g = _pool_case(cc)
    assert cc.pool_problems(after, before, rows, slots, g) == []


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda a, g, P: a.__setitem__(g + P, 0), "a guard row changed (a write outside the pool)"),
        (lambda a, g, P: a.__setitem__(g - 1, 0), "a guard row changed (a write outside the pool)"),
        (lambda a, g, P: a.__setitem__((g + 5, 1, 3), 7), "pool row 5 (token 0) differs from the expected bits"),
        (lambda a, g, P: a.__setitem__(g + 2, 0), "an untouched pool row changed"),
    ],
)
def test_pool_problems_finds(cc, damage, message):
    before, after, rows, slots, g = _pool_case(cc)
    damage(after, g, 6)
    assert message in cc.pool_problems(after, before, rows, slots, g)


def test_moved_bytes(cc):
    # T=2, Hq=4, Hkv=2, D=8, float16: q,k in and out = 2 * 2*6*8*2 = 384; positions 8; inv_freq 16.
    assert cc.moved_bytes(2, 4, 2, 8, "float16", False) == 384 + 8 + 16
    # the pool write adds v in and two pool rows out (3 * 2*2*8*2 = 192) and slots (8)
    assert cc.moved_bytes(2, 4, 2, 8, "float16", True) == 384 + 8 + 16 + 192 + 8


def test_script_imports_without_mlx():
    code = (
        "import sys; sys.modules['mlx'] = None; sys.path.insert(0, 'benchmarks'); import cuda_check as c; "
        "print(c.HAVE_MLX, c.mlx_skip_reason(), len(c.CASES))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False MLX does not import here (pip install -e '.[cuda]' installs mlx[cuda13]) 13"


# --- NumPy standing in for CuPy: the launch plumbing, end to end ------------------------------

_CUDA_TO_DTYPE = {"float": "float32", "__half": "float16", "__nv_bfloat16": "bfloat16"}


class _FakeFunction:
    """Runs what the generated kernel computes, reading its arguments by the generated signature."""

    def __init__(self, cc, code, leak):
        self.cc, self.leak = cc, leak
        signature = code.split("__global__ void ", 1)[1].split(") {", 1)[0].split("(\n", 1)[1]
        self.names = [p.strip().split()[-1] for p in signature.split(",\n")]
        self.consts = {m[0]: int(m[1]) for m in re.findall(r"constexpr int (\w+) = (\d+);", code)}
        self.consts.update({m[0]: m[1] == "true" for m in re.findall(r"constexpr bool (\w+) = (\w+);", code)})
        self.dtype = _CUDA_TO_DTYPE[re.search(r"using DType = (\w+);", code)[1]]

    def __call__(self, grid, block, args):
        cc, a = self.cc, dict(zip(self.names, args))
        assert len(args) == len(self.names)
        Hq, Hkv, D = self.consts["Hq"], self.consts["Hkv"], self.consts["D"]
        T = int(a["positions_shape"]["v"][0])
        assert grid[0] * block[0] >= source.grid_size(T, Hq, Hkv, D) and block[0] == source.BLOCK
        # the rotation the kernel's template and tables say: RD, NEOX, inv_freq [RD/2], cos_sin_scale [1]
        rope = Rope(
            D,
            self.consts["RD"],
            self.consts["NEOX"],
            tuple(np.asarray(a["inv_freq"], np.float64)),
            float(a["cos_sin_scale"][0]),
        )
        for src, dst in (("q", "q_rot"), ("k", "k_rot")):
            x = cc.to_float64(a[src], self.dtype)
            a[dst][...] = cc.to_storage(rotate(x, a["positions"], rope).astype(np.float32), self.dtype)
        if "k_pool" in a:
            P = int(a["k_pool_shape"]["v"][0])
            for t, s in enumerate(a["slots"]):
                if 0 <= s < P or (self.leak and s == P):
                    for pool, rows in ((a["k_pool"], a["k_rot"]), (a["v_pool"], a["v"])):
                        (pool if s < P else pool.base[cc.GUARD_ROWS :])[s] = rows[t]


class _FakeCupy:
    uint8 = np.uint8

    def __init__(self, cc, leak=False):
        self.cc, self.leak = cc, leak

        class runtime:
            deviceSynchronize = staticmethod(lambda: None)

        self.cuda = type("cuda", (), {"runtime": runtime})

    asarray = staticmethod(lambda a: np.array(a))  # a copy, as an upload is
    asnumpy = staticmethod(lambda a: np.array(a))

    def RawModule(self, code, options, name_expressions):
        assert any(o.startswith("--include-path=") and o.endswith("include") for o in options)
        fn = _FakeFunction(self.cc, code, self.leak)
        return type("Module", (), {"get_function": lambda _self, name: fn})()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_check_passes_a_correct_kernel(cc, dtype, tmp_path):
    cp, checks = _FakeCupy(cc), cc.Checks()
    kernels = cc.CupyKernels(cp)
    cases = [
        ("gqa", 4, 2, 8, None),
        ("mqa-d2", 2, 1, 2, None),
        ("partial-gptj", 4, 2, 20, rope_table(20, 10000.0, rotary_dim=8, is_neox=False)),
        (
            "yarn",
            2,
            1,
            16,
            rope_table(
                16, 10000.0, rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
            ),
        ),
    ]
    for name, hq, hkv, d, rope in cases:
        for T in (1, 37):
            cc.check_rotation_and_pool(cp, kernels, checks, name, hq, hkv, d, dtype, T, rope)
    assert [r["check"].split()[1] for r in checks.rows] == ["mlx", "pool"] * 8
    assert all(r["ok"] for r in checks.rows), checks.rows


def test_check_catches_a_write_past_the_pool(cc):
    cp, checks = _FakeCupy(cc, leak=True), cc.Checks()
    cc.check_rotation_and_pool(cp, cc.CupyKernels(cp), checks, "gqa", 4, 2, 8, "float16", 37)
    pool = checks.rows[1]
    assert not pool["ok"] and "k_pool: a guard row changed (a write outside the pool)" in pool["detail"]


def test_main_writes_json_and_svg(cc, tmp_path, monkeypatch):
    timing = {"dtype": "float16", "T": 64, "variant": "mlx", "fraction_of_copy": 0.8}
    monkeypatch.setattr(cc, "part_cupy", lambda args, checks: (checks.record("fake", True), {"timings": [timing]})[1])
    assert cc.main(["--out", str(tmp_path), "--skip-mlx"]) == 0
    report = json.loads((tmp_path / "cuda_check.json").read_text())
    assert report["mlx"] == {"skipped": "--skip-mlx given"} and (report["passed"], report["total"]) == (1, 1)
    svg = (tmp_path / "cuda_check.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<rect") == 1 and "T=64" in svg
