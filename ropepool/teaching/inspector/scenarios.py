"""The runs the inspector shows: a served run recorded step by step, on SmolLM2 or a tiny stand-in.

Each scenario makes an :class:`~ropepool.engine.Engine`, adds its prompts, records every step
(:func:`ropepool.engine.recording.record`) and serves to the end:

- ``sharing``: four questions behind one system prompt, the prefix cache on: the first computes the
  shared rows, the others wait a step and point at them;
- ``preemption``: three prompts in a pool too small for all, chunks of 16 tokens: chunked prefill,
  preemption, the tree giving rows back;
- ``window``: a tiny Gemma-3 (a sliding window of 4 on one layer of two) without the prefix cache: each
  request's ring (at most window rows) beside the full layers' pool;
- ``mla``: a tiny DeepSeek-V3 (MLA): the pool rows hold the latent; sharing as in ``sharing``.

``model="smollm2"`` serves SmolLM2-135M-Instruct where it can be fetched (``sharing`` and
``preemption``; it has no sliding window and no MLA), else the tiny stand-in, saying why in ``about``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...engine import Engine
from ...engine.recording import Recording, record

SCENARIOS = ("sharing", "preemption", "window", "mla")
MODELS = ("smollm2", "tiny")
SYSTEM = (
    "You are a patient tutor in a workshop on serving language models. Answer each question in one short "
    "sentence, with the fact first and no preamble. Never ask a question back, and never repeat the question."
)
QUESTIONS = ("What is the capital of France?", "What is 2 + 3?", "Who wrote Romeo and Juliet?", "What is the Moon?")


@dataclass
class Run:
    """A recorded run: the recording, how to read tokens, and what was served (a title and a line)."""

    recording: Recording
    engine: Engine
    decode: object
    title: str
    about: str


def tiny_prompts(count: int, common: int, own: int) -> list[list[int]]:
    """``count`` prompts of made-up token ids: ``common`` shared ones, then ``own`` of each's own."""
    shared = [1, *range(10, 9 + common)]
    return [shared + [60 + 7 * i + j for j in range(own)] for i in range(count)]


#: The scenarios only a tiny model serves: its name, its prompts (count, common, own), its title, why not SmolLM2.
_TINY_ONLY = {
    "window": ("gemma3", (3, 4, 8), "tiny Gemma-3 (random weights)", "SmolLM2 has no sliding window"),
    "mla": ("deepseek-v3", (3, 36, 3), "tiny DeepSeek-V3 (random weights)", "SmolLM2 has no MLA"),
}


def _model(scenario: str, model: str, progress):
    """(model, prompts, decode, name, why): what serves the scenario."""
    from ...loaders.tiny import build

    if scenario in _TINY_ONLY:
        name, counts, title, why = _TINY_ONLY[scenario]
        return build(name), tiny_prompts(*counts), None, title, why
    why = ""
    if model == "smollm2":
        from ...loaders.fetch import ModelUnavailable
        from ...loaders.smollm2 import load_smollm2

        try:
            m, tok, _ = load_smollm2(pairs="gptj", progress=progress)
            n = 4 if scenario == "sharing" else 3
            chats = [
                tok.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}])
                for q in QUESTIONS[:n]
            ]
            return m, chats, tok.decode, "SmolLM2-135M-Instruct", ""
        except ModelUnavailable as err:
            why = f"SmolLM2 is not here ({err}): "
    prompts = tiny_prompts(4, 40, 4) if scenario == "sharing" else tiny_prompts(3, 4, 16)
    return build("llama-gqa"), prompts, None, "tiny Llama (random weights)", why + "the tiny stand-in"


def run(scenario: str = "sharing", model: str = "tiny", *, progress=None) -> Run:
    """Serve ``scenario`` on ``model`` ("smollm2" or "tiny"), every step recorded; progress lines go to ``progress``."""
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}, got {scenario!r:.40}")
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {model!r:.40}")
    m, prompts, decode, name, why = _model(scenario, model, progress)
    longest = max(map(len, prompts))
    if scenario == "preemption":
        new, kwargs = 8, dict(pool_rows=longest + 28, max_step_tokens=16)
    elif scenario == "window":
        new, kwargs = 8, dict(pool_rows=64, prefix_cache=False)
    else:
        new, kwargs = 4, dict(pool_rows=-(-(longest * len(prompts) + 16) // 16) * 16)
    engine = Engine(m, **kwargs)
    for p in prompts:
        engine.add_request(p, new)
    rec = record(engine)
    live = progress is not None and progress.isatty()  # a terminal: one line redrawn; a log: a line a step
    while not engine.done:
        engine.step()
        if progress is not None:
            line = f"step {engine.steps}: {engine.stats.prefill_tokens} prompt tokens computed so far"
            print(("\r" if live else "") + line, end="" if live else "\n", file=progress, flush=True)
    if live:
        print(file=progress)
    settings = ", ".join(f"{k} {v}" for k, v in kwargs.items())
    about = (
        f"{scenario}: {len(prompts)} prompts on {name}, {new} new tokens each, {settings}; "
        f"{len(rec)} steps recorded{'; ' + why if why else ''}.{_mla_row(engine, m)}"
    )
    return Run(rec, engine, decode, f"ropepool inspect: {scenario}", about)


def _mla_row(engine: Engine, model) -> str:
    """For an MLA model, what one pool row holds against the k and v of its heads; else nothing."""
    mla = engine.runner.spec.mla
    if mla is None:
        return ""
    heads = model.args.num_attention_heads
    latent, kv = mla.kv_lora_rank + mla.rope_dim, heads * (mla.nope + mla.rope_dim + mla.v_head_dim)
    return (
        f" MLA: a pool row holds one latent of {mla.kv_lora_rank} + {mla.rope_dim} (RoPE) = {latent} values a layer, "
        f"where the k and v of its {heads} heads would take {kv}: {kv / latent:.1f}x fewer; every request's rows are "
        "found, shared and evicted as in any other model."
    )
