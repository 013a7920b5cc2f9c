"""The engine across local ranks of MLX's distributed runtime (``mlx.launch --backend ring``): every rank's
pool holds its Hkv/N heads, every rank chooses the tokens one process chooses, and a split that would break
heads is refused on every rank before any collective."""

import io
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import mlx.core as mx
import numpy as np
import pytest

from ropepool.cli import ranks
from ropepool.engine import EngineArgumentError, UnsupportedModelError, generate
from ropepool.engine.parallel import check, check_sharded
from ropepool.engine.runner import Runner
from ropepool.loaders.tiny import build, tiny


_LAUNCHED: dict = {}


def launched(n: int, model: str, new: int = 3) -> tuple[list[dict], "Clocked"]:
    """``ranks.launch``'s results and the stream its lines reached, once per ``(n, model, new)`` in this module
    (a launch takes both cores for seconds), launched as a notebook's kernel launches: PYTHONUNBUFFERED unset,
    so the parent's pipes are block-buffered."""
    key = (n, model, new)
    if key not in _LAUNCHED:
        stream, saved = Clocked(), os.environ.pop("PYTHONUNBUFFERED", None)
        popen = subprocess.Popen

        def noted(*args, **kwargs):  # the launcher's PID, for its CPU time (not the stranger's, in a thread)
            proc = popen(*args, **kwargs)
            if threading.current_thread() is threading.main_thread():
                stream.launcher = stream.launcher or proc.pid
            return proc

        subprocess.Popen = noted
        try:
            _LAUNCHED[key] = ranks.launch(n, model, new, stream=stream), stream
        finally:
            subprocess.Popen = popen
            if saved is not None:
                os.environ["PYTHONUNBUFFERED"] = saved
    return _LAUNCHED[key]


@pytest.mark.parametrize("model,n", [("tiny-llama", 3), ("tiny-qwen3", 3), ("tiny-llama-4x2", 2)])
def test_every_rank_chooses_the_tokens_of_one_process(model, n):
    (one,) = launched(1, model)[0]
    split = launched(n, model)[0]
    assert [r["rank"] for r in split] == list(range(n))
    hkv = one["pool_shape"][1]
    for r in split:
        assert r["tokens"] == one["tokens"], f"rank {r['rank']}"
        assert r["pool_shape"] == [one["pool_shape"][0], hkv // n, one["pool_shape"][2]]
        assert r["pool_bytes"] * n == one["pool_bytes"] and r["bytes_summed_per_step"] > 0


def cpu_seconds(pid: int | None) -> float | None:
    """The CPU seconds process ``pid`` has used, all its threads (Linux's /proc), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


class Clocked(io.StringIO):
    """A stream that notes the wall-clock time each line reached it, and the CPU seconds the launcher
    (``launcher``, a PID) had used by then."""

    def __init__(self):
        super().__init__()
        self.arrived: list[tuple[float, str]] = []
        self.launcher: int | None = None
        self.launcher_cpu: list[float | None] = []

    def write(self, text: str) -> int:
        self.arrived.append((time.time(), text))
        self.launcher_cpu.append(cpu_seconds(self.launcher))
        return super().write(text)


def test_each_ranks_lines_stream_as_they_come():
    """Each rank says each step as it happens, and its lines reach the caller while the ranks still run: the
    first arrives before the last rank has finished serving (buffered output would arrive only after)."""
    results, stream = launched(3, "tiny-llama", 3)
    first = stream.arrived[0][0]
    assert first < max(r["finished_at"] for r in results), "no line reached the caller before the ranks ended"
    for r in results:
        steps = [t for _, t in stream.arrived if t.startswith(f"rank {r['rank']} of 3: step ")]
        assert len(steps) == r["steps"] == 3, stream.getvalue()
        assert steps[-1].endswith(": 9 of 9 new tokens\n")


def test_the_launcher_waits_for_the_ranks_output_without_keeping_a_core_busy():
    """``mlx.launch`` between the ranks' first line and their last: it forwards lines, so it uses a few
    hundredths of a core, not the whole core its output threads take while a rank's stdin is writable."""
    _, stream = launched(3, "tiny-llama", 3)
    first, last = stream.launcher_cpu[0], stream.launcher_cpu[-1]
    if first is None or last is None:
        pytest.skip("no /proc here to read the launcher's CPU time")
    seconds = stream.arrived[-1][0] - stream.arrived[0][0]
    assert last - first < 0.15 * seconds, f"the launcher used {last - first:.2f} s of CPU in {seconds:.2f} s"


def test_a_split_that_breaks_heads_is_refused_on_every_rank():
    split = launched(3, "tiny-llama-4x2")[0]
    assert len(split) == 3
    for r in split:
        assert r["refused"].startswith("EngineArgumentError: group: 3 ranks cannot split 4 query heads and 2 KV heads")
        assert "use 1 or 2 ranks" in r["refused"]


def test_the_checks_without_launching():
    check(build("llama-gqa"), 2)  # 4 and 2 heads, MLP 128: fits
    with pytest.raises(EngineArgumentError, match="use 1 or 2 ranks"):
        check(build("llama-gqa"), 4)
    with pytest.raises(EngineArgumentError, match="the MLP's 128 columns"):
        check(tiny("llama", num_attention_heads=6, num_key_value_heads=3, head_dim=16), 3)
    with pytest.raises(UnsupportedModelError, match="gemma3_text model: the engine serves tensor-parallel ranks"):
        check(build("gemma3"), 2)
    model = build("llama-gqa")
    with pytest.raises(EngineArgumentError, match="gives 2 KV heads, not 1: split the model first"):
        check_sharded(model, SimpleNamespace(size=lambda: 2), kv_heads=2)


def test_one_rank_group_serves_as_one_process():
    """The runner with the group of a single process (what ``mx.distributed.init()`` gives alone)."""
    model = build("qwen3")
    group = mx.distributed.init()
    assert group.size() == 1
    want = generate(model, [[1, 2, 3]], 4, pool_rows=16)
    got = generate(model, [[1, 2, 3]], 4, pool_rows=16, group=group)
    assert got[0].tokens == want[0].tokens
    np.testing.assert_array_equal(np.array(got[0].logits), np.array(want[0].logits))
    assert Runner(model, 16, group=group).k_pools[0].shape[1] == model.args.num_key_value_heads


def test_the_command_prints_the_pools_and_the_verdict(capsys):
    code = ranks.main(SimpleNamespace(ranks=1, model="tiny-llama", new=3))
    out = capsys.readouterr().out
    assert code == 0 and "pool [P, Hkv, D] = [" in out and "every rank chose the same tokens: True" in out
    assert sys.executable


def test_a_ring_whose_port_is_taken_says_so_in_one_line():
    first = ranks.free_ports(2)
    with socket.socket() as squatter:  # another program on rank 1's port, loopback only
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", first + 1))
        squatter.listen()
        stream = io.StringIO()
        results = ranks.launch(2, "tiny-llama", 2, stream=stream, port=first)
    said = ranks.summary(results)
    assert "Traceback" not in stream.getvalue() and "\n" not in said
    assert f"rank 1 could not listen on port {first + 1}: it is taken" in said
    assert f"ports {first}, {first + 1}" in said and "another program on these ports?" in said


def test_a_refused_ring_connection_is_named_by_the_command(monkeypatch, capsys):
    mlx_said = "[ring] Couldn't connect (error: 111)"  # what MLX raises on a rank when a stranger took its place
    monkeypatch.setattr(
        ranks, "launch", lambda *a: [dict(rank=0, ring=ranks.ring_failure(mlx_said, 0, [41000, 41001]))]
    )
    code = ranks.main(SimpleNamespace(ranks=2, model="tiny-llama", new=3))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert "connection refused" in err[0] and "ports 41000, 41001" in err[0] and "no authentication" in err[0]


def _stranger_launch() -> tuple[int, list[dict], str]:
    """A 2-rank launch while another local program connects to its ports as soon as they listen: the first
    port, the ranks' JSON lines and all they printed."""
    first, stop, held = ranks.free_ports(2), threading.Event(), {}

    def poke():  # another local user connects to each of the ranks' ports as soon as it listens
        while not stop.is_set() and len(held) < 2:
            for port in {first, first + 1} - held.keys():
                s = socket.socket()
                try:
                    s.connect(("127.0.0.1", port))
                    held[port] = s
                except OSError:
                    s.close()
            stop.wait(0.001)

    stranger = threading.Thread(target=poke, daemon=True)
    stranger.start()
    stream = io.StringIO()
    try:
        return first, ranks.launch(2, "tiny-llama", 2, stream=stream, port=first), stream.getvalue()
    finally:
        stop.set()
        stranger.join()
        for s in held.values():
            s.close()


STRANGER = "test_a_stranger_connecting_to_the_ring_is_named_not_a_bare_mlx_error"


@pytest.fixture(scope="module", autouse=True)
def stranger_in_the_background(request):
    """The stranger's launch, started with the module's first test: its ring fails only after MLX's retries
    (1 + 2 + 4 + 8 + 16 s), during which its ranks and its launcher sleep, so the module's other launches
    run meanwhile. None where the stranger's test is not run."""
    if not any(item.name == STRANGER for item in request.session.items):
        yield None
        return
    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(_stranger_launch)


def test_a_stranger_connecting_to_the_ring_is_named_not_a_bare_mlx_error(stranger_in_the_background):
    first, results, printed = stranger_in_the_background.result()
    said = ranks.summary(results)
    assert "Traceback" not in printed and "Couldn't connect" not in printed
    assert f"the ring on 127.0.0.1 ports {first}, {first + 1} could not form" in said and "\n" not in said
