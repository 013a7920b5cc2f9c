"""
part: notebook 13, part 3 `slot_mapping`
kind: wrong
mistake: looks up only the first new token's slot in the page table and assumes the rest of the
  chunk follows in consecutive rows (slot of token i = first slot + i), so a chunk that crosses into
  the next page goes on in the rows after the current page instead of into the next page of the
  page table. Right when the chunk stays within one page, or when the pages are consecutive.
good feedback must say: when a request's new tokens cross a page boundary (pages not consecutive /
  page_size 1 with more than one token), the tokens after the boundary get rows past the end of the
  current page instead of the next page of the page table: each position must be looked up in
  pages (pages[p // page_size]). Decodes (one token) and positions are right.
wrong feedback: "positions off by one", "from the start of the page table" (it starts at cached
  correctly), "page number not multiplied by page_size", "decode wrong".
"""


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [], []
    for r in requests:
        start, n = r["cached"], r["new"]
        if n == 0:
            continue
        first = r["pages"][start // page_size] * page_size + start % page_size
        positions.extend(range(start, start + n))
        slots.extend(range(first, first + n))
    return positions, slots
