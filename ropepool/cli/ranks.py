"""``python -m ropepool ranks -n 3 --model smollm2``: the engine across N local ranks of MLX's distributed runtime.

The command starts ``mlx.launch -n N --backend ring`` (this venv's) on a launcher script it writes into a
fresh private folder (so nothing of the working folder is on the ranks' ``sys.path``), streams every
rank's output line by line as it comes (the ranks' Python unbuffered), and prints one summary. Each rank
(:func:`rank`) builds the same model, splits it over the group (:func:`ropepool.engine.parallel.shard`:
Hq/N and Hkv/N heads a rank), serves the same prompts with the engine given the group, saying each step
in a line ("rank 1 of 3: step 2: ..."), and prints one JSON line: its pool's shape and bytes, the tokens,
tok/s, the bytes its collectives summed per step (counted by wrapping ``mx.distributed.all_sum``) and
when it finished. With ``-n 1`` the same code serves the whole model in one process.

Models: ``smollm2`` (9 query, 3 KV heads: 1 or 3 ranks; fetched once), ``tiny-llama`` and ``tiny-qwen3``
(random weights, 6 query and 3 KV heads, head_dim 16, MLP 96 wide: 1 or 3 ranks), ``tiny-llama-4x2`` (4 and 2 heads:
1 or 2 ranks; 3 ranks are refused, on every rank).

MLX's ring has no authentication: any local user can reach its loopback ports (the launcher's command line
shows them). A ring that cannot form (a port taken, a connection refused) is said in one line naming the
rank and the ports (:func:`ring_failure`), not with MLX's bare ``[ring] Couldn't connect (error: 111)``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

#: name: (mlx-lm module, config fields beyond ropepool.loaders.tiny's TINY)
TINY = {
    "tiny-llama": ("llama", dict(num_attention_heads=6, num_key_value_heads=3, head_dim=16, intermediate_size=96)),
    "tiny-qwen3": (
        "qwen3",
        dict(
            num_attention_heads=6,
            num_key_value_heads=3,
            head_dim=16,
            intermediate_size=96,
            max_position_embeddings=4096,
            rope_theta=1e6,
            tie_word_embeddings=True,
        ),
    ),
    "tiny-llama-4x2": ("llama", dict(num_attention_heads=4, num_key_value_heads=2)),
}
MODELS = ("smollm2", *TINY)
PROMPTS = [[1, 5, 9, 3, 7, 2, 8], [2, 4, 6], [1, 5, 9, 3, 11]]
QUESTIONS = ("What is the capital of France?", "What is 2 + 3?", "Name a color.")
LAUNCHER = "from ropepool.cli.ranks import rank\nrank()\n"


def add_arguments(p) -> None:
    p.add_argument("-n", "--ranks", type=int, default=2, help="local ranks (processes) to start (default 2)")
    p.add_argument("--model", choices=MODELS, default="tiny-llama", help="what every rank serves")
    p.add_argument("--new", type=int, default=8, help="new tokens per prompt")


def _model(name: str):
    """The model and its prompts (token ids)."""
    if name == "smollm2":
        from ..loaders.smollm2 import load_smollm2

        model, tokenizer, _ = load_smollm2(pairs="gptj")
        return model, [tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in QUESTIONS]
    from ..loaders.tiny import tiny

    module, fields = TINY[name]
    return tiny(module, **fields), PROMPTS


def rank() -> None:
    """One rank: split the model over the group, serve, print one JSON line (``ROPEPOOL_RANKS_*`` say what)."""
    import mlx.core as mx

    from ..engine import Engine, EngineArgumentError, UnsupportedModelError
    from ..engine.parallel import shard

    try:
        group = mx.distributed.init()
    except RuntimeError as err:  # the ring could not form: one line saying why, not MLX's bare error
        me = int(os.environ.get("MLX_RANK", "0"))
        print(json.dumps(dict(rank=me, ring=ring_failure(str(err), me, ring_ports()))), flush=True)
        raise SystemExit(1) from None
    name, new = os.environ["ROPEPOOL_RANKS_MODEL"], int(os.environ["ROPEPOOL_RANKS_NEW"])

    def say(what: str) -> None:  # a line as it happens: the launcher streams it
        print(f"rank {group.rank()} of {group.size()}: {what}", flush=True)

    say("in the ring" if group.size() > 1 else "alone (no ring)")
    model, prompts = _model(name)
    out = dict(rank=group.rank(), ranks=group.size(), model=name)
    try:
        if group.size() > 1:
            shard(model, group)
        mx.eval(model.parameters())
        say(f"{name} built{', its share of the heads' if group.size() > 1 else ''}; serving {len(prompts)} prompts")
        summed = [0]
        all_sum = mx.distributed.all_sum

        def counted(x, *args, **kwargs):  # the bytes this rank's collectives sum
            summed[0] += x.nbytes
            return all_sum(x, *args, **kwargs)

        mx.distributed.all_sum = counted
        rows = sum(len(p) + new for p in prompts)
        engine = Engine(model, pool_rows=rows, group=group if group.size() > 1 else None)
        reqs = [engine.add_request(p, new) for p in prompts]
        t0 = time.perf_counter()
        while not engine.done:
            engine.step()
            say(f"step {engine.steps}: {sum(len(r.tokens) for r in reqs)} of {len(reqs) * new} new tokens")
        seconds = time.perf_counter() - t0
        k = engine.runner.k_pools[0]
        out.update(
            pool_shape=list(k.shape),
            pool_bytes=sum(p.nbytes for layer in engine.runner.pools for p in layer),
            tokens=[r.tokens for r in reqs],
            tok_s=len(prompts) * new / seconds,
            steps=engine.steps,
            bytes_summed_per_step=summed[0] / engine.steps,
        )
    except (EngineArgumentError, UnsupportedModelError) as err:
        out.update(refused=f"{type(err).__name__}: {err}")
    out.update(finished_at=time.time())  # the wall clock: a streamed line came before it, a buffered one after
    print(json.dumps(out), flush=True)


def ring_ports() -> list[int]:
    """Each rank's port, by rank, from the host file ``mlx.launch`` hands every rank (``$MLX_HOSTFILE``:
    ``[["127.0.0.1:PORT"], ...]``); [] when there is none or it does not read so."""
    try:
        with open(os.environ["MLX_HOSTFILE"], encoding="utf-8") as f:
            return [int(node[0].rsplit(":", 1)[1]) for node in json.load(f)]
    except (KeyError, OSError, ValueError, TypeError, IndexError):
        return []


def ring_failure(error: str, rank: int, ports: list[int]) -> str:
    """One line for an MLX ring that could not form: what failed on ``rank`` (``error`` is MLX's message,
    e.g. ``[ring] Couldn't bind socket (error: 98)``), on which of ``ports``, and what to suspect."""
    own = f"port {ports[rank]}" if 0 <= rank < len(ports) else "its port"
    where = f"127.0.0.1 ports {', '.join(map(str, ports))}" if ports else "its loopback ports"
    if "error: 98" in error or "bind" in error.lower():
        what = f"rank {rank} could not listen on {own}: it is taken (address in use)"
    elif "error: 111" in error or "connect" in error.lower():
        what = f"rank {rank} was refused a connection to another rank (connection refused)"
    else:
        what = f"rank {rank}: {error.strip().splitlines()[0] if error.strip() else 'no reason given'}"
    return (
        f"the ring on {where} could not form: {what}; another program on these ports? MLX's ring has no "
        "authentication: any local user can reach them; run again (new ports are picked) on a single-user machine"
    )


def free_ports(n: int) -> int:
    """The first of ``n`` consecutive loopback ports free now: two launches at once (two notebooks, two
    test workers) must not meet on mlx.launch's default ports and join each other's rings."""
    import socket

    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + n > 65535:
            continue
        sockets = []
        try:
            for port in range(first, first + n):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError(f"ranks: no {n} consecutive free ports on 127.0.0.1")


#: Bytes written to ``mlx.launch``'s stdin: far more than the pipe to a rank holds (64 KiB on Linux and macOS).
STDIN_FILL = 1 << 20


def _fill_stdin(fd: int, launcher: subprocess.Popen) -> None:
    """Write :data:`STDIN_FILL` newlines into ``mlx.launch``'s stdin (``fd``, a pipe) and close it once the
    launcher has ended.

    ``mlx.launch`` copies its stdin to every rank's, and each rank's output thread waits in ``select`` for
    output *or for the rank's stdin to be writable*. An empty pipe is always writable, so each thread turns
    without pause and the launcher keeps a core busy for the whole run (the ring's 31 s of retries included).
    The ranks never read stdin: once the copies fill their pipes, the threads wait for output. The pipe stays
    open until the launcher ends: at its end of file the launcher's own loop would turn without pause."""
    data = memoryview(b"\n" * STDIN_FILL)
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:  # the launcher ended before taking it all
        pass
    launcher.wait()
    os.close(fd)


def launch(ranks: int, model: str, new: int, stream=None, port: int | None = None) -> list[dict]:
    """Run :func:`rank` on ``ranks`` local ranks (``mlx.launch --backend ring``; one plain process for 1),
    echo their output to ``stream`` (default: ``sys.stdout`` now, a notebook's cell included) line by line as
    it comes, and return each rank's JSON line, by rank. ``port``: the first of the ranks' consecutive
    loopback ports (default: the first of ``ranks`` free now, :func:`free_ports`)."""
    stream = sys.stdout if stream is None else stream
    folder = tempfile.mkdtemp(prefix="ropepool-ranks-")  # 0700, ours: the launcher's folder is sys.path[0]
    try:
        script = Path(folder) / "rank.py"
        script.write_text(LAUNCHER)
        env = {**os.environ, "ROPEPOOL_RANKS_MODEL": model, "ROPEPOOL_RANKS_NEW": str(new), "PYTHONUNBUFFERED": "1"}
        if ranks == 1:
            cmd = [sys.executable, "-u", str(script)]
        else:
            launcher = Path(sys.executable).parent / "mlx.launch"
            cmd = [
                str(launcher),
                "-n",
                str(ranks),
                "--backend",
                "ring",
                "--starting-port",
                str(port or free_ports(ranks)),
            ]
            cmd += ["--python", sys.executable, str(script)]
        stdin, feed = os.pipe() if ranks > 1 else (subprocess.DEVNULL, None)
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                env=env,
                cwd=folder,
            )
        except BaseException:
            if feed is not None:
                os.close(feed)
            raise
        finally:
            if feed is not None:
                os.close(stdin)
        if feed is not None:
            threading.Thread(target=_fill_stdin, args=(feed, proc), daemon=True).start()
        lines = []
        for line in iter(proc.stdout.readline, ""):  # each line as soon as it is whole
            stream.write(line)
            stream.flush()
            if line.startswith("{"):
                lines.append(json.loads(line))
        proc.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return sorted(lines, key=lambda r: r["rank"])


def summary(results: list[dict]) -> str:
    """A few lines: each rank's pool, and whether every rank chose the same tokens."""
    if not results:
        return "no rank answered"
    ring = [r["ring"] for r in results if "ring" in r]
    if ring:
        return min(ring, key=lambda line: "taken" not in line)  # one line: a port taken says the most
    if any("refused" in r for r in results):
        return "\n".join(f"rank {r['rank']}: {r['refused']}" for r in results)
    lines = [
        f"rank {r['rank']} of {r['ranks']}: pool [P, Hkv, D] = {r['pool_shape']} per layer, "
        f"{r['pool_bytes'] / 2**20:.2f} MiB in all; {r['tok_s']:.1f} tok/s; "
        f"{r['bytes_summed_per_step'] / 1024:.1f} KiB summed over the ranks per step"
        for r in results
    ]
    same = all(r["tokens"] == results[0]["tokens"] for r in results)
    lines.append(f"every rank chose the same tokens: {same}")
    return "\n".join(lines)


def main(args) -> int:
    if args.ranks < 1:
        print("ranks: -n must be at least 1", file=sys.stderr)
        return 2
    results = launch(args.ranks, args.model, args.new)
    if any("ring" in r for r in results):
        print(f"ranks: {summary(results)}", file=sys.stderr)
        return 1
    print(summary(results))
    return 0 if results and not any("refused" in r for r in results) else 1
