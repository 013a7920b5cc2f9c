"""The stubs the build notebooks start from: each raises NotImplementedError until the learner writes it.

The notebooks' "your part" cells hold these same definitions (``tests/test_build_notebooks.py``
checks that they have not drifted apart).
"""

from __future__ import annotations


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    raise NotImplementedError("part 1: rotate")


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448, NaN gives 0x7F; bit 0x80 is x's sign."""
    raise NotImplementedError("part 6: encode_e4m3")


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    raise NotImplementedError("part 3: slot_mapping")
