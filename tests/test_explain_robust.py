"""``explain`` on hostile pastes and options: linear time, escapes shown escaped, huge numbers and bad
options refused in one line; and the silent-failure checklists, every line of which runs."""

import io
import time

import pytest

from ropepool.__main__ import main
from ropepool.diagnosis import CHECKLISTS, SETUP, Facts, diagnose

VIEW = "RuntimeError: shape '[1, 7, 32, 128]' is invalid for input of size 7168"
K_LINE = "k shape must be [num_tokens, num_kv_heads, head_dim], got (4, 8, 128)"
LLAMA = Facts(num_qo_heads=32, num_kv_heads=8, head_dim=128, hidden_size=4096)


def run(capsys, *args, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    try:
        rc = main(["explain", *args])
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


MEGABYTE = 1 << 20
PASTES = {  # a megabyte each, built to make a scan that backtracks or rescans go quadratic
    "one long line, message at the end": "x" * MEGABYTE + " " + VIEW,
    "digits and commas without a closing bracket": "(" + "1, " * (MEGABYTE // 3) + "\n" + K_LINE,
    "the message a thousand times": "\n".join([VIEW] * (MEGABYTE // len(VIEW))),
    "half-messages on one line": ("k shape must be [num_tokens, num_kv_heads, head_dim], got (" * 20000)[:MEGABYTE],
    "colour codes everywhere": "\x1b[31m\x1b[0m" * (MEGABYTE // 9) + VIEW,
    "size mismatch lines without shapes": "size mismatch for model.k_proj.weight: copying a param with shape " * 15000,
}


@pytest.mark.parametrize("name", PASTES)
def test_a_megabyte_paste_is_read_in_linear_time(name):
    """Well under a second on a quiet machine (the quadratic reader took 56 s on 50 kB); 5 s allows contention."""
    text = PASTES[name]
    start = time.perf_counter()
    diagnose(text, LLAMA)
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0, f"{name}: {elapsed:.2f} s for {len(text)} characters"


def test_the_message_at_the_end_of_a_megabyte_is_still_found():
    assert diagnose(PASTES["one long line, message at the end"], LLAMA).case == "kv_viewed_with_hq"
    assert diagnose(PASTES["colour codes everywhere"], LLAMA).case == "kv_viewed_with_hq"


def test_escapes_are_shown_escaped(capsys):
    text = f"\x1b[1;31m{VIEW}\x1b[0m\x07 \x1b]0;owned\x07"
    rc, out, err = run(capsys, text, "--model", "llama-3-8b")
    assert rc == 0 and "\x1b" not in out and "\x07" not in out and "kv_viewed_with_hq" in out
    rc, out, err = run(capsys, K_LINE.replace("got", "\x07got"), "--model", "llama-3-8b")
    assert "\x07" not in out + err


@pytest.mark.parametrize(
    "text",
    [
        K_LINE.replace("128)", "1" + "2" * 4400 + ")"),
        "num_qo_heads must be a multiple of num_kv_heads, got " + "9" * 5000 + " and 8",
        "RuntimeError: shape '[1, 7, 32, 128]' is invalid for input of size " + "7" * 4400,
        "[reshape] Cannot reshape array of size " + "7" * 4400 + " into shape (1,7,32,128).",
    ],
)
def test_huge_numbers_are_refused_in_one_line(capsys, text):
    rc, out, err = run(capsys, text, "--model", "llama-3-8b")
    assert rc == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err and len(err) < 400


BAD_OPTIONS = [
    ["x", "--num-kv-heads", "0"],
    ["x", "--num-kv-heads", "-3"],
    ["x", "--num-kv-heads", "eight"],
    ["x", "--num-kv-heads", "9" * 5000],
    ["x", "--head-dim", "100000"],
    ["x", "--rope-theta", "nan"],
    ["x", "--rope-theta", "-1"],
    ["x", "--rope-theta", "1" * 5000],
    ["x", "--bogus"],
    ["x", "--model", "nope"],
    ["x", "--config", "/nonexistent/config.json"],
    ["x", "--model", "llama-3-8b", "--config", "llama-3-8b"],
    ["--silent", "nonsense"],
    [],
    ["x", "--config", "/dev/zero"],
    ["x", "--model", "qwen2.5-7c"],
]


@pytest.mark.parametrize("argv", BAD_OPTIONS, ids=[" ".join(a)[:40] for a in BAD_OPTIONS])
def test_every_bad_option_is_refused_in_one_line(capsys, argv):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err and len(err) < 500, err


def test_k_with_no_heads_is_the_catalogued_error_and_explained():
    import mlx.core as mx

    from ropepool import RopePoolError, Shapes, make_inputs, rope_pool_fused

    kw = make_inputs(Shapes(6, 28, 4, 128, 8), "float16")
    with pytest.raises(RopePoolError) as e:
        rope_pool_fused(**{**kw, "k": mx.zeros((6, 0, 128), mx.float16)})
    assert e.value.code == "k_shape" and "no head at all" in e.value.hint
    assert diagnose(str(e.value)).case == "zero_heads"


@pytest.mark.parametrize("symptom", CHECKLISTS)
def test_every_check_of_every_checklist_runs_and_holds(symptom):
    env: dict = {}
    exec(SETUP, env)
    for check in CHECKLISTS[symptom].checks:
        env["r"] = eval(check.code, env)
        assert eval(check.holds, env), f"{symptom}: {check.code} gave {env['r']!r}"


@pytest.mark.parametrize("symptom, alias", [("garbled-gguf", "gguf"), ("long-context", "long"), ("fp8-2x", "fp8")])
def test_cli_prints_the_checklist(capsys, symptom, alias):
    rc, out, err = run(capsys, "--silent", alias)
    assert rc == 0 and err == "" and CHECKLISTS[symptom].title in out
    for check in CHECKLISTS[symptom].checks:
        assert check.code in out


def test_explain_page_shows_explain_on_a_transformers_error_as_it_prints(capsys):
    """explain's page (docs/explain.md), its first screen: the families explain reads, and its transformers
    example with the output it really prints."""
    import re
    import shlex
    from pathlib import Path

    from ropepool.diagnosis import FAMILIES

    page = (Path(__file__).resolve().parent.parent / "docs" / "explain.md").read_text()
    first_screen = page[: page.index("\nIt also reads")]
    for family in ("SGLang", "transformers", "PyTorch", "MLX", "mlx-lm", "vLLM", "llama.cpp", "TensorRT-LLM"):
        assert family in first_screen and any(family in f for f in FAMILIES)
    command, printed = re.search(
        r"```sh\n(python -m ropepool explain .*)\n```\n```\n(.*?)```", first_screen, re.S
    ).groups()
    rc, out, err = run(capsys, *shlex.split(command)[4:])
    assert rc == 0 and printed in out
