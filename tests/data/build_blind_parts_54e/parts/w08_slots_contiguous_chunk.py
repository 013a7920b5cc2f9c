"""Part: 3 slot_mapping.  Kind: wrong.

The mistake: each request's first new token is mapped with the formula
(pages[p // page_size] * page_size + p % page_size), and the following tokens are given the rows
after it (first_slot + j), as if a request's rows were contiguous in the pool. They are only
contiguous inside one page: once a chunk crosses a page boundary onto a page that is not the next
one in the pool, every slot after the boundary is wrong (with page_size 1, every token after the
first one of a multi-token chunk, unless the pages happen to be consecutive). Decodes (new == 1),
chunks that stay inside one page and page tables of consecutive pages are right; positions are
always right.

A good feedback message must say: a chunk that crosses into the next page (page boundary) keeps
counting rows past the end of its page instead of going to pages[p // page_size]; look up the page
of every position, not only the first.
It must not say: mapped from the start of the page table / cached ignored (from_start), positions
wrong, an off-by-one in the offset within the page, the requests' order.
"""


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [], []
    for r in requests:
        start = r["cached"]
        if r["new"] == 0:
            continue
        first = r["pages"][start // page_size] * page_size + start % page_size
        for j in range(r["new"]):
            positions.append(start + j)
            slots.append(first + j)
    return positions, slots
