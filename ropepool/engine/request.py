"""A request: its prompt, its new tokens, its status and its slot table."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Status(Enum):
    WAITING = "waiting"  # in the queue; holds no pool rows
    RUNNING = "running"  # holds its rows; one forward step per new token
    FINISHED = "finished"  # rows given back


@dataclass(eq=False)
class Request:
    """One prompt being served.

    Attributes
    ----------
    rid : int                the request's number, in arrival order
    prompt : list of int     the prompt's token ids
    max_new_tokens : int     the most tokens to generate
    stop : int or None       a token id that ends the request early (written, then done)
    status : Status
    slot_table : list of int ``slot_table[p]`` is the pool row holding the k and v of position p
    num_cached : int         positions whose k and v are already in the pool
    tokens : list of int     the new tokens so far
    logits : list            the ``[vocab]`` float32 logits each new token was chosen from
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
        A request that meets its stop token early gives back the rows it did not use.
        """
        return len(self.prompt) + self.max_new_tokens - 1

    @property
    def done(self) -> bool:
        stopped = self.stop is not None and bool(self.tokens) and self.tokens[-1] == self.stop
        return stopped or len(self.tokens) >= self.max_new_tokens
