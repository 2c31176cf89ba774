# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
# torch is pinned: this version has a CPU wheel here; an unpinned torch pulls a multi-GB CUDA build.
TORCH  := torch==2.13.0

.PHONY: run test venv dev clean

$(VENV)/.base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install -e .
	touch $@

$(VENV)/.dev: $(VENV)/.base pyproject.toml
	$(PIP) install $(TORCH) -e '.[dev]'
	touch $@

venv: $(VENV)/.base
dev: $(VENV)/.dev

run: $(VENV)/.base
	$(VENV)/bin/qkv explain

test: $(VENV)/.dev
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
