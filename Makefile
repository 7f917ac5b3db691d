# The two commands of the README: `make book` builds the book, `make test` runs every test.
# Each creates .venv and installs the project when needed (only Python 3.11 and pip required).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JOBS ?= 2
# dprl.floating_point's settings (numpy and OpenBLAS pinned to AVX2 kernels, one BLAS thread),
# so that every process started here computes the same bits as the committed results
PINNED = env $(shell $(BIN)/python -m dprl env)

.PHONY: book test install lab refresh clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e ".[book,test]"
	touch $(STAMP)

install: $(STAMP)

book: $(STAMP)
	$(PINNED) $(BIN)/jupyter-book build . -W --keep-going --all

test: $(STAMP)
	$(PINNED) $(BIN)/python -m pytest -n $(JOBS) --dist loadfile --nbval \
		--nbval-sanitize-with nbval-sanitize.cfg --nbval-cell-timeout 600 -p no:cacheprovider

# The built book in headless Chromium (installed from Debian's packages when missing): every
# page typeset, the scorecard a table, no broken internal link; screenshots in _build/screens/
.PHONY: check-book
check-book: $(STAMP)
	$(BIN)/python .ci/check_book.py _build/html --screens _build/screens

lab: $(STAMP)
	$(PINNED) $(BIN)/jupyter lab book/

# Re-execute chapters in place and store their new outputs: make refresh NB=book/primer/*.ipynb
# By default every chapter, then the appendix (its scorecard collects the chapters' verdicts).
NB ?= $(shell find book -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' -not -path 'book/appendix/*' | sort) \
	$(shell find book/appendix -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' | sort)
refresh: $(STAMP)
	$(PINNED) $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=1200 $(NB)

clean:
	rm -rf _build
