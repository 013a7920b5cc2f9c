"""A request: its prompt, its new tokens, its status and its slot table."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Status(Enum):
    WAITING = "waiting"  # in the queue; holds no pool rows (a preempted request waits again)
    RUNNING = "running"  # holds the rows of its sequence so far; runs a chunk of it, or one new token, per step
    FINISHED = "finished"  # rows given back (to the free list, or to the prefix cache)


@dataclass(eq=False)
class Request:
    """One prompt being served.

    Its sequence is ``prompt + tokens``: every token but the newest has gone through the model.

    Attributes
    ----------
    rid : int                the request's number, in arrival order
    prompt : list of int     the prompt's token ids
    max_new_tokens : int     the most tokens to generate
    stop : int or None       a token id that ends the request early (written, then done)
    status : Status
    slot_table : list of int ``slot_table[p]`` is the pool row holding the k and v of position p;
                             its first rows may be shared with other requests (the prefix cache)
    num_cached : int         positions whose k and v are in the pool, a shared prefix included
    tokens : list of int     the new tokens so far
    logits : list            the ``[vocab]`` float32 logits each new token was chosen from
                             (kept only when the engine is asked to)
    """

    rid: int
    prompt: list[int]
    max_new_tokens: int
    stop: int | None = None
    status: Status = Status.WAITING
    slot_table: list[int] = field(default_factory=list)
    num_cached: int = 0
    tokens: list[int] = field(default_factory=list)
    logits: list = field(default_factory=list)

    @property
    def rows_needed(self) -> int:
        """Rows for the request's whole life: every token that goes through the model.

        That is the prompt and every new token but the last, which is chosen and never fed back.
        """
        return len(self.prompt) + self.max_new_tokens - 1

    @property
    def seq_len(self) -> int:
        """Tokens of the sequence so far: the prompt and the new tokens."""
        return len(self.prompt) + len(self.tokens)

    @property
    def num_uncached(self) -> int:
        """Tokens of the sequence not yet in the pool: the next step's work (1 when decoding)."""
        return self.seq_len - self.num_cached

    def seq(self, start: int = 0, stop: int | None = None) -> list[int]:
        """Token ids of positions ``[start, stop)`` of the sequence."""
        return (self.prompt + self.tokens)[start:stop]

    @property
    def done(self) -> bool:
        stopped = self.stop is not None and bool(self.tokens) and self.tokens[-1] == self.stop
        return stopped or len(self.tokens) >= self.max_new_tokens

    def state(self) -> tuple:
        """What a step may change, copied (see :meth:`Scheduler.checkpoint`)."""
        return self.status, list(self.slot_table), self.num_cached, list(self.tokens), list(self.logits)

    def set_state(self, state: tuple) -> None:
        status, slot_table, self.num_cached, tokens, logits = state
        self.status, self.slot_table, self.tokens, self.logits = status, list(slot_table), list(tokens), list(logits)
