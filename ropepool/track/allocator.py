"""Part 2: the slot allocator: pages taken and given back, each reference-counted.

The learner writes a class ``Allocator(num_pages)`` with ``refs`` (a list: how many hold each page),
``num_free``, ``allocate(n) -> pages``, ``retain(pages)`` and ``release(pages) -> freed pages``, with
the engine's policy: the free list is a queue, pages ``0 .. num_pages - 1`` at first; ``allocate``
takes from its front, ``release`` puts the pages that became free at its back, in order. Wrong calls
raise ``ValueError`` and change nothing: more pages asked for than are free, retaining a free page,
releasing a free page (a double free) or a page more often than it is held.

The checker replays table cases and a random workload on the learner's class and on the engine's own
:class:`ropepool.engine.Allocator`, and compares every answer. :class:`Paged` wraps the learner's
class in the engine's interface (:class:`ropepool.engine.protocols.Allocator`: rows, pages of
``page_size`` rows, listeners), so that the engine runs on it.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable

import numpy as np

from ..engine import Allocator as EngineAllocator
from ..engine.errors import ContractError
from ..teaching.feedback import plural
from ..engine.allocator import PageRows
from .feedback import ExerciseFailed, call, history, int_list, is_int, passed, rejected, showing, wrong_case

PART = 2
FIRST = (
    "__init__ keeps a queue of free pages (0 .. num_pages - 1) and refs = [0] * num_pages; allocate(n) "
    "takes n pages off the front and sets each one's count to 1."
)


class Paged(PageRows):
    """The learner's allocator behind the engine's interface: ``Paged(Allocator)(pool_rows, page_size)``.

    Rows and pages: page ``p`` holds rows ``p * page_size .. p * page_size + page_size - 1``. Every
    :meth:`retain` and :meth:`release` is told to the listeners (the radix cache keeps its count of
    evictable pages that way). It keeps no undo log: the engine copies it at each step.
    """

    def __init__(self, make: Callable, pool_rows: int, page_size: int = 1):
        if pool_rows % page_size:
            raise ValueError(f"page_size {page_size} must divide pool_rows {pool_rows}")
        self.pool_rows, self.page_size, self.num_pages = pool_rows, page_size, pool_rows // page_size
        self.inner = make(self.num_pages)
        self.listeners = []

    @classmethod
    def factory(cls, make: Callable) -> Callable:
        """What ``Engine(allocator=...)`` takes: ``(pool_rows, page_size) -> Paged``."""
        return lambda pool_rows, page_size=1: cls(make, pool_rows, page_size)

    @property
    def refs(self):
        return self.inner.refs

    @property
    def num_free(self) -> int:
        return self.inner.num_free

    def allocate(self, n: int) -> list[int]:
        pages = [int(p) for p in self.inner.allocate(n)]
        if len(pages) != n or len(set(pages)) != n or not all(0 <= p < self.num_pages for p in pages):
            raise ContractError(
                f"your allocator's allocate({n}) returned {plural(len(pages), 'page')} {pages!r:.80}: {n} distinct pages "
                f"of 0 .. {self.num_pages - 1}"
            )
        return pages

    def retain(self, pages) -> None:
        pages = list(pages)
        self.inner.retain(pages)
        for listener in self.listeners:
            listener(pages, 1)

    def release(self, pages) -> list[int]:
        pages = list(pages)
        freed = [int(p) for p in self.inner.release(pages)]
        for listener in self.listeners:
            listener(pages, -1)
        return freed

    def watch(self, listener) -> None:
        self.listeners.append(listener)


# A case: (name, num_pages, ops); an op is ("allocate", n), ("retain", pages) or ("release", pages).
def cases() -> list[tuple[str, int, list]]:
    return [
        ("allocate hands out the lowest pages first", 4, [("allocate", 2), ("allocate", 1)]),
        (
            "release gives a page back, to the end of the free list",
            4,
            [("allocate", 3), ("release", [1]), ("allocate", 2)],
        ),
        (
            "a retained page needs two releases",
            4,
            [("allocate", 2), ("retain", [0]), ("release", [0, 1]), ("release", [0])],
        ),
        (
            "pages freed together go back in the order given",
            6,
            [("allocate", 6), ("release", [4, 1, 3]), ("allocate", 3)],
        ),
        (
            "allocating more than is free is refused, nothing taken",
            3,
            [("allocate", 2), ("allocate", 2), ("allocate", 1)],
        ),
        ("allocating exactly what is free", 3, [("allocate", 3), ("allocate", 0)]),
        ("a double free is refused", 3, [("allocate", 1), ("release", [0]), ("release", [0])]),
        (
            "releasing a page twice in one call, held once, is refused and releases nothing",
            3,
            [("allocate", 2), ("release", [1, 0, 1])],
        ),
        ("retaining a free page is refused", 3, [("allocate", 1), ("retain", [2])]),
        ("a page outside the pool is refused", 3, [("allocate", 1), ("release", [3])]),
        ("a negative page is outside the pool too", 3, [("allocate", 3), ("release", [-1]), ("retain", [-3])]),
    ]


def workload(n: int = 30, seed: int = 0) -> list[tuple[str, int, list]]:
    """``n`` random runs of 40 operations on 4-12 pages: allocations, sharing, frees, and wrong calls."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        pages = int(rng.integers(4, 13))
        ops = []
        for _ in range(40):
            r = rng.random()
            if r < 0.35:
                k = int(rng.integers(0, 4))
                ops.append(("allocate", k))
            elif r < 0.5:
                ops.append(("retain", ["held"]))
            elif r < 0.9:
                ops.append(("release", ["held"] * int(rng.integers(1, 3))))
            else:
                ops.append(("release", [int(rng.integers(0, pages))]))  # often a free page: a double free
        out.append((f"random run {i}", pages, ops + [("release", ["all"])]))
    return out


def _counts(a, num_pages: int, what: str) -> tuple[list[int], int]:
    """``(refs as a list, num_free)`` of allocator ``a``: ``refs`` may be any sequence or mapping (a page
    missing from a mapping is held 0 times); a missing attribute or a count that is no int is a verdict."""
    refs, free = _read(a, "refs", what), _read(a, "num_free", what)
    try:
        counts = [refs.get(p, 0) if hasattr(refs, "get") else refs[p] for p in range(num_pages)]
    except Exception as e:  # a learner's refs of any kind: what reading it did is the verdict
        raise rejected(
            PART,
            "refs",
            f"after {what}, refs[p] for p < {num_pages} fails ({type(e).__name__}: {e}); refs is {refs!r:.100}",
        ) from None
    if callable(free):
        free = call(PART, free, what=f"num_free() after {what}", first=FIRST)
    if not all(is_int(c) for c in [*counts, free]):
        raise rejected(PART, "not_int", f"after {what}: refs and num_free must hold ints, got {counts}, {free!r}")
    return [int(c) for c in counts], int(free)


def _read(a, name: str, what: str):
    """Attribute ``name`` of the learner's allocator; a missing one, or a property that raises, is a verdict."""
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's
    try:
        return call(
            PART, getattr, a, name, what=f"reading `{name}` after {what}", first=FIRST, expected=(AttributeError,)
        )
    except AttributeError as e:
        raise rejected(
            PART, "missing_attribute", f"after {what} the allocator has no `{name}` ({e}): the stub names it"
        ) from None


def _pages(answer, what: str, learner: bool):
    """The pages an answer lists, as ints; a page that is no int (a float, a string) is a verdict."""
    if answer is None:
        return None
    return int_list(PART, answer, what) if learner else [int(p) for p in answer]


def _run(make: Callable, num_pages: int, ops: list, rng: np.random.Generator | None, *, learner: bool):
    """Replay ``ops``; yield (op as given, answer) after each. "held" picks a held page with ``rng``.
    A release's answer is compared as a set: the stub fixes the free list's order, not the answer's."""
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's
    a = call(PART, make, num_pages, what=f"Allocator({num_pages})", first=FIRST) if learner else make(num_pages)
    refs, _ = _counts(a, num_pages, f"Allocator({num_pages})")
    for op, arg in ops:
        if op != "allocate" and arg == ["all"]:  # every holder gives its pages back: no page may stay taken
            arg = [p for p in range(num_pages) for _ in range(refs[p])]
        elif op != "allocate" and "held" in arg:
            held = [p for p in range(num_pages) if refs[p] > 0]
            arg = [int(rng.choice(held)) for _ in arg] if held else [0]
        what = f"{op}({arg})"
        # a page outside the pool may be refused by Python's own IndexError (refs[p]), if nothing changed
        outside = op != "allocate" and any(not 0 <= p < num_pages for p in arg)
        refusals = (ValueError, IndexError) if outside else (ValueError,)
        try:
            fn = getattr(a, op)
            answer = fn(arg) if not learner else call(PART, fn, arg, what=what, first=FIRST, expected=refusals)
            answer = _pages(answer, what, learner)
            if op == "release" and answer is not None:
                answer = sorted(answer)
        except ExerciseFailed:
            raise
        except refusals:
            answer = "ValueError"
        refs, free = _counts(a, num_pages, what)
        yield what, answer, refs, free


def _engine(num_pages: int):
    return EngineAllocator(num_pages)


class _SortedRelease(EngineAllocator):
    """The engine's allocator, but release frees the pages in page order, not in the order given."""

    def release(self, pages) -> list[int]:
        return super().release(sorted(pages))


class _ReversedRelease(EngineAllocator):
    """The engine's allocator, but release frees the pages last given first."""

    def release(self, pages) -> list[int]:
        return super().release(list(pages)[::-1])


RELEASE_ORDER = (
    "allocate handed out the right pages in another order: your release put the pages that became free at "
    "the back of the queue sorted (or reversed), not in the order given. release([4, 1, 3]) queues 4, then 1, "
    "then 3. In the engine no answer changes (any free page holds rows as well), but the checker compares "
    "your allocator with the engine's page for page."
)


def _released_in_another_order(num_pages: int, ops: list, seed: int, k: int, got: tuple) -> bool:
    """True when the ``k``-th answer ``got`` (answer, refs, free) is that of an allocator whose release frees
    the pages in page order, or last given first: the same pages as the engine's, queued in another order."""
    for make in (_SortedRelease, _ReversedRelease):
        replay = _run(make, num_pages, ops, np.random.default_rng(seed), learner=False)
        if next(itertools.islice(replay, k, None))[1:] == got:
            return True
    return False


def _args(what: str) -> list[int]:
    """The pages of a call written ``op([p, ...])``; none for ``allocate(n)``."""
    if what.startswith("allocate") or "[" not in what:
        return []
    return [int(p) for p in what[what.index("[") + 1 : what.rindex("]")].split(",") if p.strip()]


def _hint(what: str, want, got, want_free, got_free, want_refs, got_refs) -> tuple[str, str]:
    if want == "ValueError" == got and want_refs != got_refs:
        op = what.split("(")[0]
        return "partial_release", (
            f"right to refuse {what}, but the refused call changed some counts first: check every page, then "
            f"change any. In the engine a refused {op} would leave counts half changed: pages freed while "
            "held, or never freed."
        )
    if want == "ValueError" and got != "ValueError":
        outside = [p for p in _args(what) if not 0 <= p < len(want_refs)]
        if outside:
            return "outside_pool", (
                f"page {outside[0]} is outside the pool (pages 0 .. {len(want_refs) - 1}): {what} must raise "
                "ValueError and change nothing"
                + (
                    f"; a negative page is no exception in Python (refs[{outside[0]}] is page "
                    f"{outside[0] % len(want_refs)}), so check 0 <= page < num_pages yourself"
                    if outside[0] < 0
                    else ""
                )
                + ". In the engine a bad page from a bug elsewhere would change another page's count silently."
            )
        if what.startswith("release"):
            return "no_double_free_error", (
                "releasing a page that is free, or more often than it is held, must raise "
                "ValueError and release nothing: check every page before changing any. In the engine a bug elsewhere (a request finished twice) would put a page on the free list twice and hand it to two requests."
            )
        if what.startswith("retain"):
            return "retain_free_page", (
                "retaining a free page must raise ValueError: only a held page can get another holder. In the engine the prefix cache could keep a page nobody wrote, and hand it to the next request."
            )
        return (
            "allocate_too_many",
            "asking for more pages than are free must raise ValueError and take nothing. In the engine a request would get fewer rows than it writes, and write past them.",
        )
    if got == "ValueError" and what == "allocate(0)":
        return "zero_pages", (
            "allocate(0) is a valid call: it hands out no pages, an empty list. In the engine nothing would "
            "change (it never asks for fewer than 1 page), but the stub allows 0 and the checker asks."
        )
    if got == "ValueError" and what.startswith("allocate") and isinstance(want, list) and len(want) == got_free:
        return (
            "off_by_one",
            "asking for exactly the pages that are free is allowed: refuse only n > num_free. In the engine the last free page is never used: a full pool stalls one page early.",
        )
    if got == "ValueError":
        return (
            "wrong_error",
            "this call is valid: it must not raise. In the engine the call would stop a step that should have run.",
        )
    if want_refs != got_refs and want == got and what.startswith("release"):
        return "partial_release", "a refused release must change nothing: check all pages first, then release."
    if what.startswith("allocate") and isinstance(got, list) and isinstance(want, list) and len(got) != len(want):
        return "off_by_one", f"allocate(n) returns exactly n pages: {len(want)}, not {len(got)}."
    if (
        what.startswith("release")
        and isinstance(got, list)
        and (want_refs, want_free) == (got_refs, got_free)
        and set(want) < set(got)
    ):
        return "release_returns_held", (
            f"the counts are right, but release returned {got}: only the pages whose count fell to 0 "
            f"({want}) became free; the others are still held. In the engine the caller takes the returned "
            "pages as free (the prefix cache stops counting them) while a holder still uses them."
        )
    if what.startswith("release") and isinstance(got, list) and len(set(got)) < len(got) and got != want:
        twice = sorted({p for p in got if got.count(p) > 1})
        return "freed_twice", (
            f"release returned page {twice[0]} {got.count(twice[0])} times ({got}, want {want}): a page listed "
            "more than once in one call (held that many times) comes free once, when its count reaches 0; return "
            "it and queue it once. In the engine it would sit twice on the free list and be handed to two requests."
        )
    if what.startswith("release") and want != got and isinstance(got, list) and sorted(got) != sorted(want):
        return "refcount", (
            "a page becomes free only when its count falls to 0: a retained page needs one release per holder. In the engine, "
            "a page freed while held is handed out again and two requests write the same rows."
        )
    if want_free != got_free and want == got and got_free > want_free:
        return "freed_while_held", (
            f"num_free is {got_free}, should be {want_free}: a page went back on the free list while a holder "
            "still has it. In the engine it is handed out again and two requests write the same rows."
        )
    if want_free != got_free and want == got:
        return "leak", (
            f"num_free is {got_free}, should be {want_free}: a page that became free must go back on the "
            "free list (a leak otherwise), once. In the engine the pool shrinks with every request until nothing can be admitted."
        )
    if what.startswith("allocate") and isinstance(got, list) and sorted(got) == sorted(want):
        return (
            "wrong_order",
            "take pages from the front of the free list, in order. In the engine no answer changes, but the checker compares page for page.",
        )
    if what.startswith("allocate"):
        return "wrong_order", (
            "freed pages go to the back of the free list (a queue, not a stack): the pages never "
            "used are handed out before a freed one. In the engine no answer changes (any free page holds rows as well), but the checker compares your allocator with the engine's page for page."
        )
    return "wrong_answer", "compare with the policy in the stub's docstring."


def check(make: Callable) -> object:
    """Replay the table cases and a random workload on ``make`` (the learner's class) and the engine's Allocator.

    Raises :class:`~ropepool.teaching.feedback.ExerciseFailed` naming the first operation whose answer, reference
    counts or free count differ, with the operations before it.
    """
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's
    table, runs = cases(), workload()
    for name, pages, ops in table + runs:
        seed = zlib.crc32(name.encode())
        mine = _run(make, pages, ops, np.random.default_rng(seed), learner=True)
        theirs = _run(_engine, pages, ops, np.random.default_rng(seed), learner=False)
        done = []
        with showing(lambda: f"Allocator({pages}), then {'; '.join(done[-6:]) or 'nothing'}"):
            for (what, got, got_refs, got_free), (_, want, want_refs, want_free) in zip(mine, theirs):
                if (got, got_refs, got_free) != (want, want_refs, want_free):
                    problem, hint = _hint(what, want, got, want_free, got_free, want_refs, got_refs)
                    if problem == "wrong_order" and _released_in_another_order(
                        pages, ops, seed, len(done), (got, got_refs, got_free)
                    ):
                        problem, hint = "release_order", RELEASE_ORDER
                    given = history(f"Allocator({pages}), then ", done, 6, "nothing", "; ...", what)
                    expected = f"{want} (refs {want_refs}, {want_free} free)"
                    answer = f"{got} (refs {got_refs}, {got_free} free)"
                    raise wrong_case(PART, problem, name, given, expected, answer, hint)
                done.append(what)
    return passed(
        PART,
        f"Allocator answers as the engine's own on {len(table)} table cases and {len(runs)} random "
        "runs of 40 operations: same pages, same counts, ValueError on a double free.",
    )
