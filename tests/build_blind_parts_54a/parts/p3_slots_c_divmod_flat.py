"""
part: notebook 13, part 3 `slot_mapping`
kind: correct
unusual: builds all positions first as one flat list of (request, position) pairs, then maps each
  with divmod (page index and offset in one call) inside one comprehension, and unzips; returns
  lists of Python ints.
good feedback must say: passes / correct.
wrong feedback: any named mistake (from_start, off by one, page multiply, order).
"""


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    todo = [(r["pages"], p) for r in requests for p in range(r["cached"], r["cached"] + r["new"])]
    positions = [p for _, p in todo]
    slots = [pages[page] * page_size + offset for pages, p in todo for page, offset in [divmod(p, page_size)]]
    return positions, slots
