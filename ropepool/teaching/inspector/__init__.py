"""See every step of a served run: the recording (:mod:`ropepool.engine.recording`) drawn per step.

:mod:`.render` draws the pieces of a step as HTML; :mod:`.painter` keeps a run's frames up to date step by step,
each step redrawing what it changed; :mod:`.widget` is the lab's viewer (a slider over the steps);
:mod:`.page` is the same as one self-contained page; :mod:`.scenarios` serves the runs the suite and
``python -m ropepool inspect`` show (sharing, preemption, a sliding window, MLA).
"""
