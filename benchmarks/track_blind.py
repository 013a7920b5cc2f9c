"""Score a blind set of build-track parts against the track's checkers, as the notebooks run them.

A blind set is a folder with ``cases.json`` (one entry per part: ``id``, ``part`` ("notebook 12 part 1
rotate", or a leading number: "1 rotate"), ``kind`` ("wrong" or "correct"), ``file``, ``mistake``, ``good_feedback_must_say``,
``must_not_say``) and the parts' files. Each part is loaded as the learner's cell would define it and
given to ``ropepool.track.feedback(n, part)``; what the checker says (and prints) is its feedback.

Per case this prints: caught or accepted, the problem code and the message, which of the phrases a good
message must say appear in it (a phrase is read as alternatives split on " / ", each without its
parenthesis), which it must not say appear, and the verdict a reader gave that feedback, from the
verdicts file (``verdicts.json`` in ``--verdicts``, default the cases folder): ``named``, ``partly``,
``not``, ``asserts-false``, ``wrong-passed`` for a wrong part; ``passed`` or ``correct-rejected`` for a
correct one. Verdicts are kept per tree label
(``--label``) with a digest of the feedback they were given for: a case whose feedback changed since is
flagged ``CHANGED`` and counts as unread. ``--set ID=VERDICT`` records a reading for the feedback seen now.

    python benchmarks/track_blind.py tests/build_blind_parts_54a --tree /work/main --label main
    python benchmarks/track_blind.py tests/build_blind_parts_54a --label track

``--tree PATH`` imports ``ropepool`` from PATH (a checkout) instead of this one.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import io
import json
import re
import sys
from pathlib import Path

VERDICTS = ("named", "partly", "not", "asserts-false", "correct-rejected", "wrong-passed", "passed")


def phrase_found(phrase: str, text: str) -> bool:
    """True when one of ``phrase``'s alternatives (split on " / ", parentheses dropped) is in ``text``."""
    low = text.lower()
    alternatives = [re.sub(r"\(.*?\)", "", a).strip().lower() for a in phrase.split(" / ")]
    return any(a and a in low for a in alternatives)


def load_part(path: Path, name: str):
    """The object ``name`` that ``path`` defines, loaded as a module of its own."""
    spec = importlib.util.spec_from_file_location(f"blind_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def part_number(field: str, parts) -> int:
    """The part a case's ``part`` field names: the number after "part" ("notebook 12 part 1 rotate"), else
    its leading number ("1 rotate", "1"). Raises ValueError when neither is one of ``parts``."""
    found = re.search(r"\bpart\s+(\d+)", field, re.IGNORECASE) or re.match(r"\s*(\d+)\b", field)
    if found is None or int(found.group(1)) not in parts:
        raise ValueError(f"part {field!r}: no part number of {sorted(parts)} ('part N ...' or a leading 'N ...')")
    return int(found.group(1))


def run_case(track, folder: Path, case: dict) -> dict:
    """The checker's feedback on one case: caught, problem, message (what it printed included)."""
    n = part_number(case["part"], track.PARTS)
    part = load_part(folder / case["file"], track.PARTS[n][1])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            verdict = track.feedback(n, part)
        except Exception as e:  # a checker that crashes is feedback too, and a bad one
            return {"caught": True, "problem": "checker-crash", "message": f"{type(e).__name__}: {e}"}
    text = (printed.getvalue() + verdict.message).strip()
    return {"caught": not verdict.passed, "problem": verdict.problem, "message": text}


def digest(result: dict) -> str:
    return hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()[:12]


def score(cases: list[dict], results: dict, readings: dict) -> str:
    """The summary lines: mistakes named, partly, not; false assertions; correct rejected; wrong passed."""
    wrong = [c for c in cases if c["kind"] == "wrong"]
    correct = [c for c in cases if c["kind"] == "correct"]
    read = {c["id"]: readings.get(c["id"], {}) for c in cases}
    fresh = {i: r.get("verdict") for i, r in read.items() if r.get("digest") == digest(results[i])}
    count = {v: sum(1 for c in wrong if fresh.get(c["id"]) == v) for v in VERDICTS}
    unread = [c["id"] for c in cases if c["id"] not in fresh]
    rejected = sum(1 for c in correct if results[c["id"]]["caught"])
    passed = sum(1 for c in wrong if not results[c["id"]]["caught"])
    named = count["named"]
    return (
        f"wrong parts: {len(wrong)}  caught {len(wrong) - passed}  named {named} ({100 * named / len(wrong):.0f}%)"
        f"  partly {count['partly']}  not {count['not']}  asserts-false {count['asserts-false']}\n"
        f"correct parts: {len(correct)}  rejected {rejected}\nwrong parts passed: {passed}\n"
        f"unread (no verdict for this feedback): {len(unread)} {' '.join(unread)}"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cases", type=Path, help="the blind set's folder (cases.json and the parts)")
    ap.add_argument("--tree", type=Path, help="a checkout whose ropepool is scored (default: this one)")
    ap.add_argument("--label", default="track", help="whose feedback the verdicts are about (default: track)")
    ap.add_argument("--verdicts", type=Path, help="the folder of verdicts.json (default: the cases folder)")
    ap.add_argument("--set", action="append", default=[], metavar="ID=VERDICT", help="record a reading")
    ap.add_argument("--quiet", action="store_true", help="only the summary and the changed cases")
    args = ap.parse_args(argv)
    tree = (args.tree or Path(__file__).resolve().parent.parent).resolve()
    sys.path.insert(0, str(tree))
    from ropepool import track

    if not Path(track.__file__).resolve().is_relative_to(tree):
        raise SystemExit(f"ropepool came from {track.__file__}, not {tree}")
    cases = json.loads((args.cases / "cases.json").read_text(encoding="utf-8"))
    vfile = (args.verdicts or args.cases) / "verdicts.json"
    verdicts = json.loads(vfile.read_text(encoding="utf-8")) if vfile.exists() else {}
    readings = verdicts.setdefault(args.label, {})
    results = {c["id"]: run_case(track, args.cases, c) for c in cases}
    for item in args.set:
        cid, verdict = item.split("=", 1)
        if cid not in results or verdict not in VERDICTS:
            raise SystemExit(f"--set {item}: no such case or verdict (one of {', '.join(VERDICTS)})")
        readings[cid] = {"verdict": verdict, "digest": digest(results[cid])}
    if args.set:
        vfile.write_text(json.dumps(verdicts, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"ropepool from {tree} (label {args.label})\n")
    for c in cases:
        r, reading = results[c["id"]], readings.get(c["id"], {})
        changed = bool(reading) and reading.get("digest") != digest(r)
        mark = "CHANGED since read" if changed else reading.get("verdict", "UNREAD")
        if args.quiet and not changed and reading:
            continue
        said = [p for p in c["good_feedback_must_say"] if phrase_found(p, r["message"])]
        bad = [p for p in c["must_not_say"] if phrase_found(p, r["message"])]
        state = "caught" if r["caught"] else "accepted"
        n = part_number(c["part"], track.PARTS)
        print(f"== {c['id']} ({c['kind']}, part {n}: {track.PARTS[n][1]}): {state} [{r['problem']}]  verdict: {mark}")
        print(f"   mistake: {c['mistake']}")
        print("   " + r["message"].replace("\n", "\n   "))
        print(f"   must say: {len(said)}/{len(c['good_feedback_must_say'])} {said}   must not say, present: {bad}\n")
    print(score(cases, results, readings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
