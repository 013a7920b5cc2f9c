"""What a diagnosis knows and what it says: the model's numbers (:class:`Facts`) and the verdict
(:class:`Diagnosis`); one vocabulary for every message family.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..k_shape import Case, heads  # noqa: F401  (one vocabulary: the op's hint and explain's)


#: The facts a :class:`~ropepool.models.RopeParams` gives under the same name (and ``rope_base``, as rope_theta).
_FROM_PARAMS = (
    "name",
    "num_qo_heads",
    "num_kv_heads",
    "head_dim",
    "rotary_dim",
    "rope_scaling",
    "max_position_embeddings",
)


@dataclass(frozen=True)
class Facts:
    """The model's numbers, as far as they are known (None: not given).

    Attributes
    ----------
    name : str                 the model, for messages
    num_qo_heads : int         Hq, ``config.num_attention_heads``
    num_kv_heads : int         Hkv, ``config.num_key_value_heads``
    head_dim : int             D
    hidden_size : int          ``config.hidden_size`` (to spot ``hidden_size // heads`` taken for D)
    rotary_dim : int           dimensions that rotate (None: the whole head, or unknown)
    rope_theta : float         the base
    rope_scaling : dict        the scaling fields
    passed_kv_heads : int      the ``num_kv_heads`` the failing call passed (not the model's)
    kv_lora_rank : int         MLA's latent width, ``config.kv_lora_rank`` (None: not MLA, or unknown)
    rope_dim : int             MLA's RoPE part of a head, ``config.qk_rope_head_dim``
    nope_dim : int             MLA's part of a q and k head without RoPE, ``config.qk_nope_head_dim``
    kv_bytes_per_token : int   the KV cache's bytes a token over all layers, bfloat16 (the config's
                               :class:`~ropepool.kv_layout.CacheLayout`: MLA's latent, GQA's k and v)
    sliding_window : int       ``config.sliding_window``: the tokens a layer attends to (a rolling cache's rows)
    max_position_embeddings : int  the positions the config gives (scaled ones included, where it scales)
    vocab_size : int           ``config.vocab_size``
    tp : int                   the tensor-parallel size the model runs at (``--tp``)
    notes : tuple of str       what reading the config found, one line each (a field it lacks)
    """

    name: str = "the model"
    num_qo_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    hidden_size: int | None = None

    rotary_dim: int | None = None  # RoPE: its width, base and scaling
    rope_theta: float | None = None
    rope_scaling: dict | None = None

    passed_kv_heads: int | None = None  # what the failing call passed, and MLA's latent sizes
    kv_lora_rank: int | None = None
    rope_dim: int | None = None
    nope_dim: int | None = None
    kv_bytes_per_token: int | None = None
    sliding_window: int | None = None

    max_position_embeddings: int | None = None  # the tables (positions, tokens) and the run
    vocab_size: int | None = None
    tp: int | None = None

    notes: tuple = ()  # what reading the config found, one line each (a field it lacks)

    @classmethod
    def of(cls, params, **overrides) -> "Facts":
        """Facts from a :class:`~ropepool.models.RopeParams` (or None), then ``overrides`` where not None."""
        base = {}
        if params is not None:
            base = {name: getattr(params, name) for name in _FROM_PARAMS}
            base["rope_theta"] = params.rope_base
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)

    @property
    def known(self) -> bool:
        return any(v is not None for v in (self.num_qo_heads, self.num_kv_heads, self.head_dim))

    @property
    def naive_head_dim(self) -> int | None:
        """``hidden_size // num_attention_heads``, the head_dim a reader without ``config.head_dim`` takes."""
        if self.hidden_size and self.num_qo_heads:
            return self.hidden_size // self.num_qo_heads
        return None

    def describe(self) -> str:
        parts = [
            f"{k} = {v}"
            for k, v in (("Hq", self.num_qo_heads), ("Hkv", self.num_kv_heads), ("D", self.head_dim))
            if v is not None
        ]
        if self.kv_lora_rank and self.rope_dim:  # MLA: no per-head k and v are cached
            parts = [p for p in parts if not p.startswith("Hkv")]
            parts.append(f"MLA latent row {self.kv_lora_rank} + {self.rope_dim} (kv_lora_rank + qk_rope_head_dim)")
        elif self.num_qo_heads and self.num_kv_heads and self.num_qo_heads % self.num_kv_heads == 0:
            parts.append(f"G = {self.num_qo_heads // self.num_kv_heads}")
        if self.rotary_dim is not None and self.rotary_dim != self.head_dim:
            parts.append(f"rotary_dim = {self.rotary_dim}")
        if self.rope_theta is not None:
            parts.append(f"rope_theta = {self.rope_theta:g}")
        if self.rope_scaling:
            parts.append(f"scaling {self.rope_scaling.get('rope_type', self.rope_scaling.get('type'))!r}")
        return ("given" if self.name == "the model" else self.name) + ": " + ", ".join(parts)


@dataclass(frozen=True)
class Diagnosis:
    """What a message says, read.

    Attributes
    ----------
    family : str     who printed it: sglang, ropepool, pytorch, transformers, mlx, mlx-lm, vllm, llama.cpp, tensorrt-llm
    source : str     the code that prints it
    line : str       the message as read
    read : str       its numbers, in words
    case : str       the mistake; ``ambiguous`` where the numbers fit more than one (``why`` names them,
                     ``fix`` says what to check); ``needs_model`` where they say nothing without the model
    quantity : str   what is wrong: heads, head_dim, tokens, rotary_dim, scaling, tp, versions, layout
    why : str        the mistake that gives exactly these numbers
    fix : str        the change that makes the error go away (never the values already passed)
    code : str       the catalog code, for the op's own messages
    """

    family: str
    source: str
    line: str
    read: str
    case: str
    quantity: str
    why: str
    fix: str
    code: str | None = None
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def ambiguous(self) -> bool:
        return self.case == "ambiguous"


def ambiguous(options: list[tuple[str, str]], check: str) -> tuple[str, str, str, str]:
    """``(case, quantity, why, fix)`` of numbers that fit several mistakes: ``options`` as (name, text)."""
    texts = [(name, text[3:] if text.startswith("or ") else text) for name, text in options]
    lead = "these numbers fit more than one mistake: " if len(texts) > 1 else "the one reading that fits, unconfirmed: "
    why = lead + "; or ".join(f"({chr(65 + i)}) {name}: {text}" for i, (name, text) in enumerate(texts))
    return "ambiguous", "/".join(dict.fromkeys(name for name, _ in options)), why, f"Check {check} to tell."
