"""Part: 3 slot_mapping.  Kind: wrong.

The mistake: slot = pages[p // page_size] + p % page_size. The page number is used as if it were
the row where the page starts; it must be multiplied by page_size (page k holds rows
k * page_size .. k * page_size + page_size - 1). With page_size 1 (SGLang's) this is right, and so
is any token on page 0; with pages of 2, 4 or 16 rows, every token on a page other than 0 gets a
row inside the wrong page (rows of different pages even collide: page 3 offset 0 and page 2
offset 1 both give row 3). Positions are right.

A good feedback message must say: the page number must be multiplied by page_size / page k starts
at row k * page_size; the failing case has page_size > 1.
It must not say: from the start of the page table / cached ignored, an off-by-one position, the
chunk crossing a page boundary as the cause, the requests' order.
"""


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [], []
    for r in requests:
        for p in range(r["cached"], r["cached"] + r["new"]):
            positions.append(p)
            slots.append(r["pages"][p // page_size] + p % page_size)
    return positions, slots
