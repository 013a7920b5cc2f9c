"""Part: 3 slot_mapping
Kind: wrong

The mistake:
    Looks up the page once per request, at the chunk's first position, and uses it for all its new
    tokens: a chunk whose tokens span two or more pages (a chunk crossing a page boundary; any chunk
    of 2+ tokens at page_size 1) writes past its first page into that page's rows. Decodes and
    chunks inside one page are right; positions are right.

A good feedback message must say:
    - a chunk that crosses a page boundary (spans several pages; page_size 1 with several new
    tokens)
    - each position p takes its own page pages[p // page_size], not the first page of the chunk

It must not say:
    - mapped from the start / cached ignored / positions from 0
    - offset within page p % page_size
    - positions are wrong
"""

def slot_mapping(requests, page_size):
    positions, slots = [], []
    for r in requests:
        pages, cached, new = r["pages"], r["cached"], r["new"]
        for i, p in enumerate(range(cached, cached + new)):
            if i == 0:
                page = pages[p // page_size]  # the chunk's page
            positions.append(p)
            slots.append(page * page_size + p % page_size)
    return positions, slots
