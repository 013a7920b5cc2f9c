"""The undo log of one step: each change recorded with how to undo it, undone newest first on failure.

A step changes the allocator (pages taken, released, reference counts), the prefix cache (nodes
added, split, evicted, its clock), the requests (status, slot table, tokens) and the queues. A
database makes such a change a transaction with a log of undo records; so does the engine:

- :meth:`Journal.begin` opens the step's log; every part then calls :meth:`Journal.record` with a
  function and its arguments that undo the change it just made (``allocate`` records "put these
  pages back at the head of the free list"). The log holds what the step touched, nothing more:
  O(pages and nodes touched), whatever the pool's size.
- :meth:`Journal.commit` forgets the log: the step stands.
- :meth:`Journal.rollback` calls the undo records newest first: the engine is as it was when the
  step began. A Ctrl-C (SIGINT) arriving meanwhile is held until the log is undone
  (:func:`held_interrupts`), then raised: a second Ctrl-C cannot leave half a rollback. A rollback
  that was still cut short (a Ctrl-C in the instant before its hold began) is finished by the next
  :meth:`Journal.begin`, before anything else changes.

Outside a step (:meth:`begin` not called) :meth:`record` records nothing: a part used on its own
(a doctest, a notebook) pays one attribute test per change.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


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

    def commit(self) -> None:
        """The step stands: forget its undo records."""
        self.active = False
        self._undo.clear()
        self._marked.clear()

    def rollback(self) -> bool:
        """Undo the step's changes, newest first; return whether a Ctrl-C arrived meanwhile (held till the end)."""
        self.active = False
        with held_interrupts() as held:
            while self._undo:
                undo, args = self._undo[-1]
                undo(*args)
                self._undo.pop()  # popped once done: an undo record interrupted by an error is not lost
            self._marked.clear()
        return bool(held)

    def __len__(self) -> int:
        return len(self._undo)


class HeldInterrupts:
    """While started, a SIGINT (Ctrl-C) is counted instead of raised; :meth:`stop` puts the handler back.

    Signal handlers can only be set from the main thread; elsewhere no SIGINT is delivered
    (Python raises KeyboardInterrupt in the main thread only), so there is nothing to hold.
    """

    def __init__(self):
        self.count = 0
        self._installed = False
        self._previous = None

    def _hold(self, signum, frame) -> None:
        self.count += 1

    def start(self) -> None:
        if threading.current_thread() is threading.main_thread() and not self._installed:
            self._previous = signal.signal(signal.SIGINT, self._hold)
            self._installed = True

    def stop(self) -> int:
        """Stop holding (again: nothing happens); return how many SIGINTs were held."""
        if self._installed:
            signal.signal(signal.SIGINT, signal.SIG_DFL if self._previous is None else self._previous)
            self._installed = False
        return self.count


@contextmanager
def held_interrupts():
    """Inside the block, a SIGINT is held instead of raised; the list yielded has one entry per SIGINT held."""
    hold = HeldInterrupts()
    held: list[int] = []
    hold.start()
    try:
        yield held
    finally:
        held += [signal.SIGINT] * hold.stop()


class InterruptGate:
    """A SIGINT handler that holds Ctrl-C for the engine named :attr:`holder` and passes it on otherwise.

    An engine's step commits, then returns its batch. A handler restored before the return would let a
    Ctrl-C land between the two (the batch lost); this one is installed once and stays, so a step only
    sets and clears :attr:`holder`, a plain attribute store that no signal can split. A Ctrl-C while an
    engine holds adds one to its ``held_interrupts``; otherwise it goes to the handler this one replaced
    (Python's: KeyboardInterrupt, as without it). Main thread only (elsewhere no SIGINT reaches Python
    code, so a step there holds nothing). One per process (:data:`GATE`), shared by every engine: a
    chain of handlers, one per engine, would grow without end.
    """

    def __init__(self):
        self.holder = None  # the engine holding Ctrl-C now, or None
        self._previous = None

    def _handle(self, signum, frame) -> None:
        holder = self.holder
        if holder is not None:
            holder.held_interrupts += 1
        elif callable(self._previous):
            self._previous(signum, frame)
        elif self._previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    def hold(self, owner) -> None:
        """Hold Ctrl-C for ``owner`` (anything with an int ``held_interrupts``) until :attr:`holder` is None."""
        if threading.current_thread() is threading.main_thread():
            self.holder = owner  # first: once installed, the handler holds from this store on
            current = signal.getsignal(signal.SIGINT)
            if current != self._handle:
                self._previous = current
                signal.signal(signal.SIGINT, self._handle)


#: The process's gate (:class:`InterruptGate`).
GATE = InterruptGate()


def bookkeeping(f, *args, **kwargs):
    """``f(*args, **kwargs)`` with Ctrl-C held until it returns, then raised.

    The bookkeeping of a step (schedule, postprocess) changes the allocator, the tree and the
    requests in small steps, each recorded in the undo log just after it is made: a SIGINT landing
    between a change and its record would leave a change the rollback cannot see. Held, it lands
    after the last record; the rollback then undoes everything. The forward pass stays interruptible.
    """
    hold = HeldInterrupts()
    hold.start()
    try:
        out = f(*args, **kwargs)
    except BaseException as error:
        if hold.stop():  # the Ctrl-C is not dropped for the error: both reach the caller
            raise KeyboardInterrupt("held during the step's bookkeeping, which failed") from error
        raise
    held = hold.stop()
    if held:
        raise KeyboardInterrupt("held until the step's bookkeeping had recorded its changes")
    return out
