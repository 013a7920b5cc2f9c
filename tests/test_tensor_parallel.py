"""The engine across local ranks of MLX's distributed runtime (``mlx.launch --backend ring``): every rank's
pool holds its Hkv/N heads, every rank chooses the tokens one process chooses, and a split that would break
heads is refused on every rank before any collective."""

import io
import sys
from types import SimpleNamespace

import mlx.core as mx
import numpy as np
import pytest

from ropepool.cli import ranks
from ropepool.engine import EngineArgumentError, UnsupportedModelError, generate
from ropepool.engine.parallel import check, check_sharded
from ropepool.engine.runner import Runner
from ropepool.loaders.tiny import build, tiny


def launched(n: int, model: str, new: int = 3) -> list[dict]:
    return ranks.launch(n, model, new, stream=io.StringIO())


@pytest.mark.parametrize("model,n", [("tiny-llama", 3), ("tiny-qwen3", 3), ("tiny-llama-4x2", 2)])
def test_every_rank_chooses_the_tokens_of_one_process(model, n):
    (one,) = launched(1, model)
    split = launched(n, model)
    assert [r["rank"] for r in split] == list(range(n))
    hkv = one["pool_shape"][1]
    for r in split:
        assert r["tokens"] == one["tokens"], f"rank {r['rank']}"
        assert r["pool_shape"] == [one["pool_shape"][0], hkv // n, one["pool_shape"][2]]
        assert r["pool_bytes"] * n == one["pool_bytes"] and r["bytes_summed_per_step"] > 0


def test_a_split_that_breaks_heads_is_refused_on_every_rank():
    split = launched(3, "tiny-llama-4x2")
    assert len(split) == 3
    for r in split:
        assert r["refused"].startswith("EngineArgumentError: group: 3 ranks cannot split 4 query heads and 2 KV heads")
        assert "use 1 or 2 ranks" in r["refused"]


def test_the_checks_without_launching():
    check(build("llama-gqa"), 2)  # 4 and 2 heads, MLP 128: fits
    with pytest.raises(EngineArgumentError, match="use 1 or 2 ranks"):
        check(build("llama-gqa"), 4)
    with pytest.raises(EngineArgumentError, match="the MLP's 128 columns"):
        check(tiny("llama", num_attention_heads=6, num_key_value_heads=3, head_dim=16), 3)
    with pytest.raises(UnsupportedModelError, match="gemma3_text model: the engine serves tensor-parallel ranks"):
        check(build("gemma3"), 2)
    model = build("llama-gqa")
    with pytest.raises(EngineArgumentError, match="gives 2 KV heads, not 1: split the model first"):
        check_sharded(model, SimpleNamespace(size=lambda: 2), kv_heads=2)


def test_one_rank_group_serves_as_one_process():
    """The runner with the group of a single process (what ``mx.distributed.init()`` gives alone)."""
    model = build("qwen3")
    group = mx.distributed.init()
    assert group.size() == 1
    want = generate(model, [[1, 2, 3]], 4, pool_rows=16)
    got = generate(model, [[1, 2, 3]], 4, pool_rows=16, group=group)
    assert got[0].tokens == want[0].tokens
    np.testing.assert_array_equal(np.array(got[0].logits), np.array(want[0].logits))
    assert Runner(model, 16, group=group).k_pools[0].shape[1] == model.args.num_key_value_heads


def test_the_command_prints_the_pools_and_the_verdict(capsys):
    code = ranks.main(SimpleNamespace(ranks=1, model="tiny-llama", new=3))
    out = capsys.readouterr().out
    assert code == 0 and "pool [P, Hkv, D] = [" in out and "every rank chose the same tokens: True" in out
    assert sys.executable
