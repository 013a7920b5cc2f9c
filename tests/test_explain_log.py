"""``explain --log``: a whole serving log, every distinct error explained once, in order, with its line; the
model from the options or from a log line naming it; INFO and WARNING lines and repeated tracebacks
skipped. And an option that replaces a preset's number says so."""

import io
import re
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from ropepool.cli.explain import NUMBER_OPTIONS, diagnosis_of, log_report, main

LOG = """\
2026-12-05 10:00:01 INFO     Starting server, model=meta-llama/Meta-Llama-3-8B-Instruct
2026-12-05 10:00:02 INFO     Loading weights took 12.3 s
2026-12-05 10:00:03 WARNING  shape mismatch warnings are off (error budget ok)
2026-12-05 10:00:04 INFO     Running warmup
Traceback (most recent call last):
  File "/srv/app/attention.py", line 88, in forward
    k = k.view(bsz, q_len, self.num_heads, self.head_dim)
RuntimeError: shape '[1, 7, 32, 128]' is invalid for input of size 7168
2026-12-05 10:00:05 INFO     Retrying request 17 (attempt 2 of 3)
Traceback (most recent call last):
  File "/srv/app/attention.py", line 88, in forward
    k = k.view(bsz, q_len, self.num_heads, self.head_dim)
RuntimeError: shape '[1, 7, 32, 128]' is invalid for input of size 7168
2026-12-05 10:00:06 INFO     Falling back to the fused kernel
ValueError: k shape must be [num_tokens, num_kv_heads, head_dim], got (4, 32, 128)
2026-12-05 10:00:07 INFO     Shutting down
"""


def args(**kw):
    base = dict(text=None, model=None, config=None, rope_theta=None, silent=None, log=None)
    base.update({dest: None for _, dest, _, _ in NUMBER_OPTIONS})
    base.update(kw)
    return SimpleNamespace(**base)


def run(**kw):
    out, err = io.StringIO(), io.StringIO()
    code = main(args(**kw), out, err)
    return code, out.getvalue(), err.getvalue()


def test_every_distinct_error_once_in_order_with_its_line_and_the_model_from_the_log(tmp_path):
    path = tmp_path / "serve.log"
    path.write_text(LOG)
    code, out, _ = run(log=str(path))
    assert code == 0
    assert "llama-3-8b (named on line 1:" in " ".join(out.split())
    assert [line for line in out.splitlines() if line.startswith("line ")] == ["line 8 (again on line 13)", "line 15"]
    assert "kv_viewed_with_hq" in out  # the view, read against Llama-3-8B's 8 KV heads
    assert out.count("shape '[1, 7, 32, 128]'") == 1  # the retried traceback: once


def test_the_model_given_wins_and_no_line_is_needed(tmp_path):
    path = tmp_path / "serve.log"
    path.write_text(LOG.replace("model=meta-llama/Meta-Llama-3-8B-Instruct", "ready"))
    code, out, _ = run(log=str(path), model="mistral-7b")
    assert code == 0 and "named on line" not in out and "Mistral-7B" in out
    _, alone, _ = run(log=str(path))
    assert "none given or named" in alone


def test_stdin_a_fifo_and_a_log_without_errors(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "ropepool", "explain", "--log", "-"], input=LOG, capture_output=True, text=True
    )
    assert done.returncode == 0 and "line 15" in done.stdout
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code, _, err = run(log=str(fifo))
    assert code == 2 and "not a regular file (pass - and pipe it in)" in err
    quiet = tmp_path / "quiet.log"
    quiet.write_text("INFO all good\nDEBUG still good\n")
    code, out, _ = run(log=str(quiet))
    assert code == 1 and "0 distinct" in out


def test_the_report_reads_lines_as_they_come():
    lines = iter(LOG.splitlines(keepends=True))  # a stream, not a list: read once
    text, count = log_report(lines)
    assert count == 2 and "line 8" in text


def test_an_option_that_replaces_a_preset_s_number_says_so():
    code, _, err = run(text="k shape must be [num_tokens, num_kv_heads, head_dim], got (4, 32, 128)",
                       model="llama-3-8b", num_kv_heads=32)  # fmt: skip
    assert "--num-kv-heads 32 replaces llama-3-8b's 8" in err and "--passed-kv-heads" in err
    _, _, same = run(text="k shape must be [num_tokens, num_kv_heads, head_dim], got (4, 32, 128)",
                     model="llama-3-8b", num_kv_heads=8)  # fmt: skip
    assert "replaces" not in same


def test_a_message_ending_in_a_colon_is_read_with_its_body_lines_as_when_pasted_whole():
    mismatch = (
        "\tsize mismatch for model.layers.0.self_attn.{}_proj.weight: copying a param with shape "
        "torch.Size([1024, 4096]) from checkpoint, the shape in current model is torch.Size([4096, 4096]).\n"
    )
    message = ["RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\n", mismatch.format("k")]
    message.append(mismatch.format("v"))
    text, count = log_report(["INFO loading\n", *message, "INFO done\n"], model="llama-3-8b")
    whole = diagnosis_of("".join(message), "llama-3-8b")
    assert count == 1 and "line 2" in text and whole.case in text
    assert " ".join(whole.fix.split()) in " ".join(text.split())


VIEW = "RuntimeError: shape '[1, 7, 32, 128]' is invalid for input of size 7168"
K_SHAPE = "ValueError: k shape must be [num_tokens, num_kv_heads, head_dim], got (4, 32, 128)"
STATE_DICT = (
    "RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\n"
    "\tsize mismatch for model.layers.0.self_attn.k_proj.weight: copying a param with shape torch.Size([1024, 4096]) "
    "from checkpoint, the shape in current model is torch.Size([4096, 4096])."
)
START = "2026-12-05 10:00:01 INFO     Starting server, model=meta-llama/Meta-Llama-3-8B-Instruct"
COLON_LOGS = {
    # asyncio.TaskGroup's ExceptionGroup: an indented "+ Exception Group Traceback (most recent call last):"
    "exception group": (
        [
            START,
            "  + Exception Group Traceback (most recent call last):",
            '  |   File "/srv/app/serve.py", line 12, in main',
            "  | ExceptionGroup: unhandled errors in a TaskGroup (2 sub-exceptions)",
            "  +-+---------------- 1 ----------------",
            "    | Traceback (most recent call last):",
            f"    | {VIEW}",
            "    +---------------- 2 ----------------",
            f"    | {K_SHAPE}",
            "    +------------------------------------",
        ],
        [7, 9],
    ),
    # a whole log indented (pasted into a quote or a Markdown block)
    "indented": ([START, *STATE_DICT.splitlines(), "INFO retrying", K_SHAPE, VIEW], [2, 5, 6], "    "),
    # logging's "Exception while ...:" with the exceptions indented under it
    "logging": ([START, "2026-12-05 10:00:02 ERROR    Exception while loading:", f"  {VIEW}", f"  {K_SHAPE}"], [3, 4]),
}


@pytest.mark.parametrize("name", COLON_LOGS)
def test_a_line_ending_in_a_colon_never_hides_the_errors_after_it(name):
    lines, want, *margin = COLON_LOGS[name]
    text, count = log_report([(margin[0] if margin else "") + line + "\n" for line in lines])
    assert count == len(want) and [int(x) for x in re.findall(r"^line (\d+)$", text, re.M)] == want, text


def test_an_error_no_reader_reads_is_listed_as_not_read_and_never_dropped():
    log = [START, "Traceback (most recent call last):", '  File "x.py", line 3, in f',
           "\x1b[31mRuntimeError: the frobnicator is out of sprockets\x1b[0m", VIEW]  # fmt: skip
    text, count = log_report([line + "\n" for line in log])
    assert count == 1 and "line 4: not read: RuntimeError: the frobnicator is out of sprockets" in text
    assert "\x1b" not in text and "1 distinct, 1 not read" in text
    assert text.index("line 4: not read") < text.index("line 5\n")
    alone, count = log_report(["INFO up\n", "RuntimeError: the frobnicator is out of sprockets\n"])
    assert count == 0 and "errors    0 distinct, 1 not read" in alone and "line 2: not read" in alone


def test_a_json_line_is_read_field_by_field():
    import json

    record = {"ts": "2026-12-06T09:14:21Z", "level": "ERROR", "msg": "draft model failed", "exc": STATE_DICT}
    quiet = {"level": "INFO", "msg": "loaded model, 12 expected tokens/s"}
    text, count = log_report([json.dumps(quiet) + "\n", json.dumps(record) + "\n"], model="llama-3-8b")
    assert count == 1 and "line 2" in text and "config_without_kv_heads" in text
    assert "\\n" not in text and '"exc"' not in text  # the traceback's own lines, not the escaped record
    unread = {"level": "ERROR", "msg": "worker died", "exc": "KeyError: 'sprocket'"}
    text, _ = log_report([json.dumps(unread) + "\n"])
    assert "line 1: not read: KeyError: 'sprocket'" in text


@pytest.mark.parametrize(
    "line",
    [
        "INFO loading /models/Meta-Llama-3-8B-Instruct/config.json",
        "INFO cache at /root/.cache/huggingface/hub/models--meta-llama--Meta-Llama-3-8B/snapshots/abc/config.json",
    ],
)
def test_a_model_named_only_by_a_path_is_found(line):
    text, count = log_report([line + "\n", VIEW + "\n"])
    assert "llama-3-8b (named on line 1" in text and "kv_viewed_with_hq" in text
