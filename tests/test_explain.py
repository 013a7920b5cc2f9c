"""``python -m ropepool explain`` and :mod:`ropepool.diagnosis`: every catalog message is read back from its
text, and every case of a shape error is named, for models of different GQA ratios, from errors the op
really raised."""

import io

import mlx.core as mx
import pytest

from ropepool import CATALOG, RopePoolError, Shapes, make_inputs, rope_pool_fused
from ropepool.__main__ import main
from ropepool.cli.explain import explain
from ropepool.diagnosis import read_error, read_shape
from ropepool.models import closest_preset, preset


def raised(kw) -> RopePoolError:
    with pytest.raises(RopePoolError) as e:
        rope_pool_fused(**kw)
    return e.value


@pytest.mark.parametrize("code", sorted(CATALOG))
def test_every_catalog_message_is_read_back(code):
    """The op's full text, its first line alone, and a traceback's last line all name the check."""
    err = raised(CATALOG[code].trigger())
    assert err.code == code
    for text in (str(err), err.first_line, f"Traceback ...\n  ...\nRuntimeError: {err.first_line}\n"):
        read = read_error(text, CATALOG)
        assert read is not None and read.code == code, f"{text!r} read as {read}"
    report = explain(str(err))
    assert report.startswith(f"check     {code}, ")
    assert " ".join(CATALOG[code].fix.split()) in " ".join(report.split())


def test_the_numbers_are_read_out_of_the_text():
    read = read_error("k shape must be [num_tokens, num_kv_heads, head_dim], got torch.Size([6, 32, 128])", CATALOG)
    assert read.code == "k_shape" and read_shape(read.fields["shape"]) == (6, 32, 128) and read.expected is None
    read = read_error("v_pool shape must match k_pool shape, got (5, 2, 8) vs (6, 2, 8)", CATALOG)
    assert read.code == "v_pool_shape" and read.fields == {"shape": "(5, 2, 8)", "k_shape": "(6, 2, 8)"}
    assert read_error("CUDA out of memory", CATALOG) is None


# Models of different GQA ratios: G = 4, 7, 2 (D = 256), 71 (MQA) and 1 (MHA).
MODELS = ["llama-3-8b", "qwen2.5-7b", "gemma-2-9b", "falcon-7b", "phi-3-mini"]


def model_call(name, T=3):
    p = preset(name)
    return p, make_inputs(Shapes(T, p.num_qo_heads, p.num_kv_heads, p.head_dim, 8), "float16")


def case_for(name, kw, **extra):
    """Explain the op's own error for ``kw`` with the model ``name``: (case name, report)."""
    report = explain(str(raised(kw)), preset(name), **extra)
    case = next(line for line in report.splitlines() if line.startswith("case"))
    return case.split()[1].rstrip(":"), report


@pytest.mark.parametrize("name", MODELS)
def test_classic_bug_num_kv_heads_passed_as_hq(name):
    p, kw = model_call(name)
    if p.num_kv_heads == p.num_qo_heads:  # MHA: Hq is right; a wrong count is still this case
        kw["num_kv_heads"] = p.num_qo_heads // 2 if p.num_qo_heads % 2 == 0 else 1
    else:
        kw["num_kv_heads"] = p.num_qo_heads
    case, report = case_for(name, kw)
    assert case == "num_kv_heads"
    assert f"Pass num_kv_heads={p.num_kv_heads} (config.num_key_value_heads)" in " ".join(report.split())
    if p.num_kv_heads != p.num_qo_heads:
        assert "classic GQA bug" in report
        # the fix changes the outcome: the call with it passes
        rope_pool_fused(**{**kw, "num_kv_heads": p.num_kv_heads})


@pytest.mark.parametrize("name", [m for m in MODELS if preset(m).group_size > 1])
def test_k_repeated_to_the_query_heads(name):
    p, kw = model_call(name)
    kw["k"] = mx.repeat(kw["k"], p.group_size, axis=1)  # [T, Hq, D]: after repeat_kv
    case, report = case_for(name, kw)
    assert case == "repeated_k" and "repeat_kv" in report
    flat = " ".join(report.split())
    assert f"[T, {p.num_kv_heads}, {p.head_dim}]" in flat and f"num_kv_heads={p.num_kv_heads}" in flat


def test_k_of_another_model_qwen_with_32_heads():
    """The seed's error: Qwen2.5-7B (Hq 28, Hkv 4) meets a k of 32 heads, which matches neither."""
    text = "k shape must be [num_tokens, num_kv_heads, head_dim], got (6, 32, 128)"
    report = explain(text, preset("qwen2.5-7b"))
    flat = " ".join(report.split())
    assert "case foreign_k (heads): k has 32 heads, neither Hq = 28 nor Hkv = 4" in flat
    assert "llama-3-8b" in flat and "another model's config" in flat
    assert "Build k with this model's projection: [T, 4, 128]" in flat
    assert "Pass num_kv_heads" not in flat  # the fix that changes nothing is not offered


@pytest.mark.parametrize("name", MODELS)
def test_k_of_neither_head_count(name):
    p, kw = model_call(name)
    # a count that is no tensor-parallel shard of Hkv (those are tp's or another model's: ambiguous, below)
    wrong = next(h for h in range(2, 100) if h not in (p.num_qo_heads, p.num_kv_heads) and not p.num_kv_heads % h == 0)
    kw["k"] = mx.zeros((3, wrong, p.head_dim), mx.float16)
    case, report = case_for(name, kw)
    assert case == "foreign_k" and f"k has {wrong} heads" in report


@pytest.mark.parametrize("name", [m for m in MODELS if preset(m).num_kv_heads % 2 == 0 and preset(m).num_kv_heads > 2])
def test_k_of_a_tensor_parallel_shard_is_tp_or_another_model(name):
    """k with Hkv / 2 heads: a tp = 2 shard called with the whole model's counts, or another model's k."""
    p, kw = model_call(name)
    kw["k"] = mx.zeros((3, p.num_kv_heads // 2, p.head_dim), mx.float16)
    case, report = case_for(name, kw)
    said = " ".join(report.split())
    assert case == "ambiguous" and "tp = 2" in said
    assert f"num_qo_heads={p.num_qo_heads // 2}, num_kv_heads={p.num_kv_heads // 2}" in said


@pytest.mark.parametrize("name", MODELS)
def test_head_dim_mismatch(name):
    p, kw = model_call(name)
    kw["k"] = kw["k"][..., : p.head_dim - 2]
    case, report = case_for(name, kw)
    assert case == "head_dim" and f"k's last axis is {p.head_dim - 2}, the model's head_dim {p.head_dim}" in " ".join(
        report.split()
    )


def test_head_dim_mismatch_from_a_wrong_reshape():
    p, kw = model_call("llama-3-8b")
    kw["k"] = kw["k"].reshape(3, 16, 64)  # 8 x 128 = 16 x 64
    case, report = case_for("llama-3-8b", kw)
    assert case == "head_dim" and "reshaped with the wrong head count" in report


@pytest.mark.parametrize("name", MODELS)
def test_token_count_mismatch(name):
    p, kw = model_call(name, T=4)
    kw["k"] = kw["k"][:3]  # k sliced differently from q
    case, report = case_for(name, kw)
    assert case == "tokens" and "k has 3 tokens but q has 4" in report


@pytest.mark.parametrize("name", [m for m in MODELS if preset(m).group_size > 1])
def test_pool_allocated_with_the_query_heads(name):
    p, kw = model_call(name)
    kw["k_pool"] = kw["v_pool"] = mx.zeros((8, p.num_qo_heads, p.head_dim), mx.float16)
    case, report = case_for(name, kw)
    assert case == "pool_with_hq" and f"[P, {p.num_kv_heads}, {p.head_dim}]" in report


def test_v_repeated_but_not_k():
    p, kw = model_call("llama-3-8b")
    kw["v"] = mx.repeat(kw["v"], 4, axis=1)
    assert case_for("llama-3-8b", kw)[0] == "repeated_v"


def test_q_and_kv_heads_swapped():
    p, kw = model_call("llama-3-8b")
    kw.update(num_qo_heads=8, num_kv_heads=32)
    case, report = case_for("llama-3-8b", kw)
    assert case == "num_qo_heads" and "Pass num_qo_heads=32" in report


def test_group_size_names_the_count_that_is_not_the_models():
    p, kw = model_call("qwen2.5-7b")
    kw.update(
        num_kv_heads=3, k=kw["k"][:, :3], v=kw["v"][:, :3], k_pool=kw["k_pool"][:, :3], v_pool=kw["v_pool"][:, :3]
    )
    case, report = case_for("qwen2.5-7b", kw)
    assert case == "group_size" and "num_kv_heads=3 (the model's is 4)" in " ".join(report.split())


# --- The op's own hint reasons the same way, with the numbers it has ---------------------------


def test_op_hint_for_a_k_of_neither_count_does_not_blame_num_kv_heads():
    p, kw = model_call("qwen2.5-7b")
    kw["k"] = mx.zeros((3, 32, 128), mx.float16)
    hint = " ".join(raised(kw).hint.split())
    assert "k has 32 heads but num_kv_heads=4 (and num_qo_heads=28): k matches neither" in hint
    assert "the fault is in what produced k" in hint and "must come from config" not in hint


def test_op_hint_for_the_classic_bug():
    p, kw = model_call("qwen2.5-7b")
    kw["num_kv_heads"] = 28
    hint = " ".join(raised(kw).hint.split())
    assert "classic GQA bug" in hint and "Pass num_kv_heads=4" in hint


# --- The command line ---------------------------------------------------------------------------


def run(capsys, *args, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    rc = main(["explain", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_explains_with_a_model(capsys):
    """SGLang's line alone: k is Llama-3-8B's own [T, 8, 128], so either the count passed or k's tokens are
    wrong; explain says both, and what to print to tell; with ropepool's second line it names the one."""
    line = "k shape must be [num_tokens, num_kv_heads, head_dim], got (4, 8, 128)"
    rc, out, err = run(capsys, line, "--model", "llama-3-8b")
    flat = " ".join(out.split())
    assert rc == 0 and err == "" and "case ambiguous" in flat and "Pass num_kv_heads=8" in flat
    assert "k has 4 tokens and q another count" in flat and "print(num_kv_heads, q.shape[0], k.shape[0])" in flat
    second = "\n  expected (4, 32, 128) = [T, Hkv, D], got (4, 8, 128)."
    rc, out, err = run(capsys, line + second, "--model", "llama-3-8b")
    assert rc == 0 and "case      num_kv_heads" in out and "Pass num_kv_heads=8" in out


def test_cli_reads_stdin_and_uses_the_count_passed(capsys, monkeypatch):
    text = "RuntimeError: k shape must be [num_tokens, num_kv_heads, head_dim], got (4, 8, 128)\n"
    rc, out, _ = run(
        capsys, "-", "--model", "llama-3-8b", "--passed-kv-heads", "16", stdin=text, monkeypatch=monkeypatch
    )
    assert rc == 0 and "num_kv_heads=16 was passed" in " ".join(out.split())


def test_cli_without_a_model_says_how_to_get_the_case(capsys):
    rc, out, _ = run(capsys, "k shape must be [num_tokens, num_kv_heads, head_dim], got (4, 32, 128)")
    assert rc == 0 and "add --model" in out and "case" not in out


def test_cli_text_without_a_message_exits_1(capsys):
    rc, out, err = run(capsys, "Segmentation fault")
    assert rc == 1 and out == "" and "no message explain reads in 'Segmentation fault'" in err
    assert err.count("\n") == 1 and "transformers" in err and "llama.cpp" in err


def test_cli_reads_a_suffixed_checkpoint_as_its_preset(capsys):
    rc, out, err = run(
        capsys,
        "k shape must be [num_tokens, num_kv_heads, head_dim], got (6, 32, 128)",
        "--model",
        "Qwen2.5-7B-Instruct",
    )
    assert rc == 0 and "read as the preset qwen2.5-7b" in err and "case      foreign_k" in out


def test_cli_unknown_model_exits_2_with_the_preset_meant(capsys):
    rc, out, err = run(capsys, "rope_pool_fused: head_dim must be even", "--model", "qwen2.5-7c")
    assert rc == 2 and "did you mean 'qwen2.5-7b'?" in err


@pytest.mark.parametrize(
    "name, want",
    [
        ("qwen2.5-7b-instruct", "qwen2.5-7b"),
        ("Llama-3-8B-Instruct", "llama-3-8b"),
        ("mistral-7b-chat", "mistral-7b"),
        ("llama-3.1-8b-base", "llama-3.1-8b"),
        ("qwen2.5-7b-yarn-instruct", "qwen2.5-7b-yarn"),
        ("gpt2", None),
    ],
)
def test_preset_suffixes_are_ignored(name, want):
    assert closest_preset(name) == want


def test_check_suggests_the_preset_without_its_suffix(capsys):
    rc = main(["check", "qwen2.5-7b-instruct"])
    assert rc == 2 and "did you mean 'qwen2.5-7b'?" in capsys.readouterr().err


def test_readme_headline_is_notebook_01s_classic_bug():
    """explain's headline error (docs/explain.md) is the one 01 reproduces (Llama-3-8B, T = 4, num_kv_heads=32), and
    explain names it as the classic bug."""
    import json
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    headline = re.search(r"```\n(k shape must be .*)\n```", (root / "docs" / "explain.md").read_text()).group(1)
    nb = json.loads((root / "notebooks" / "01_gqa_shapes.ipynb").read_text())
    assert any(f'sglang_message = "{headline}"' in "".join(c["source"]) for c in nb["cells"])
    p, kw = model_call("llama-3-8b", T=4)
    assert raised({**kw, "num_kv_heads": 32}).first_line == headline
    assert "classic GQA bug" in explain(headline, preset("llama-3-8b"))


@pytest.mark.parametrize("name", [m for m in MODELS if preset(m).group_size > 1])
def test_the_fix_named_changes_the_outcome_and_the_tempting_one_does_not(name):
    """repeated_k and foreign_k: passing num_kv_heads = k's heads still fails (at the pool); the k the
    fix describes ([T, Hkv, D] from the K projection) passes."""
    p, kw = model_call(name)
    # k with q's heads (repeat_kv), and k with another count that divides Hq (passes the group-size check)
    others = [
        h
        for h in range(2, 100)
        if h not in (p.num_qo_heads, p.num_kv_heads) and p.num_qo_heads % h == 0 and p.num_kv_heads % h != 0
    ]
    for bad_heads in [p.num_qo_heads] + others[:1]:
        broken = {**kw, "k": mx.zeros((3, bad_heads, p.head_dim), mx.float16)}
        case, report = case_for(name, broken)
        assert case in ("repeated_k", "foreign_k")
        tempting = raised({**broken, "num_kv_heads": bad_heads, "v": mx.zeros((3, bad_heads, p.head_dim), mx.float16)})
        assert tempting.code == "k_pool_shape"  # the error moved to the pool, as the report says
        rope_pool_fused(**{**broken, "k": kw["k"]})  # the k the fix names: passes


def test_a_v_pool_whose_rows_alone_differ_from_k_pools_says_so_and_gives_the_rows():
    """Heads and head_dim are the model's and what the op expected: only P differs, and the fix names it."""
    report = explain("v_pool shape must match k_pool shape, got (15, 8, 128) vs (16, 8, 128)", model="mistral-7b")
    flat = " ".join(report.split())
    assert "pool_rows_differ" in flat and "v_pool has 15 rows and k_pool 16" in flat
    assert "with the same P (16)" in flat and "Pass ." not in flat
