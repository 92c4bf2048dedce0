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

.PHONY: demo waste test browser fuzz readme bench install clean vllm-reference conformance \
	cpu-live

# pip runs without --quiet: a first install downloads for a minute or two, and its progress
# shows; each step says what it does first.
$(STAMP): pyproject.toml
	@echo "== 1/3 creating the virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "== 2/3 upgrading pip"
	$(BIN)/pip install --upgrade pip
	@echo "== 3/3 installing simkv from this clone (pip install -e .)"
	$(BIN)/pip install -e .
	touch $(STAMP)

$(TESTSTAMP): $(STAMP)
	@echo "== installing the test and ray extras (pip install -e '.[test,ray]')"
	$(BIN)/pip install -e '.[test,ray]'
	touch $(TESTSTAMP)

# The browser layout tests drive a headless Chromium (tests/report/chromium.py); they cannot
# install it (a system package), so without one this says so before the tests start. They
# are skipped then, and fail instead when CI is set (.ci/run sets it and installs chromium).
CHROMIUM ?= $(or $(SIMKV_CHROMIUM),/usr/bin/chromium)
browser:
	@if [ -x "$(CHROMIUM)" ]; then echo "== browser tests use $(CHROMIUM)"; else \
	  echo "== NOTE: the browser layout tests need Chromium and $(CHROMIUM) is missing:"; \
	  echo "==       install it (Debian/Ubuntu: sudo apt-get install chromium) or point"; \
	  echo "==       SIMKV_CHROMIUM at one. Without it they are SKIPPED (listed at the end);"; \
	  echo "==       with CI=1 they FAIL instead."; fi

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/simkv run configs/quickstart.yaml

waste: $(STAMP)
	$(BIN)/simkv waste traces/azure2023/AzureLLMInferenceTrace_conv.csv

bench: $(STAMP)
	$(BIN)/python benchmarks/engine_speed.py

test: $(TESTSTAMP) browser
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

# live rate sweeps against the real engine on this CPU (reports/cpu-live/, about 65 minutes),
# then the calibration on one run, the predictions of the others and the knees
# (benchmarks/cpu_live.py, benchmarks/saturation.py; serve on an otherwise idle machine);
# the bundled runs are traces/measured/cpu-vllm0.32/. NICE: the engine's priority (a negative
# value needs root; the bundled runs used -15 so that other work on the machine cannot starve it)
LIVE  = nice -n $(NICE) $(VREF)/bin/python tools/vllm_reference/live.py reports/cpu-live
NICE ?= 0
cpu-live: $(STAMP) $(VREFSTAMP)
	$(LIVE) --model small-llama --mix chat --rates 1,1.25,1.5,1.75,2,2.5,3 --requests 150 \
		--repeat 2
	$(LIVE) --model small-llama --mix long --rates 0.5,1 --requests 150
	$(LIVE) --model small-llama --mix decode --rates 1,2 --requests 150
	$(LIVE) --model tiny-llama --mix chat --rates 1.5,2,3,4,6 --requests 150
	$(LIVE) --model small-llama --mix chat --rates 1,1.5,2,2.5,3,3.5,4,5,6,7,8 --requests 150 \
		--first-repeat 2 --repeat 2
	$(LIVE) --model small-llama --mix chat --rates 3.5,4,5 --requests 150
	$(BIN)/python benchmarks/cpu_live.py --runs reports/cpu-live
	$(BIN)/python benchmarks/saturation.py --runs reports/cpu-live

clean:
	rm -rf $(VENV) reports/*/
