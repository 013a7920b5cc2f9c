"""``python -m ropepool check``: what it prints, its exit status, and one-line errors for bad input."""

import json
import re
import subprocess
import sys

import pytest

from ropepool import best_backend
from ropepool.__main__ import main
from ropepool.cli.check import human_bytes
from ropepool.models import preset_names


def check(capsys, *args):
    """(exit status, stdout, stderr) of ``python -m ropepool check ARGS``, in process."""
    rc = main(["check", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def row(out, name):
    """The shapes-table row of argument ``name``: (symbolic, concrete)."""
    m = re.search(rf"^  {name} +(\[[^\]]*\]) +(\(.*\))$", out, re.M)
    assert m, f"no row for {name} in:\n{out}"
    return m.group(1), m.group(2)


# preset, T, P, dtype, (q, k/v, pool) shapes, group size line, per-token and per-layer pool memory
REPORTS = [
    (
        "llama-3-8b",
        8,
        64,
        "float16",
        ("(8, 32, 128)", "(8, 8, 128)", "(64, 8, 128)"),
        "G = Hq // Hkv = 4  (GQA: each KV head serves 4 query heads)",
        "4.0 KiB",
        "256.0 KiB",
    ),
    (
        "gemma-2-9b",
        3,
        10,
        "bfloat16",
        ("(3, 16, 256)", "(3, 8, 256)", "(10, 8, 256)"),
        "G = Hq // Hkv = 2  (GQA",
        "8.0 KiB",
        "80.0 KiB",
    ),
    (
        "phi-3-mini",
        1,
        1,
        "float32",
        ("(1, 32, 96)", "(1, 32, 96)", "(1, 32, 96)"),
        "G = Hq // Hkv = 1  (MHA: one KV head per query head)",
        "24.0 KiB",
        "24.0 KiB",
    ),
    (
        "falcon-7b",
        0,
        4,
        "float16",
        ("(0, 71, 64)", "(0, 1, 64)", "(4, 1, 64)"),
        "G = Hq // Hkv = 71  (MQA: all 71 query heads share one KV head)",
        "256 B",
        "1.0 KiB",
    ),
]


@pytest.mark.parametrize("name, T, P, dtype, shapes, group, per_token, per_layer", REPORTS, ids=[r[0] for r in REPORTS])
def test_report(capsys, name, T, P, dtype, shapes, group, per_token, per_layer):
    rc, out, err = check(capsys, name, "--tokens", T, "--pool", P, "--dtype", dtype)
    assert (rc, err) == (0, "")
    q, kv, pool = shapes
    assert row(out, "q") == ("[T, Hq, D]", q)
    assert row(out, "k") == row(out, "v") == ("[T, Hkv, D]", kv)
    assert row(out, "positions") == row(out, "slots") == ("[T]", f"({T},)")
    assert row(out, "k_pool") == row(out, "v_pool") == ("[P, Hkv, D]", pool)
    assert group in out
    assert f"shapes (T = {T}, P = {P}, {dtype})" in out
    assert re.search(rf"^  per token .* = {re.escape(per_token)}$", out, re.M)
    assert re.search(rf"^  P = {P} rows +{re.escape(per_layer)}$", out, re.M)
    assert f"ran rope_pool_fused once on backend {best_backend()!r}" in out
    assert f"{T} tokens written to {T} of {P} pool rows" in out


def test_report_names_model_source_and_parameters(capsys):
    rc, out, _ = check(capsys, "qwen2.5-7b")
    assert rc == 0
    assert "model       Qwen/Qwen2.5-7B" in out
    assert "source      https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json" in out
    for line in (
        "num_qo_heads  Hq  = 28",
        "num_kv_heads  Hkv = 4",
        "head_dim      D   = 128",
        "rope_base         = 1000000.0",
    ):
        assert line in out
    assert re.search(r"^  x 28 layers +3\.5 MiB$", out, re.M)  # 2 x 4 x 128 x 2 B x 64 rows x 28
    # 2 x 4 x 128 x 2 B x 131072 tokens
    assert "  one sequence of max_position_embeddings = 131072 tokens: 256.0 MiB per layer" in out


def test_report_shows_the_rotation_and_notes(capsys, tmp_path):
    config = {
        "_name_or_path": "meta-llama/Llama-3.1-8B",
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "factor": 8.0,
            "rope_type": "llama3",
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    rc, out, _ = check(capsys, path)
    assert rc == 0
    assert "WARNING" not in out
    assert "  scaling       llama3" in out and "  pairing       NeoX (i, i + 64)" in out
    assert "    i = 63     " in out and "(x8.00)" in out  # the slowest pair: 8x longer wavelength
    assert "    i = 0              6.3 ->           6.3  (x1.00)" in out  # the fastest: unchanged
    rc, out, _ = check(capsys, "phi-2")
    assert rc == 0 and "  rotary part   32 of 80 dimensions per head; the last 48 pass through" in out
    rc, out, _ = check(capsys, "gemma-2-9b")
    assert "  note: head_dim = 256 is set by the config" in out


def test_folder_with_config_json(capsys, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 4, "hidden_size": 64}))
    rc, out, _ = check(capsys, tmp_path, "--tokens", 2, "--pool", 3)
    assert rc == 0 and row(out, "k") == ("[T, Hkv, D]", "(2, 4, 16)")
    assert f"source      {tmp_path / 'config.json'}" in out
    assert "note: num_key_value_heads absent: MHA" in out


# preset, N, the hint's phrase (from ropepool.validation), the fix
MISMATCHES = [
    (
        "llama-3-8b",
        32,
        "num_kv_heads was likely taken from config.num_attention_heads",
        "fix: pass num_kv_heads=8, the heads of the K projection (config.num_key_value_heads)",
    ),
    ("qwen2.5-7b", 2, "k has 4 heads but num_kv_heads=2", "fix: pass num_kv_heads=4"),
    (
        "falcon-7b",
        71,
        "num_kv_heads was likely taken from config.num_attention_heads",
        "fix: pass num_kv_heads=1, the heads of the K projection (multi_query: true",
    ),
]


@pytest.mark.parametrize("name, N, hint, fix", MISMATCHES, ids=[m[0] for m in MISMATCHES])
def test_num_kv_heads_mismatch_is_explained(capsys, name, N, hint, fix):
    rc, out, err = check(capsys, name, "--num-kv-heads", N)
    assert rc == 1 and err == ""
    assert f"mismatch: num_kv_heads = {N}, but this config gives" in out
    assert "    k shape must be [num_tokens, num_kv_heads, head_dim], got (8, " in out  # SGLang's message
    flat = " ".join(out.split())  # the error's explanation is wrapped at word boundaries
    assert hint in flat and fix in flat
    assert "ran rope_pool_fused" not in out


def test_num_kv_heads_that_agrees_just_runs(capsys):
    rc, out, _ = check(capsys, "llama-3-8b", "--num-kv-heads", 8)
    assert rc == 0 and "mismatch" not in out and "ran rope_pool_fused" in out


# name, arguments, exit status, the one line on stderr
FAILURES = [
    ("unknown-preset", ["llama3-8b"], 2, "llama3-8b: no such file, and not a preset (did you mean 'llama-3-8b'?)"),
    ("missing-file", ["{tmp}/nope.json"], 2, "nope.json: no such file"),
    ("malformed-json", ["{tmp}/bad.json"], 2, "bad.json: malformed JSON at line 2 column 1"),
    ("json-list", ["{tmp}/list.json"], 2, "list.json: expected a JSON object"),
    ("mla-model-without-rope-dim", ["{tmp}/mla.json"], 1, "qk_rope_head_dim must be a positive int, got None"),
    (
        "too-many-tokens",
        ["llama-3-8b", "--tokens", "9", "--pool", "4"],
        2,
        "need 0 <= --tokens <= --pool (each token writes its own row), got --tokens 9 --pool 4",
    ),
    ("zero-kv-heads", ["llama-3-8b", "--num-kv-heads", "0"], 2, "--num-kv-heads must be > 0, got 0"),
]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "bad.json").write_text('{"num_attention_heads": 32,\n}')
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "mla.json").write_text(
        json.dumps({"num_attention_heads": 16, "hidden_size": 2048, "kv_lora_rank": 512})
    )
    return tmp_path


@pytest.mark.parametrize("name, args, rc, line", FAILURES, ids=[f[0] for f in FAILURES])
def test_failure_is_one_line(capsys, files, name, args, rc, line):
    got_rc, out, err = check(capsys, *[a.format(tmp=files) for a in args])
    assert got_rc == rc and out == ""
    assert err.startswith("python -m ropepool check: ") and line in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("name, args, rc, line", [FAILURES[2], FAILURES[0]], ids=["malformed-json", "unknown-preset"])
def test_failure_in_a_subprocess(files, name, args, rc, line):
    run = subprocess.run(
        [sys.executable, "-m", "ropepool", "check", *[a.format(tmp=files) for a in args]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == rc and run.stdout == ""
    assert line in run.stderr and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


def test_subprocess_runs_a_preset():
    run = subprocess.run(
        [sys.executable, "-m", "ropepool", "check", "mistral-7b"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert "model       mistralai/Mistral-7B-v0.1" in run.stdout and ": ok\n" in run.stdout


def test_help_lists_the_presets():
    run = subprocess.run(
        [sys.executable, "-m", "ropepool", "check", "--help"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0
    assert all(name in run.stdout for name in preset_names())


HUMAN = [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (3 * 2**30, "3.0 GiB")]


@pytest.mark.parametrize("n, text", HUMAN)
def test_human_bytes(n, text):
    assert human_bytes(n) == text


# Hostile config files: each ends in one line on stderr, a non-zero status, within the timeout, and
# nothing it holds reaches the terminal unescaped (name, file, the one line expected).
LLAMA_FIELDS = {"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}
ESCAPES = "\x1b]0;owned\x07\x1b[2J"  # an OSC title change, then clear screen
HOSTILE = [
    (
        "head_dim 2**28 (40 bytes)",
        '{"num_attention_heads":1,"head_dim":268435456}',
        "head_dim = 268435456 is past 1024",
    ),
    (
        "hidden_size 2**30 and no head_dim",
        json.dumps({"num_attention_heads": 1, "hidden_size": 2**30}),
        "head_dim = 1073741824 is past 1024",
    ),
    (
        "a million heads",
        json.dumps({**LLAMA_FIELDS, "num_attention_heads": 10**6}),
        "num_attention_heads must be at most 1024, got 1000000",
    ),
    ("JSON nested 100,000 deep", "[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
    (
        "a 5,000-digit integer",
        '{"num_attention_heads": ' + "7" * 5000 + "}",
        "not a model config: Exceeds the limit (4300 digits) for integer string conversion",
    ),
    (
        "max_position_embeddings 10**4000",
        json.dumps(
            {**LLAMA_FIELDS, "max_position_embeddings": 10**4000, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
        ),
        "max_position_embeddings must be at most 2147483647, got an integer of 13288 bits",
    ),
    (
        "a lone surrogate in _name_or_path",
        '{"_name_or_path": "evil\\ud800", "num_attention_heads": 0}',
        "evil\\ud800: num_attention_heads must be a positive integer, got 0",
    ),
    (
        "terminal escapes in _name_or_path",
        json.dumps({"_name_or_path": ESCAPES, "num_attention_heads": 0}),
        "\\x1b]0;owned\\x07\\x1b[2J: num_attention_heads must be a positive integer",
    ),
    (
        "terminal escapes in a field's value",
        json.dumps({**LLAMA_FIELDS, "rope_scaling": {"rope_type": ESCAPES}}),
        "unknown rope_scaling type '\\x1b]0;owned\\x07\\x1b[2J'",
    ),
]


@pytest.mark.parametrize("name, text, line", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_config_is_one_line_in_seconds(tmp_path, name, text, line):
    (tmp_path / "config.json").write_text(text, encoding="utf-8", errors="surrogatepass")
    run = subprocess.run(
        [sys.executable, "-m", "ropepool", "check", str(tmp_path / "config.json")],
        capture_output=True,
        text=True,
        timeout=60,
        encoding="utf-8",
        errors="replace",
    )
    assert run.returncode in (1, 2) and run.stdout == "", (run.returncode, run.stdout[-500:])
    assert run.stderr.count("\n") == 1 and line in run.stderr and "Traceback" not in run.stderr, run.stderr[-1500:]
    assert "\x1b" not in run.stderr


@pytest.mark.parametrize(
    "name_or_path, shown",
    [(ESCAPES, "\\x1b]0;owned\\x07\\x1b[2J"), ("evil\ud800", "evil\\ud800")],
    ids=["terminal escapes", "a lone surrogate"],
)
def test_a_hostile_name_in_a_good_config_is_shown_escaped(tmp_path, name_or_path, shown):
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA_FIELDS, "_name_or_path": name_or_path}))
    run = subprocess.run(
        [sys.executable, "-m", "ropepool", "check", str(tmp_path), "--tokens", "1", "--pool", "2"],
        capture_output=True,
        text=True,
        timeout=60,
        encoding="utf-8",
        errors="replace",
    )
    assert run.returncode == 0, run.stderr[-1500:]
    assert f"model       {shown}\n" in run.stdout and "\x1b" not in run.stdout


# preset, lines the report must hold: the new pool shapes and what the layers keep
BEYOND = [
    (
        "deepseek-v3",
        [
            "latent_pool [P, 1, R + rd]  (64, 1, 576)",
            "cache layout (MLA)",
            "latent_pool   [P, 1, 576] = (64, 1, 576) per layer",
            "ran rope_pool_fused_mla once",
        ],
    ),
    ("gemma-3-27b", ["k_pool        [P, 16, 128]", "62: 10 full, 52 sliding (window 1024"]),
    ("gpt-oss-20b", ["k_pool        [P, 8, 64]", "24: 12 full, 12 sliding (window 128", "attention-sink"]),
    ("llama-2-7b", ["cache layout (MHA)", "k_pool        [P, 32, 128]", "32, every one keeps every token"]),
    ("qwen2-vl-7b", ["scaling       mrope", "k_pool        [P, 4, 128]", "28, every one keeps every token"]),
]


@pytest.mark.parametrize("name, lines", BEYOND, ids=[b[0] for b in BEYOND])
def test_check_prints_the_pool_shapes_beyond_gqa(capsys, name, lines):
    rc, out, err = check(capsys, name)
    assert rc == 0 and err == "", err
    for line in lines:
        assert line in out, line
