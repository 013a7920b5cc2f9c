"""OpenBLAS's thread count during engine steps, from the cores other programs leave free: every core on a
quiet machine, fewer when a browser, a video call or the lab's other kernel takes one.

OpenBLAS's threads spin while they wait for work. With every core busy elsewhere, a thread of ours that
spins waits for a core that is not ours, and a decode step (small matrix-vector products) falls 3-20x,
below what one thread alone gets. So each engine step runs inside :func:`for_step`: at most every
``PERIOD`` seconds it reads how much CPU the other programs used since the last look (the machine's
busy time in ``/proc/stat`` over the cores this process may run on, less this process's own CPU time),
sets OpenBLAS to the cores left, rounded down once a core is more than a quarter taken
(``threads = clamp(floor(free + 0.25), 1, cores)``), and sets the count it found back when the step ends
(or raises): other code in the process (mlx-lm's own forward, NumPy) keeps its count. The count only
changes between steps, never under a running matmul. ``benchmarks/busy.py`` measures it against one and
two threads pinned.

What it trades: a matmul split over another number of threads may round float32 differently, so logits
may differ in their last bits with the machine's load (never a token of the exactness matrix). To pin
the count: ``ROPEPOOL_BLAS_THREADS=N`` (every engine), ``Engine(..., blas_threads=N)`` (one engine), or
``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS``, which always win over the environment's other settings
(nothing is changed then); ``ROPEPOOL_BLAS_THREADS=off`` keeps OpenBLAS's own count. Without OpenBLAS
loaded (macOS, ``ROPEPOOL_BLAS=off``), or without a readable ``/proc/stat``, nothing adapts.
:func:`describe` says what was chosen and why (``python -m ropepool doctor`` prints it).
"""

from __future__ import annotations

import math
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import _ropepool_blas

#: Seconds between two looks at the machine's load.
PERIOD = 0.5
#: Environment variables whose presence means the user chose the thread count.
USER_SETTINGS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
#: Where the machine's busy time is read.
STAT = "/proc/stat"


def threads_for(free: float, cores: int) -> int:
    """The thread count for ``free`` cores (of ``cores``): rounded down once a core is more than a quarter
    taken, at least 1."""
    return max(1, min(cores, math.floor(free + 0.25)))


@dataclass
class Sample:
    """One look: ``at`` (monotonic seconds), ``busy`` (seconds the cores spent busy, every program), ``own``
    (this process's CPU seconds, all its threads)."""

    at: float
    busy: float
    own: float


def busy_ticks(text: str, cpus: list[int]) -> int | None:
    """The ticks ``cpus`` spent busy (every field of their ``cpuN`` lines but idle and iowait, the first 8),
    read from the text of ``/proc/stat``; None unless each of them has exactly one line of at least 4
    decimal fields (an odd file is no information)."""
    wanted = {f"cpu{c}" for c in cpus}
    seen, busy = set(), 0
    for line in text.splitlines():
        name, *fields = line.split() or [""]
        if name not in wanted:
            continue
        v = fields[:8]  # user nice system idle iowait irq softirq steal
        if name in seen or len(v) < 4 or not all(x.isascii() and x.isdigit() for x in v):
            return None
        v = [int(x) for x in v]
        busy += sum(v) - v[3] - (v[4] if len(v) > 4 else 0)
        seen.add(name)
    return busy if seen == wanted else None


def sample(cpus: list[int], path: str = STAT) -> Sample | None:
    """The machine's busy time over ``cpus`` and this process's CPU time now; None where ``path`` cannot be
    read or says nothing usable (:func:`busy_ticks`)."""
    try:
        with open(path, "rb") as f:
            ticks = busy_ticks(f.read(1 << 20).decode("ascii"), cpus)
    except (OSError, ValueError):
        return None
    if ticks is None:
        return None
    t = os.times()
    return Sample(time.monotonic(), ticks / os.sysconf("SC_CLK_TCK"), t.user + t.system)


@dataclass
class Policy:
    """The adaptive thread count of one process (see the module's docstring).

    ``read`` gives a :class:`Sample` (None: no load to read) and is called at most once per ``period``
    seconds of ``clock``; both replaceable, so that the policy can be tested without a busy machine."""

    cores: int
    read: object = None
    period: float = PERIOD
    clock: object = time.monotonic
    threads: int | None = None  # the count decided last (None: not yet)
    free: float | None = None  # cores free at the last look
    last: Sample | None = field(default=None, repr=False)
    looked: float | None = field(default=None, repr=False)  # clock() at the last read, usable or not

    def adapt(self) -> int | None:
        """The thread count for the next step: decided again if ``period`` has passed since the last look."""
        now = self.clock()
        if self.looked is not None and now - self.looked < self.period:
            return self.threads
        self.looked = now
        seen = self.read()
        if seen is None:
            return self.threads
        if self.last is None or seen.at - self.last.at <= 0:
            self.last = seen
            return self.threads
        wall = seen.at - self.last.at
        others = max(0.0, (seen.busy - self.last.busy) - (seen.own - self.last.own)) / wall  # cores, others'
        self.last, self.free = seen, max(0.0, self.cores - others)
        self.threads = threads_for(self.free, self.cores)
        return self.threads


def env_pin() -> int | None:
    """The count ``ROPEPOOL_BLAS_THREADS=N`` pins (a whole number >= 1), else None."""
    value = os.environ.get("ROPEPOOL_BLAS_THREADS", "").strip()
    return int(value) if value.isascii() and value.isdigit() and int(value) >= 1 else None


def _setting() -> str | None:
    """Why the policy is off (the user's setting, or nothing to adapt), or None when it applies."""
    for name in USER_SETTINGS:
        if os.environ.get(name, "").strip():
            return f"{name}={os.environ[name].strip()} set: yours, kept"
    if _ropepool_blas.STATE["status"] != "loaded":
        return "OpenBLAS is not loaded: MLX's own BLAS, one thread"
    if env_pin() is not None:
        return f"ROPEPOOL_BLAS_THREADS={env_pin()}: pinned at {env_pin()} during engine steps"
    if os.environ.get("ROPEPOOL_BLAS_THREADS", "").strip().lower() in _ropepool_blas.OFF_WORDS:
        return "ROPEPOOL_BLAS_THREADS=off: OpenBLAS's own count, kept"
    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        return "one core: one thread"
    return None


_POLICY: list = []  # the process's Policy, made on the first adapt() where it applies
_PINNED: list = []  # a count pinned by pinned(), innermost last


def adapt() -> int | None:
    """The thread count for the next engine step: ``ROPEPOOL_BLAS_THREADS=N``'s, or the policy's from the
    cores free (the load read at most every ``PERIOD`` s); None where nothing is to change (the user's
    setting, the policy off, not decided yet, or paused by :func:`pinned`)."""
    if _PINNED:
        return None
    if not _POLICY:
        off = _setting()
        if off is not None:
            return env_pin() if off.startswith("ROPEPOOL_BLAS_THREADS=") else None
        cpus = sorted(os.sched_getaffinity(0))
        most = _ropepool_blas.num_threads() or len(cpus)
        _POLICY.append(Policy(min(len(cpus), most), lambda: sample(cpus)))
    return _POLICY[0].adapt()


@contextmanager
def for_step(pin: int | None = None):
    """OpenBLAS at the step's count inside the block (``pin``, or :func:`adapt`'s), and the count it had
    before set back on the way out, whatever happens: code outside the engine's steps keeps its count."""
    before = _ropepool_blas.num_threads()
    n = pin if pin is not None else adapt()
    changed = before is not None and n is not None and n != before
    if changed:
        _ropepool_blas.set_num_threads(n)
    try:
        yield n
    finally:
        if changed:
            _ropepool_blas.set_num_threads(before)


@contextmanager
def pinned(n: int):
    """OpenBLAS at ``n`` threads inside the block, the policy paused (engine steps keep ``n``); afterwards
    the count before is set again. What ``benchmarks/busy.py`` races the policy against."""
    before = _ropepool_blas.num_threads()
    _PINNED.append(n)
    _ropepool_blas.set_num_threads(n)
    try:
        yield
    finally:
        _PINNED.pop()
        if before:
            _ropepool_blas.set_num_threads(_PINNED[-1] if _PINNED else before)


def describe() -> str:
    """One line: whether the thread count adapts, and what it chose last and why."""
    off = _setting()
    if off is not None:
        return off
    p = _POLICY[0] if _POLICY else None
    rule = (
        "adaptive: as many threads as cores free during engine steps (others' load read at most every 0.5 s; "
        "ROPEPOOL_BLAS_THREADS=N pins it)"
    )
    if p is None or p.free is None:
        return f"{rule}; not decided yet in this process (OpenBLAS's {_ropepool_blas.num_threads()} for now)"
    return f"{rule}; last {p.threads} of {p.cores} ({p.free:.1f} cores free at the last look)"
