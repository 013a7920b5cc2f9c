"""A GGUF file's own tokenizer: byte-level BPE from its vocabulary and merges, and its chat template.

GGUF metadata holds everything a GPT-2-style tokenizer needs: ``tokenizer.ggml.tokens`` (the
vocabulary, id = index), ``tokenizer.ggml.merges`` (``"Ġ t"`` strings, in rank order),
``tokenizer.ggml.token_type`` (3 = control tokens such as ``<|im_start|>``), the bos/eos ids and
``tokenizer.chat_template`` (Jinja). :class:`GGUFTokenizer` builds a ``tokenizers.Tokenizer``
from them and renders the template in Jinja's sandbox (the template is data from a file).
"""

from __future__ import annotations

import mlx.core as mx
from jinja2.sandbox import ImmutableSandboxedEnvironment

# llama.cpp's pre-tokenizer names (``tokenizer.ggml.pre``) this module reproduces:
# "smollm" splits every digit on its own, then applies GPT-2's regex (byte-level).
_DIGITS_FIRST = {"smollm": True, "gpt2": False, "default": False}
_CONTROL = 3


class TokenizerError(ValueError):
    """GGUF metadata this module cannot turn into a tokenizer (names the field)."""


def _scalar(value):
    return value.item() if isinstance(value, mx.array) else value


class GGUFTokenizer:
    """``encode``/``decode``/``apply_chat_template`` from GGUF metadata alone.

    Attributes
    ----------
    tokenizer : tokenizers.Tokenizer   the byte-level BPE
    bos_token_id, eos_token_id : int
    chat_template : str | None         the Jinja template from the file

    Raises
    ------
    TokenizerError
        Not a ``gpt2`` (byte-level BPE) vocabulary, an unknown pre-tokenizer, or a field missing.

    Example
    -------
    Needs the model's metadata, so the doctests skip it:

    >>> tok = GGUFTokenizer(metadata)                                   # doctest: +SKIP
    >>> tok.decode(tok.encode("Paris, 1889"))                           # doctest: +SKIP
    'Paris, 1889'
    """

    def __init__(self, metadata: dict):
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers  # mlx-lm brings it

        kind = metadata.get("tokenizer.ggml.model")
        if kind != "gpt2":
            raise TokenizerError(f"tokenizer.ggml.model is {kind!r}: only 'gpt2' (byte-level BPE) is built here")
        pre = metadata.get("tokenizer.ggml.pre", "default")
        if pre not in _DIGITS_FIRST:
            raise TokenizerError(f"tokenizer.ggml.pre is {pre!r}: known are {', '.join(_DIGITS_FIRST)}")
        for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.eos_token_id"):
            if key not in metadata:
                raise TokenizerError(f"GGUF metadata has no {key}")
        tokens = list(metadata["tokenizer.ggml.tokens"])
        merges = [tuple(m.split(" ", 1)) for m in metadata["tokenizer.ggml.merges"]]
        bpe = models.BPE({t: i for i, t in enumerate(tokens)}, merges, ignore_merges=False)
        tok = Tokenizer(bpe)
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                             if _DIGITS_FIRST[pre] else byte_level)
        tok.decoder = decoders.ByteLevel()
        types = metadata.get("tokenizer.ggml.token_type")
        if types is not None:
            control = [tokens[i] for i, t in enumerate(types.tolist()) if t == _CONTROL]
            tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
        self.tokenizer = tok
        self.eos_token_id = int(_scalar(metadata["tokenizer.ggml.eos_token_id"]))
        self.bos_token_id = int(_scalar(metadata.get("tokenizer.ggml.bos_token_id", self.eos_token_id)))
        self.add_bos = bool(_scalar(metadata.get("tokenizer.ggml.add_bos_token", False)))
        self.chat_template = metadata.get("tokenizer.chat_template")
        self.vocab_size = len(tokens)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens written in the text are recognised)."""
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return [self.bos_token_id, *ids] if self.add_bos else ids

    def decode(self, ids, *, skip_special_tokens: bool = False) -> str:
        """The text of ``ids`` (a list of int or a 1-D array)."""
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def render_chat(self, messages: list[dict], *, add_generation_prompt: bool = True) -> str:
        """The chat template applied to ``messages`` (``[{"role": ..., "content": ...}]``), as text.

        Raises
        ------
        TokenizerError
            The file has no chat template.
        """
        if not self.chat_template:
            raise TokenizerError("GGUF metadata has no tokenizer.chat_template")
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        return env.from_string(self.chat_template).render(
            messages=messages, add_generation_prompt=add_generation_prompt,
            bos_token=self.tokenizer.id_to_token(self.bos_token_id),
            eos_token=self.tokenizer.id_to_token(self.eos_token_id))

    def apply_chat_template(self, messages: list[dict], *, add_generation_prompt: bool = True) -> list[int]:
        """Token ids of :meth:`render_chat` (what a chat model is prompted with)."""
        return self.encode(self.render_chat(messages, add_generation_prompt=add_generation_prompt))
