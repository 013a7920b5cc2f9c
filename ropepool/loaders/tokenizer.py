"""A GGUF file's own tokenizer: byte-level BPE from its vocabulary and merges, and its chat template.

GGUF metadata holds everything a GPT-2-style tokenizer needs: ``tokenizer.ggml.tokens`` (the
vocabulary, id = index), ``tokenizer.ggml.merges`` (``"Ġ t"`` strings, in rank order),
``tokenizer.ggml.token_type`` (3 = control tokens such as ``<|im_start|>``), the bos/eos ids and
``tokenizer.chat_template`` (Jinja). :class:`GGUFTokenizer` builds a ``tokenizers.Tokenizer``
from them and renders the template in Jinja's sandbox (the template is data from a file).

What a user writes is text, never control: message content is encoded with control tokens
spelled in it as plain text (only the template's own markers are control tokens). ``encode``
refuses text with a byte the vocabulary has no token for (SmolLM2 has none for six control
characters), rather than drop it, and ``decode`` refuses an id outside the vocabulary.
"""

from __future__ import annotations

import re
import secrets

import mlx.core as mx
from jinja2.sandbox import ImmutableSandboxedEnvironment

# llama.cpp's pre-tokenizer names (``tokenizer.ggml.pre``) this module reproduces:
# "smollm" splits every digit on its own, then applies GPT-2's regex (byte-level).
_DIGITS_FIRST = {"smollm": True, "gpt2": False, "default": False}
_CONTROL = 3


class TokenizerError(ValueError):
    """GGUF metadata this module cannot turn into a tokenizer (names the field)."""


def _byte_chars() -> dict[int, str]:
    """GPT-2's byte-level map: the printable Latin-1 bytes stand for themselves, the other 68 for
    ``chr(256 + n)`` in byte order (0x04 is 'Ą')."""
    keep = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)}
    shifted = iter(range(256, 512))
    return {b: chr(b) if b in keep else chr(next(shifted)) for b in range(256)}


_BYTE_CHARS = _byte_chars()


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
        vocab = {t: i for i, t in enumerate(tokens)}

        def byte_level_bpe():
            tok = Tokenizer(models.BPE(vocab, merges, ignore_merges=False))
            byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
            tok.pre_tokenizer = (
                pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                if _DIGITS_FIRST[pre]
                else byte_level
            )
            tok.decoder = decoders.ByteLevel()
            return tok

        tok = byte_level_bpe()
        types = metadata.get("tokenizer.ggml.token_type")
        if types is not None:
            control = [tokens[i] for i, t in enumerate(types.tolist()) if t == _CONTROL]
            tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
        self.tokenizer = tok
        self._plain = byte_level_bpe()  # the same BPE, no control tokens: "<|im_end|>" is 7 plain pieces
        self._missing = frozenset(b for b, c in _BYTE_CHARS.items() if c not in vocab)  # bytes it cannot spell
        self.eos_token_id = int(_scalar(metadata["tokenizer.ggml.eos_token_id"]))
        self.bos_token_id = int(_scalar(metadata.get("tokenizer.ggml.bos_token_id", self.eos_token_id)))
        self.add_bos = bool(_scalar(metadata.get("tokenizer.ggml.add_bos_token", False)))
        self.chat_template = metadata.get("tokenizer.chat_template")
        self.vocab_size = len(tokens)

    def encode(self, text: str, *, control: bool = True) -> list[int]:
        """Token ids of ``text``; with ``control`` (default) control tokens written in it (``<|im_end|>``)
        are recognised, without it they are plain text.

        Raises
        ------
        TokenizerError
            ``text`` holds a character the vocabulary cannot spell (it would be dropped), or is not
            encodable as UTF-8 (a lone surrogate).
        """
        ids = self._ids(text, control)
        return [self.bos_token_id, *ids] if self.add_bos else ids

    def _ids(self, text: str, control: bool) -> list[int]:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise TokenizerError(
                f"text holds {text[err.start]!r} at index {err.start}, which is not UTF-8 text (a lone surrogate)"
            ) from None
        if self._missing and not self._missing.isdisjoint(data):
            at = next(i for i, c in enumerate(text) if not self._missing.isdisjoint(c.encode("utf-8")))
            raise TokenizerError(
                f"text holds {text[at]!r} at index {at}: this vocabulary has no token for it, "
                "so it would be dropped; remove it from the text"
            )
        return (self.tokenizer if control else self._plain).encode(text, add_special_tokens=False).ids

    def decode(self, ids, *, skip_special_tokens: bool = False) -> str:
        """The text of ``ids`` (a list of int or a 1-D array).

        Raises
        ------
        TokenizerError
            An id is not an integer in ``[0, vocab_size)``.
        """
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        bad = next(
            (i for i in ids if not (isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.vocab_size)), None
        )
        if bad is not None:
            raise TokenizerError(f"token id {bad!r} is not in this vocabulary (ids 0 to {self.vocab_size - 1})")
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
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.tokenizer.id_to_token(self.bos_token_id),
            eos_token=self.tokenizer.id_to_token(self.eos_token_id),
        )

    def apply_chat_template(self, messages: list[dict], *, add_generation_prompt: bool = True) -> list[int]:
        """Token ids of :meth:`render_chat` (what a chat model is prompted with): the template's own
        markers as control tokens, each message's content as plain text (a ``<|im_end|>`` a user
        writes is text, not the end of their turn).

        The template is rendered with a placeholder for each content string, which is encoded
        apart where the placeholder lands.
        """
        nonce = secrets.token_hex(8)
        masked = [
            {**m, "content": f"\x00{nonce}:{i}\x00"} if isinstance(m.get("content"), str) else m
            for i, m in enumerate(messages)
        ]
        text = self.render_chat(masked, add_generation_prompt=add_generation_prompt)
        ids, start = [], 0
        for placeholder in re.finditer(f"\x00{nonce}:(\\d+)\x00", text):
            ids += self._ids(text[start : placeholder.start()], control=True)
            ids += self._ids(messages[int(placeholder.group(1))]["content"], control=False)
            start = placeholder.end()
        ids += self._ids(text[start:], control=True)
        return [self.bos_token_id, *ids] if self.add_bos else ids
