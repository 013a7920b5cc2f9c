"""Tensor parallelism over MLX's distributed runtime: N ranks, each with Hq/N query heads and Hkv/N KV heads
of every layer, and so 1/N of every layer's KV pool.

mlx-lm splits a model with ``model.shard(group)`` (q, k, v projections all-to-sharded, o_proj and the MLP's
down projection sharded-to-all, which sums over the ranks); it divides the head counts without checking
that N divides them. :func:`shard` checks first, then calls it. The engine, given the group
(``Engine(model, ..., group=group)``), checks again (:func:`check`) and sizes each rank's pools from the
heads its k projection gives: ``[P, Hkv/N, D]``. Every rank schedules the same requests the same way (the
scheduler is deterministic), so every rank runs the same steps and the ranks' collectives meet; the
head runs on every rank over the summed hidden state, so every rank picks the same tokens.

Both checks are local (the config's head counts and N), so a refusal comes on every rank before any
collective runs: no rank is left waiting for another.
"""

from __future__ import annotations

from .errors import EngineArgumentError, UnsupportedModelError
from .model_spec import architecture

#: mlx-lm modules whose models have ``shard(group)`` and that the engine serves split.
SHARDABLE = ("llama", "qwen2", "qwen3")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def check(model, ranks: int) -> None:
    """Refuse a split of ``model`` over ``ranks`` ranks that does not keep whole heads on every rank.

    Raises
    ------
    UnsupportedModelError
        An architecture mlx-lm cannot shard (or the engine does not serve split).
    EngineArgumentError
        ``ranks`` does not divide the query and KV head counts (the message names the rank counts that do),
        or the MLP's width.
    """
    arch = architecture(model)
    if ranks == 1:
        return
    if arch not in SHARDABLE:
        raise UnsupportedModelError(
            f"{arch} model: the engine serves tensor-parallel ranks for {', '.join(SHARDABLE)} models (mlx-lm's "
            "model.shard); serve this one in one process"
        )
    hq, hkv = model.args.num_attention_heads, model.args.num_key_value_heads
    if hq % ranks or hkv % ranks:
        fit = [d for d in _divisors(hkv) if hq % d == 0]
        raise EngineArgumentError(
            f"group: {ranks} ranks cannot split {hq} query heads and {hkv} KV heads into whole heads per rank "
            f"(each rank's k would hold {hkv / ranks:g} heads); use {' or '.join(map(str, fit))} ranks (the "
            "divisors of both)"
        )
    width = model.args.intermediate_size
    if width % ranks:
        raise EngineArgumentError(
            f"group: {ranks} ranks cannot split the MLP's {width} columns (intermediate_size) evenly; use a rank "
            f"count that divides it and the heads"
        )


def shard(model, group) -> None:
    """Split ``model`` over ``group`` as mlx-lm does (``model.shard(group)``), after :func:`check`; in place,
    on every rank, before any collective."""
    check(model, group.size())
    model.shard(group)


def check_sharded(model, group, kv_heads: int) -> None:
    """The engine's check: the split fits (:func:`check`), and ``model`` was split over this group (its k
    projection gives ``Hkv / N`` heads, ``kv_heads``)."""
    ranks = group.size()
    check(model, ranks)
    want = model.args.num_key_value_heads // ranks
    if kv_heads != want:
        raise EngineArgumentError(
            f"group: a group of {ranks} ranks, but this rank's k projection gives {kv_heads} KV heads, not "
            f"{want}: split the model first, on every rank (ropepool.engine.parallel.shard(model, group))"
        )
