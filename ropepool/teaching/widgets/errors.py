"""Error cards and the "break it yourself" widget, both read from ``ropepool.teaching.catalog.CATALOG``.

Nothing here lists the errors: every function takes an :class:`~ropepool.teaching.catalog.ErrorSpec`
(or its code) and reads its message, meaning, causes and fix from the catalog, its bad call
from ``spec.trigger()`` and its fixed call from ``spec.fixed()``.
"""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass

import ipywidgets as W
import numpy as np

from ..._arrays import dtype_name, is_array, largest_abs, to_numpy
from ..checks import expect_error
from ...errors import RopePoolError
from ..catalog import CATALOG, ErrorSpec
from ...op import rope_pool_fused
from ...reference import FUSION_KEYWORDS, rms_norm, rope_pool_reference
from ...rope import ROPE_KEYWORDS, rope_of
from ...tolerance import error_bound, error_ratio, pair_norms

#: Where each check lives, in the order SGLang runs them: its Python wrapper, its C++ side, then ours.
ORIGINS = {
    "sglang": "SGLang's Python wrapper",
    "sglang-c++": "SGLang's C++ extension",
    "ropepool": "ropepool's extra checks",
}


OUTPUT_NAMES = ("q_rot", "k_rot", "k_pool", "v_pool")

#: An error's text keeps its own line breaks (made at word boundaries, ropepool.errors.wrap) and
#: is never broken mid-word: JupyterLab's output CSS would otherwise cut "projection" as "projecti/on".
ERROR_TEXT_STYLE = "white-space:pre-wrap;word-break:normal;overflow-wrap:normal;overflow-x:auto;color:#9d0208"

#: The longest label of a BreakIt choice: whole words, so none is cut off in the dropdown.
LABEL_CHARS = 72


def mistake_label(spec: ErrorSpec) -> str:
    """``code: first cause``, shortened at a word boundary to :data:`LABEL_CHARS`."""
    return textwrap.shorten(f"{spec.code}: {spec.causes[0]}", LABEL_CHARS, placeholder=" ...")


def by_origin(origin: str) -> list[ErrorSpec]:
    """The catalog's errors raised by ``origin`` ("sglang", "sglang-c++" or "ropepool"), in catalog order."""
    if origin not in ORIGINS:
        raise ValueError(f"origin must be one of {list(ORIGINS)}, got {origin!r}")
    return [spec for spec in CATALOG.values() if spec.origin == origin]


def catalog_html() -> str:
    """The catalog as an HTML table: code, who raises it, and its message, in the order checks run."""
    from .gqa import table_html

    rows = [(spec.code, ORIGINS[spec.origin], spec.message) for spec in CATALOG.values()]
    return table_html(("code", "raised by", "message"), rows, "ropepool-catalog")


@dataclass(frozen=True)
class FixedRun:
    """The fixed call of one catalog entry, run through the op and through the float64 reference.

    Attributes
    ----------
    code : str
    dtype : str                     the dtype of q in the fixed call
    outputs, reference : tuple of 4 float64 arrays (q_rot, k_rot, k_pool, v_pool)
    max_error : float               the largest ``|op - reference|`` over all four outputs
    matches : bool                  q_rot, k_rot within :mod:`ropepool.tolerance`; pools exact
    """

    code: str
    dtype: str
    outputs: tuple
    reference: tuple
    max_error: float
    matches: bool


def _pools_match(got, ref, kw, dtype, k=None, norm_dim=0) -> bool:
    """Pools within the k rotation's bound (v rows and untouched rows are then exact); ``k``: what
    turned (the normalised k under QK-norm, ``norm_dim`` its head size). FP8 pools: the same codes."""
    k = to_numpy(kw["k"], np.float64) if k is None else k
    worst = (
        error_bound(dtype, to_numpy(kw["positions"]).max(initial=0), pair_norms(k).max(initial=0.0), norm_dim) + 1e-12
    )
    return all(np.abs(g - r).max(initial=0.0) <= worst for g, r in zip(got[2:], ref[2:]))


def run_fixed(spec: ErrorSpec | str) -> FixedRun:
    """Run ``spec.fixed()`` through ``rope_pool_fused`` and the reference, and compare them."""
    spec = CATALOG[spec] if isinstance(spec, str) else spec
    kw = spec.fixed()
    out = rope_pool_fused(**kw)
    rope = rope_of(kw)
    ref = rope_pool_reference(
        kw["q"],
        kw["k"],
        kw["v"],
        kw["positions"],
        kw["slots"],
        kw["k_pool"],
        kw["v_pool"],
        rope_base=kw["rope_base"],
        **{n: kw[n] for n in ROPE_KEYWORDS + FUSION_KEYWORDS if n in kw},
    )
    got = tuple(to_numpy(o, np.float64) for o in out)
    dtype = dtype_name(kw["q"])
    max_error = max((float(np.max(np.abs(g - r))) if g.size else 0.0) for g, r in zip(got, ref))
    positions = to_numpy(kw["positions"])
    eps, D = kw.get("norm_eps", 1e-6), got[0].shape[-1]  # QK-norm: the bound of what turns, the normalised input
    x = {
        n: (
            to_numpy(kw[n], np.float64)
            if kw.get(f"{n}_norm_weight") is None
            else rms_norm(kw[n], kw[f"{n}_norm_weight"], eps)
        )
        for n in ("q", "k")
    }
    norm_dim = D if any(kw.get(f"{n}_norm_weight") is not None for n in ("q", "k")) else 0
    matches = (
        all(g.shape == r.shape for g, r in zip(got, ref))
        and error_ratio(got[0], ref[0], x["q"], positions, dtype, rope, norm_dim) <= 1
        and error_ratio(got[1], ref[1], x["k"], positions, dtype, rope, norm_dim) <= 1
        and _pools_match(got, ref, kw, dtype, x["k"], norm_dim)
    )
    return FixedRun(spec.code, dtype, got, ref, max_error, matches)


def describe(value) -> str:
    """A short description of one argument: kind, shape and dtype of an array (values if small ints)."""
    if is_array(value):
        kind = "mx.array" if type(value).__module__.startswith("mlx") else "np.ndarray"
        text = f"{kind} {tuple(value.shape)} {dtype_name(value)}"
        if value.ndim == 1 and "int" in dtype_name(value) and value.size <= 8:
            text += f" {to_numpy(value).tolist()}"
        if "float" in dtype_name(value) and largest_abs(value) >= 1e6:  # values no activation has (norm_overflow)
            text += f", |values| up to {largest_abs(value):.3g}"
        if isinstance(value, np.ndarray):  # what inplace=True needs of a NumPy pool
            if not value.flags.writeable:
                text += ", read-only"
            if not value.flags.c_contiguous:
                text += ", strided"
        return text
    if isinstance(value, list):
        return f"list of {len(value)}"
    return repr(value)


def changes(bad: dict, good: dict) -> list[tuple[str, str, str]]:
    """(argument, in the bad call, in the fixed call) for every argument the fix changes."""
    missing = "(not passed)"
    rows = []
    for name in list(good) + [n for n in bad if n not in good]:
        b = describe(bad[name]) if name in bad else missing
        g = describe(good[name]) if name in good else missing
        if b != g:
            rows.append((name, b, g))
    return rows


def error_card(
    spec: ErrorSpec, err: RopePoolError, run: FixedRun | None = None, bad: dict | None = None, good: dict | None = None
) -> str:
    """An HTML card: the error as raised, what it means, causes, the fix and (given) the fixed call's result.

    The card is a ``<div class="ropepool-error-card" data-code="...">``.
    """
    e = html.escape
    parts = [
        f'<div class="ropepool-error-card" data-code="{e(spec.code)}" '
        'style="border:1px solid #ccc;border-radius:6px;padding:0.5em 1em;margin:0.5em 0">',
        f"<h4 style='margin:0.2em 0'><code>{e(spec.code)}</code> <small>({e(ORIGINS[spec.origin])})</small></h4>",
    ]
    if bad is not None and good is not None and changes(bad, good):
        from .gqa import table_html

        parts.append(table_html(("argument", "bad call", "fixed call"), changes(bad, good), "ropepool-change"))
    parts.append(f"<pre style='{ERROR_TEXT_STYLE}'>RopePoolError: {e(str(err))}</pre>")
    parts.append(f"<p><b>What it means.</b> {e(spec.meaning)}</p>")
    parts.append("<p><b>Common causes.</b></p><ul>" + "".join(f"<li>{e(c)}</li>" for c in spec.causes) + "</ul>")
    parts.append(f"<p><b>Fix.</b> {e(spec.fix)}</p>")
    if run is not None:
        verdict = "matches" if run.matches else "does NOT match"
        parts.append(
            f"<p><b>After the fix</b> the call succeeds and {verdict} the float64 reference "
            f"({run.dtype}, largest difference {run.max_error:.1e}).</p>"
        )
    parts.append("</div>")
    return "".join(parts)


class BreakIt(W.VBox):
    """Pick a mistake from the catalog; see the error it raises, what it means and how to fix it.

    Attributes
    ----------
    mistake : Dropdown     ``description="Mistake"``; options (label, code) over the catalog
    card : HTML            :func:`error_card` of the chosen mistake
    error : RopePoolError  the error the bad call raised (proved by ``expect_error``)
    run : FixedRun         the fixed call, compared with the reference

    Example
    -------
    >>> w = BreakIt()
    >>> w.mistake.value = "k_shape"
    >>> w.error.code
    'k_shape'
    """

    def __init__(self, code: str = "k_shape"):
        self._cache: dict[str, tuple[RopePoolError, FixedRun, str]] = {}
        options = [(mistake_label(spec), spec.code) for spec in CATALOG.values()]
        # as wide as the longest label (about 0.6em a character) plus the description, never past the cell
        self.mistake = W.Dropdown(
            description="Mistake",
            options=options,
            value=code,
            style={"description_width": "5em"},
            layout=W.Layout(width=f"{5 + 0.62 * LABEL_CHARS + 3:.0f}em", max_width="100%"),
        )
        self.card = W.HTML()
        self.error: RopePoolError | None = None
        self.run: FixedRun | None = None
        self.mistake.observe(lambda change: self.update(), names="value")
        super().__init__([self.mistake, self.card])
        self.update()

    def update(self) -> None:
        code = self.mistake.value
        if code not in self._cache:
            spec = CATALOG[code]
            bad, good = spec.trigger(), spec.fixed()
            err = expect_error(code, rope_pool_fused, **bad)
            run = run_fixed(spec)
            self._cache[code] = (err, run, error_card(spec, err, run, bad, good))
        self.error, self.run, self.card.value = self._cache[code]
