"""mlx-lm's own greedy generation, one request at a time, in the shape of ``ropepool.engine.generate``.

``greedy(model, prompts, max_new_tokens)`` returns one :class:`Greedy` per prompt, in prompt
order, each with ``.tokens`` (the new token ids) and ``.logits`` (what each was chosen from), as
the engine's results have: a caller can swap one for the other in one line. Each request runs
alone through ``mlx_lm.generate.generate_step`` with mlx-lm's own RoPE and KV cache: the
reference an engine's logits and answers are checked against. The logits are caught, unchanged,
by a logits processor (mlx-lm's hook for editing them before sampling).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import mlx.core as mx


@dataclass
class Greedy:
    """One request's greedy continuation.

    Attributes
    ----------
    tokens : list of int   the new token ids
    logits : mx.array      ``[len(tokens), vocab]`` float32: the logits each token was chosen from
    """

    tokens: list[int]
    logits: mx.array


def greedy(model, prompts: Sequence[Sequence[int]], max_new_tokens, *, stop: int | None = None) -> list[Greedy]:
    """Greedy continuations of ``prompts`` by mlx-lm's ``generate_step``, each request alone.

    Parameters
    ----------
    model : an mlx-lm model
    prompts : token ids, one list per request
    max_new_tokens : int, or one int per prompt
    stop : a token id (e.g. eos) after which a request stops early; None: always max_new_tokens

    Raises
    ------
    ValueError
        ``max_new_tokens`` has a different length than ``prompts``, or a prompt is empty.
    """
    from mlx_lm.generate import generate_step  # mlx-lm: imported when used

    limits = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
    if len(limits) != len(prompts):
        raise ValueError(f"max_new_tokens: expected an int or {len(prompts)} ints (one per prompt), got {len(limits)}")
    for i, prompt in enumerate(prompts):
        if len(prompt) == 0:
            raise ValueError(f"prompts[{i}] is empty: a request needs at least one token")
    out = []
    for prompt, limit in zip(prompts, limits):
        tokens: list[int] = []
        seen: list[mx.array] = []  # [1, vocab] per step; generate_step runs one step ahead

        def keep(_, logits):
            seen.append(logits)
            return logits

        if limit > 0:
            for token, _ in generate_step(mx.array(list(prompt)), model, max_tokens=limit, logits_processors=[keep]):
                tokens.append(int(token))
                if stop is not None and tokens[-1] == stop:
                    break
        logits = mx.concatenate(seen[: len(tokens)], axis=0) if tokens else mx.zeros((0, model.args.vocab_size))
        out.append(Greedy(tokens, logits.astype(mx.float32)))  # [len(tokens), vocab]
    return out
