"""Part 3 slot_mapping -- kind: wrong.

Mistake: the row is computed as `pages[p // page_size] + p % page_size`: the page number is used as
if it were the page's first row, without multiplying it by page_size. With page_size 1 (SGLang's,
a page is a row) this is exactly right; with pages of 2, 4, 16 rows every slot is wrong unless the
page is page 0 (page 3 of 16 rows starts at row 48, not row 3). Differs from a correct part ONLY
where page_size > 1 and the position's page number is not 0. Positions are always right.

A good feedback message must say: multiply the page number by page_size / the row of a page's first
slot is page * page_size; right with page_size 1, wrong with larger pages.
It must not say: mapped from the start / positions not offset by cached, off by one, wrong order of
requests, positions wrong.
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
            slots.append(pages[p // page_size] + p % page_size)
    return positions, slots
