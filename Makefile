# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: demo waste test fuzz bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,ray]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/simkv run configs/quickstart.yaml

waste: $(STAMP)
	$(BIN)/simkv waste traces/azure2023/AzureLLMInferenceTrace_conv.csv

fuzz: $(STAMP)
	$(BIN)/pytest -m fuzz tests/fuzz

bench: $(STAMP)
	$(BIN)/python benchmarks/engine_speed.py

test: $(STAMP)
	$(BIN)/ruff check simkv tests benchmarks
	$(BIN)/pytest

clean:
	rm -rf $(VENV) reports/*/
