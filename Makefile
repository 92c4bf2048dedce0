# Two commands on a fresh machine: `make demo` and `make test`.
# The demo installs simkv alone; the tests add the test and ray extras (the sweep tests run
# the Ray executor on a local two-CPU Ray).
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
TESTSTAMP = $(VENV)/.installed-test

# The real vLLM reference (docs/conformance.md): its own virtualenv, never simkv's.
VREF     ?= .venv-vllm
VREFSTAMP = $(VREF)/.installed
REFDIR    = tests/vllm_reference/fixtures
REFTOOL   = $(BIN)/python -m tools.vllm_reference.conformance

.PHONY: demo waste test fuzz readme bench install clean vllm-reference conformance

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
	$(BIN)/ruff check simkv tests benchmarks tools
	$(BIN)/pytest -n 2

fuzz: $(TESTSTAMP)
	$(BIN)/pytest -m fuzz

readme: $(TESTSTAMP)
	$(BIN)/pytest -m readme

$(VREFSTAMP): tools/vllm_reference/requirements.txt tools/vllm_reference/setup.sh
	tools/vllm_reference/setup.sh $(VREF)
	touch $(VREFSTAMP)

# record the fixture scenarios' step logs with the real engine, then replay them in simkv
vllm-reference: $(TESTSTAMP) $(VREFSTAMP)
	$(VREF)/bin/python tools/vllm_reference/record.py $(REFDIR)/scenarios.jsonl.gz \
		$(REFDIR)/vllm-0.32.0.jsonl.gz
	$(REFTOOL) compare $(REFDIR)/scenarios.jsonl.gz $(REFDIR)/vllm-0.32.0.jsonl.gz

# the full random set (400 scenarios, and 300 of them with async scheduling, in
# reports/conformance/); its result goes into
# docs/conformance.md
conformance: $(TESTSTAMP) $(VREFSTAMP)
	mkdir -p reports/conformance
	$(REFTOOL) generate 1000:1400 reports/conformance/scenarios.jsonl.gz --async-seeds 1000:1300
	$(VREF)/bin/python tools/vllm_reference/record.py reports/conformance/scenarios.jsonl.gz \
		reports/conformance/vllm-0.32.0.jsonl.gz
	$(REFTOOL) compare reports/conformance/scenarios.jsonl.gz \
		reports/conformance/vllm-0.32.0.jsonl.gz --docs docs/conformance.md --name random

clean:
	rm -rf $(VENV) reports/*/
