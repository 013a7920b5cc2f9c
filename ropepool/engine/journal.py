"""The undo log of one step: each change recorded with how to undo it, undone newest first on failure.

A step changes the allocator (pages taken, released, reference counts), the prefix cache (nodes
added, split, evicted, its clock), the requests (status, slot table, tokens) and the queues. A
database makes such a change a transaction with a log of undo records; so does the engine:

- :meth:`Journal.begin` opens the step's log; every part then calls :meth:`Journal.record` with a
  function and its arguments that undo the change it just made (``allocate`` records "put these
  pages back at the head of the free list"). The log holds what the step touched, nothing more:
  O(pages and nodes touched), whatever the pool's size.
- :meth:`Journal.commit` hands the log over and forgets it: the step stands (a recording reads what
  changed from it: :mod:`.recording`).
- :meth:`Journal.rollback` calls the undo records newest first: the engine is as it was when the
  step began. A Ctrl-C (SIGINT) arriving meanwhile is held until the log is undone
  (:class:`SigintHold`), then handed to the program's handler: a second Ctrl-C cannot leave half a rollback. A rollback
  that was still cut short (a Ctrl-C in the instant before its hold began) is finished by the next
  :meth:`Journal.begin`, before anything else changes.

Outside a step (:meth:`begin` not called) :meth:`record` records nothing: a part used on its own
(a doctest, a notebook) pays one attribute test per change.
"""

from __future__ import annotations

import signal
import threading


class Journal:
    """Undo records of the step in progress.

    Example
    -------
    >>> log, free = Journal(), [3, 4]
    >>> log.begin()
    >>> page = free.pop(0)
    >>> log.record(free.insert, 0, page)   # how to undo the pop
    >>> log.rollback(), free              # False: no Ctrl-C came during the rollback
    (False, [3, 4])
    """

    def __init__(self):
        self.active = False
        self._undo: list[tuple] = []  # (function, args), oldest first
        self._marked: set[int] = set()  # ids of objects whose state was saved this step (see first_time)

    def begin(self) -> None:
        """Start recording a step's changes. Undo records still here (a rollback cut short) are undone first."""
        if self._undo:
            self.rollback()
        self._undo.clear()
        self._marked.clear()
        self.active = True

    def record(self, undo, *args) -> None:
        """Remember that ``undo(*args)`` undoes the change just made (nothing when no step is open)."""
        if self.active:
            self._undo.append((undo, args))

    def first_time(self, obj) -> bool:
        """True the first time ``obj`` is named in this step (then save its state once); False outside a step."""
        if not self.active or id(obj) in self._marked:
            return False
        self._marked.add(id(obj))
        return True

    def commit(self) -> list[tuple]:
        """The step stands: forget its undo records; return them, ``(undo, args)`` oldest first."""
        self.active = False
        records, self._undo = self._undo, []
        self._marked.clear()
        return records

    def rollback(self) -> bool:
        """Undo the step's changes, newest first; return whether a Ctrl-C arrived meanwhile (held till the end,
        not delivered: the caller hands it on)."""
        self.active = False
        hold = SigintHold().start()
        try:
            while self._undo:
                undo, args = self._undo[-1]
                undo(*args)
                self._undo.pop()  # popped once done: an undo record interrupted by an error is not lost
            self._marked.clear()
        finally:
            held = hold.stop()  # released whatever happens, an undo record that raises included
        return bool(held)

    def __len__(self) -> int:
        return len(self._undo)


class SigintHold:
    """While started, a SIGINT (Ctrl-C) is counted instead of delivered; :meth:`stop` puts back exactly the
    handler that was in force and returns the count.

    ``with SigintHold():`` also delivers a held SIGINT on the way out, once, to that handler, as if it came
    then: a Python handler is called (Python's own raises KeyboardInterrupt), ``SIG_IGN`` drops it,
    ``SIG_DFL`` ends the process as the OS would. Holds nest: an inner one delivers to the outer, which
    counts it. Nothing stays installed after :meth:`stop`, so a program's own handler, installed before
    or between steps and chaining to the one it replaced, sees every Ctrl-C. Main thread only (elsewhere
    no SIGINT reaches Python code, so there is nothing to hold).
    """

    def __init__(self):
        self.count = 0
        self.previous = None  # the handler in force when the hold started
        self._installed = False

    def _hold(self, signum, frame) -> None:
        self.count += 1

    def start(self) -> SigintHold:
        if threading.current_thread() is threading.main_thread() and not self._installed:
            self.previous = signal.signal(signal.SIGINT, self._hold)
            self._installed = True
        return self

    def stop(self) -> int:
        """Stop holding (again: nothing happens); return how many SIGINTs were held."""
        if self._installed:
            signal.signal(signal.SIGINT, signal.SIG_DFL if self.previous is None else self.previous)
            self._installed = False
        return self.count

    def __enter__(self) -> SigintHold:
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.stop():
            deliver()


def deliver() -> None:
    """One SIGINT to the handler in force now (a held one, handed on)."""
    signal.raise_signal(signal.SIGINT)


def bookkeeping(f, *args, **kwargs):
    """``f(*args, **kwargs)`` with Ctrl-C held until it returns, then delivered.

    The bookkeeping of a step (schedule, postprocess) changes the allocator, the tree and the
    requests in small steps, each recorded in the undo log just after it is made: a SIGINT landing
    between a change and its record would leave a change the rollback cannot see. Held, it lands
    after the last record (with an error of ``f``, the KeyboardInterrupt carries it as its context);
    the rollback then undoes everything. The forward pass stays interruptible.
    """
    with SigintHold():
        return f(*args, **kwargs)
