# part: 3
# verdict: wrong
# mistake: I put the decode tokens first in the step (as the scheduler runs them first) instead of keeping the requests in the order given
# expect: "order", "request after request"


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [], []
    for r in sorted(requests, key=lambda r: int(r["new"]) != 1):
        pages, cached, new = r["pages"], int(r["cached"]), int(r["new"])
        for p in range(cached, cached + new):
            positions.append(p)
            slots.append(int(pages[p // page_size]) * page_size + p % page_size)
    return positions, slots
