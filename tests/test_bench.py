"""The benchmark's contenders compute the op correctly, and its functions run (no timings asserted);
``benchmarks/op_bench.py`` says met or MISS and pastes its table into a README as an editor saves."""

import importlib.util
import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from ropepool import Shapes, make_inputs, rope_pool_reference
from ropepool.cli.bench import METHODS, Timing, compare, report, rope_fast_scatter, rope_pool_numpy
from ropepool.tolerance import error_bound

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("op_bench", ROOT / "benchmarks" / "op_bench.py")
op_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(op_bench)
README_START, README_END, markdown, paste_into = (
    op_bench.README_START,
    op_bench.README_END,
    op_bench.markdown,
    op_bench.paste_into,
)

ORDER = ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")

# (name, T, Hq, Hkv, D, positions): why each row is here is in its name.
CASES = [
    ("gqa-llama3-decode", 1, 32, 8, 128, [4097]),
    ("gqa-irregular-positions", 5, 8, 2, 64, [0, 900, 3, 77777, 12]),  # not 0..T-1: per-token offsets
    ("mqa", 3, 4, 1, 16, [5, 5, 6]),
    ("mha-d2", 4, 2, 2, 2, [1, 2, 3, 4]),
]


def f64(a):
    if isinstance(a, mx.array):
        a = a.astype(mx.float32)
    return np.asarray(a, np.float64)


def assert_matches_reference(out, kw, dtype):
    ref = rope_pool_reference(*(kw[n] for n in ORDER), rope_base=kw["rope_base"])
    max_pos = int(np.max(f64(kw["positions"])))
    for name, got, want, x in zip(("q_rot", "k_rot"), out[:2], ref[:2], (kw["q"], kw["k"])):
        r = np.abs(f64(x)).max() * np.sqrt(2)
        tol = error_bound(dtype, max_pos, r)
        np.testing.assert_allclose(f64(got), want, rtol=0, atol=tol, err_msg=name)
    slots = np.asarray(kw["slots"])
    np.testing.assert_array_equal(f64(out[2])[slots], f64(out[1]))  # pool rows are k_rot
    np.testing.assert_array_equal(f64(out[3]), ref[3])  # v moves exactly


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name,T,Hq,Hkv,D,positions", CASES, ids=[c[0] for c in CASES])
def test_mx_fast_rope_composition_matches_reference(name, T, Hq, Hkv, D, positions, dtype):
    kw = make_inputs(Shapes(T, Hq, Hkv, D, T + 3), dtype, positions=positions)
    args = {n: kw[n] for n in ORDER}
    pools_before = (f64(kw["k_pool"]), f64(kw["v_pool"]))
    out = rope_fast_scatter(*(mx.array(args[n]) for n in ORDER), rope_base=kw["rope_base"])
    mx.eval(*out)
    assert_matches_reference(out, kw, dtype)
    untouched = np.setdiff1d(np.arange(T + 3), np.asarray(kw["slots"]))
    np.testing.assert_array_equal(f64(out[2])[untouched], pools_before[0][untouched])


def test_mx_fast_rope_with_a_scalar_offset_would_be_wrong():
    """Why the composition needs one batch row per token: [1, H, T, D] with offset = positions[0]
    gives positions[0] + t, not positions[t]."""
    kw = make_inputs(Shapes(3, 4, 2, 8, 5), "float32", positions=[10, 0, 7])
    q = kw["q"]
    wrong = mx.fast.rope(q.transpose(1, 0, 2)[None], 8, traditional=False, base=kw["rope_base"], scale=1.0, offset=10)[
        0
    ].transpose(1, 0, 2)
    ref = rope_pool_reference(*(kw[n] for n in ORDER), rope_base=kw["rope_base"])[0]
    assert np.abs(f64(wrong) - ref).max() > 1e-2


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name,T,Hq,Hkv,D,positions", CASES, ids=[c[0] for c in CASES])
def test_numpy_implementation_matches_reference(name, T, Hq, Hkv, D, positions, dtype):
    kw = make_inputs(Shapes(T, Hq, Hkv, D, T + 3), dtype, kind="numpy", positions=positions)
    pools = [kw["k_pool"].copy(), kw["v_pool"].copy()]
    out = rope_pool_numpy(*(kw[n] for n in ORDER[:5]), *pools, rope_base=kw["rope_base"])
    assert_matches_reference(out, kw, dtype)


def test_numpy_implementation_skips_out_of_range_slots():
    kw = make_inputs(Shapes(3, 4, 2, 8, 4), "float32", kind="numpy", slots=[-1, 2, 4])
    before = kw["k_pool"].copy()
    _, k_rot, k_pool, _ = rope_pool_numpy(*(kw[n] for n in ORDER), rope_base=kw["rope_base"])
    np.testing.assert_array_equal(k_pool[[0, 1, 3]], before[[0, 1, 3]])
    np.testing.assert_array_equal(k_pool[2], k_rot[1])


# The heads of the compare docstring's example (8 q, 2 KV, D 64): one specialised build of the 'cpu' kernel
# serves both (seconds of g++ on an empty kernel cache).
HEADS = dict(num_qo_heads=8, num_kv_heads=2, head_dim=64)


def test_compare_times_every_method_once_per_row():
    rows = compare(Shapes(tokens=2, pool_rows=16, **HEADS), "float16", repeats=2, warmup=1)
    assert [r.method for r in rows] == list(METHODS)
    assert all(isinstance(r, Timing) and r.median_ms > 0 and r.repeats == 2 for r in rows)
    assert rows[0].ratio == 1.0 and rows[0].ratio_range == (1.0, 1.0)
    assert all(r.ratio_range[0] <= r.ratio_range[1] for r in rows)


def test_compare_leaves_numpy_out_for_bfloat16():
    rows = compare(Shapes(tokens=2, pool_rows=16, **HEADS), "bfloat16", repeats=1, warmup=0)
    assert "numpy" not in [r.method for r in rows]


def test_compare_rejects_an_unknown_method():
    with pytest.raises(ValueError, match="unknown methods"):
        compare(Shapes(1, 2, 1, 4, 4), "float32", methods=("torch",))


def test_report_gives_the_tables_and_the_targets_say_met_or_miss():
    shapes = [
        Timing(m, "float16", 1, 4096, ms, ms, 1)
        for m, ms in (
            ("ropepool", 1.0),
            ("ropepool-inplace", 2.0),
            ("mx.fast.rope", 3.0),
            ("copy (mlx)", 0.5),
            ("memcpy (numpy)", 0.1),
        )
    ]
    pools = [Timing("ropepool", "float16", 64, P, ms, ms, 1) for P, ms in ((4096, 1.0), (1048576, 1.5))]
    results = {"backend": "mlx", "device": "cpu", "shapes": shapes, "pools": pools}
    text = report(results)
    assert "Llama-3-8B (Hq=32, Hkv=8, D=128), P=4096" in text and "MISS" not in text
    checks = dict(op_bench.target_checks(results))
    assert checks["ropepool float16 T=1: 3.00x faster than mx.fast.rope + scatter"] is True
    assert checks["ropepool float16 T=1: 2.00x the MLX copy floor (10.0x memcpy)"] is True
    assert checks["ropepool-inplace float16 T=1: 1.50x faster than mx.fast.rope + scatter"] is False
    assert checks["ropepool-inplace float16 T=1: 4.00x the MLX copy floor (20.0x memcpy)"] is False
    assert checks["ropepool: P=1,048,576 takes 1.50x P=4,096"] is False


def test_decode_checks_say_hit_or_miss_against_the_issue_targets():
    def t(method, ms, dtype="float16"):
        return Timing(method, dtype, 1, 4096, ms, ms, 10)

    rows = [
        t("ropepool-inplace", 0.10),
        t("mx.fast.rope", 0.11),
        t("ropepool-inplace-np", 0.05),
        t("numpy", 0.06),
        t("ropepool-inplace", 0.10, "bfloat16"),
        t("mx.fast.rope", 0.16, "bfloat16"),
    ]
    checks = op_bench.decode_checks(rows)
    assert [ok for _, ok in checks] == [True, False, True]  # bfloat16 mx (1.6x); float16 mx (1.1x), NumPy (1.2x)
    assert checks[1][0].startswith("float16   mx inputs:    1.10x faster")


def test_engine_checks_judge_decode_in_place_and_prefill_by_their_own_goals():
    def t(method, ms, tokens, dtype="float32"):
        return Timing(method, dtype, tokens, 4096, ms, ms, 10)

    rows = [
        t("ropepool-inplace", 1.0, 1),
        t("mx.fast.rope", 1.6, 1),
        t("ropepool", 1.0, 64),
        t("mx.fast.rope", 1.9, 64),
        t("ropepool", 1.0, 2048),
        t("mx.fast.rope", 2.5, 2048),
        t("ropepool", 1.0, 8),
        t("mx.fast.rope", 9.0, 8),
    ]
    checks = op_bench.engine_checks(rows)
    assert checks == [
        ("ropepool-inplace float32 T=1: 1.60x faster than mx.fast.rope + scatter (>= 1.5x)", True),
        ("ropepool float32 T=64: 1.90x faster than mx.fast.rope + scatter (>= 2.0x)", False),
        ("ropepool float32 T=2048: 2.50x faster than mx.fast.rope + scatter (>= 2.0x)", True),
    ]


def _results():
    shapes = [
        Timing(m, "float16", 1, 4096, ms, ms, 1)
        for m, ms in (("ropepool", 1.0), ("ropepool-inplace", 2.0), ("mx.fast.rope", 3.0), ("copy (mlx)", 0.5))
    ]
    pools = [Timing("ropepool", "float16", 64, P, ms, ms, 1) for P, ms in ((4096, 1.0), (1048576, 1.1))]
    return {
        "backend": "cpu",
        "device": "Device(cpu, 0)",
        "machine": "a test machine",
        "date": "2026-01-02",
        "command": "python benchmarks/op_bench.py",
        "shapes": shapes,
        "pools": pools,
    }


def test_markdown_gives_the_table_and_every_target_met_or_missed():
    text = markdown(_results())
    assert text.startswith("`python benchmarks/op_bench.py` on 2026-01-02: a test machine; backend `cpu`.")
    assert "| float16 | 1 | 1.000 ms | 3.00x | 2.000 ms | 1.50x | 0.500 ms | 2.00x |" in text
    assert "  - met: ropepool float16 T=1: 3.00x faster than mx.fast.rope + scatter" in text
    assert "  - **MISS**: ropepool-inplace float16 T=1: 1.50x faster than mx.fast.rope + scatter" in text
    assert "  - **MISS**: ropepool-inplace float16 T=1: 4.00x the MLX copy floor" in text
    assert "  - met: ropepool: P=1,048,576 takes 1.10x P=4,096" in text
    assert "2 of 6 targets missed in this run" in text  # the two MISS lines above


def test_paste_into_replaces_only_the_block_between_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\n{README_START}\nold table\n{README_END}\n\nafter\n")
    paste_into(readme, "| new |\n")
    assert readme.read_text() == f"# title\n\n{README_START}\n| new |\n{README_END}\n\nafter\n"
    paste_into(readme, "| new |\n")  # a second run gives the same file
    assert readme.read_text().count("| new |") == 1


@pytest.mark.parametrize(
    "text", ["no markers", f"{README_END}\n{README_START}\n", f"{README_START}\n{README_START}\n{README_END}\n"]
)
def test_paste_into_refuses_a_file_without_one_ordered_pair_of_markers(tmp_path, text):
    readme = tmp_path / "README.md"
    readme.write_text(text)
    with pytest.raises(ValueError, match="needs one"):
        paste_into(readme, "| new |\n")
    assert readme.read_text() == text


def test_measured_page_table_is_the_bench_commands_output():
    text = (ROOT / "docs" / "measured.md").read_text()
    block = text[text.index(README_START) + len(README_START) : text.index(README_END)]
    assert block.lstrip().startswith(("`python benchmarks/op_bench.py", "`python -m ropepool bench"))
    assert "| dtype | T | ropepool | speed-up | in place | speed-up | copy floor | ropepool / floor |" in block
    # the counts and the derived column agree with the rows: a table typed or edited by hand rarely does
    missed, total = map(int, re.search(r"(\d+) of (\d+) targets missed in this run", block).groups())
    assert block.count("**MISS**") == missed and block.count("  - met: ") == total - missed
    rows = re.findall(r"^\| \w+ \| \d+ \| .+\|$", block, re.M)  # dtype, T, ...: the data rows
    assert len(rows) >= 6
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        ropepool_ms, floor_ms, ratio = float(cells[2].split()[0]), float(cells[6].split()[0]), float(cells[7][:-1])
        # times are printed to 0.001 ms and the ratio to 0.01: the bound their rounding allows
        rounding = ratio * (0.0005 / ropepool_ms + 0.0005 / floor_ms) * 1.01 + 0.005
        assert abs(ropepool_ms / floor_ms - ratio) <= rounding + 1e-9, row


# --- --readme writes as an editor saves -------------------------------------------------------

GOOD = f"# title\n\n{README_START}\nold\n{README_END}\n"


def refused_within(seconds, call):
    """The ValueError ``call`` raises, which must come within ``seconds`` (a FIFO must not hang it)."""
    box = {}

    def target():
        try:
            call()
        except Exception as err:  # noqa: BLE001 (handed to the test)
            box["error"] = err

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s"
    return box.get("error")


def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "README.md"
    os.mkfifo(fifo)
    err = refused_within(10, lambda: paste_into(fifo, "| new |\n"))
    assert isinstance(err, ValueError) and "not a regular file" in str(err)


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused_without_reading_it(path):
    if not os.path.exists(path):
        pytest.skip(f"no {path} here")
    err = refused_within(10, lambda: paste_into(path, "| new |\n"))
    assert isinstance(err, ValueError) and "not a regular file" in str(err)


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not a regular file"):
        paste_into(tmp_path, "| new |\n")


def test_crlf_line_endings_and_the_mode_are_kept(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_bytes(GOOD.replace("\n", "\r\n").encode())
    readme.chmod(0o600)
    paste_into(readme, "| a |\n| b |\n")
    assert readme.read_bytes() == f"# title\r\n\r\n{README_START}\r\n| a |\r\n| b |\r\n{README_END}\r\n".encode()
    assert stat.S_IMODE(readme.stat().st_mode) == 0o600


def test_a_symlinked_readme_stays_a_link_and_its_target_is_written(tmp_path):
    real = tmp_path / "docs" / "README.md"
    real.parent.mkdir()
    real.write_text(GOOD)
    link = tmp_path / "README.md"
    link.symlink_to(real)
    paste_into(link, "| new |\n")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == f"# title\n\n{README_START}\n| new |\n{README_END}\n"
    assert sorted(p.name for p in real.parent.iterdir()) == ["README.md"]  # no temporary file left


def test_a_planted_temporary_name_is_never_written_through(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(GOOD)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    for name in (".README.md.bench-tmp", ".README.md.bench"):
        (tmp_path / name).symlink_to(victim)
    paste_into(readme, "| new |\n")
    assert victim.read_text() == "keep me"
    assert readme.read_text().count("| new |") == 1


def test_a_readme_too_big_is_refused_after_reading_a_bounded_part(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(GOOD + "x" * (op_bench.README_LIMIT + 1))
    with pytest.raises(ValueError, match="not a README"):
        paste_into(readme, "| new |\n")


def test_the_command_refuses_a_fifo_before_any_timing(tmp_path):
    fifo = tmp_path / "README.md"
    os.mkfifo(fifo)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "op_bench.py"),
            "--quick",
            "--readme",
            str(fifo),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == f"op_bench: --readme {fifo}: not a regular file"
