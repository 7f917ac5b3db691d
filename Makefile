# The two commands of the README: `make book` builds the book, `make test` runs every test.
# Each creates .venv and installs the project when needed (only Python 3.11 and pip required).
PYTHON ?= python3.11
PYTHON_VERSION := 3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JOBS ?= 2
# dprl.floating_point's settings (numpy and OpenBLAS pinned to AVX2 kernels, one BLAS thread),
# so that every process started here computes the same bits as the committed results; read
# from the module file itself, so that they are known before .venv exists (make -n shows them)
PINNED = env $(shell $(firstword $(wildcard $(BIN)/python) $(PYTHON)) dprl/floating_point.py)

.PHONY: help book test install lab refresh clean distclean spot-check-heavy
.DEFAULT_GOAL := help

help:
	@echo "dprl: make TARGET [PYTHON=/path/to/python$(PYTHON_VERSION)] (each creates .venv first)"
	@echo "  book              build the HTML book from the committed outputs (_build/html)"
	@echo "  test              every test: unit tests, result spot-checks, nbval on every chapter"
	@echo "  check-book        load every built page in headless Chromium"
	@echo "  lab               JupyterLab on book/ with the pinned floating point"
	@echo "  refresh NB=...    re-execute chapters in place (default: all)"
	@echo "  spot-check-heavy  recompute a trial of the results CI only checks for being current"
	@echo "  crosscheck        install d3rlpy and Opacus for the cross-checks (make test does)"
	@echo "  test-slurm        --slurm on a real one-node Slurm, installed and started here (root)"
	@echo "  install | clean | distclean"

# The Python version of .venv (empty when there is none or it is broken): a .venv of another
# version, say from `PYTHON=python3.12 make install`, is recreated by the next make.
VERSION_OF = $(shell $(1) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
ifneq ($(call VERSION_OF,$(BIN)/python),$(PYTHON_VERSION))
$(STAMP): FORCE
endif
FORCE:
# A PYTHON given on the command line is used only to create .venv: say so when it differs
ifeq ($(origin PYTHON),command line)
ifneq ($(wildcard $(BIN)/python),)
ifneq ($(call VERSION_OF,$(PYTHON)),$(call VERSION_OF,$(BIN)/python))
$(warning PYTHON=$(PYTHON) is Python $(or $(call VERSION_OF,$(PYTHON)),unknown), but the existing \
  $(VENV) is $(call VERSION_OF,$(BIN)/python) and is kept; run make distclean first to rebuild it)
endif
endif
endif

# pip compiles what it installs one file at a time (about 25 s of the install here):
# compileall compiles the same files on every core instead; like pip, it skips those that do
# not compile under this Python (torch ships one for 3.12 only), hence the `|| true`.
$(STAMP): pyproject.toml
	@version="$(call VERSION_OF,$(PYTHON))"; if [ "$$version" != "$(PYTHON_VERSION)" ]; then \
		echo "error: dprl needs Python $(PYTHON_VERSION) (pyproject.toml pins its packages for it)," \
			"but PYTHON=$(PYTHON) is $${version:-not a working Python}." >&2; \
		echo "Install Python $(PYTHON_VERSION) and run: make PYTHON=/path/to/python$(PYTHON_VERSION) ..." >&2; \
		exit 1; fi
	@if [ -e $(VENV) ] && [ "$(call VERSION_OF,$(BIN)/python)" != "$(PYTHON_VERSION)" ]; then \
		echo "$(VENV) is not a working Python $(PYTHON_VERSION) environment: recreating it"; \
		rm -rf $(VENV); fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile -e ".[book,test]"
	$(BIN)/python -m compileall -q -q -j 0 "$$($(BIN)/python -c \
		'import sysconfig; print(sysconfig.get_path("purelib"))')" || true
	touch $(STAMP)

install: $(STAMP)

# The cross-check libraries of tests/test_crosscheck.py (d3rlpy's learners, Opacus's clipping).
# d3rlpy 2.8.1 requires gymnasium 1.0.0, which the book's pinned Gymnasium replaces, so they
# install without pip's resolver, every package pinned; `make test` installs them (seconds).
CROSSCHECK := d3rlpy==2.8.1 opacus==1.6.0 opt-einsum==3.4.0 h5py==3.16.0 structlog==26.1.0 \
	colorama==0.4.6 dataclasses-json==0.6.7 marshmallow==4.4.0 typing-inspect==0.9.0 \
	mypy-extensions==1.2.0 gym==0.26.2 gym-notices==0.1.0 scikit-learn==1.9.1 joblib==1.6.0 \
	threadpoolctl==3.8.0 narwhals==2.29.0
XSTAMP := $(VENV)/.crosscheck

$(XSTAMP): $(STAMP) Makefile
	$(BIN)/python -m pip install --quiet --no-deps $(CROSSCHECK)
	touch $(XSTAMP)

.PHONY: crosscheck
crosscheck: $(XSTAMP)

book: $(STAMP)
	$(PINNED) $(BIN)/jupyter-book build . -W --keep-going --all

# dprl is installed editable, so pip compiled none of it: compile it once here, or every
# process the tests start (chapter kernels, workers, subprocesses) compiles what it imports
# again where PYTHONDONTWRITEBYTECODE is set
test: $(STAMP) $(XSTAMP)
	$(BIN)/python -m compileall -q dprl
	$(PINNED) $(BIN)/python -m pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder --nbval \
		--nbval-sanitize-with nbval-sanitize.cfg --nbval-cell-timeout 600 -p no:cacheprovider

# The spot-checks of the results whose trials take minutes and ~10 GB each (left out of `make
# test` and CI, which check only that they are current): one random trial of each recomputed
spot-check-heavy: $(STAMP)
	DPRL_SPOT_HEAVY=1 DPRL_SPOT_BUDGET_S=1e9 $(PINNED) $(BIN)/python -m pytest -n $(JOBS) \
		--dist loadfile -p no:cacheprovider tests/test_spot_check_*.py tests/test_vendor_bits.py

# `run --slurm` on a real one-node Slurm (Debian's packages, installed when missing, and
# dask-jobqueue; needs root; minutes, so left out of `make test` and CI): first the retirement
# tests on a fake sbatch that `make test` skips, then .ci/slurm-test (smoke runs against
# serial, an sbatch error, a run longer than its jobs' walltime, Ctrl-C)
.PHONY: test-slurm
test-slurm: $(STAMP)
	DPRL_SLURM_TESTS=1 $(PINNED) $(BIN)/python -m pytest -p no:cacheprovider tests/test_slurm.py
	.ci/slurm-test

# Extra options for JupyterLab, e.g. in a container run as root:
# make lab LAB_ARGS="--allow-root --no-browser --ip=0.0.0.0"
LAB_ARGS ?=

# The built book in headless Chromium (installed from Debian's packages when missing): every
# page typeset, the scorecard a table, no broken internal link, figure text of 9 px or more,
# nothing wider than a 400 px window, long outputs folded; screenshots in _build/screens/
.PHONY: check-book
check-book: $(STAMP)
	$(BIN)/python .ci/check_book.py _build/html --screens _build/screens

lab: $(STAMP)
	$(PINNED) $(BIN)/jupyter lab book/ $(LAB_ARGS)

# Re-execute chapters in place and store their new outputs: make refresh NB=book/primer/*.ipynb
# By default every chapter, then the appendix (its scorecard collects the chapters' verdicts).
NB ?= $(shell find book -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' -not -path 'book/appendix/*' | sort) \
	$(shell find book/appendix -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' | sort)
refresh: $(STAMP)
	$(PINNED) $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=1200 $(NB)

clean:
	rm -rf _build

# Everything make created: the built book and the environment (the next make recreates it).
distclean: clean
	rm -rf $(VENV)
