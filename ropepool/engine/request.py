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
    num_in_cache : int       whole pages of its sequence the prefix cache holds (matched, or inserted)
    cursor : object          where the prefix cache's last match or insert of its sequence ended
                             (:mod:`.protocols`); the next insert continues from there
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
    num_in_cache: int = 0
    cursor: object = None
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
        """Token ids of positions ``[start, stop)`` of the sequence: O(stop - start)."""
        n = len(self.prompt)
        stop = self.seq_len if stop is None else stop
        if stop <= n:
            return self.prompt[start:stop]
        if start >= n:
            return self.tokens[start - n : stop - n]
        return self.prompt[start:] + self.tokens[: stop - n]

    @property
    def done(self) -> bool:
        stopped = self.stop is not None and bool(self.tokens) and self.tokens[-1] == self.stop
        return stopped or len(self.tokens) >= self.max_new_tokens

    def mark(self) -> tuple:
        """What a step may change, in O(1): the scalars, and each list with its length.

        A step only appends to the lists, replaces the slot table by a new list (a preemption), or
        changes slot-table entries in place (recorded by the scheduler on its own): :meth:`rewind`
        puts the lists back and cuts what was appended.
        """
        return (
            self.status,
            self.num_cached,
            self.num_in_cache,
            self.cursor,
            self.slot_table,
            len(self.slot_table),
            self.tokens,
            len(self.tokens),
            self.logits,
            len(self.logits),
        )

    def rewind(self, mark: tuple) -> None:
        """Back to :meth:`mark`'s state (the undo log's record for a request)."""
        (
            self.status,
            self.num_cached,
            self.num_in_cache,
            self.cursor,
            self.slot_table,
            n_slots,
            self.tokens,
            n_tokens,
            self.logits,
            n_logits,
        ) = mark
        del self.slot_table[n_slots:], self.tokens[n_tokens:], self.logits[n_logits:]

    def state(self) -> tuple:
        """What a step may change, copied (the snapshot fallback of :mod:`.protocols`): O(its sequence)."""
        return (
            self.status,
            list(self.slot_table),
            self.num_cached,
            self.num_in_cache,
            self.cursor,
            list(self.tokens),
            list(self.logits),
        )

    def set_state(self, state: tuple) -> None:
        status, slot_table, self.num_cached, self.num_in_cache, self.cursor, tokens, logits = state
        self.status, self.slot_table, self.tokens, self.logits = status, list(slot_table), list(tokens), list(logits)
