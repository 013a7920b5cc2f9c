"""Sphinx's settings for the suite as a site (``make docs``): run from the repository root as
``sphinx-build -c docs . build/site``, so that the README's own links (docs/..., notebooks/...) resolve.

Everything the pages need is in build/site: no script, font or style sheet is fetched from elsewhere
(``make docs-check`` checks it in Chromium).
"""

import json
import os
from pathlib import Path

# The build-it notebooks (12-14) run with every part filled in by the reference, as nbmake runs them
# (notebooks/conftest.py): their stubs would stop Run All at the first checker. Each part says so in its output.
os.environ.setdefault("ROPEPOOL_TRACK", "solutions")
# A timing claim prints whether it held this run and asserts nothing, as under `make test` (tests/conftest.py):
# the machine that builds the site is rarely quiet. In the lab the notebooks assert them.
os.environ.setdefault("ROPEPOOL_TIMING_CLAIMS", "report")

project = "ropepool"
author = "ropepool's authors"
root_doc = "docs/index"

extensions = ["myst_nb"]

# What the site holds: the README, the pages under docs/ (the error pages too), the notebooks and their guides.
include_patterns = ["README.md", "docs/**", "notebooks/*.ipynb", "notebooks/*.md"]
exclude_patterns = [
    "docs/conf.py",
    "docs/_static/**",
    "docs/_site_root/**",
    "docs/**/.ipynb_checkpoints",
    "notebooks/.ipynb_checkpoints",
]

# MyST: headings get anchors (a link to page.md#a-heading resolves), and markdown-style links to files.
myst_heading_anchors = 3
# A page that starts at a section's level (a moved README section) is fine.
suppress_warnings = ["myst.header"]

# Every notebook is executed at build time, in its own folder as nbmake runs it, and shown with its outputs.
nb_execution_mode = "force"
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_execution_show_tb = True


def _needing_the_model() -> list[str]:
    """The notebooks whose code names SmolLM2, when it cannot be had here (offline, before `make docs` fetched
    it): they are shown without outputs, and the build says so, instead of failing on the model's loader."""
    from ropepool.loaders.fetch import ModelUnavailable
    from ropepool.loaders.smollm2 import fetch_smollm2

    try:
        fetch_smollm2()  # `make docs` fetched it: found in the cache, checked
        return []
    except ModelUnavailable as err:
        root = Path(__file__).resolve().parent.parent
        names = []
        for path in sorted((root / "notebooks").glob("*.ipynb")):
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            if any("smollm2" in "".join(c["source"]).lower() for c in cells if c["cell_type"] == "code"):
                names.append(f"notebooks/{path.name}")
        print(f"ropepool: no model ({err}): {', '.join(names)} shown without outputs")
        return names


nb_execution_excludepatterns = _needing_the_model()
# No widget manager from a CDN: a widget shows its text, the plots and tables are images and HTML.
nb_ipywidgets_js = {}

html_theme = "alabaster"
html_title = "ropepool"
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {
    "page_width": "1000px",
    "sidebar_width": "200px",
    "fixed_sidebar": False,
    "sidebar_includehidden": False,  # the error pages: reached from their index, not listed in the sidebar
}
# The site opens from disk (file://): build/site/index.html leads to the README.
html_extra_path = ["_site_root"]  # relative to docs/, this file's folder
html_static_path = ["_static"]
html_css_files = ["site.css"]
# A fence without a language is text (an error message, a command's output): not coloured as Python.
highlight_language = "none"
