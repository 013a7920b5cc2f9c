"""OpenBLAS's thread count from the cores other programs leave free: every core on a quiet machine, fewer
when a browser, a video call or the lab's other kernel takes one.

OpenBLAS's threads spin while they wait for work. With every core busy elsewhere, a thread of ours that
spins waits for a core that is not ours, and a decode step (small matrix-vector products) falls 3-20x,
below what one thread alone gets. So before each step the engine calls :func:`adapt`: at most every
``PERIOD`` seconds it reads how much CPU the other programs used since the last look (the machine's
busy time in ``/proc/stat`` over the cores this process may run on, less this process's own CPU time)
and sets OpenBLAS to the cores left, rounded down once a core is more than a quarter taken:
``threads = clamp(floor(free + 0.25), 1, cores)``. The count only changes between steps, never under a
running matmul. ``benchmarks/busy.py`` measures it against one and two threads forced.

The user's choice always wins: with ``OPENBLAS_NUM_THREADS`` or ``OMP_NUM_THREADS`` set, or
``ROPEPOOL_BLAS_THREADS=off``, nothing is changed. Without OpenBLAS loaded (macOS, ``ROPEPOOL_BLAS=off``),
or without ``/proc/stat``, :func:`adapt` does nothing. :func:`describe` says what was chosen and why
(``python -m ropepool doctor`` prints it).
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


def sample(cpus: list[int]) -> Sample | None:
    """The machine's busy time over ``cpus`` and this process's CPU time now; None without ``/proc/stat``."""
    ticks = os.sysconf("SC_CLK_TCK")
    wanted = {f"cpu{c}" for c in cpus}
    busy = 0
    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                name, *fields = line.split()
                if name in wanted:  # user nice system idle iowait irq softirq steal ...
                    v = [int(x) for x in fields[:8]]
                    busy += sum(v) - v[3] - v[4]
    except (OSError, ValueError):
        return None
    t = os.times()
    return Sample(time.monotonic(), busy / ticks, t.user + t.system)


@dataclass
class Policy:
    """The adaptive thread count of one process (see the module's docstring).

    ``read`` gives a :class:`Sample` (None: no load to read), ``apply`` sets the thread count; both
    replaceable, so that the policy can be tested without a busy machine."""

    cores: int
    read: object = None
    apply: object = None
    period: float = PERIOD
    threads: int | None = None  # the count set last (None: OpenBLAS's own)
    free: float | None = None  # cores free at the last look
    last: Sample | None = field(default=None, repr=False)

    def adapt(self) -> int | None:
        """Look at the load if ``period`` has passed since the last look; set and return the thread count."""
        now = self.read()
        if now is None:
            return self.threads
        if self.last is None:
            self.last = now
            return self.threads
        wall = now.at - self.last.at
        if wall < self.period:
            return self.threads
        others = max(0.0, (now.busy - self.last.busy) - (now.own - self.last.own)) / wall  # cores, others'
        self.last, self.free = now, max(0.0, self.cores - others)
        n = threads_for(self.free, self.cores)
        if n != self.threads:
            self.apply(n)
            self.threads = n
        return n


def _setting() -> str | None:
    """Why the policy is off (the user's setting, or nothing to adapt), or None when it applies."""
    for name in USER_SETTINGS:
        if os.environ.get(name, "").strip():
            return f"{name}={os.environ[name].strip()} set: yours, kept"
    if os.environ.get("ROPEPOOL_BLAS_THREADS", "").strip().lower() in _ropepool_blas.OFF_WORDS:
        return "ROPEPOOL_BLAS_THREADS=off: OpenBLAS's own count, kept"
    if _ropepool_blas.STATE["status"] != "loaded":
        return "OpenBLAS is not loaded: MLX's own BLAS, one thread"
    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        return "one core: one thread"
    return None


_POLICY: list = []  # the process's Policy, made on the first adapt() where it applies
_PINNED: list = []  # a count pinned by pinned(), innermost last


def adapt() -> int | None:
    """Set OpenBLAS's threads from the cores free now (at most every ``PERIOD`` s); None where the policy is
    off (or paused by :func:`pinned`)."""
    if _PINNED:
        return None
    if not _POLICY:
        if _setting() is not None:
            return None
        cpus = sorted(os.sched_getaffinity(0))
        most = _ropepool_blas.num_threads() or len(cpus)
        _POLICY.append(Policy(min(len(cpus), most), lambda: sample(cpus), _ropepool_blas.set_num_threads))
    return _POLICY[0].adapt()


@contextmanager
def pinned(n: int):
    """OpenBLAS at ``n`` threads inside the block, the policy paused; afterwards the policy's last count (or
    the count before) is set again. What ``benchmarks/busy.py`` races the policy against."""
    before = _POLICY[0].threads if _POLICY and _POLICY[0].threads else _ropepool_blas.num_threads()
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
    rule = "adaptive: as many threads as cores free (others' load read every 0.5 s between engine steps)"
    if p is None or p.free is None:
        return f"{rule}; not decided yet in this process (OpenBLAS's {_ropepool_blas.num_threads()} for now)"
    return f"{rule}; now {p.threads} of {p.cores} ({p.free:.1f} cores free at the last look)"
