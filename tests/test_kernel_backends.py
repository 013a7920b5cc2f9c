"""The fused kernel's builders and registry entries; its Metal, CUDA and host-CPU runs where they exist."""

import shutil

import mlx.core as mx
import numpy as np
import pytest
from helpers import bits

import ropepool
from ropepool.kernels import fused, host, source, statuses
from ropepool.reference import rope_pool_reference
from ropepool.shapes import Shapes
from ropepool.tolerance import error_bound

HAS_METAL = mx.metal.is_available()
HAS_CUDA = hasattr(mx, "cuda") and mx.cuda.is_available()


@pytest.fixture
def kernel_copy(tmp_path, monkeypatch):
    """A copy of the kernel's source folder that source.py reads instead of the package's."""
    folder = tmp_path / "kernels"
    shutil.copytree(source.KERNEL_DIR, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    monkeypatch.setattr(source, "KERNEL_DIR", folder)
    source.body.cache_clear(), source.header.cache_clear()
    yield folder
    monkeypatch.undo()
    source.body.cache_clear(), source.header.cache_clear()


def _names():
    source.body.cache_clear(), source.header.cache_clear()
    return {b: source.kernel_name(b) for b in ("metal", "cuda", "cpu")}


def test_kernel_name_changes_with_the_text_it_compiles_and_only_then(kernel_copy):
    before = _names()
    assert before == _names()  # the same text, the same names
    body = kernel_copy / source.BODY_FILE
    body.write_text(body.read_text().replace("return;", "return ;", 1))  # one byte of the body
    after_body = _names()
    assert all(after_body[b] != before[b] for b in before)
    header = kernel_copy / source.HEADER_FILES["metal"]
    header.write_text(header.read_text() + "\n")
    after_header = _names()
    assert after_header["metal"] != after_body["metal"]
    assert after_header["cuda"] == after_body["cuda"] and after_header["cpu"] == after_body["cpu"]


def test_a_changed_body_is_a_new_driver_library_and_the_old_one_stays(kernel_copy, tmp_path, monkeypatch):
    """The driver's cache key holds the body it includes: an edit builds anew, the old one is reused."""
    from ropepool.kernels import emulator

    if emulator.unavailable_reason() is not None:
        pytest.skip(emulator.unavailable_reason())
    monkeypatch.setenv("ROPEPOOL_KERNEL_CACHE", str(tmp_path / "cache"))
    emulator._library.__wrapped__()
    (first,) = (tmp_path / "cache").glob("ropepool_emulator_*.so")
    built_at = first.stat().st_mtime_ns
    body = kernel_copy / source.BODY_FILE
    original = body.read_text()
    body.write_text(original + "\n// edited\n")
    emulator._library.__wrapped__()
    assert len(list((tmp_path / "cache").glob("ropepool_emulator_*.so"))) == 2
    body.write_text(original)
    emulator._library.__wrapped__()  # found in the cache: not rebuilt
    assert first.stat().st_mtime_ns == built_at and len(list((tmp_path / "cache").glob("*.so"))) == 2


def test_kernel_names_differ_between_backends():
    assert len({source.kernel_name(b) for b in ("metal", "cuda", "cpu")}) == 3


def test_metal_body_names_the_attribute_mlx_must_declare():
    # MLX declares thread_position_in_grid in the signature only if the body mentions it.
    assert "thread_position_in_grid" in source.body("metal")
    assert "thread_position_in_grid" not in source.header("metal")


def test_metal_build_is_cached():
    assert fused.build("metal") is fused.build("metal")  # MLX constructs it even without Metal


@pytest.mark.skipif(not HAS_CUDA, reason="mx.fast.cuda_kernel cannot be constructed without a CUDA back-end")
def test_cuda_build_is_cached():
    assert fused.build("cuda") is fused.build("cuda")


def test_build_refuses_an_unknown_backend():
    with pytest.raises(ValueError, match="metal.*cuda"):
        fused.build("vulkan")


def test_grid_size_is_one_thread_per_pair_of_q_and_k_heads():
    assert source.grid_size(2048, 32, 8, 128) == 2048 * 40 * 64


def test_statuses_name_every_kernel_backend_with_reasons():
    st = statuses()
    assert set(st) == {"metal", "cuda", "cpu"}
    for name, (runs, reason, impl) in st.items():
        assert reason
        assert (impl is not None) == runs


@pytest.mark.skipif(HAS_METAL, reason="this machine has Metal")
def test_metal_reported_unavailable_without_metal():
    runs, reason, impl = statuses()["metal"]
    assert not runs and impl is None and "no Metal back-end" in reason


@pytest.mark.skipif(HAS_CUDA, reason="this machine has CUDA")
def test_cuda_reported_unavailable_without_cuda():
    runs, reason, impl = statuses()["cuda"]
    assert not runs and impl is None and "no CUDA back-end" in reason


def test_auto_prefers_a_kernel_backend_where_one_runs():
    # what this machine has, from its own probes: a GPU back-end, else a C++ compiler, else MLX ops
    want = "metal" if HAS_METAL else "cuda" if HAS_CUDA else "cpu" if host.unavailable_reason() is None else "mlx"
    assert ropepool.backends.best_backend() == want
    assert ropepool.backends.resolve("auto")[0] == want


# ---- runs of the real kernel: only where its back-end exists --------------------------------

ORDER = ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")
CASES = [("gqa-llama3", 5, 32, 8, 128), ("mqa", 3, 4, 1, 64), ("d2", 2, 2, 1, 2), ("t1", 1, 8, 8, 256)]


def _check_backend(backend: str, dtype: str, T, Hq, Hkv, D):
    P = T + 3
    slots = list(np.random.default_rng(0).permutation(P)[:T])
    slots[0] = -1
    kw = ropepool.make_inputs(
        Shapes(T, Hq, Hkv, D, P), dtype, slots=slots, positions=[7 * t + 1000 * (t % 2) for t in range(T)]
    )
    pools = (np.array(kw["k_pool"].astype(mx.float32)), np.array(kw["v_pool"].astype(mx.float32)))
    out = ropepool.rope_pool_fused(**kw, backend=backend)
    mx.eval(*out)
    ref = rope_pool_reference(*(kw[n] for n in ORDER), rope_base=kw["rope_base"])
    f64 = [np.array(o.astype(mx.float32), np.float64) for o in out]
    tol = error_bound(dtype, 1199, 4)
    np.testing.assert_allclose(f64[0], ref[0], rtol=0, atol=tol * 6)
    np.testing.assert_allclose(f64[1], ref[1], rtol=0, atol=tol * 6)
    written = [s for s in slots if s >= 0]
    kb, rb = bits(out[2]), bits(out[1])
    np.testing.assert_array_equal(kb[written], rb[1:])
    untouched = np.setdiff1d(np.arange(P), written)
    np.testing.assert_array_equal(f64[2][untouched], pools[0][untouched])
    np.testing.assert_array_equal(f64[3][untouched], pools[1][untouched])


FUSED_BACKENDS = [
    pytest.param(
        "metal",
        marks=[
            pytest.mark.metal,
            pytest.mark.skipif(not HAS_METAL, reason="no Metal back-end on this machine (needs Apple Silicon)"),
        ],
    ),
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(
                not HAS_CUDA, reason="no CUDA back-end on this machine (needs an NVIDIA GPU and mlx[cuda13])"
            ),
        ],
    ),
    pytest.param(
        "cpu", marks=pytest.mark.skipif(host.unavailable_reason() is not None, reason=str(host.unavailable_reason()))
    ),
]


@pytest.mark.parametrize("backend", FUSED_BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name,T,Hq,Hkv,D", CASES, ids=[c[0] for c in CASES])
def test_fused_kernel_matches_reference(backend, name, T, Hq, Hkv, D, dtype):
    _check_backend(backend, dtype, T, Hq, Hkv, D)


def test_emulator_says_why_without_a_compiler(monkeypatch):
    from ropepool.kernels import emulator

    monkeypatch.setenv("CXX", "/nonexistent/g++")
    assert emulator.compiler() is None
    reason = emulator.unavailable_reason.__wrapped__()
    assert "no C++ compiler" in reason
