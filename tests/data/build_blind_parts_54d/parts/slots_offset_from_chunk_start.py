"""Part: 3 slot_mapping
Kind: wrong

The mistake:
    The row inside a page is counted from the chunk's start ((p - cached) % page_size) instead of
    from the page's start (p % page_size): right when cached is a multiple of page_size (a chunk at
    a page edge, and always at page_size 1), wrong for a chunk or decode starting mid-page; the page
    is right.

A good feedback message must say:
    - a chunk / decode that starts in the middle of a page (cached not a multiple of page_size)
    - the row in the page is p % page_size, not counted from the chunk start

It must not say:
    - mapped from the start of the page table / cached ignored (the 'from_start' mistake)
    - wrong page / p // page_size
    - positions are wrong
"""

def slot_mapping(requests, page_size):
    positions, slots = [], []
    for r in requests:
        pages, cached, new = r["pages"], r["cached"], r["new"]
        for i, p in enumerate(range(cached, cached + new)):
            page = pages[p // page_size]
            positions.append(p)
            slots.append(page * page_size + (p - cached) % page_size)
    return positions, slots
