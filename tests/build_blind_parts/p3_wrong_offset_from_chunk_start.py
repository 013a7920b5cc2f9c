# part: 3
# verdict: wrong
# mistake: the row within the page is counted from the start of this step's chunk ((p - cached) % page_size), not from the position
# expect: "mid-page", "middle", "offset", "p % page_size"


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [], []
    for r in requests:
        pages, cached, new = r["pages"], int(r["cached"]), int(r["new"])
        for p in range(cached, cached + new):
            positions.append(p)
            slots.append(int(pages[p // page_size]) * page_size + (p - cached) % page_size)
    return positions, slots
