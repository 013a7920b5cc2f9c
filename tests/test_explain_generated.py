"""``explain`` on the op's own errors, generated: every preset times every wrong quantity, each raised by a
real call, read back in both forms (SGLang's first line alone, and with ropepool's "expected (...)" line);
and DeepSeek-V3's MLA mistakes, raised by ``rope_pool_fused_mla``.

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


# --- MLA (DeepSeek-V3's config): rope_pool_fused_mla's shape messages ---------------------------------------------


def _mla_config():
    from ropepool.models import load_preset

    c = load_preset("deepseek-v3")
    return c["num_attention_heads"], c["kv_lora_rank"], c["qk_rope_head_dim"], c["qk_nope_head_dim"]


# mistake: (the wrong call's arguments from the right ones, the case, the call fixed as the diagnosis's fix says)
MLA_MISTAKES = {
    "q_pe_whole_head": (
        lambda kw, nope: {
            **kw,
            "q_pe": mx.concatenate([mx.zeros((*kw["q_pe"].shape[:2], nope), kw["q_pe"].dtype), kw["q_pe"]], -1),
        },
        lambda bad, R, nope: {**bad, "q_pe": mx.split(bad["q_pe"], [nope], axis=-1)[1]},
    ),
    "q_pe_heads": (
        lambda kw, nope: {**kw, "q_pe": kw["q_pe"][:, :16]},
        lambda bad, R, nope: {**bad, "num_qo_heads": 16},
    ),
    "k_pe_repeated": (
        lambda kw, nope: {**kw, "k_pe": mx.repeat(kw["k_pe"], kw["num_qo_heads"], axis=1)},
        lambda bad, R, nope: {**bad, "k_pe": bad["k_pe"][:, :1]},
    ),
    "k_pe_with_c_kv": (
        lambda kw, nope: {**kw, "k_pe": mx.concatenate([kw["c_kv"][:, None], kw["k_pe"]], -1)},
        lambda bad, R, nope: {**bad, "k_pe": mx.split(bad["k_pe"], [R], axis=-1)[1]},
    ),
    "c_kv_with_k_pe": (
        lambda kw, nope: {**kw, "c_kv": mx.concatenate([kw["c_kv"], kw["k_pe"][:, 0]], -1)},
        lambda bad, R, nope: {**bad, "c_kv": mx.split(bad["c_kv"], [R], axis=-1)[0]},
    ),
    "latent_pool_per_head": (
        lambda kw, nope: {**kw, "latent_pool": mx.repeat(kw["latent_pool"], kw["num_qo_heads"], axis=1)},
        lambda bad, R, nope: {**bad, "latent_pool": bad["latent_pool"][:, :1]},
    ),
    "latent_pool_without_rope": (
        lambda kw, nope: {**kw, "latent_pool": kw["latent_pool"][..., : kw["kv_lora_rank"]]},
        lambda bad, R, nope: {
            **bad,
            "latent_pool": mx.zeros((bad["latent_pool"].shape[0], 1, R + bad["rope_dim"]), bad["latent_pool"].dtype),
        },
    ),
}


def test_every_mla_case_is_generated():
    from ropepool.diagnosis.mla import MLA_CASES

    assert set(MLA_MISTAKES) == set(MLA_CASES)


@pytest.mark.parametrize("mistake", list(MLA_MISTAKES))
def test_generated_mla_case(mistake):
    """DeepSeek-V3's sizes: each MLA mistake, raised by a real call, is named in both forms with the
    config's numbers, and the fix the diagnosis names (the split, the single key, the pool's width) passes."""
    from ropepool.inputs import mla_inputs
    from ropepool.mla import rope_pool_fused_mla

    Hq, R, rd, nope = _mla_config()
    kw = mla_inputs(tokens=T, num_qo_heads=Hq, kv_lora_rank=R, rope_dim=rd, pool_rows=8)
    make_bad, fixed = MLA_MISTAKES[mistake]
    bad = make_bad(kw, nope)
    with pytest.raises(RopePoolError) as e:
        rope_pool_fused_mla(**bad)
    f = facts_of("deepseek-v3")
    assert (f.kv_lora_rank, f.rope_dim) == (R, rd)
    for text in (str(e.value), e.value.first_line):
        d = diagnose(text, f)
        assert d.case == mistake, (
            f"{mistake} ({'line alone' if text == e.value.first_line else 'full'}): {d.case}: {d.why}"
        )
    flat = " ".join(d.fix.split())
    number = {"q_pe_whole_head": nope, "q_pe_heads": 16, "k_pe_with_c_kv": R, "c_kv_with_k_pe": R}.get(mistake, R + rd)
    if mistake != "k_pe_repeated":
        assert str(number) in flat, flat
    rope_pool_fused_mla(**fixed(bad, R, nope))  # the fix, applied, passes
