# Two commands for a newcomer: `make book` and `make test`. Both bootstrap .venv on first use.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# The kernel spec runs `python`: put the venv first so notebooks run in it.
export PATH := $(abspath $(VENV))/bin:$(PATH)
# No model hub: the default checkpoint ships in a PyPI package (HF_HUB_OFFLINE=0 TRANSFORMERS_OFFLINE=0 reach a hub
# for another one); one OpenMP thread per process, since make runs two at once on two cores. The settings live in
# tools/environment.py (stdlib only); each is exported unless already set.
SETTINGS := $(shell python3 -m tools.environment)
$(foreach setting,$(SETTINGS),$(eval export $(subst =, ?= ,$(setting))))
PORT ?= 8000

.PHONY: book book-class test test-portable test-any-bert lint unit nbval serve clean venv

venv: $(STAMP)

# Python 3.11+ with venv (Debian: apt-get install python3-venv); one clear line instead of a traceback.
PYTHON_OK := import sys; sys.exit("make: Python 3.11 or newer is needed, this python3 is " + sys.version.split()[0]) if sys.version_info < (3, 11) else None
VENV_OK := import ensurepip, venv

$(VENV)/bin/python:
	@command -v python3 > /dev/null || { echo "make: python3 is not installed (Python 3.11 or newer is needed)"; exit 1; }
	@python3 -c '$(PYTHON_OK)'
	@python3 -c '$(VENV_OK)' 2> /dev/null || { echo "make: python3 cannot create a virtual environment; on Debian/Ubuntu: apt-get install python3-venv"; exit 1; }
	python3 -m venv $(VENV)

# What a reader needs (run the chapters, build the book); re-installed only when the pins or the package change.
$(STAMP): $(VENV)/bin/python requirements.txt pyproject.toml
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# What the tests and the classroom tools add (axe-core for the accessibility test: npm, pinned by its lock file), and
# the system packages they need (Chromium, chromedriver, bubblewrap, npm): tools/system_packages.sh, the one list,
# installs them as root on Debian/Ubuntu and otherwise stops with the command to run. `make test` checks them first.
AXE := tests/book/axe
SYSTEM_PACKAGES := tools/system_packages.sh
.PHONY: system-packages
system-packages:
	@$(SYSTEM_PACKAGES)

$(DEV_STAMP): $(STAMP) requirements-dev.txt requirements-teacher.txt $(AXE)/package-lock.json
	@$(SYSTEM_PACKAGES)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	npm ci --prefix $(AXE) --no-audit --no-fund --silent
	touch $(DEV_STAMP)

# What the book is built from: every project file outside _build, .venv, .git and caches. When none changed
# since the last good build, `make book` has nothing to do (`make -B book` runs Jupyter Book anyway).
BOOK_INPUTS := $(shell find . \( -name .git -o -name .venv -o -name _build -o -name __pycache__ \
	-o -name '.*_cache' -o -name .ipynb_checkpoints -o -name dist -o -name build -o -name '*.egg-info' \
	-o -name node_modules -o -name .hypothesis \) \
	-prune -o -type f -print)
BOOK_BUILT := _build/html/.built
# What the outputs depend on besides the notebooks' code (helpers, pins, installed versions, checkpoint); rewritten,
# after emptying the cache and the build, only when that changes (tools/book/fingerprint.py).
FINGERPRINT := _build/.fingerprint

book: $(BOOK_BUILT)
	@echo "The book is in _build/html/index.html (make serve to read it in a browser)."

# Run changed notebooks into Jupyter Book's cache one per core, then build from that cache with -W; print the whole
# book as one PDF where Chromium and Playwright are installed, and say so where not (tools/book/pdf.py).
# The stamp takes the build's start time, so a file saved during the build counts as changed.
$(BOOK_BUILT): $(STAMP) $(BOOK_INPUTS) $(FINGERPRINT)
	@mkdir -p _build && touch _build/.book-started
	python -m tools.book.findings_page
	python -m tools.book.execute
	jupyter-book build . --warningiserror --keep-going
	python -m tools.book.pdf --with-book
	mv _build/.book-started $@

# The book for a class: the same pages from the same cache, without solutions, downloads or launch buttons; rebuilt
# only when the book was (its inputs are the book's).
CLASS_BUILT := _build/class/.built
book-class: $(CLASS_BUILT)
	@echo "The class book is in _build/class/_build/html/index.html."

$(CLASS_BUILT): $(BOOK_BUILT)
	python -m tools.book.class_build
	touch $@

# Always asked, rewritten only when something changed: make then sees a newer file and rebuilds the book.
$(FINGERPRINT): FORCE $(STAMP)
	@python -m tools.book.fingerprint

.PHONY: FORCE
FORCE:

# Lint, then two lanes at once: every notebook (nbval), the book built from what nbval cached, the class book, the PDF,
# the tests of what they built (tests/book), the unit tests and two classroom files; and the other classroom tests,
# which need no built book. Each lane keeps about one core busy (nbval's two workers and the graders' two share them).
# The split is by CPU seconds measured in a warm run (each lane in its own cpuacct group, every process counted);
# tests/unit/test_lanes.py checks that every test file runs in exactly one lane. Lines interleave. Each lane is one
# pytest process (-n 0): an xdist worker (-n 1) added a controller that imported and set up again (~9 CPU s, measured).
test: system-packages $(DEV_STAMP)
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory -j2 --output-sync=line test-built test-code

# The classroom files that run in the book's lane, beside tests/book and tests/unit, to even the lanes out.
CLASSROOM_IN_BOOK_LANE := tests/classroom/test_cluster.py tests/classroom/test_answers.py tests/classroom/test_message_cap.py
# The book's browser visit (tests/book/conftest.py's `visited`) is loaded from _build/.visit-cache when the same site
# was visited by the same code, axe-core and Chromium (tests/book/visit_store.py); `make test VISIT_FROM_CACHE=`
# visits anyway. A fresh clone (CI) has no stored visit and visits.
VISIT_FROM_CACHE ?= --visit-cache _build/.visit-cache

.PHONY: test-built test-code
test-built: $(DEV_STAMP)
	$(MAKE) --no-print-directory nbval
	$(MAKE) --no-print-directory book
	$(MAKE) --no-print-directory book-class
	$(MAKE) --no-print-directory pdf
	pytest tests/book tests/unit $(CLASSROOM_IN_BOOK_LANE) -n 0 --durations=15 $(VISIT_FROM_CACHE)

# The grading tests (bubblewrap sandboxes; kernels forked by a kernel zygote where the grader is root), beside the
# book's lane.
test-code: $(DEV_STAMP)
	pytest tests/classroom $(addprefix --ignore=,$(CLASSROOM_IN_BOOK_LANE)) -n 0 --durations=15

lint: $(DEV_STAMP)
	ruff check .

# Two workers; --dist loadscope (pyproject.toml) keeps each notebook's cells in one worker and kernel. Each notebook
# that passes in full goes into Jupyter Book's cache as nbclient would have stored it
# (tools/testing/pytest_book_cache.py), so the `make book` after it executes nothing again. A notebook the cache
# already holds for the same code and environment (helpers, pins, versions, checkpoint, CPU) is compared with that
# run instead of running again (tools/testing/pytest_nbval_replay.py); `make test NBVAL_FROM_CACHE=` runs every cell.
# The fingerprint is settled first, since a change to it empties the cache.
NBVAL_FROM_CACHE ?= --nbval-from-cache _build/.jupyter_cache
nbval: $(DEV_STAMP) $(FINGERPRINT)
	pytest book -n 2 --durations=15 --nbval-book-cache _build/.jupyter_cache $(NBVAL_FROM_CACHE)

unit: $(DEV_STAMP)
	pytest tests -n 2

# Another CPU's kernels on this one (no AVX, SSE4.2 MKL paths, one thread): stored outputs and tolerances must not
# depend on the machine. Re-runs nbval and the unit tests; CI runs it after `make test`.
PORTABLE := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 OMP_NUM_THREADS=1
test-portable: $(DEV_STAMP)
	$(PORTABLE) pytest book -n 2
	$(PORTABLE) pytest tests/unit -n 2

# Regenerate helpers/data/train_positions_results.json (shipped in the wheel): "Train it"'s scheme x mask x task x seed grid, its controls and ablations (344 trainings, 8 seeds; about 15 min with 2 processes on 2 idle cores, 5-6x that at load 10-14).
.PHONY: experiments
experiments: $(STAMP)
	OMP_NUM_THREADS=1 python -m helpers.training --jobs 2
	OMP_NUM_THREADS=1 python -m helpers.pretraining --jobs 2

# The drift canary: nbval and the unit tests in a side venv (_build/latest-venv, never .venv) with the newest
# transformers, nbval and Jupyter Book 1.x the index offers; torch stays 2.13.0 (newer ones are CUDA builds).
# Reported, never gating: tools/latest.py prints what moved and what failed, and writes _build/latest.json.
.PHONY: test-latest
test-latest: $(DEV_STAMP)
	python -m tools.latest

# The whole book built on two BERTs nobody trained (width 96; the packaged shapes with fresh weights), each into
# _build/any-bert/<kind>/: every page builds, no cell fails, every finding gets a verdict. CI runs it.
test-any-bert: $(DEV_STAMP)
	python -m tools.book.any_bert

# The built book on localhost, gzip-compressed as a host should serve it (tools/book/serve.py).
serve:
	@test -f _build/html/index.html || { echo "No book yet: run 'make book' first."; exit 1; }
	python3 -m tools.book.serve $(PORT)

clean:
	rm -rf _build .pytest_cache
	find . -name .ipynb_checkpoints -prune -exec rm -rf {} +

.PHONY: pdf
# The whole book as one PDF in _build/pdf/ and in the site (the intro links it): Debian's Chromium (apt-get install
# chromium) prints a single-page build of the same cache; redone only when the book was rebuilt. `make book` prints it
# already where Chromium and the test tools are installed (tools/book/pdf.py writes the stamp).
PDF_BUILT := _build/pdf/.built
pdf: $(PDF_BUILT)

$(PDF_BUILT): $(DEV_STAMP) $(BOOK_BUILT)
	python -m tools.book.pdf

.PHONY: teacher assignments
# What a teacher needs (book/teachers.md): the reader's environment, nbgrader, Dask and tqdm (requirements-teacher.txt);
# not the test tools (pytest, npm, axe-core). Grading also needs bubblewrap (apt-get install bubblewrap).
TEACHER_STAMP := $(VENV)/.installed-teacher
teacher: $(TEACHER_STAMP)
	@command -v bwrap > /dev/null || echo "make teacher: grading needs bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"
	@echo "Ready: source $(VENV)/bin/activate, then follow book/teachers.md from this folder."

$(TEACHER_STAMP): $(STAMP) requirements-teacher.txt
	$(PY) -m pip install --quiet -r requirements-teacher.txt
	touch $@

# nbgrader assignments from exercises/ (student versions, LMS zips, gradebook) under _build/assignments/, or under
# COURSE_DIR=DIR (make assignments COURSE_DIR=~/bert-course); see book/teachers.md.
COURSE_ARG = $(if $(COURSE_DIR),--course-dir $(COURSE_DIR))
assignments: $(TEACHER_STAMP)
	python -m tools.classroom assignments $(COURSE_ARG)

.PHONY: bench
# Time the floor (every notebook once), a clean and a no-change `make book`, nbval and `make test`:
# a table on stdout, the numbers in _build/bench.json. Take it on a quiet machine.
bench: $(DEV_STAMP)
	python -m tools.bench

.PHONY: grade
# Grade a chapter's new and changed submissions, each in a bubblewrap sandbox, on WORKERS local Dask workers
# (book/teachers.md): make grade CHAPTER=token_embeddings WORKERS=2 [COURSE_DIR=DIR]
WORKERS ?= 2
grade: $(TEACHER_STAMP)
	@test -n "$(CHAPTER)" || { echo "make grade: say which chapter, e.g. make grade CHAPTER=token_embeddings"; exit 2; }
	python -m tools.classroom grade $(CHAPTER) --workers $(WORKERS) $(COURSE_ARG)

.PHONY: dist
# The helpers package as a wheel and an sdist in dist/, built offline with the venv's setuptools (build/ is its
# scratch space). Every chapter's first cell installs this wheel from the GitHub release: README.md, Publishing.
dist: $(STAMP)
	rm -rf dist build
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation -w dist .
	$(PY) -c 'from setuptools import build_meta; build_meta.build_sdist("dist")' > /dev/null
	rm -rf build
	@ls -l dist

# ---- The live widget (issue 45) ---------------------------------------------------------------------------------
# `make widget`: the packaged checkpoint exported to ONNX (tools/widget/export.py, fp16 weights) and the browser's
# runtime and WordPiece from npm (onnxruntime-web, @huggingface/tokenizers: tools/widget/package-lock.json, npm ci),
# gathered in _build/widget/dist. A book built after it vendors them into _static/widget (tools/book/sphinx_widget.py);
# `make book` never needs them (each live box then shows `make widget book`). make test builds them first.
WIDGET := tools/widget
WIDGET_BUILT := _build/widget/.built
.PHONY: widget
widget: $(WIDGET_BUILT)

$(WIDGET_BUILT): $(DEV_STAMP) $(WIDGET)/package-lock.json $(wildcard $(WIDGET)/*.py) helpers/checkpoint.py
	@command -v npm > /dev/null || { echo "make: npm is not installed (Debian/Ubuntu: apt-get install nodejs npm)"; exit 1; }
	npm ci --prefix $(WIDGET) --no-audit --no-fund --silent
	python -m tools.widget.export
	touch $@

test-built test-code: widget
# Once the widget is built, the book depends on its manifest (a file no rule makes, so `make book` never runs npm):
# a new widget rebuilds the pages that vendor it.
$(BOOK_BUILT): $(wildcard _build/widget/dist/manifest.json)
# ---- end of the live widget -------------------------------------------------------------------------------------
