# Two commands on a fresh machine: `make demo` and `make test`.
# The demo installs simkv alone; the tests add the test and ray extras (the sweep tests run
# the Ray executor on a local two-CPU Ray).
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
TESTSTAMP = $(VENV)/.installed-test

.PHONY: demo waste test fuzz readme bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(STAMP)

$(TESTSTAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,ray]'
	touch $(TESTSTAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/simkv run configs/quickstart.yaml

waste: $(STAMP)
	$(BIN)/simkv waste traces/azure2023/AzureLLMInferenceTrace_conv.csv

bench: $(STAMP)
	$(BIN)/python benchmarks/engine_speed.py

test: $(TESTSTAMP)
	$(BIN)/ruff check simkv tests benchmarks
	$(BIN)/pytest -n 2

fuzz: $(TESTSTAMP)
	$(BIN)/pytest -m fuzz

readme: $(TESTSTAMP)
	$(BIN)/pytest -m readme

clean:
	rm -rf $(VENV) reports/*/
