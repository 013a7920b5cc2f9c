"""The op's benchmark with its targets, and the README's table: ``python -m ropepool bench`` plus goals.

    .venv/bin/python benchmarks/op_bench.py --quick                  # seconds; prints met or MISS
    .venv/bin/python benchmarks/op_bench.py --readme docs/measured.md  # the full run, pasted into that page

Runs :func:`ropepool.cli.bench.run` (every method interleaved in one process; see that module),
prints its tables, then every target met or MISS; writes ``OUT/bench.md`` (the table and the
targets) beside bench.json and bench.png. With ``--readme FILE`` it also replaces the text between
FILE's two bench markers with bench.md, the way an editor saves (:func:`paste_into`).
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import tempfile
from pathlib import Path

from ropepool.cli.bench import _lookup, bad_arguments, report, run_default

#: The targets (met or MISS in the output): the kernel's against MLX and the copy floor, and the decode op's.
TARGET_SPEEDUP = 2.0  # ropepool at least this much faster than mx.fast.rope + scatter
TARGET_POOL_FLAT = 1.2  # time at the largest pool within this factor of the smallest
TARGET_FLOOR = 3.0  # ropepool within this factor of the copy floor (copy (mlx))
#: Decode in place (T = 1): mx inputs this much faster than mx.fast.rope + scatter, NumPy
#: inputs at least as fast as the NumPy implementation.
TARGET_DECODE_MX = 1.5
TARGET_DECODE_NUMPY = 1.0


def target_checks(results: dict) -> list[tuple[str, bool]]:
    """``(line, met)`` for the speed-up, copy-floor and pool-size targets, in the table's order."""
    checks = []
    for dt, T in sorted({(r.dtype, r.tokens) for r in results["shapes"]}):
        got = _lookup(results["shapes"], dtype=dt, tokens=T)
        for m in ("ropepool", "ropepool-inplace"):
            if m in got and "mx.fast.rope" in got:
                speedup = got["mx.fast.rope"].median_ms / got[m].median_ms
                checks.append(
                    (f"{m} {dt} T={T}: {speedup:.2f}x faster than mx.fast.rope + scatter", speedup >= TARGET_SPEEDUP)
                )
            if m in got and "copy (mlx)" in got:
                floor = got[m].median_ms / got["copy (mlx)"].median_ms
                checks.append(
                    (
                        f"{m} {dt} T={T}: {floor:.2f}x the MLX copy floor"
                        + (
                            f" ({got[m].median_ms / got['memcpy (numpy)'].median_ms:.1f}x memcpy)"
                            if "memcpy (numpy)" in got
                            else ""
                        ),
                        floor <= TARGET_FLOOR,
                    )
                )
    if results["pools"]:
        P0 = min(r.pool_rows for r in results["pools"])
        P1 = max(r.pool_rows for r in results["pools"])
        for m in ("ropepool", "ropepool-unchecked", "ropepool-inplace"):
            a, b = _lookup(results["pools"], pool_rows=P0).get(m), _lookup(results["pools"], pool_rows=P1).get(m)
            if a and b:
                checks.append(
                    (
                        f"{m}: P={P1:,} takes {b.median_ms / a.median_ms:.2f}x P={P0:,}",
                        b.median_ms / a.median_ms <= TARGET_POOL_FLAT,
                    )
                )
    return checks


TARGETS_LINE = (
    f"Targets (>= {TARGET_SPEEDUP}x mx.fast.rope, <= {TARGET_FLOOR}x copy floor, "
    f"<= {TARGET_POOL_FLAT}x across pool sizes)"
)
DECODE_LINE = (
    f"Decode in place, T = 1 (>= {TARGET_DECODE_MX}x mx.fast.rope + scatter with mx inputs, "
    f">= {TARGET_DECODE_NUMPY}x the NumPy implementation with NumPy inputs)"
)
ENGINE_LINE = (
    f"The engine's op targets (decode in place T = 1 >= {TARGET_DECODE_MX}x, "
    f"prefill T = 64 and 2048 >= {TARGET_SPEEDUP}x mx.fast.rope + scatter, every dtype)"
)


def engine_checks(rows) -> list[tuple[str, bool]]:
    """``(line, met)`` per dtype: ropepool-inplace at T = 1 against :data:`TARGET_DECODE_MX`, the
    op as called by default (``ropepool``) at T = 64 and 2048 against :data:`TARGET_SPEEDUP`."""
    out = []
    for dt, T in sorted({(r.dtype, r.tokens) for r in rows if r.tokens in (1, 64, 2048)}):
        got = _lookup(rows, dtype=dt, tokens=T)
        m, goal = ("ropepool-inplace", TARGET_DECODE_MX) if T == 1 else ("ropepool", TARGET_SPEEDUP)
        if m in got and "mx.fast.rope" in got:
            x = got["mx.fast.rope"].median_ms / got[m].median_ms
            out.append((f"{m} {dt} T={T}: {x:.2f}x faster than mx.fast.rope + scatter (>= {goal}x)", x >= goal))
    return out


def decode_checks(rows) -> list[tuple[str, bool]]:
    """``(line, hit)`` per dtype at T = 1: ropepool-inplace against mx.fast.rope + scatter (mx
    inputs), ropepool-inplace-np against the NumPy implementation (NumPy inputs)."""
    out = []
    for dt in sorted({r.dtype for r in rows if r.tokens == 1}):
        got = _lookup(rows, dtype=dt, tokens=1)
        if "ropepool-inplace" in got and "mx.fast.rope" in got:
            x = got["mx.fast.rope"].median_ms / got["ropepool-inplace"].median_ms
            out.append(
                (
                    f"{dt:<9} mx inputs:    {x:.2f}x faster than mx.fast.rope + scatter "
                    f"({got['ropepool-inplace'].median_ms * 1e3:.0f} us against {got['mx.fast.rope'].median_ms * 1e3:.0f} us)",
                    x >= TARGET_DECODE_MX,
                )
            )
        if "ropepool-inplace-np" in got and "numpy" in got:
            x = got["numpy"].median_ms / got["ropepool-inplace-np"].median_ms
            out.append(
                (
                    f"{dt:<9} NumPy inputs: {x:.2f}x the NumPy implementation's speed "
                    f"({got['ropepool-inplace-np'].median_ms * 1e3:.0f} us against {got['numpy'].median_ms * 1e3:.0f} us)",
                    x >= TARGET_DECODE_NUMPY,
                )
            )
    return out


def markdown(results: dict) -> str:
    """The README's table: per dtype and T, ropepool against mx.fast.rope + scatter and the copy
    floor, then every target with "met" or "MISS". ``results`` as :func:`ropepool.cli.bench.run` returns it."""
    lines = [
        f"`{results['command']}` on {results['date']}: {results['machine']}; backend "
        f"`{results['backend']}`. Llama-3-8B shapes (Hq = 32, Hkv = 8, D = 128), P = 4,096, medians "
        f"of one run; speed-up = `mx.fast.rope` on q and k + two scatters, divided by ropepool's time.",
        "",
        "| dtype | T | ropepool | speed-up | in place | speed-up | copy floor | ropepool / floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def ms(r):
        return f"{r.median_ms:.3f} ms" if r else "n/a"

    def x(a, b):
        return f"{a.median_ms / b.median_ms:.2f}x" if a and b else "n/a"

    for dt, T in sorted({(r.dtype, r.tokens) for r in results["shapes"]}):
        got = _lookup(results["shapes"], dtype=dt, tokens=T)
        rp, ip, fr, cp = (got.get(m) for m in ("ropepool", "ropepool-inplace", "mx.fast.rope", "copy (mlx)"))
        lines.append(f"| {dt} | {T} | {ms(rp)} | {x(fr, rp)} | {ms(ip)} | {x(fr, ip)} | {ms(cp)} | {x(rp, cp)} |")
    checks = [(DECODE_LINE, None), *decode_checks(results["shapes"]), (TARGETS_LINE, None), *target_checks(results)]
    missed = sum(ok is False for _, ok in checks)
    lines += ["", f"{missed} of {sum(ok is not None for _, ok in checks)} targets missed in this run:", ""]
    for text, ok in checks:
        lines.append(f"- **{text}**" if ok is None else f"  - {'met' if ok else '**MISS**'}: {text}")
    return "\n".join(lines) + "\n"


README_START, README_END = "<!-- bench: start -->", "<!-- bench: end -->"
MARKERS_NEEDED = f"needs one {README_START} line and, after it, one {README_END} line"
README_LIMIT = 4 << 20  # bytes: more is not a README


def _has_markers(text: str) -> bool:
    return text.count(README_START) == 1 == text.count(README_END) and text.find(README_START) < text.find(README_END)


def read_readme(readme: str | Path) -> tuple[Path, str, os.stat_result]:
    """The file ``readme`` names (a symlink's target), its text and its stat, checked for pasting.

    Opened without blocking (a FIFO cannot hang it) and read only if it is a regular file, of at
    most :data:`README_LIMIT` bytes (``/dev/zero`` cannot fill memory).

    Raises
    ------
    ValueError
        Not a regular file, too big, not UTF-8, or without one ordered pair of bench markers.
    OSError
        It cannot be opened.
    """
    target = Path(os.path.realpath(readme))  # a symlinked README: its file is written, the link stays
    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{readme}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(README_LIMIT + 1)
    finally:
        os.close(fd)
    if len(data) > README_LIMIT:
        raise ValueError(f"{readme}: more than {README_LIMIT >> 20} MiB, not a README")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{readme}: not UTF-8 ({err.reason} at byte {err.start})") from None
    if not _has_markers(text):
        raise ValueError(f"{readme}: {MARKERS_NEEDED}")
    return target, text, st


def paste_into(readme: str | Path, table: str) -> None:
    """Replace the text between :data:`README_START` and :data:`README_END` in ``readme`` with ``table``.

    Written as an editor saves: the new text goes to a fresh temporary file beside it (created
    exclusively, never through a link), which then replaces the file in one rename. The file's line
    endings (LF or CRLF), mode and owner stay; a symlink stays a link and its target gets the text.

    Raises ValueError or OSError (see :func:`read_readme`), with the file untouched.
    """
    target, text, st = read_readme(readme)
    newline = "\r\n" if "\r\n" in text else "\n"
    a, b = text.find(README_START), text.find(README_END)
    new = text[: a + len(README_START)] + newline + table.replace("\r\n", "\n").replace("\n", newline) + text[b:]
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".bench-tmp")  # O_EXCL|O_NOFOLLOW
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(new.encode("utf-8"))
            os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode))
            try:
                os.fchown(f.fileno(), st.st_uid, st.st_gid)
            except OSError:  # another owner's file in a folder we may write: it becomes ours, as in an editor
                pass
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)  # whole or not at all
    except BaseException:
        os.unlink(tmp)
        raise


def readme_problem(readme: str | Path) -> str | None:
    """Why ``--readme`` cannot work, checked before any timing; None if it can."""
    try:
        target, _, _ = read_readme(readme)
    except OSError as err:
        return f"--readme {readme}: cannot read it ({err.strerror or err})"
    except ValueError as err:
        return f"--readme {err}"
    if not os.access(target.parent, os.W_OK | os.X_OK):
        return f"--readme {readme}: cannot write in its folder {target.parent}"
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    ap.add_argument("--repeats", type=int, default=None, help="timed calls per method (default 10; --quick 5)")
    ap.add_argument("--out", default="artifacts", help="folder for bench.md, bench.png and bench.json")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--readme", default=None, metavar="FILE", help="also paste bench.md between FILE's bench markers")
    args = ap.parse_args(argv)
    problem = bad_arguments(args.repeats, args.out) or (readme_problem(args.readme) if args.readme else None)
    if problem:
        print(f"op_bench: {problem}", file=sys.stderr)
        return 2
    command = (
        "python benchmarks/op_bench.py"
        + (" --quick" if args.quick else "")
        + (f" --repeats {args.repeats}" if args.repeats else "")
    )
    results = run_default(args.quick, args.repeats, args.out, not args.no_plot, command)
    print(report(results))
    for title, checks in (
        (DECODE_LINE, decode_checks(results["shapes"])),
        (TARGETS_LINE, target_checks(results)),
        (ENGINE_LINE, engine_checks(results["shapes"])),
    ):
        print(f"\n{title}")
        print("\n".join(f"  {'met ' if ok else 'MISS'}  {text}" for text, ok in checks))
    table = Path(args.out) / "bench.md"
    table.write_text(markdown(results))
    if args.readme is not None:
        try:
            paste_into(args.readme, table.read_text())
        except (OSError, ValueError) as err:  # the file changed during the run
            print(f"op_bench: --readme {args.readme}: not pasted ({err}); the table is in {table}", file=sys.stderr)
            return 2
        print(f"table pasted into {args.readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
