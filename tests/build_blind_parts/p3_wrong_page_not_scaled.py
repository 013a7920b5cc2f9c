# part: 3
# verdict: wrong
# mistake: I add the offset to the page number without multiplying the page by page_size
# expect: "page_size", "multiply", "page * page_size"


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [], []
    for r in requests:
        pages, cached, new = r["pages"], int(r["cached"]), int(r["new"])
        for p in range(cached, cached + new):
            positions.append(p)
            slots.append(int(pages[p // page_size]) + p % page_size)
    return positions, slots
