"""Every part filled in: what a facilitator's demo runs (``ROPEPOOL_TRACK=solutions``).

These are reference answers for the learner's interfaces, kept out of the notebooks. The checkers
compare the learner's parts with the engine's own implementation and the float64 reference; two use
these as well: part 3's checker takes :func:`slot_mapping` as its reference, and part 5's runs
:func:`schedule_step` on a mistaken input, to recognise a mistake. :mod:`.mistakes` edits them.
"""

from __future__ import annotations

from collections import Counter, deque

import numpy as np

from ..fp8 import decode_table


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i]."""
    x = np.asarray(x, np.float64)
    D = x.shape[-1]
    theta = np.asarray(positions, np.float64)[:, None] * np.asarray(inv_freq, np.float64)[None, :]  # [T, D/2]
    cos, sin = np.cos(theta), np.sin(theta)
    if is_neox:
        a, b = np.arange(D // 2), np.arange(D // 2) + D // 2  # (i, i + D/2)
    else:
        a, b = np.arange(0, D, 2), np.arange(1, D, 2)  # (2i, 2i + 1)
    out = x.copy()
    out[:, a] = x[:, a] * cos - x[:, b] * sin
    out[:, b] = x[:, a] * sin + x[:, b] * cos
    return out  # [T, D]


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]."""
    x = np.asarray(x, np.float32)
    with np.errstate(invalid="ignore"):
        mag = np.minimum(np.abs(x.astype(np.float64)), 448.0)  # saturate; NaN stays NaN
        _, e = np.frexp(mag)  # mag = m * 2**e, m in [0.5, 1)
        step = np.where(mag < 2.0**-6, 2.0**-9, np.ldexp(1.0, e - 4))  # 8 steps per binade; subnormals 2**-9
        rounded = np.rint(mag / step) * step  # np.rint: a tie goes to the even multiple, the even code
        rounded = np.where(np.isnan(x), 0.0, rounded)
    code = np.searchsorted(decode_table()[:0x7F], rounded)  # the code whose value it is
    code = code | (np.signbit(x).astype(np.int64) << 7)
    return np.where(np.isnan(x), 0x7F, code).astype(np.uint8)  # NaN of either sign: 0x7F


def slot_mapping(requests, page_size):
    """(positions, slots) of one step, request after request."""
    positions, slots = [], []
    for r in requests:
        for p in range(r["cached"], r["cached"] + r["new"]):
            positions.append(p)
            slots.append(r["pages"][p // page_size] * page_size + p % page_size)
    return positions, slots


class Allocator:
    """Pages 0 .. num_pages - 1, handed out from a queue, each reference-counted."""

    def __init__(self, num_pages):
        self.refs = [0] * num_pages
        self.free = deque(range(num_pages))

    @property
    def num_free(self):
        return len(self.free)

    def allocate(self, n):
        if n > len(self.free):
            raise ValueError(f"allocate({n}): only {len(self.free)} pages are free")
        pages = [self.free.popleft() for _ in range(n)]
        for p in pages:
            self.refs[p] = 1
        return pages

    def retain(self, pages):
        for p in pages:
            if not 0 <= p < len(self.refs) or self.refs[p] == 0:
                raise ValueError(f"retain: page {p} is not held")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        count = Counter(pages)
        for p, k in count.items():
            if not 0 <= p < len(self.refs) or self.refs[p] < k:
                held = self.refs[p] if 0 <= p < len(self.refs) else 0
                raise ValueError(f"release: page {p} given {k} times, held {held}")
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
        self.free.extend(freed)
        return freed


class _Node:
    def __init__(self, keys, pages, parent, last_used, order):
        self.keys, self.pages, self.parent = list(keys), list(pages), parent
        self.children = {}
        self.last_used, self.order = last_used, order


def _common(a, b) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


class PrefixTree:
    """A radix tree over keys whose edges hold the pool pages of those keys."""

    def __init__(self, allocator):
        self.allocator = allocator
        self.root = _Node([], [], None, 0, 0)
        self.clock = self.made = 0

    def _new(self, keys, pages, parent, last_used):
        self.made += 1
        return _Node(keys, pages, parent, last_used, self.made)

    def match(self, keys):
        self.clock += 1
        node, i, pages = self.root, 0, []
        while i < len(keys) and keys[i] in node.children:
            node = node.children[keys[i]]
            node.last_used = self.clock
            n = _common(node.keys, keys[i:])
            pages += node.pages[:n]
            i += n
            if n < len(node.keys):
                self._split(node, n)
                break
        return pages

    def insert(self, keys, pages):
        self.clock += 1
        node, i, out = self.root, 0, []
        while i < len(keys):
            child = node.children.get(keys[i])
            if child is None:
                new = list(pages[i : len(keys)])
                self.allocator.retain(new)
                node.children[keys[i]] = self._new(keys[i:], new, node, self.clock)
                return out + new
            child.last_used = self.clock
            n = _common(child.keys, keys[i:])
            if n < len(child.keys):
                child = self._split(child, n)
            out += child.pages[:n]
            i += n
            node = child
        return out

    def _split(self, node, n):
        top = self._new(node.keys[:n], node.pages[:n], node.parent, node.last_used)
        node.parent.children[top.keys[0]] = top
        node.keys, node.pages, node.parent = node.keys[n:], node.pages[n:], top
        top.children[node.keys[0]] = node
        return top

    def _nodes(self):
        nodes = list(self.root.children.values())
        for node in nodes:  # the list grows as it is walked: every node, parents first
            nodes += node.children.values()
        return nodes

    def num_evictable(self):
        refs = self.allocator.refs
        return sum(refs[p] == 1 for node in self._nodes() for p in node.pages)

    def evict(self, n):
        refs, freed = self.allocator.refs, []
        while len(freed) < n:
            leaves = [x for x in self._nodes() if not x.children and refs[x.pages[-1]] == 1]
            if not leaves:
                break
            leaf = min(leaves, key=lambda x: (x.last_used, x.order))
            del leaf.parent.children[leaf.keys[0]]  # the whole leaf goes, as in SGLang
            freed += self.allocator.release(leaf.pages)
        return freed


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """Running requests first (a decode, or the next chunk), preempting the newest when rows run out;
    then waiting ones that fit, while the budget lasts and nothing was preempted."""
    budget, run, preempted = max_step_tokens, [], []
    alive = [r["rid"] for r in running]  # admission order: the last is preempted first
    for r in running:
        if r["rid"] not in alive:
            continue  # preempted earlier in this step
        n = min(r["uncached"], budget)
        if n == 0:
            continue
        need = max(0, n - r["spare"])
        while need > free_rows:
            victim = alive.pop()
            preempted.append(victim)
            free_rows += next(x["held"] for x in running if x["rid"] == victim)
            if victim == r["rid"]:
                break
        if r["rid"] not in alive:
            continue
        free_rows -= need
        budget -= n
        run.append((r["rid"], n))
    for w in waiting:
        if budget == 0 or preempted:
            break
        if w["tokens"] <= free_rows:
            free_rows -= w["tokens"]
            n = min(w["tokens"], budget)
            budget -= n
            run.append((w["rid"], n))
    return run, preempted
