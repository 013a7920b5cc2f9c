"""Teaching: the notebooks' plots (:mod:`.viz`), widgets (:mod:`.widgets`), workshop exercises and
their checkers (:mod:`.exercises`, :mod:`.notebook_exercises`), the one way every checker answers, the
build-it track's too (:mod:`.feedback`), and visible checks (:mod:`.checks`).

Nothing below this package (the op, the kernels, the engine) imports it.
"""
