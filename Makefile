# make demo: set up and run the offline demo; make test: set up and run the tests.
# make bench: the recall benchmark on the dev sets in $(DATA); make wheel-check: the wheel outside the checkout.
# make docs: build the documentation site (mkdocs --strict) into site/.
PYTHON ?= python3
DATA   ?= $(GRAPHRAG_DATA)
VENV   := .venv
BIN    := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup demo test bench docs wheel-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[local,viz,dev]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/python -m llama_index_graphrag_milvus.bench.demo

test: setup
	$(BIN)/python -m pytest -q -n 3 --dist loadfile

bench: setup
	@test -n "$(DATA)" || { echo "make bench DATA=DIR: a directory holding musique/, hotpotqa/, wiki2/ (or set GRAPHRAG_DATA)"; exit 2; }
	$(BIN)/graphrag-milvus eval --data $(DATA)/musique $(DATA)/hotpotqa $(DATA)/wiki2 --out benchmarks/results/recall

$(VENV)/.docs-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[docs]'
	touch $@

docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

wheel-check:
	PYTHON=$(PYTHON) .ci/wheel_smoke.sh

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache site
