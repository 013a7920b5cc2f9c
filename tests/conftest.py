"""Shared test settings.

Under CI (``CI`` set, as ``.ci/run`` runs), hypothesis draws the same examples every run, so a
submission's result does not depend on luck; locally it explores new examples each run.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
