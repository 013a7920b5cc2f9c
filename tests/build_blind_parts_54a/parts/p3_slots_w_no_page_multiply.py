"""
part: notebook 13, part 3 `slot_mapping`
kind: wrong
mistake: the slot is pages[p // page_size] + p % page_size: the page number is used as a row number
  without multiplying by page_size. Positions are right; with page_size 1 the slots are right too.
good feedback must say: with page_size > 1 the slots are wrong (too small / land in the wrong rows,
  overlapping other pages): the page number must be multiplied by page_size
  (pages[p // page_size] * page_size + p % page_size); page_size 1 and the positions are right.
wrong feedback: "positions wrong / off by one", "from the start of the page table" (from_start),
  "order of requests", "page_size 1 wrong".
"""


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [], []
    for r in requests:
        for p in range(r["cached"], r["cached"] + r["new"]):
            positions.append(p)
            slots.append(r["pages"][p // page_size] + p % page_size)
    return positions, slots
