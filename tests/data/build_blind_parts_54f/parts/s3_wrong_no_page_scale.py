"""
part: 3 slot_mapping
kind: wrong
mistake: the slot is pages[p // page_size] + p % page_size: the page number is used as if it
    were its first row, not multiplied by page_size. Right with pages of 1 row (SGLang's);
    wrong for page_size > 1 wherever the page is not page 0 (rows of different pages overlap).
good feedback must say: the page number must be multiplied by page_size to give its first row:
    slot = pages[p // page_size] * page_size + p % page_size; right for page_size 1, wrong for 16
    (or 2, 4).
must not say: positions wrong / from the start of the page table (from_start) / cached ignored /
    off by one; the request order.
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
