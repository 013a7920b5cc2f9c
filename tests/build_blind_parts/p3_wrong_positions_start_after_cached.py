# part: 3
# verdict: wrong
# mistake: I took cached as the last position already written, so new tokens start at cached + 1
# expect: "position", "cached", "off by one", "one"


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [], []
    for r in requests:
        pages, cached, new = r["pages"], int(r["cached"]), int(r["new"])
        for p in range(cached + 1, cached + new + 1):
            positions.append(p)
            slots.append(int(pages[p // page_size]) * page_size + p % page_size)
    return positions, slots
