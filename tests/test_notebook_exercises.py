"""The end-of-notebook checkers of 00-05: the right answer passes, None is "not yet", mistakes are named."""

import numpy as np
import pytest

from ropepool.teaching import notebook_exercises as nx
from ropepool import models
from ropepool.teaching.exercises import ExerciseFailed, feedback
from ropepool.kernels.source import grid_size
from ropepool.reference import inverse_frequencies

LLAMA_ROW = models.preset("llama-3-8b").shapes(1, 1).pool_bytes("bfloat16")  # k and v: 2 x 8 x 128 x 2 bytes

# (checker, right answer, [(wrong answer, problem)]): the right answers worked out by hand where short.
CASES = [
    (nx.n00, [5, 6], [([5, 6, 7], "negative_index"), ([1, 5, 6], "earlier_call"), ([1, 5], "wrong_rows")]),
    (
        nx.n01,
        list(range(14, 21)),
        [
            ([2, 6, 10, 14, 18, 22, 26], "interleaved"),
            ([2], "wrong_heads"),
            (list(range(8, 12)), "wrong_group_size"),
            (list(range(7, 14)), "off_by_one"),
            (list(range(21, 28)), "off_by_one"),
            (list(range(14, 22)), "off_by_one"),
        ],
    ),
    (
        nx.n02,
        "k_shape",
        [
            ("pool_dtype", "wrong_code"),
            ("q_shape", "wrong_array"),
            ("index_dtype", "second_rule"),
            ("positions_dtype", "not_a_code"),
        ],
    ),
    (
        nx.n03,
        int(np.argmax(2 * np.pi / inverse_frequencies(128, 10000.0) > 8192)),
        [(49, "off_by_one"), (51, "off_by_one"), (3, "wrong_pair"), (64, "out_of_range"), (-1, "out_of_range")],
    ),
    # Qwen2.5-7B's YaRN (D = 128, base 1e6, 32,768 trained positions, beta_fast = 32): the ramp starts at
    # floor(D * ln(32768 / (32 * 2 pi)) / (2 ln 1e6)) = floor(23.6) = 23, where it is still 0: pair 24 changes first.
    (nx.n03b, 24, [(0, "pair_zero"), (23, "off_by_one"), (25, "off_by_one"), (60, "wrong_pair")]),
    (
        nx.n04,
        16 * 2**30 // (32 * LLAMA_ROW),
        [
            (2 * 16 * 2**30 // (32 * LLAMA_ROW), "one_pool"),
            (7, "wrong_rows"),
            (16 * 2**30 // LLAMA_ROW, "one_layer"),
            (16 * 10**9 // (32 * LLAMA_ROW), "gb_not_gib"),
        ],
    ),
    (nx.n05, 64 * (64 + 8) * 64, [(64 * 64 * 64, "q_only"), (64 * 72 * 128, "per_element"), (1, "wrong_count")]),
]


@pytest.mark.parametrize("check, right, wrong", CASES, ids=[c[0].__name__ for c in CASES])
def test_checker(check, right, wrong):
    assert check(right).passed
    assert feedback(check, None).problem == "unanswered" and not feedback(check, None).passed
    for answer, problem in wrong:
        with pytest.raises(ExerciseFailed) as info:
            check(answer)
        assert info.value.problem == problem, (answer, str(info.value))


def test_hand_worked_answers():
    assert 16 * 2**30 // (32 * 4096) == 131_072  # Llama-3-8B: 4 KiB a row in 32 layers
    assert grid_size(64, 64, 8, 128) == 64 * 72 * 64
    assert int(128 * np.log(32768 / (32 * 2 * np.pi)) / (2 * np.log(1e6))) == 23  # YaRN's ramp start (n03b)


def test_every_notebook_00_to_05_runs_its_checker():
    from pathlib import Path

    import nbformat

    for stem, check in nx.CHECKS.items():
        path = next((Path(__file__).parent.parent / "notebooks").glob(f"{stem}_*.ipynb"))
        source = "\n".join(c.source for c in nbformat.read(path, 4).cells if c.cell_type == "code")
        assert f"notebook_exercises.{check.__name__}" in source, f"{path.name} does not run {check.__name__}"
