"""
part: 3 (slot_mapping)
kind: wrong
mistake: The learner counts pages from the chunk's start: token i of the step goes to page
    pages[cached // page_size + i // page_size] (with the right in-page offset (cached + i) % page_size),
    instead of pages[(cached + i) // page_size]. A chunk that starts in the middle of a page and crosses
    into the next page keeps writing into the first page's rows (offsets wrap around to its start)
    until i reaches page_size. Pages of 1 row, chunks starting at a page edge, prefills from 0 and
    single decodes are all right.
good feedback must say: a chunk that starts mid-page (cached % page_size != 0) and crosses a page
    boundary: the positions past the boundary got rows in the chunk's first page instead of the next
    page (the page index must come from the position p, pages[p // page_size], not from the token's
    index in the chunk); positions are right, only slots are wrong.
must NOT say: that the mapping starts from position 0 / ignores cached (from_start); that the offset
    p % page_size is missing; that positions are wrong; that page_size 1 fails.
"""


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [], []
    for req in requests:
        pages, cached, new = req["pages"], req["cached"], req["new"]
        first_page = cached // page_size          # the page the chunk starts in
        for i in range(new):
            p = cached + i
            page = pages[first_page + i // page_size]
            positions.append(p)
            slots.append(page * page_size + p % page_size)
    return positions, slots
