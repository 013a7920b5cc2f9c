"""
part: 3 slot_mapping
kind: wrong
mistake: the learner looks up only the row of the chunk's first position and gives the chunk's
    next tokens the rows after it (first + i), as if a request's rows were contiguous. Right for
    a decode (1 token), for a chunk inside one page and where the request's pages happen to be
    consecutive; wrong as soon as a chunk crosses into a page that does not follow the previous
    one (with page_size 1, any prompt whose rows are not consecutive).
good feedback must say: each position must be looked up in the page table on its own: where the
    chunk crosses a page boundary, the next page is pages[p // page_size], not the row after the
    last one; a request's pages are not contiguous.
must not say: the page number is not multiplied by page_size; positions wrong / from the start
    (from_start) / cached ignored / off by one.
"""


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [], []
    for r in requests:
        p0 = r["cached"]
        positions += range(p0, p0 + r["new"])
        slots += [r["pages"][p0 // page_size] * page_size + p0 % page_size + i for i in range(r["new"])]
    return positions, slots
