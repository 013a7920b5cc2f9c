"""Part 3 slot_mapping -- kind: wrong.

Mistake: the page of the step's i-th new token is taken as the chunk's first page plus
i // page_size (`pages[start // page_size + i // page_size]`), counting pages from where the chunk
starts instead of from position p itself; the offset inside the page is p % page_size (right).
That is the same thing when the chunk starts on a page's edge (cached % page_size == 0) or stays
inside one page, but a chunk starting mid-page crosses into the next page at the first position
p with p % page_size == 0, and this part keeps that token (and the next ones, until i reaches
page_size) in the previous page's row. Differs from a correct part ONLY for the tokens where
p // page_size != cached // page_size + i // page_size (a chunk starting mid-page: from its first
page boundary until i reaches the next multiple of page_size, and so on). With page_size 1, a chunk
starting on a page's edge, or decodes (new == 1), always right. Example: pages [4, 1, 6], cached 24,
new 13, page_size 16: positions 32..36 must go to rows 96..100 (page 6), this part puts them in
rows 16..20 (page 1).

A good feedback message must say: a chunk that starts in the middle of a page crosses into the next
page: take the page of each position p from p // page_size (not from the chunk's start plus
i // page_size); the token at the page boundary lands in the wrong page / row.
It must not say: mapped from the start (cached ignored), positions wrong, page not multiplied by
page_size, off by one everywhere.
"""

def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [], []
    for req in requests:
        pages, start = req["pages"], req["cached"]
        for i in range(req["new"]):
            p = start + i
            positions.append(p)
            slots.append(pages[start // page_size + i // page_size] * page_size + p % page_size)
    return positions, slots
