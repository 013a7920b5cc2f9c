"""The OpenBLAS thread policy: as many threads as the other programs leave cores free, the user's setting
kept. Its decisions on given loads (no busy machine needed); ``benchmarks/busy.py`` measures its speed."""

import os

import pytest

from ropepool import blas_threads
from ropepool.blas_threads import Policy, Sample, threads_for


@pytest.mark.parametrize(
    "free,cores,want",
    [(2.0, 2, 2), (1.8, 2, 2), (1.7, 2, 1), (1.0, 2, 1), (0.0, 2, 1), (7.9, 8, 8), (3.6, 8, 3), (5.0, 4, 4)],
)
def test_threads_for_the_cores_free(free, cores, want):
    assert threads_for(free, cores) == want


class Machine:
    """A machine of ``cores`` cores on which other programs use ``others`` cores and this process ``own``."""

    def __init__(self, cores=2):
        self.t, self.busy, self.own, self.cores = 0.0, 0.0, 0.0, cores
        self.set = []

    def run(self, seconds, others, own):
        self.t += seconds
        self.busy += seconds * (others + own)
        self.own += seconds * own

    def policy(self):
        return Policy(self.cores, lambda: Sample(self.t, self.busy, self.own), self.set.append)


def test_a_core_taken_by_another_program_gives_one_thread_and_a_quiet_machine_both():
    m = Machine()
    p = m.policy()
    assert p.adapt() is None and m.set == []  # the first look only remembers
    m.run(0.6, others=0.05, own=1.9)  # a browser tab; the engine's own threads busy: not counted as others'
    assert p.adapt() == 2
    m.run(0.6, others=1.0, own=1.0)  # a program spinning on one core
    assert p.adapt() == 1 and abs(p.free - 1.0) < 1e-9
    m.run(0.6, others=0.1, own=1.0)  # it stopped
    assert p.adapt() == 2
    assert m.set == [2, 1, 2]  # set only when the count changes


def test_the_load_is_looked_at_once_per_period():
    m = Machine()
    p = m.policy()
    p.adapt()
    m.run(0.2, others=1.5, own=0.5)
    assert p.adapt() is None and m.set == []  # 0.2 s: not yet
    m.run(0.4, others=1.5, own=0.5)
    assert p.adapt() == 1


def test_no_proc_stat_changes_nothing():
    set_ = []
    p = Policy(2, lambda: None, set_.append)
    assert p.adapt() is None and p.adapt() is None and set_ == []


@pytest.mark.parametrize("name", ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"])
def test_the_user_s_setting_wins(monkeypatch, name):
    for other in blas_threads.USER_SETTINGS:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, "2")
    assert blas_threads.adapt() is None
    assert blas_threads.describe() == f"{name}=2 set: yours, kept"


def test_the_machine_s_own_load_reads():
    """On this Linux machine /proc/stat reads: busy time and own time grow, and own never exceeds busy."""
    cpus = sorted(os.sched_getaffinity(0))
    a = blas_threads.sample(cpus)
    sum(i * i for i in range(300_000))  # some CPU of our own
    b = blas_threads.sample(cpus)
    assert a is not None and b.at > a.at and b.busy >= a.busy and b.own > a.own
