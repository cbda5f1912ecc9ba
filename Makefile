# make demo: set up and run the offline demo; make test: set up and run the tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup demo test bench clean

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
	$(BIN)/python -m benchmarks.multihop --data ../shared/data/musique --out benchmarks/results/musique.json

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
