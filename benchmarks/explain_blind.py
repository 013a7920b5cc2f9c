"""Score ``python -m ropepool explain`` on a blind set of messages: what it says, against answers written first.

    .venv/bin/python benchmarks/explain_blind.py tests/data/explain_blind_53a/cases.json --tree .
    .venv/bin/python benchmarks/explain_blind.py CASES --tree /path/to/another/checkout
    .venv/bin/python benchmarks/explain_blind.py CASES --judge c07 model right "names repeat_kv, G = 4"

``cases.json`` is a list of ``{id, framework, generated_by, message, args, answer, must_mention, kind}``
(``kind``: diagnose, ambiguous or decline; ``args``: the command's options; a path whose file name is in the
cases' folder is read from there), and cases with ``log`` (a file in that folder) and ``expected_errors`` (``[{line, about}]``).
Each case runs as a subprocess, ``python -m ropepool explain MESSAGE ARGS`` with ``PYTHONPATH`` the
``--tree`` (so the same cases score two checkouts), twice: with its args (``model``) and without the
options that give a model (``bare``; once where it has none). Per case and mode it prints the output's
verdict lines, whether each ``must_mention`` string appears, and the verdict a reader assigned to exactly
that output: verdicts live in ``verdicts.json`` beside the cases, keyed by the case, the mode and a hash
of the output, so a score is reproducible and an output that changed since its verdict shows as
``UNJUDGED`` (with the verdict its earlier output had). Totals per mode: right or honestly ambiguous,
partly, declined, confidently wrong, unjudged.

A case whose args give no model runs once; its one verdict counts in both modes. Verdicts: right (for a
``decline`` case: declined as foreign), ambiguous-honest (lists the readings, the right one among them, and what to print),
partly, declined, confidently-wrong.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

VERDICTS = ("right", "ambiguous-honest", "partly", "declined", "confidently-wrong")
#: The options that give the model: dropped in the ``bare`` mode, with their value.
MODEL_OPTIONS = (
    "--model",
    "--config",
    "--num-qo-heads",
    "--num-kv-heads",
    "--head-dim",
    "--hidden-size",
    "--rotary-dim",
    "--passed-kv-heads",
    "--rope-theta",
)
#: The labelled fields of explain's output worth a reader's first look.
_SHOWN = ("family", "check", "case", "config", "errors", "model")


def bare(args: list[str]) -> list[str]:
    """``args`` without the options that give the model (``--model X`` and ``--model=X``)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in MODEL_OPTIONS:
            skip = True
            continue
        if a.split("=", 1)[0] in MODEL_OPTIONS:
            continue
        out.append(a)
    return out


def local(arg: str, folder: Path) -> str:
    """``arg`` as a file of the cases' folder where a file of its name is there (``/work/blind/x/cfg.json``
    -> ``cfg.json``): the copy beside the cases, wherever they were written."""
    if "/" in arg and (folder / Path(arg).name).is_file():
        return Path(arg).name
    return arg


def run_case(case: dict, args: list[str], tree: Path, folder: Path) -> tuple[int, str]:
    """``(exit status, stdout + stderr)`` of explain on ``case`` with ``args``, run from ``folder``."""
    cmd = [sys.executable, "-m", "ropepool", "explain"]
    if "log" in case:
        cmd += ["--log", local(case["log"], folder)]
    else:
        cmd.append(case["message"])
    args = [local(a, folder) for a in args]
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    done = subprocess.run(cmd + args, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + ("\n[stderr]\n" + done.stderr if done.stderr.strip() else "")


def digest(code: int, output: str) -> str:
    return hashlib.sha256(f"{code}\n{output}".encode()).hexdigest()[:16]


def fields(output: str) -> list[str]:
    """The labelled fields shown first (a field's wrapped lines joined), and any ``line N`` of a log report."""
    shown, current = [], None
    for line in output.splitlines():
        body = line.strip()
        label = body.split(" ", 1)[0]
        if re.match(r"line \d+$", body) or body.startswith("line ") and ": not read" in body:
            current = None
            shown.append(body)
        elif label in _SHOWN and (line.startswith(label) or line.startswith("  " + label)):
            current = len(shown)
            shown.append(" ".join(body.split()))
        elif current is not None and line.startswith(" " * 10) and not re.match(r"\s*\w+\s{2,}", line[2:12]):
            shown[current] += " " + body
        else:
            current = None
    if "[stderr]" in output:
        shown += [s for s in output.split("[stderr]\n", 1)[1].splitlines() if s.strip()][:2]
    return shown


def log_lines(output: str) -> list[int]:
    return [int(m) for m in re.findall(r"^line (\d+)", output, re.M)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", type=Path, help="a cases.json")
    ap.add_argument("--tree", type=Path, default=Path("."), help="the checkout whose ropepool runs (its root)")
    ap.add_argument("--only", default=None, help="comma-separated case ids")
    ap.add_argument("--judge", nargs=4, action="append", metavar=("ID", "MODE", "VERDICT", "NOTE"), default=[])
    ap.add_argument("--full", action="store_true", help="print each whole output")
    args = ap.parse_args(argv)
    folder = args.cases.parent
    cases = json.loads(args.cases.read_text())
    store = folder / "verdicts.json"
    verdicts = json.loads(store.read_text()) if store.exists() else {}
    only = set(args.only.split(",")) if args.only else None
    judge = {(i, m): (v, note) for i, m, v, note in args.judge}
    for _, _, v, _ in args.judge:
        if v not in VERDICTS:
            raise SystemExit(f"verdict {v!r}: one of {', '.join(VERDICTS)}")
    totals = {"model": dict.fromkeys(VERDICTS + ("UNJUDGED",), 0), "bare": dict.fromkeys(VERDICTS + ("UNJUDGED",), 0)}
    missed = {"model": [], "bare": []}
    for case in cases:
        if only and case["id"] not in only:
            continue
        given = [str(a) for a in case.get("args", [])]
        modes = {"model": given, "bare": bare(given)}
        outputs = {}
        for mode, mode_args in modes.items():
            if mode == "bare" and mode_args == given:
                outputs[mode] = outputs["model"]
                shared = True
            else:
                outputs[mode] = run_case(case, mode_args, args.tree, folder)
                shared = False
            code, output = outputs[mode]
            key, sha = f"{case['id']}|{'model' if shared else mode}", digest(code, output)
            if (case["id"], mode) in judge:
                v, note = judge[(case["id"], mode)]
                verdicts.setdefault(key, {})[sha] = {"verdict": v, "note": note}
            stored = verdicts.get(key, {})
            got = stored.get(sha)
            head = f"== {case['id']} [{case.get('kind', 'log' if 'log' in case else '?')}] {case.get('framework', '')}"
            print(f"{head} mode={mode}{' (same as model)' if shared else ''} args={mode_args} exit={code}")
            if mode == "model" or not shared:
                for line in fields(output):
                    print("   | " + line[:400])
                for s in case.get("must_mention", []):
                    print(f"   must_mention {s!r}: {'yes' if s.lower() in output.lower() else 'NO'}")
                if "expected_errors" in case:
                    found = log_lines(output)
                    want = [e["line"] for e in case["expected_errors"]]
                    order = [n for n in found if n in want]
                    print(f"   log lines found {found}; expected {want}; all found in order: {order == want}")
                if args.full:
                    print("\n".join("   > " + x for x in output.splitlines()))
            if got:
                verdict = got["verdict"]
                print(f"   verdict {verdict}: {got['note']}")
            else:
                verdict = "UNJUDGED"
                earlier = "; ".join(f"{v['verdict']} ({v['note'][:80]})" for v in stored.values())
                print(f"   verdict UNJUDGED (output {sha})" + (f"; changed since: {earlier}" if earlier else ""))
            totals[mode][verdict] += 1
            if verdict not in ("right", "ambiguous-honest"):
                missed[mode].append(f"{case['id']}:{verdict}")
    if judge:
        store.write_text(json.dumps(verdicts, indent=1, sort_keys=True) + "\n")
    print()
    for mode, t in totals.items():
        n = sum(t.values())
        good = t["right"] + t["ambiguous-honest"]
        print(
            f"{mode:5} ({'with the case args' if mode == 'model' else 'model options dropped'}): "
            f"right or honestly ambiguous {good}/{n}, confidently wrong {t['confidently-wrong']}, "
            f"partly {t['partly']}, declined {t['declined']}, unjudged {t['UNJUDGED']}"
        )
        print(f"      not right: {' '.join(missed[mode]) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
