"""The build-it checkers (ropepool.track): each passes the reference part, tells a stub what to write
first, and names every wrong part of ropepool.track.mistakes (at least three per checker) by its mistake."""

import numpy as np
import pytest

from ropepool import track
from ropepool.track import mistakes, solutions, stubs
from ropepool.teaching.exercises import expect_rejection

PARTS = sorted(track.PARTS)
WRONG = [(n, code, fn) for n in PARTS for code, fn in mistakes.BY_PART[n].items()]


@pytest.mark.parametrize("n", PARTS)
def test_the_reference_part_passes(n):
    verdict = track.check(n, getattr(solutions, track.PARTS[n][1]))
    assert verdict.passed and f"Part {n} PASSED" in repr(verdict)


@pytest.mark.parametrize("n", PARTS)
def test_a_stub_is_told_what_to_write_first(n):
    err = expect_rejection(lambda part: track.check(n, part), getattr(stubs, track.PARTS[n][1]), "not_implemented")
    assert "Write this first:" in str(err) and "stub is still there" in str(err)


@pytest.mark.parametrize("n", PARTS)
def test_three_or_more_mistakes_per_checker(n):
    assert len(mistakes.BY_PART[n]) >= 3


@pytest.mark.parametrize(("n", "code", "wrong"), WRONG, ids=[f"part{n}-{code}" for n, code, _ in WRONG])
def test_each_mistake_is_named_in_plain_words(n, code, wrong):
    err = expect_rejection(lambda part: track.check(n, part), wrong, code)
    text = str(err)
    for line in ("case '", "input:", "expected:", "got:", "hint:"):
        assert line in text, f"{line!r} missing from: {text}"


def test_an_error_the_learner_raises_is_reported_not_raised():
    def rotate(x, positions, inv_freq, is_neox):
        return x[:, 0, 0]  # IndexError on a 2-D head

    verdict = track.feedback(1, rotate)
    assert not verdict.passed and verdict.problem == "raised" and "IndexError" in verdict.message


def test_an_allocator_refusing_with_another_error_type_is_told_so():
    """ValueError is the allocator's refusal (judged against the engine's); any other error is reported."""

    class KeyErrors(solutions.Allocator):
        def release(self, pages):
            try:
                return super().release(pages)
            except ValueError as e:
                raise KeyError(str(e)) from None

    verdict = track.feedback(2, KeyErrors)
    assert verdict.problem == "raised" and "KeyError" in verdict.message


def test_the_demo_switch(monkeypatch, capsys):
    mine = object()
    monkeypatch.delenv("ROPEPOOL_TRACK", raising=False)
    track.demo(False)
    assert track.use(1, mine) is mine
    monkeypatch.setenv("ROPEPOOL_TRACK", "solutions")
    assert track.use(1, mine) is solutions.rotate and "[demo] part 1" in capsys.readouterr().out
    monkeypatch.delenv("ROPEPOOL_TRACK")
    track.demo()
    try:
        assert track.use(6, mine) is solutions.encode_e4m3
    finally:
        track.demo(False)


def test_hints_come_one_more_each_time_then_the_last_again():
    said = [track.hint(3) for _ in range(4)]
    assert said[0].startswith("Hint 1 of 3") and said[2].startswith("Hint 3 of 3") and said[3] == said[2]
    with pytest.raises(ValueError, match="part 9 does not exist"):
        track.hint(9)


def test_the_solution_encoder_matches_the_reference_on_every_float32_pattern_sampled():
    from ropepool.reference import encode_e4m3

    bits = np.random.default_rng(0).integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    np.testing.assert_array_equal(solutions.encode_e4m3(x), encode_e4m3(x))


def test_a_part_fails_and_passes_as_every_exercise_of_the_suite_does():
    """One feedback core: a part's failure is the suite's ExerciseFailed and its verdict the suite's Verdict."""
    from ropepool.teaching import feedback as core

    err = expect_rejection(lambda part: track.check(6, part), mistakes.encode_sign_dropped, "sign")
    assert type(err) is core.ExerciseFailed and str(err).startswith("Part 6 [sign]: case '")
    verdict = track.feedback(6, mistakes.encode_sign_dropped)
    assert type(verdict) is core.Verdict and repr(verdict).startswith("Part 6 NOT YET: case '")
    assert type(track.check(6, solutions.encode_e4m3)) is core.Verdict


def test_the_tree_notebook_14_serves_wrong_is_named_too():
    """Notebook 14 plugs mistakes.TreeMatchesWholeEdges into the engine; its checker names it as well."""
    err = expect_rejection(lambda part: track.check(4, part), mistakes.TreeMatchesWholeEdges, "match")
    assert "hint:" in str(err)


def test_part_3_checks_the_engine_schedulers_own_steps():
    """Part 3's checker also runs the engine's scheduler (no model) and compares with the positions and
    slots it gave: its steps share prefix rows, chunk prompts and decode, with pages of 1 and 16."""
    from ropepool.track import slots

    for ps in (1, 16):
        steps = slots.engine_steps(ps, seed=ps)
        assert steps and all(slots.reference(reqs, p) == want for _, p, reqs, want in steps)
        reqs = [r for _, _, rs, _ in steps for r in rs]
        assert any(r["new"] == 1 and r["cached"] > 0 for r in reqs)  # decodes
        assert any(r["new"] > 1 and r["cached"] > 0 for r in reqs)  # a later chunk of a prompt
    # two requests of one step whose page tables start with the same 8 rows: the shared prefix's
    assert any(len({tuple(r["pages"][:8]) for r in rs}) < len(rs) for _, _, rs, _ in slots.engine_steps(1, seed=1))
    engine_calls = []

    def spy(requests, page_size):
        engine_calls.append((requests, page_size))
        return solutions.slot_mapping(requests, page_size)

    assert "steps of the engine's own scheduler" in str(track.check(3, spy))
    n = len(slots.engine_steps(1)) + len(slots.engine_steps(16, seed=1))
    assert engine_calls[-n:] == [(r, p) for _, p, r, _ in slots.engine_steps(1) + slots.engine_steps(16, seed=1)]


# --- Part 2 as learners write it: correct in unusual ways, wrong in ways the track's list lacks ------
# Written from the stub's docstring and the report of a learner's tries, not from the checker.


class DictRefs(solutions.Allocator):
    """Correct: refs as a dict of the held pages only."""

    def __init__(self, num_pages):
        super().__init__(num_pages)
        self.refs = {}
        self._n = num_pages

    def allocate(self, n):
        if n > len(self.free):
            raise ValueError("too many")
        pages = [self.free.popleft() for _ in range(n)]
        self.refs.update((p, 1) for p in pages)
        return pages

    def retain(self, pages):
        if any(self.refs.get(p, 0) == 0 for p in pages):
            raise ValueError("not held")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        from collections import Counter

        if any(not 0 <= p < self._n or self.refs.get(p, 0) < k for p, k in Counter(pages).items()):
            raise ValueError("not held that often")
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                del self.refs[p]
                freed.append(p)
        self.free.extend(freed)
        return freed


class SetRelease(solutions.Allocator):
    """Correct: release returns the freed pages as a set (the stub fixes the free list's order, not this)."""

    def release(self, pages):
        return set(super().release(pages))


class FloatPages(solutions.Allocator):
    """Wrong: pages as floats (int(p) would hide it)."""

    def allocate(self, n):
        return [p + 0.5 for p in super().allocate(n)]


class NoRefsAtAll:
    """Wrong: no refs attribute at all."""

    def __init__(self, num_pages):
        self.inner = solutions.Allocator(num_pages)

    num_free = property(lambda self: self.inner.num_free)

    def allocate(self, n):
        return self.inner.allocate(n)

    def retain(self, pages):
        self.inner.retain(pages)

    def release(self, pages):
        return self.inner.release(pages)


class FreesWhileHeld(solutions.Allocator):
    """Wrong: release frees every page given, whatever its count."""

    def release(self, pages):
        for p in pages:
            if not 0 <= p < len(self.refs) or self.refs[p] == 0:
                raise ValueError("not held")
        freed = []
        for p in pages:
            self.refs[p] = 0
            if p not in self.free and p not in freed:
                freed.append(p)
        self.free.extend(freed)
        return freed


class RefusesHalfway(solutions.Allocator):
    """Wrong: checks each page as it releases it, so a bad call has changed the pages before it."""

    def release(self, pages):
        freed = []
        for p in pages:
            if not 0 <= p < len(self.refs) or self.refs[p] == 0:
                raise ValueError("not held")
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
                self.free.append(p)
        return freed


@pytest.mark.parametrize("part", [DictRefs, SetRelease], ids=lambda c: c.__name__)
def test_a_correct_allocator_written_another_way_passes(part):
    assert track.check(2, part).passed


@pytest.mark.parametrize(
    "part,problem,says",
    [
        (FloatPages, "not_int", "pages are ints"),
        (NoRefsAtAll, "missing_attribute", "has no `refs`"),
        (FreesWhileHeld, "refcount", "two requests write the same rows"),
        (RefusesHalfway, "partial_release", "changed some counts first"),
    ],
    ids=lambda x: getattr(x, "__name__", str(x))[:20],
)
def test_an_allocator_mistake_is_named_never_a_traceback(part, problem, says):
    verdict = track.feedback(2, part)
    assert not verdict.passed and verdict.problem == problem and says in verdict.message, verdict


# --- Part 1 as learners write it (from the stub and the report, not from the checker) ---------


def _complex_rotate(x, positions, inv_freq, is_neox):
    """Wrong: the rotation done on complex numbers and returned complex."""
    x = np.asarray(x, np.float64)
    half = x.shape[1] // 2
    a, b = (x[:, :half], x[:, half:]) if is_neox else (x[:, 0::2], x[:, 1::2])
    z = (a + 1j * b) * np.exp(1j * np.outer(positions, inv_freq))
    out = np.empty(x.shape, complex)
    if is_neox:
        out[:, :half], out[:, half:] = z.real, z.imag
    else:
        out[:, 0::2], out[:, 1::2] = z.real, z.imag
    return out


def _float16_positions(x, positions, inv_freq, is_neox):
    return solutions.rotate(x, np.asarray(positions).astype(np.float16), inv_freq, is_neox)


def _float16_result(x, positions, inv_freq, is_neox):
    return np.asarray(solutions.rotate(x, positions, inv_freq, is_neox)).astype(np.float16)


def _ragged(x, positions, inv_freq, is_neox):
    return [[1.0, 2.0], [3.0]]


@pytest.mark.parametrize(
    "part,problem",
    [
        (_complex_rotate, "not_real"),
        (_float16_positions, "positions_float16"),
        (_float16_result, "float16_result"),
        (_ragged, "not_real"),
    ],
    ids=lambda x: getattr(x, "__name__", str(x)),
)
def test_a_rotation_mistake_is_named_never_a_traceback_or_a_pass(part, problem):
    verdict = track.feedback(1, part)
    assert not verdict.passed and verdict.problem == problem, verdict


def _float32_rotate(x, positions, inv_freq, is_neox):
    """Correct: computed in float32 throughout."""
    return np.asarray(solutions.rotate(np.asarray(x, np.float32), positions, np.asarray(inv_freq, np.float32), is_neox))


def test_a_float32_rotation_passes():
    assert track.check(1, _float32_rotate).passed


# --- Part 4 as learners write it ---------------------------------------------------------------------


class ReversedEvict(solutions.PrefixTree):
    """Correct: evict pops pages from a leaf's end, as the stub words it, and returns them in that order."""

    def evict(self, n):
        return list(reversed(super().evict(n)))


class CountsOneTooMany(solutions.PrefixTree):
    """Wrong: num_evictable counts one page more than evict can free."""

    def num_evictable(self):
        return super().num_evictable() + 1


def test_a_tree_returning_evicted_pages_in_another_order_passes():
    assert track.check(4, ReversedEvict).passed


def test_a_tree_that_overcounts_its_evictable_pages_is_told_not_a_traceback():
    verdict = track.feedback(4, CountsOneTooMany)
    assert not verdict.passed and verdict.problem in ("evict_short", "num_evictable"), verdict
    assert "num_evictable" in verdict.message or "evictable" in verdict.message, verdict


def test_a_part_that_raises_is_told_its_own_line():
    class Raises(solutions.Allocator):
        def allocate(self, n):
            return super().allocate(n) + undefined_name  # noqa: F821 - the learner's bug

    verdict = track.feedback(2, Raises)
    assert not verdict.passed and verdict.problem == "raised", verdict
    assert "NameError" in verdict.message and "test_build_checkers.py, line" in verdict.message
    assert "undefined_name" in verdict.message.splitlines()[1]  # the learner's line, then the input


def test_an_edited_mistake_is_the_reference_with_its_one_line_changed_and_solutions_untouched():
    import inspect

    from ropepool.teaching.feedback import your_line

    before = dict(vars(solutions))

    @mistakes.edit_of(solutions.schedule_step, ("victim = alive.pop()", "victim = alive.pop(0)"))
    def oldest(running, waiting, max_step_tokens, free_rows):
        """Oldest."""

    wrong = oldest
    assert dict(vars(solutions)) == before
    assert (wrong.__name__, wrong.__module__, wrong.__doc__) == ("oldest", __name__, "Oldest.")
    ref = inspect.getsource(solutions.schedule_step).splitlines()
    for fn in (wrong, mistakes.plan_preempts_oldest):  # each edit shows its own lines, whatever was edited after
        got = inspect.getsource(fn).splitlines()
        changed = [(a.strip(), b.strip()) for a, b in zip(ref, got) if a != b]
        assert len(ref) == len(got) and changed == [("victim = alive.pop()", "victim = alive.pop(0)")]
    assert "pages[: len(keys) - i]" in inspect.getsource(mistakes.TreeMatchesWholeEdges.match)
    assert "n == len(node.keys) else []" in inspect.getsource(mistakes.TreeNoPartialMatch.match)
    running = [dict(rid=0, uncached=1, spare=0, held=4), dict(rid=1, uncached=1, spare=0, held=4)]
    assert solutions.schedule_step(running, [], 8, 0) == ([(0, 1)], [1])
    assert wrong(running, [], 8, 0) == ([(1, 1)], [0])
    with pytest.raises(KeyError) as raised:  # an error inside an edited part is not the learner's line
        wrong([dict(rid=0, uncached=1)], [], 8, 0)
    assert str(raised.traceback[-1].path).endswith("mistakes.py:" + oldest.__qualname__ + " (edited)")
    assert "test_build_checkers.py" in your_line(raised.value)  # the caller's frame, not the edited one
    with pytest.raises(ValueError, match="stands 0 times"):
        mistakes.edit_of(solutions.schedule_step, ("no such line", "x"))
    with pytest.raises(TypeError, match="is not schedule_step's signature"):
        mistakes.edit_of(solutions.schedule_step)(lambda running, waiting: None)


def test_a_rotation_leaving_the_second_half_alone_is_told_which_dims_it_left_untouched():
    def rotate_first_half_only(x, positions, inv_freq, is_neox):
        out = np.array(solutions.rotate(x, positions, inv_freq, is_neox), np.float64)
        D = out.shape[1]
        second = slice(D // 2, None) if is_neox else slice(1, None, 2)
        out[:, second] = np.asarray(x, np.float64)[:, second]
        return out

    verdict = track.feedback(1, rotate_first_half_only)
    assert verdict.problem == "untouched" and "Left untouched (out = x there): dim 1;" in verdict.message, verdict


class _AllocateTakesBeforeRefusing(solutions.Allocator):
    """Takes the free pages one by one and refuses only when the queue runs dry: the refused call took pages."""

    def allocate(self, n):
        pages = []
        for _ in range(n):
            if not self.free:
                raise ValueError(f"allocate({n}): too few free pages")
            pages.append(self.free.popleft())
            self.refs[pages[-1]] = 1
        return pages


def test_a_refused_allocate_that_changed_counts_is_told_about_allocate_not_release():
    verdict = track.feedback(2, _AllocateTakesBeforeRefusing)
    assert verdict.problem == "partial_release" and "right to refuse allocate(" in verdict.message, verdict
    assert "refused release" not in verdict.message, verdict


class _GrowsWithoutRetain(solutions.PrefixTree):
    """Adds a new leaf below a leaf without retaining its pages (a new leaf elsewhere still retains them)."""

    def insert(self, keys, pages):
        retain = self.allocator.retain
        self.allocator.retain = lambda new: None if self._grows(keys) else retain(new)
        try:
            return super().insert(keys, pages)
        finally:
            self.allocator.retain = retain

    def _grows(self, keys):
        node, i = self.root, 0
        while i < len(keys) and keys[i] in node.children:
            node = node.children[keys[i]]
            i += len(node.keys)
        return node is not self.root and not node.children and i < len(keys)


def test_an_insert_retaining_too_seldom_is_told_too_seldom():
    verdict = track.feedback(4, _GrowsWithoutRetain)
    assert verdict.problem == "refcount" and "counted too seldom" in verdict.message, verdict
    assert "too often" not in verdict.message, verdict


def _slots_on_last_page(requests, page_size):
    """Every position's offset on the request's last page."""
    positions, _ = solutions.slot_mapping(requests, page_size)
    rows = [r["pages"][-1] * page_size for r in requests for _ in range(r["new"])]
    return positions, [row + p % page_size for row, p in zip(rows, positions)]


def _slots_past_the_pool(requests, page_size):
    """The right rows, 100 pages further on."""
    positions, slots = solutions.slot_mapping(requests, page_size)
    return positions, [s + 100 * page_size for s in slots]


def _slots_from_the_first_table(requests, page_size):
    """Every request looked up in the first request's page table (wrapping round it)."""
    positions, _ = solutions.slot_mapping(requests, page_size)
    table = requests[0]["pages"]
    return positions, [table[p // page_size % len(table)] * page_size + p % page_size for p in positions]


@pytest.mark.parametrize(
    ("part", "lands"),
    [
        (_slots_on_last_page, "land in another of this request's rows (position 5's)."),
        (_slots_past_the_pool, "land in a row no request of this step holds."),
        (_slots_from_the_first_table, "land in another request's rows (request 0's)."),
    ],
)
def test_a_wrong_slot_is_said_to_land_in_the_rows_it_does_land_in(part, lands):
    """Whose row a wrong slot is comes from the step's page tables: the request's own page (which
    position's), another request's page, or a page none of the step's requests holds."""
    verdict = track.feedback(3, part)
    assert verdict.problem == "wrong_rows" and lands in verdict.message, verdict
    assert verdict.message.count("would land in") == 1, verdict


def _encode_zero_unsigned(x):
    """The sign bit from x < 0: -0.0 (and what rounds to -0) gets 0x00; every other code is right."""
    x = np.asarray(x, np.float32)
    code = solutions.encode_e4m3(x)
    return np.where((code == 0x80) & ~(x < 0), 0x00, code).astype(np.uint8)


def _encode_small_negatives_unsigned(x):
    """Negative values below 1 in size, -0.0 included, lose their sign; the rest are right."""
    x = np.asarray(x, np.float32)
    code = solutions.encode_e4m3(x)
    return np.where(np.abs(x) < 1, code & 0x7F, code).astype(np.uint8)


def test_a_lost_sign_of_zero_alone_is_not_said_to_flip_attention_scores():
    verdict = track.feedback(6, _encode_zero_unsigned)
    assert verdict.problem == "sign", verdict
    assert "change sign" not in verdict.message and "stored positive" not in verdict.message, verdict
    assert "Only zero's sign is wrong: 1 value whose code is -0 (0x80) stored as +0 (0x00)" in verdict.message
    assert "no attention score changes value" in verdict.message, verdict


def test_a_lost_sign_of_nonzero_values_is_said_to_flip_attention_scores():
    """Its first wrong code is -0.0's too, yet its nonzero negatives below 1 are stored positive."""
    verdict = track.feedback(6, _encode_small_negatives_unsigned)
    assert verdict.problem == "sign" and "x[0] = -0.0" in verdict.message, verdict
    assert "nonzero negative values here are stored positive" in verdict.message, verdict
    assert "so do attention scores" in verdict.message and "Only zero's sign" not in verdict.message, verdict
