"""Hints, one more each time a learner asks (``ropepool.track.hint(n)``); the last nearly gives it away."""

HINTS = {
    1: [
        "theta = positions[:, None] * inv_freq[None, :] has shape [T, D/2]: one angle per token and pair.",
        "NeoX pairs: a = x[:, :D//2], b = x[:, D//2:]. GPT-J pairs: a = x[:, 0::2], b = x[:, 1::2].",
        "out = x.copy(); write a*cos - b*sin where a came from and a*sin + b*cos where b came from.",
    ],
    2: [
        "Keep refs = [0] * num_pages and a collections.deque of the free pages; num_free is its length.",
        "allocate: check n <= num_free first, then popleft n pages and set each refs[p] = 1.",
        "release: count each page in the call (collections.Counter) and check refs[p] >= count for all pages "
        "before changing any (a page outside 0 .. num_pages - 1 is refused too); then decrement, and append each "
        "page that reaches 0 to the free queue.",
    ],
    3: [
        "One request at a time, in order; its tokens this step are positions cached .. cached + new - 1.",
        "Position p sits on page p // page_size of the request, at offset p % page_size inside it.",
        "slot = pages[p // page_size] * page_size + p % page_size.",
    ],
    4: [
        "Start with match: from the root, children[keys[i]] gives the edge that starts with that key; count how many "
        "of its keys agree, take that many pages, go on only if the whole edge agreed.",
        "insert walks the same way; where a child's edge agrees only partly and the keys go on, split the edge: "
        "a new upper node with the agreeing part, the old node below it with the rest.",
        "evict: collect the leaves whose last page has allocator.refs == 1, take min by (last_used, order), remove "
        "it from its parent and allocator.release all its pages; repeat until at least n pages are freed.",
    ],
    5: [
        "Running requests first, oldest first: n = min(uncached, budget); the rows it needs are max(0, n - spare).",
        "While those rows are more than free_rows, preempt the last request still running (add its held rows to "
        "free_rows); if that was this request, it does not run.",
        "Then the waiting ones, in order, but stop if the budget is 0 or anything was preempted: admit one whose "
        "tokens <= free_rows (skip it otherwise), and run min(tokens, budget) of them.",
    ],
    6: [
        "Work on |x| and put the sign back at the end: code | 0x80 where np.signbit(x); give NaN its 0x7F after "
        "that (a NaN can carry a sign bit too, invisible when printed: np.signbit(-np.nan) is True).",
        "decode_table()[:0x7F] is every finite non-negative value, increasing: np.searchsorted finds the two "
        "codes around |x|.",
        "Clip |x| to 448 first (saturate); on a tie pick the even code (lo % 2 == 0); NaN of either sign gives 0x7F.",
    ],
}
