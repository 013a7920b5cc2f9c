"""The OpenBLAS thread policy: as many threads as the other programs leave cores free, the user's setting
kept, the count before a step set back after it. Its decisions on given loads (no busy machine needed);
``benchmarks/busy.py`` measures its speed."""

import os

import _ropepool_blas
import mlx.core as mx
import numpy as np
import pytest

from ropepool import blas_threads
from ropepool.blas_threads import Policy, Sample, threads_for
from ropepool.engine import Engine, EngineArgumentError
from ropepool.loaders.tiny import build


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
        self.reads = 0

    def run(self, seconds, others, own):
        self.t += seconds
        self.busy += seconds * (others + own)
        self.own += seconds * own

    def read(self):
        self.reads += 1
        return Sample(self.t, self.busy, self.own)

    def policy(self):
        return Policy(self.cores, self.read, clock=lambda: self.t)


def test_a_core_taken_by_another_program_gives_one_thread_and_a_quiet_machine_both():
    m = Machine()
    p = m.policy()
    assert p.adapt() is None  # the first look only remembers
    m.run(0.6, others=0.05, own=1.9)  # a browser tab; the engine's own threads busy: not counted as others'
    assert p.adapt() == 2
    m.run(0.6, others=1.0, own=1.0)  # a program spinning on one core
    assert p.adapt() == 1 and abs(p.free - 1.0) < 1e-9
    m.run(0.6, others=0.1, own=1.0)  # it stopped
    assert p.adapt() == 2


def test_the_load_is_looked_at_once_per_period():
    m = Machine()
    p = m.policy()
    p.adapt()
    m.run(0.2, others=1.5, own=0.5)
    assert p.adapt() is None and m.reads == 1  # 0.2 s: not yet, and /proc/stat not read either
    m.run(0.4, others=1.5, own=0.5)
    assert p.adapt() == 1 and m.reads == 2


def test_proc_stat_is_read_at_most_every_half_second_however_often_steps_come():
    """400 steps in 2 s of the policy's clock read the machine's load about 4 times (every 0.5 s), not 400."""
    m = Machine()
    p = m.policy()
    for _ in range(400):
        p.adapt()
        m.run(0.005, others=0.0, own=1.0)
    assert 4 <= m.reads <= 5, m.reads


def test_no_proc_stat_changes_nothing():
    p = Policy(2, lambda: None)
    assert p.adapt() is None and p.adapt() is None


CPU_LINES = "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0 0 0\nintr 1 2\n"


@pytest.mark.parametrize(
    "text",
    [
        "cpu  10 0 10\ncpu0 5 0 5\ncpu1 5 0 5\n",  # short cpu lines (a container's emulated /proc)
        "cpu0 5 0 5 50 x 0 0 0\ncpu1 5 0 5 50 0 0 0 0\n",  # a field that is no number
        "cpu0 5 0 5 -50 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0\n",  # a negative count
        "cpu0 5 0 5 50 0 0 0 0\n",  # a core of ours missing
        "cpu0 5 0 5 50 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0\n",  # one twice
        "\n\n   \n",  # blank lines only
        "\u00b2\u00b3",  # not ASCII
    ],
)
def test_an_odd_proc_stat_is_no_information_never_an_error(tmp_path, text):
    fake = tmp_path / "stat"
    fake.write_bytes(text.encode("utf-8"))
    assert blas_threads.sample([0, 1], path=str(fake)) is None
    p = Policy(2, lambda: blas_threads.sample([0, 1], path=str(fake)))
    assert p.adapt() is None and p.adapt() is None


def test_a_well_formed_proc_stat_counts_busy_ticks_without_idle_and_iowait(tmp_path):
    assert blas_threads.busy_ticks(CPU_LINES, [0, 1]) == 20
    assert blas_threads.busy_ticks("cpu0 1 2 3 1000 1000 4 5 6 7 8\n", [0]) == 21  # guest fields not counted twice
    assert blas_threads.busy_ticks("cpu0 1 2 3 1000\n", [0]) == 6  # an old kernel's 4 fields
    fake = tmp_path / "stat"
    fake.write_text(CPU_LINES)
    seen = blas_threads.sample([0, 1], path=str(fake))
    assert seen is not None and seen.busy == pytest.approx(20 / os.sysconf("SC_CLK_TCK"))


@pytest.mark.parametrize("name", ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"])
def test_the_user_s_setting_wins(monkeypatch, name):
    for other in blas_threads.USER_SETTINGS:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, "2")
    monkeypatch.setattr(blas_threads, "_POLICY", [])  # as in a process that has not stepped an engine before
    assert blas_threads.adapt() is None
    assert blas_threads.describe() == f"{name}=2 set: yours, kept"


def test_the_machine_s_own_load_reads():
    """On this Linux machine /proc/stat reads: busy time and own time grow, and own never exceeds busy."""
    cpus = sorted(os.sched_getaffinity(0))
    a = blas_threads.sample(cpus)
    sum(i * i for i in range(300_000))  # some CPU of our own
    b = blas_threads.sample(cpus)
    assert a is not None and b.at > a.at and b.busy >= a.busy and b.own > a.own


@pytest.fixture
def openblas():
    """OpenBLAS's own count around the test (skipped where it is not loaded), and the process's policy reset."""
    before = _ropepool_blas.num_threads()
    if before is None:
        pytest.skip("OpenBLAS is not loaded here: no thread count to change")
    policy = list(blas_threads._POLICY)
    blas_threads._POLICY.clear()
    yield before
    blas_threads._POLICY[:] = policy
    _ropepool_blas.set_num_threads(before)


def monkeypatch_policy(monkeypatch, before: int) -> int:
    """A policy that chooses another count than ``before`` (and sets it, as a policy that sets it itself would)."""
    other = 1 if before != 1 else 2

    def policy():
        _ropepool_blas.set_num_threads(other)
        return other

    monkeypatch.setattr(blas_threads, "adapt", policy)
    return other


def counts_inside_steps(engine):
    """OpenBLAS's thread count seen during each of ``engine``'s forward passes."""
    seen, run = [], engine.runner.run

    def watched(batch):
        seen.append(_ropepool_blas.num_threads())
        return run(batch)

    engine.runner.run = watched
    return seen


def test_mlx_lm_s_forward_gives_the_same_logits_before_and_after_an_engine_stepped(openblas, monkeypatch):
    """The policy sets another count for the engine's step; the count before is back after it, so mlx-lm's own
    forward in the same process runs as it did (same count, same logits, bit for bit)."""
    other = monkeypatch_policy(monkeypatch, openblas)
    model = build("llama-gqa")
    tokens = mx.array([list(range(1, 65))])
    before = np.array(model(tokens))
    engine = Engine(model, pool_rows=32)
    engine.add_request([1, 2, 3], 2)
    seen = counts_inside_steps(engine)
    engine.step()
    assert seen == [other], "the policy's count was not in force during the step"
    assert _ropepool_blas.num_threads() == openblas, "the engine left its thread count set for the process"
    assert np.array_equal(np.array(model(tokens)), before)


def test_a_step_that_fails_sets_the_thread_count_back_too(openblas, monkeypatch):
    monkeypatch_policy(monkeypatch, openblas)
    engine = Engine(build("llama-gqa"), pool_rows=32)
    engine.add_request([1, 2, 3], 2)

    def failing(batch):
        raise ValueError("the forward pass failed")

    engine.runner.run = failing
    with pytest.raises(ValueError, match="forward pass failed"):
        engine.step()
    assert _ropepool_blas.num_threads() == openblas


def test_an_engine_pinned_to_a_count_runs_its_steps_at_it_and_never_asks_the_policy(openblas, monkeypatch):
    def policy(*_):
        raise AssertionError("a pinned engine asked the adaptive policy")

    monkeypatch.setattr(blas_threads, "adapt", policy)
    pin = 1 if openblas != 1 else 2
    engine = Engine(build("llama-gqa"), pool_rows=32, blas_threads=pin)
    engine.add_request([1, 2, 3], 3)
    seen = counts_inside_steps(engine)
    while not engine.done:
        engine.step()
    assert seen == [pin] * 3 and _ropepool_blas.num_threads() == openblas


def test_rope_pool_blas_threads_n_pins_every_engine_s_steps(openblas, monkeypatch):
    for name in blas_threads.USER_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROPEPOOL_BLAS_THREADS", "1")
    assert blas_threads.adapt() == 1 and not blas_threads._POLICY
    assert "pinned at 1" in blas_threads.describe()
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")  # the user's OpenBLAS setting still wins
    assert blas_threads.adapt() is None


@pytest.mark.parametrize("pin", [0, -1, 2.0, "2", True])
def test_a_pin_that_is_no_count_is_refused(pin):
    with pytest.raises(EngineArgumentError, match="blas_threads must be"):
        Engine(build("llama-gqa"), pool_rows=32, blas_threads=pin)
