"""``explain`` on the op's own errors, generated: every preset times every wrong quantity, each raised by a
real call, read back in both forms (SGLang's first line alone, and with ropepool's "expected (...)" line).

The full form must name the one mistake; the first line alone must name it too where the numbers allow,
and otherwise say which mistakes they fit (never a single wrong fix). Where the fix is an argument, the
call with it passes, and the fix never repeats the value that was passed.
"""

import mlx.core as mx
import pytest

from ropepool import RopePoolError, Shapes, make_inputs, rope_pool_fused
from ropepool.cli.explain import facts_of
from ropepool.diagnosis import diagnose
from ropepool.models import beyond_preset_names, preset, preset_names

T = 3


def _zeros(*shape):
    return mx.zeros(shape, mx.float16)


def _not_dividing(hq: int) -> int:
    return next(h for h in range(2, 200) if hq % h)


# mistake: (applies to the preset?, bad call from (params, kw), case of the full form, cases the line alone may give,
#           the argument fix as {keyword: value} from params, or None)
MISTAKES = {
    "num_kv_heads_wrong": (
        lambda p: True,
        lambda p, kw: {**kw, "num_kv_heads": p.num_qo_heads if p.group_size > 1 else 1},
        "num_kv_heads",
        {"ambiguous"},
        lambda p: {"num_kv_heads": p.num_kv_heads},
    ),
    "k_repeated_to_hq": (
        lambda p: p.group_size > 1,
        lambda p, kw: {**kw, "k": mx.repeat(kw["k"], p.group_size, axis=1)},
        "repeated_k",
        {"repeated_k"},
        None,
    ),
    "k_head_dim": (
        lambda p: True,
        lambda p, kw: {**kw, "k": kw["k"][..., : p.head_dim // 2]},
        "head_dim",
        {"head_dim"},
        None,
    ),
    "k_one_token_longer": (
        lambda p: True,
        lambda p, kw: {**kw, "k": _zeros(T + 1, p.num_kv_heads, p.head_dim)},
        "tokens",
        {"ambiguous"},
        None,
    ),
    "q_with_kv_heads": (
        lambda p: p.group_size > 1,
        lambda p, kw: {**kw, "q": _zeros(T, p.num_kv_heads, p.head_dim)},
        "q_as_kv",
        {"q_as_kv"},
        None,
    ),
    "head_counts_swapped": (
        lambda p: p.group_size > 1,
        lambda p, kw: {**kw, "num_qo_heads": p.num_kv_heads, "num_kv_heads": p.num_qo_heads},
        "num_qo_heads",
        {"ambiguous"},
        lambda p: {"num_qo_heads": p.num_qo_heads, "num_kv_heads": p.num_kv_heads},
    ),
    "head_dim_passed_wrong": (
        lambda p: True,
        lambda p, kw: {**kw, "head_dim": _wrong_head_dim(p)},
        "head_dim",
        {"ambiguous"},
        lambda p: {"head_dim": p.head_dim},
    ),
    "pool_with_hq": (
        lambda p: p.group_size > 1,
        lambda p, kw: {
            **kw,
            "k_pool": _zeros(8, p.num_qo_heads, p.head_dim),
            "v_pool": _zeros(8, p.num_qo_heads, p.head_dim),
        },
        "pool_with_hq",
        {"pool_with_hq"},
        None,
    ),
    "v_repeated": (
        lambda p: p.group_size > 1,
        lambda p, kw: {**kw, "v": mx.repeat(kw["v"], p.group_size, axis=1)},
        "repeated_v",
        {"repeated_v"},
        None,
    ),
    "kv_heads_not_dividing": (
        lambda p: True,
        lambda p, kw: _not_dividing_call(p, kw),
        "group_size",
        {"group_size"},
        lambda p: {"num_kv_heads": p.num_kv_heads},
    ),
    "k_zero_heads": (
        lambda p: True,
        lambda p, kw: {**kw, "k": _zeros(T, 0, p.head_dim)},
        "zero_heads",
        {"zero_heads"},
        None,
    ),
}


def _wrong_head_dim(p):
    naive = facts_of(_name[p.name]).naive_head_dim
    return naive if naive != p.head_dim else p.head_dim // 2


def _not_dividing_call(p, kw):
    h = _not_dividing(p.num_qo_heads)
    return {
        **kw,
        "num_kv_heads": h,
        "k": _zeros(T, h, p.head_dim),
        "v": _zeros(T, h, p.head_dim),
        "k_pool": _zeros(8, h, p.head_dim),
        "v_pool": _zeros(8, h, p.head_dim),
    }


# The presets of rope_pool_fused's shapes: the GQA ones, and those beyond GQA whose cache is per-head k and v
# (MHA Llama-2, Gemma-3's and GPT-OSS's sliding windows, Qwen2-VL's mrope); DeepSeek-V3's latent cache is
# rope_pool_fused_mla's, generated below.
NAMES = preset_names() + [n for n in beyond_preset_names() if n != "deepseek-v3"]
_name = {preset(n).name: n for n in NAMES}
CASES = [(n, m) for n in NAMES for m, spec in MISTAKES.items() if spec[0](preset(n))]


def test_the_table_covers_every_preset_and_over_a_hundred_cases():
    assert {n for n, _ in CASES} == set(NAMES) and len(CASES) >= 100
    assert set(NAMES) | {"deepseek-v3"} == set(preset_names()) | set(beyond_preset_names())


@pytest.mark.parametrize("name, mistake", CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_generated_case(name, mistake):
    p = preset(name)
    kw = make_inputs(Shapes(T, p.num_qo_heads, p.num_kv_heads, p.head_dim, 8), "float16")
    _, build, full_case, alone_cases, arg_fix = MISTAKES[mistake]
    bad = build(p, kw)
    with pytest.raises(RopePoolError) as e:
        rope_pool_fused(**bad)
    f = facts_of(name)
    full, alone = diagnose(str(e.value), f), diagnose(e.value.first_line, f)
    assert full.case in (full_case, f"{full_case}_from_hidden"), f"{name} {mistake}: {full.case}: {full.why}"
    assert alone.case in alone_cases | {full.case}, f"{name} {mistake} (line alone): {alone.case}: {alone.why}"
    if alone.case == "ambiguous":
        assert full_case.split("_")[0] in alone.why and "Check" in alone.fix
    if arg_fix is not None:
        fix = arg_fix(p)
        flat = " ".join(full.fix.split())
        for key, value in fix.items():
            if bad.get(key) != value:  # the argument that was wrong: the fix names the model's value, not the passed
                assert f"{key}={value}" in flat and f"{key}={bad[key]}" not in flat.replace(f"{key}={value}", "")
        rope_pool_fused(**{**bad, **fix, **{k: kw[k] for k in ("k", "v", "k_pool", "v_pool")}})


@pytest.mark.parametrize("name", ["llama-3-8b", "gemma-2-9b", "falcon-7b"])
def test_the_line_alone_is_named_once_the_passed_count_is_known(name):
    """k one token longer, SGLang's line alone: with the num_kv_heads the call passed (the model's, right),
    only the token count is left; with a wrong count passed, the count is named."""
    p = preset(name)
    line = f"k shape must be [num_tokens, num_kv_heads, head_dim], got ({T + 1}, {p.num_kv_heads}, {p.head_dim})"
    assert diagnose(line, facts_of(name, passed_kv_heads=p.num_kv_heads)).case == "tokens"
    wrong = p.num_qo_heads if p.group_size > 1 else 2
    d = diagnose(line, facts_of(name, passed_kv_heads=wrong))
    assert d.case == "num_kv_heads" and f"num_kv_heads={p.num_kv_heads}" in d.fix
