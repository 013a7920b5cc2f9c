"""Per-layer FP8 scales from one float prefill: ``k_scale = max|k_rot| * headroom / 448``, and v's alike.

e4m3 keeps about 3 significant bits from 2**-6 to 448 (:mod:`ropepool.fp8`). With scale 1.0 a layer
whose values are all small (SmolLM2's first layer: v around 0.02) spends them on subnormals, steps of
2**-9; a scale that maps the layer's largest value near 448 puts them all in the normal range. This
is the calibration vLLM's checkpoints carry as ``k_scale``/``v_scale``; here it is measured on
prompts the caller gives.

Example
-------
Needs a model (an mlx-lm ``model``, SmolLM2 in notebook 10), so the doctests skip it:

>>> scales = calibrate(model, prompts)                                   # doctest: +SKIP
>>> generate(model, prompts, 10, pool_rows=96, kv_dtype="fp8", kv_scales=scales)  # doctest: +SKIP
"""

from __future__ import annotations

import math

import mlx.core as mx

from ..fp8 import MAX
from ..fusion import KV_SCALE_MAX, KV_SCALE_MIN
from .arguments import check_token_ids
from .errors import EngineArgumentError
from .generate import Engine


def calibrate(model, prompts, *, headroom: float = 2.0, backend: str = "auto") -> list[tuple[float, float]]:
    """``[(k_scale, v_scale)]``, one per layer: the largest ``|k_rot|`` and ``|v|`` the layer writes while
    prefilling ``prompts`` (float pools), times ``headroom``, over 448. A layer that writes only zeros
    gets 1.0; every scale is clipped to the range the op takes (``2**-126`` to ``2**126``).

    ``prompts``: any iterable (a list, a generator) of prompts, each a non-empty list of token ids.

    Raises
    ------
    EngineArgumentError
        ``prompts`` is no iterable of prompts or is empty, a prompt is no list of token ids (named
        ``prompts[i]``), or ``headroom`` is no finite number > 0; or a layer's k or v holds NaN or inf.
    """
    if (
        isinstance(headroom, bool)
        or not isinstance(headroom, (int, float))
        or not (math.isfinite(headroom) and headroom > 0)
    ):
        raise EngineArgumentError(
            f"headroom must be a finite number > 0 (2.0: twice the largest value seen), got {headroom!r:.60}"
        )
    if isinstance(prompts, (str, bytes, dict)) or not hasattr(prompts, "__iter__"):
        raise EngineArgumentError(
            f"prompts must be an iterable of prompts (lists of token ids), got {type(prompts).__name__} {prompts!r:.60}"
        )
    vocab = model.args.vocab_size
    prompts = [check_token_ids(f"prompts[{i}]", p, vocab) for i, p in enumerate(prompts)]
    if not prompts:
        raise EngineArgumentError("prompts is empty: calibrate needs at least one prompt to measure")
    engine = Engine(model, pool_rows=sum(len(p) for p in prompts), backend=backend)
    for p in prompts:
        engine.add_request(p, 1)
    while not engine.done:  # every prompt prefilled: each of its rows written once, none reused
        engine.step()
    out = []
    for i, pools in enumerate(engine.runner.pools):  # k and v, or MLA's one latent pool (its scale given twice)
        amax = [float(mx.abs(p.astype(mx.float32)).max()) for p in pools]
        if not all(math.isfinite(a) for a in amax):
            raise EngineArgumentError(
                f"model: layer {i}'s k or v holds NaN or inf after prefilling the prompts (its weights or "
                "activations overflow): no FP8 scale can be measured"
            )
        scales = tuple(min(max(a * headroom / MAX, KV_SCALE_MIN), KV_SCALE_MAX) if a > 0 else 1.0 for a in amax)
        out.append(scales * (2 // len(scales)))
    return out
