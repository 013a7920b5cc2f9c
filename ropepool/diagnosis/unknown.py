"""A message no family's reader knows: read from its numbers, or from the words it names, or said foreign.

Only where no recogniser reads the text. Its message line (the last line naming an error) gives:

- numbers: two shapes (their differing axes), a size and a shape (a view), a count that must divide
  another, an index past a size, or two numbers compared; each read by the one core
  (:mod:`.sizes`) against the model's sizes, said as a message of a framework explain does not know;
- no numbers, but heads, KV heads, head_dim, RoPE, rotary, cos/sin, positions or the KV cache named: the
  candidates that fit the model, and what to print to tell them apart;
- a tokenizer's files, the CUDA driver, the network: ``not_mine``, said as such (no RoPE, GQA or KV-cache
  mistake gives them);
- another domain's words (channels, images, batch norm, truncation, the disk, HTTP) with no number the
  model's, or numbers none of which is a size of the model: ``likely_not_mine``, with what would make it one.

A single reading of such a message is said unconfirmed (``ambiguous`` with one option): its framework is
not one explain reads. Decimals (0.25, 1e-5) are read whole, never as two integers.

Anything else stays unread (None). Time: linear in the text (one scan for the message line, then a
bounded window).
"""

from __future__ import annotations

import re

from .base import Diagnosis, Facts, ambiguous
from .heads import index_case, view_case
from .sizes import (
    describe_sizes,
    divides_case,
    name_of,
    order_case,
    read_pair,
    read_shapes,
    scaling_factor_line,
    vocabulary,
)
from .text import WINDOW, integer, product, shapes

#: A line that states an error: ``XError: ...``, ``error: ...``, ``RuntimeError(...)``, ``failed``, ``Assertion``.
_ERROR_LINE = re.compile(r"\w*(?:Error|Exception)\b[:(]|\berror\b\s*[:\]]|\bfailed\b|\bAssertion|\bcheck failed", re.I)
#: Foreign: what no RoPE, GQA or KV-cache mistake prints.
_FOREIGN = (
    (
        "a tokenizer's files or its loading",
        re.compile(
            r"tokenizer(?:\.json|_config|\.model| file|s?\b.{0,60}(?:not found|no such file|can't load|cannot load"
            r"|couldn't|could not|failed to load|missing|corrupt|parse))|sentencepiece|merges\.txt|vocab\.json",
            re.I,
        ),
        "Load the tokenizer that ships with the checkpoint (its tokenizer.json / tokenizer.model), with the "
        "tokenizers or sentencepiece version it needs.",
    ),
    (
        "the CUDA driver or runtime",
        re.compile(
            r"CUDA driver|driver version|no CUDA GPUs|NVIDIA driver|cudaErrorInsufficientDriver|CUDA_ERROR_NO_DEVICE"
            r"|libcuda|cudaErrorNoDevice|CUDA initialization|forward compatibility was attempted",
            re.I,
        ),
        "Match the driver to the CUDA runtime (nvidia-smi shows the driver's CUDA version), or run on the CPU.",
    ),
    (
        "the network",
        re.compile(
            r"ConnectionError|Connection refused|Max retries exceeded|Name or service not known|Temporary failure in "
            r"name resolution|SSLError|ReadTimeout|ConnectTimeout|Network is unreachable|getaddrinfo|HTTPError|"
            r"\b(?:401|403|404|502|503) Client Error|ProxyError",
            re.I,
        ),
        "Check the connection, the proxy and the token (HF_TOKEN), or load from a local folder (HF_HUB_OFFLINE=1).",
    ),
    (
        "a loss's logits and labels",
        re.compile(r"Expected input batch_size \(\d+\) to match target batch_size|cross_entropy|nll_loss", re.I),
        "Give the loss logits and labels of the same tokens: flatten both to [B*T, V] and [B*T], labels shifted "
        "by one against the logits (or passed as labels= to the model, which shifts them), padding set to -100.",
    ),
)
#: A number as written: an integer, or a decimal (0.25, 1e-5) that is read whole, never as two integers.
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.]\d)")
#: Words of other domains: where one appears and no number is a size of the model, the message is probably
#: not a head, RoPE or KV-cache error.
_ELSEWHERE = (
    ("a convolution's channels (Conv1d/Conv2d)", re.compile(r"\bconv\w*|Given groups=|\bchannels?\b", re.I)),
    ("an image", re.compile(r"\bimages?\b|\bpixels?\b|\bRGBA?\b", re.I)),
    ("a batch norm", re.compile(r"batch_?norm|running_(?:mean|var)", re.I)),
    ("a tokenizer (truncation, padding)", re.compile(r"tokeniz|truncat|\bpadding side", re.I)),
    ("the CUDA driver", re.compile(r"\bdriver\b", re.I)),
    ("the network (HTTP)", re.compile(r"\bHTTPS?\b(?!://)|\bsocket\b", re.I)),  # a link to docs is no network
    ("the disk", re.compile(r"No space left|disk quota|\bdisk\b", re.I)),
)
#: A count that must be larger or smaller than another: (the relation).
_ORDER = re.compile(
    r"must (?:be )?(greater|larger|more|bigger|exceed|less|smaller|fewer|at least|at most|not exceed)", re.I
)
_WHEN = re.compile(r"\b(?:when|if|with) (.{1,80}?)\s*(?:$|[.;])", re.I)
#: A scaling factor written as a decimal below 1.
_FACTOR = re.compile(r"\bfactor\b.{0,80}?(?<![\w.])(0?\.\d+|\d\.?\d*[eE]-\d+)(?![\d.])", re.I)
#: Frameworks a message may name, for the verdict to say which one it was.
_FRAMEWORK = re.compile(
    r"flash_attn|flash-attn|flashinfer|xformers|triton|vllm|llama\.cpp|llama_|ggml|gguf|jax|numpy|tensorflow|"
    r"deepspeed|megatron|tensorrt|onnx|tokenizers|accelerate|exllama|sglang|mlx|torch",
    re.I,
)
_DIVIDES = re.compile(r"divisible by|multiple of|does not divide|not divisible|must divide|evenly divide", re.I)
_INDEX = re.compile(r"index (-?\d{1,30})\b.{0,80}?(?:size|length|bounds|range|max\w*)\D{0,30}?(\d{1,30})", re.I)
_NUMEL = re.compile(r"(?:of size|with size|numel|elements?|of) \(?(\d{1,30})\)?(?: elements)?", re.I)
_RESHAPE = re.compile(r"reshape|\bview\b", re.I)
#: What the message says the tensors were in: a write (into a cache, a slice) or attention (a product).
_WRITE = re.compile(
    r"\bwrit|\bcop(?:y|ied)|\bassign|setitem|index_put|indexing result|value tensor|\bstore|\bcache", re.I
)
_ATTENTION = re.compile(r"attention|\bquery\b|\bq\b|matmul|\bbmm\b|score|sdpa|softmax|einsum", re.I)
_COMPARED = re.compile(r"match|mismatch|expected|got|!=|\bvs\.?\b|equal|differ|incompatible|same|must be", re.I)
#: Words that name what a number is, read just before it.
_ROLE_WORDS = (
    ("kv_heads", re.compile(r"kv[_ ]?heads?|num_key_value|n_kv|key_value|kv_head", re.I)),
    ("head_dim", re.compile(r"head[_ ]?dim|head[_ ]?size|headdim|d_head|dim_head", re.I)),
    ("heads", re.compile(r"heads?\b|n_head|num_head|nheads", re.I)),
    ("rotary", re.compile(r"rotary|rope|cos|sin|freq", re.I)),
    ("positions", re.compile(r"position|pos\b|max_len|max_position|context|seq_?len|sequence", re.I)),
    ("tp", re.compile(r"tensor.parallel|\btp(?:_size|_degree|_world_size)?\b|world.size|ranks?\b", re.I)),
)
#: Topics a message without numbers may name: the candidates each gives.
_TOPICS = dict(
    kv_heads=re.compile(r"kv[_ ]heads?|num_key_value_heads|n_kv_heads|key_value_heads|\bGQA\b|\bMQA\b", re.I),
    head_dim=re.compile(r"head[_ ]?dim|head size|headdim", re.I),
    rope=re.compile(r"\brope\b|rotary|\bcos\b|\bsin\b|cos_sin|inv_freq|rope_scaling|rope_theta", re.I),
    positions=re.compile(r"\bpositions?\b|position_ids|max_position", re.I),
    kv_cache=re.compile(r"kv[_ ]?cache|cache blocks?|kv blocks?|block_table|page_size|slot_mapping", re.I),
    heads=re.compile(r"\bheads?\b|num_attention_heads|n_heads", re.I),
    memory=re.compile(
        r"out of memory|\bOOM\b|tried to allocate|not enough memory|insufficient memory|"
        r"KV cache (?:is needed|memory)|\d\s*GiB KV cache",
        re.I,
    ),
)


def message_line(text: str) -> str:
    """The last line of ``text`` (its last :data:`WINDOW` * 4 characters) that names an error, with the lines
    after it where it ends in ":" (a message whose body follows); else its last line."""
    tail = text[-WINDOW * 4 :]
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    for k in range(len(lines) - 1, -1, -1):
        line = lines[k][:WINDOW]
        if _ERROR_LINE.search(line):
            if line.endswith(":"):  # its body (the shapes, the names) follows on the next lines
                line = " ".join([line] + lines[k + 1 : k + 8])[:WINDOW]
            return line
    return lines[-1][:WINDOW] if lines else ""


def framework_named(text: str) -> str:
    m = _FRAMEWORK.search(text[-WINDOW * 4 :])
    return (
        f"it names {m.group(0)}, whose message explain has no reader for" if m else "a framework explain does not know"
    )


_TOKEN = re.compile(r"[\w.~/-]+")
_KEPT = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\d+x\d+")  # a number, or a product's m x k


def without_names(line: str) -> str:
    """``line`` with its names blanked: a path or a token of letters with digits (``llama-3-8b``, ``float16``,
    ``layers.3.mlp``, ``sm_90``) names a thing and counts nothing, so its digits are never read as sizes."""

    def blank(m: re.Match) -> str:
        token = m.group(0)
        named = re.search(r"\d", token) and ("/" in token or re.search(r"[A-Za-z]", token))
        return " " * len(token) if named and not _KEPT.fullmatch(token.strip(".-")) else token

    return _TOKEN.sub(blank, line)


def _roles(line: str) -> list[tuple[int, str | None, int]]:
    """Each number of ``line`` with the role the words just before it name (None: unnamed), and its place."""
    out = []
    for m in _NUMBER.finditer(line):
        if not re.fullmatch(r"-?\d+", m.group(0)):  # a decimal (0.25, 1e-5) is no count
            continue
        before = line[max(0, m.start() - 28) : m.start()]
        role = next((name for name, words in _ROLE_WORDS if words.search(before)), None)
        out.append((integer(m.group(0)), role, m.start()))
    return out


_MATRIX = re.compile(r"\b(\d{1,19})x(\d{1,19})\b")


def _from_shapes(line: str, f: Facts) -> tuple[str, tuple] | None:
    found = [s for s in shapes(line) if len(s) >= 2]
    matrices = [(integer(a), integer(b)) for a, b in _MATRIX.findall(line)[:2]]
    if not found and len(matrices) == 2 and matrices[0][1] != matrices[1][0]:  # a product: (m x k) @ (k x n)
        (m, k), (k2, n) = matrices
        return f"a product of {m}x{k} and {k2}x{n}: {k} against {k2}", read_pair(k, k2, None, None, f, "attention")
    numel = _NUMEL.search(line)
    n = integer(numel.group(1)) if numel else None
    if len(found) == 2 and _RESHAPE.search(line) and len(found[1]) >= 3:  # a shape reshaped into another
        found, n = found[1:], product(found[0])
    if len(found) == 1 and n and len(found[0]) >= 3:  # a view or reshape: a size into a shape
        dims = found[0]
        if -1 in dims[:-2] or n == product(dims):
            return None
        rows = product(dims[:-2])
        width = n // rows if rows and n % rows == 0 else None
        nheads = None if dims[-2] == -1 else dims[-2]
        verdict = view_case(width, nheads, dims[-1], f, rows=rows, numel=n)
        return f"{n} values into {list(dims)}: " + (f"{width} per row" if width else "not whole rows"), verdict
    if len(found) < 2:
        return None
    pairs = [(a, b) for i, a in enumerate(found[:8]) for b in found[i + 1 : 8] if a != b]  # q, k and v: q against k
    return read_shapes(*pairs[0], f, doing_of(line)) if pairs else None


def doing_of(line: str) -> str | None:
    """``write``, ``attention`` or None: what the message says its tensors were in, where only one is said."""
    write, attention = bool(_WRITE.search(line)), bool(_ATTENTION.search(line))
    return "write" if write and not attention else "attention" if attention and not write else None


def _elsewhere(line: str, f: Facts) -> tuple | None:
    """A message that speaks another domain's words (channels, images, a tokenizer) and whose numbers are
    none of the model's sizes: probably not a head, RoPE or KV-cache error, said so with what would make it one."""
    found = [what for what, words in _ELSEWHERE if words.search(line)]
    counts = [n for n, _, _ in _roles(line)]
    sizes = vocabulary(f)
    if not found or (f.known and any(n in sizes for n in counts if n > 1)):
        return None
    listed = ", ".join(str(n) for n in dict.fromkeys(counts))
    match = (
        f"none of them is a size of {f.name} ({describe_sizes(f)})"
        if f.known
        else "none is checked against a model (add --model)"
    )
    numbers = f"its numbers ({listed}): {match}" if listed else "it carries no numbers"
    why = (
        f"probably not a head, RoPE or KV-cache error: it speaks of {', '.join(found)}, and {numbers}. It would be one only if one of its numbers were the model's head count, head_dim, rotary width "
        "or a cache length."
    )
    fix = (
        "Read it as the error of that part (its own documentation); explain reads attention, RoPE and KV-cache shapes."
    )
    return "another domain's words: " + ", ".join(found), ("likely_not_mine", "foreign", why, fix)


def _ordered(line: str, f: Facts) -> tuple[str, tuple] | None:
    """A count that must be greater (or less) than another, each named by the words before it."""
    m = _ORDER.search(line)
    numbered = _roles(line)
    if not m or len(numbered) < 2:
        return None
    before = [x for x in numbered if x[2] < m.start()] or numbered[:1]
    after = [x for x in numbered if x[2] > m.end()] or numbered[-1:]
    (n, n_role, _), (k, k_role, _) = before[-1], after[0]
    if {n_role, k_role} != {"tp", "kv_heads"}:  # other counts: read as two numbers compared
        return None
    word = m.group(1).lower()
    relation = "greater" if word in ("greater", "larger", "more", "bigger", "exceed", "at least") else "less"
    when = _WHEN.search(line[m.end() :])
    said = f"{n} must be {relation} than {k}"
    return said, order_case(n, n_role, k, k_role, relation, when.group(1) if when else "", f)


def _factor(line: str, f: Facts) -> tuple[str, tuple] | None:
    """A RoPE scaling factor below 1 where at least 1 is asked."""
    m = _FACTOR.search(line)
    if not m or not 0 < float(m.group(1)) < 1:
        return None
    value = float(m.group(1))
    why = scaling_factor_line(value, f) + "."
    case, quantity, text, check = ambiguous([("scaling", why)], "rope_scaling in config.json")
    fix = f" Write the factor as target / original length: {1 / value:g}, not {value:g}."
    return f"a scaling factor of {value:g}", (case, quantity, text, check + fix)


def _from_numbers(line: str, f: Facts) -> tuple[str, tuple] | None:
    m = _INDEX.search(line)
    if m:
        index, size = integer(m.group(1)), integer(m.group(2))
        return f"index {index} against a size of {size}", index_case(index, -1, size, f)
    numbered = _roles(line)
    d = _DIVIDES.search(line)
    if d and len(numbered) >= 2:
        before = [x for x in numbered if x[2] < d.start()] or numbered[:1]
        after = [x for x in numbered if x not in before] or numbered[-1:]
        n, divisor = before[-1], after[0]
        return f"{n[0]} must be a multiple of {divisor[0]}", divides_case(n[0], n[1], divisor[0], divisor[1], f)
    if _COMPARED.search(line):
        values = [x[:2] for x in numbered if x[0] > 0]
        pairs = [(p, q) for i, p in enumerate(values) for q in values[i + 1 :] if p[0] != q[0]]
        if pairs:
            (a, ra), (b, rb) = pairs[0]
            dim = -1 if "head_dim" in (ra, rb) or "rotary" in (ra, rb) else (1 if "heads" in (ra, rb) else None)
            said = " and ".join(f"{v}" + (f" ({r})" if r else "") for v, r in ((a, ra), (b, rb)))
            return f"two numbers compared: {said}", read_pair(a, b, dim, None, f, doing_of(line))
    return None


#: A message saying a config field is missing: (the field).
_MISSING = re.compile(
    r"(?:missing|required|KeyError|has no attribute|not found|absent|undefined)\b.{0,80}?\b(num_key_value_heads|"
    r"num_kv_heads|n_kv_heads|n_head_kv|head_dim|num_attention_heads|n_heads|rope_theta|rotary_dim|"
    r"partial_rotary_factor|max_position_embeddings|rope_scaling|rope_parameters|hidden_size)\b",
    re.I,
)
#: What a config without the field builds instead.
_WITHOUT = {
    "kv": "without it the model is built as MHA (as many KV heads as query heads) and a GQA checkpoint's "
    "k_proj and v_proj do not fit; code that requires it refuses the config",
    "head_dim": "without it head_dim is taken as hidden_size // num_attention_heads, wrong for models that "
    "set it apart (Gemma, Qwen3)",
    "rope": "without it RoPE falls back to a default (rope_theta 10000, no scaling, the whole head rotated), "
    "not the checkpoint's",
}


def _missing_field(line: str, f: Facts) -> tuple | None:
    m = _MISSING.search(line)
    if not m:
        return None
    field = m.group(1)
    kind = "kv" if "kv" in field or "key_value" in field else "rope" if re.search("rope|rotary|position", field) else ""
    value = ""
    if kind == "kv" and f.num_kv_heads and not f.notes and f.num_kv_heads != f.num_qo_heads:
        value = f" ({f.name}'s: {f.num_kv_heads})"
    return (
        "config_field_missing",
        field,
        f"the config (or the arguments built from it) has no {field}: {_WITHOUT.get(kind, _WITHOUT['head_dim'])}.",
        f"Add {field} to the config with the checkpoint's value{value} (its own config.json has it; for the KV "
        "heads: k_proj.weight rows / head_dim).",
    )


def _kv_bytes(f: Facts) -> str:
    Hkv, D, B = f.num_kv_heads, f.head_dim, f.kv_bytes_per_token
    if not (Hkv and D):
        return "add --model for the number"
    lora, rope = f.kv_lora_rank, f.rope_dim
    per = (
        f"{f.name}: one latent of {lora} + {rope} x 2 bytes (bfloat16) = {2 * (lora + rope)} bytes a token and layer"
        if lora and rope  # MLA caches the latent, not k and v
        else f"{f.name}: 2 x {Hkv} x {D} x 2 bytes (bfloat16) = {4 * Hkv * D} bytes a token and layer"
    )
    return per + (f", {B // 1024} KiB a token over all its layers" if B else "")


#: An amount of memory: (the number, its unit).
_AMOUNT = re.compile(r"(\d+(?:\.\d+)?)\s*(GiB|GB|MiB|MB)\b")
#: A number of tokens the message names: (the tokens).
_TOKENS = re.compile(r"(?:max seq len|max_model_len|maximum model length|tokens?)\D{0,12}\(?(\d{3,9})\)?", re.I)


def _kv_memory(line: str, f: Facts) -> tuple | None:
    """A KV cache that does not fit its memory, told with the model's bytes a token: the tokens the memory
    holds and the ways to fit. None where the message names no amounts or the model is not known."""
    amounts = [float(v) * (1024 if u.startswith(("G",)) else 1) for v, u in _AMOUNT.findall(line)]  # in MiB
    if len(amounts) < 2 or not f.kv_bytes_per_token or "kv cache" not in line.lower():
        return None
    per = f.kv_bytes_per_token / 2**20  # MiB a token, bfloat16
    tokens = [int(t) for t in _TOKENS.findall(line)]
    need, have = max(amounts), min(amounts)
    P = f.max_position_embeddings
    why = (
        f"the KV cache does not fit: {_kv_bytes(f)}, so {have / 1024:.2f} GiB holds about {int(have / per)} tokens"
        + (f" and {max(tokens)} tokens need {max(tokens) * per / 1024:.1f} GiB" if tokens else "")
        + f" (the message says {need / 1024:.1f} GiB)"
        + (
            f"; {P} is {f.name}'s max_position_embeddings, the length a server sizes for by default"
            if P in tokens
            else ""
        )
    )
    fix = (
        f"Serve shorter sequences (max_model_len at most {int(have / per)}), give the cache more memory "
        "(gpu_memory_utilization), store it in FP8 (kv_cache_dtype=fp8: half the bytes), or split it over more "
        "GPUs (tensor parallelism divides the KV heads)."
    )
    return "kv_memory", "kv_bytes", why + ".", fix


def _grouped(line: str, f: Facts) -> str:
    """Where the message says one head count must divide the other: whether the model's own do."""
    if not _DIVIDES.search(line):
        return ""
    Hq, Hkv = f.num_qo_heads, f.num_kv_heads
    if not (Hq and Hkv):
        return " (the KV heads passed do not divide the query heads: a config whose num_key_value_heads does not divide num_attention_heads, or axes that are not the heads)"
    if Hq % Hkv:
        return f" ({Hkv} KV heads do not divide {Hq} query heads: the config itself cannot be grouped)"
    return f" (these divide, G = {Hq // Hkv}: the tensors passed are not the model's heads as built)"


def _candidates(line: str, f: Facts) -> tuple | None:
    """A message without numbers naming heads, RoPE, positions or the cache: the mistakes that fit the model."""
    topics = [name for name, words in _TOPICS.items() if words.search(line)]
    if not topics:
        return None
    Hq, Hkv, D = f.num_qo_heads or "Hq", f.num_kv_heads or "Hkv", f.head_dim or "D"
    half = f.head_dim // 2 if f.head_dim else "D/2"
    texts = {
        "kv_heads": (
            "heads",
            f"k or v built or viewed with the query head count ({Hq}) where the KV heads ({Hkv}) belong, or "
            "repeat_kv missing before an MHA-only kernel",
        ),
        "heads": (
            "heads",
            f"a head count that is not the model's: q has {Hq} heads, k and v {Hkv}" + _grouped(line, f),
        ),
        "layout": (
            "layout",
            "or k and v in the other layout than the kernel takes ([B, H, T, D] where [B, T, H, D] is read, or the "
            "reverse), so their token count is read as the head count",
        ),
        "tp": (
            "tp",
            f"or a tensor-parallel split that divided q's heads ({Hq} / tp) but not k and v's ({Hkv} / tp), or the "
            "reverse",
        ),
        "head_dim": (
            "head_dim",
            f"a head_dim that is not the model's {D} (hidden_size // Hq taken for it), or one "
            "the kernel does not support",
        ),
        "rope": (
            "rotary_dim",
            f"cos/sin of another width: a table of the whole head ({D} columns, cat(freqs, freqs)) where the "
            f"kernel takes half of it ({half} columns, one a frequency, rotary_dim = 2 x cos.shape[-1]), or the "
            "reverse, or a partial RoPE's rotary_dim; or of another length (a table shorter than the positions); "
            "or a rope_scaling this version does not read",
        ),
        "positions": (
            "positions",
            "positions past the table (max_position_embeddings"
            + (f" = {f.max_position_embeddings}" if f.max_position_embeddings else "")
            + "), or "
            "position_ids of another length than the tokens",
        ),
        "kv_cache": (
            "kv_cache",
            "a cache of other shapes than the model's ([P, Hkv, D] per layer) or too few "
            "blocks for the tokens (memory for the KV cache)",
        ),
        "memory": (
            "kv_bytes",
            "bytes against memory: the KV cache takes 2 (k and v) x Hkv x D x bytes a value per token and "
            f"layer ({_kv_bytes(f)}), times the tokens of every sequence (max_model_len x batch); a cache sized with "
            "Hq (k repeated before the write, or a config read without num_key_value_heads) takes G times that",
        ),
    }
    if "heads" in topics or "kv_heads" in topics:  # a head count the kernel checks: a layout or a split gives it too
        topics += ["layout", "tp"]
    options = [texts[t] for t in topics if t in texts]
    check = "q.shape, k.shape, cos.shape and positions.max() just before the failing call, against the model's " + (
        "sizes above" if f.known else "sizes (add --model)"
    )
    if "memory" in topics:
        check = "the cache's shape and dtype (k_cache.shape[-2] is Hkv, not Hq), max_model_len and the batch"
    return ambiguous(options, check)


def diagnose(text: str, f: Facts) -> Diagnosis | None:
    """A message no family reads: from its numbers, its words, or said foreign; None for anything else."""
    line = message_line(text)
    if not line:
        return None
    for what, words, fix in _FOREIGN:
        if words.search(line):
            why = f"this message is about {what}: no RoPE, GQA or KV-cache mistake gives it (not explain's to read)."
            return Diagnosis(
                "unknown", "not RoPE, GQA or the KV cache", line[:400], what, "not_mine", "foreign", why, fix
            )
    if _TOPICS["memory"].search(line):  # its numbers are bytes, not sizes: read by its words
        verdict = _kv_memory(line, f) or _candidates(line, f)
        return Diagnosis("unknown", framework_named(text) + "; bytes against memory", line[:400], "memory", *verdict)
    missing = _missing_field(line, f)
    if missing is not None:
        return Diagnosis("unknown", framework_named(text) + "; read from its words", line[:400], "a field", *missing)
    for reader in (_elsewhere, _factor):
        said = reader(line, f)
        if said is not None:
            return Diagnosis("unknown", framework_named(text) + "; read from its words", line[:400], *_said(*said))
    source = framework_named(text) + "; read from its numbers"
    shown, line = line, without_names(line)
    if not re.search(r"\d", line):
        verdict = _candidates(line, f)
        if verdict is None:
            return None
        source = framework_named(text) + "; no numbers, so the candidates that fit"
        named = ", ".join(name for name, words in _TOPICS.items() if words.search(line))
        return Diagnosis("unknown", source, shown[:400], f"no numbers; it names: {named}", *verdict)
    read = (
        _ordered(line, f)
        or (_from_numbers(line, f) if _DIVIDES.search(line) else None)
        or _from_shapes(line, f)
        or _from_numbers(line, f)
    )
    if read is None:
        verdict = _candidates(line, f)
        return None if verdict is None else Diagnosis("unknown", source, shown[:400], "its words", *verdict)
    if read[1][0] == "foreign" and any(role for _, role, _ in _roles(line)):  # its words name what they are
        verdict = _candidates(line, f)
        return None if verdict is None else Diagnosis("unknown", source, shown[:400], "its words", *verdict)
    if read[1][0] == "foreign":  # the numbers compared are none of the model's sizes: probably not its own
        sizes = vocabulary(f)
        others = sorted({n for n, _, _ in _roles(line) if n in sizes})
        also = f" ({', '.join(name_of(n, f) for n in others)} elsewhere in it)" if others else ""
        why = (
            f"probably not a head, RoPE or KV-cache error: the numbers compared are none of {f.name}'s sizes"
            f"{also} ({describe_sizes(f)}). It would be one if a tensor of this model met one of another."
        )
        read = read[0], ("likely_not_mine", "foreign", why, read[1][3])
    return Diagnosis("unknown", source, shown[:400], *_said(*read))


def _said(read: str, verdict: tuple) -> tuple:
    """``(read, case, quantity, why, fix)``: a single reading of a message from a framework explain does not
    know is stated as unconfirmed, never as the reading."""
    case, quantity, why, fix = verdict
    if case not in ("ambiguous", "likely_not_mine"):
        why = f"the one reading that fits, unconfirmed (a message explain has no reader for): {case}: " + why
        case = "ambiguous"
    return read, case, quantity, why, fix
