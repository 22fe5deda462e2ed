# mlcc: `make demo` compiles and verifies every example model; `make test` runs the default suite.
# An example's NAME.flags holds extra compile/verify flags (gpt2_tiny_dynseq: --shape seq=1..64).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
MLCC   := $(VENV)/bin/mlcc
STAMP  := $(VENV)/.installed-stamp
MODELS := $(wildcard examples/models/*.onnx)
JOBS   ?= 2
N      ?= 1000

.PHONY: setup demo test test-slow test-gpu gpu-check fuzz clean

setup: $(STAMP)

# torch is pinned: that CPU build is what Triton's interpreter needs, and an unpinned
# torch would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	@mkdir -p build
	@set -e; for m in $(MODELS); do \
	  n=$$(basename $$m .onnx); \
	  flags=$$(cat examples/models/$$n.flags 2>/dev/null || true); \
	  $(MLCC) compile $$m -o build/$$n --depfile build/$$n.d $$flags; \
	  if [ -f examples/models/$$n.inputs.npz ]; then \
	    $(MLCC) verify $$m --bundle build/$$n --inputs examples/models/$$n.inputs.npz $$flags; \
	  else \
	    $(MLCC) verify $$m --bundle build/$$n $$flags; \
	  fi; \
	done

test: $(STAMP)
	$(PY) -m pytest -q -n $(JOBS) --dist loadfile

test-slow: $(STAMP)
	$(PY) -m pytest -q -n $(JOBS) --dist loadfile -m slow

test-gpu: $(STAMP)
	$(PY) -m pytest -q -m gpu

# The GPU kit (benchmarks/gpu_check.py): pytest -m gpu, the GPT-2 benchmark, mlcc tune and the benchmark
# rerun with its database, streaming at 50%, GEMM/bandwidth microbenchmarks -> $(GPU_CHECK_OUT)/gpu_check.{md,json}.
# SIM=1: the same stages on the simulated device $(SIM_DEVICE) with tiny sizes (timings meaningless); the
# default test suite runs it (tests/test_gpu_kit.py).
SIM            ?= 0
SIM_DEVICE     ?= sim:sm_90
GPU_CHECK_OUT  ?= build/gpu-check
gpu-check: $(STAMP)
	$(PY) benchmarks/gpu_check.py --out $(GPU_CHECK_OUT) $(if $(filter 1,$(SIM)),--sim --device $(SIM_DEVICE))

# Differential fuzzing against onnxruntime: N random valid models, failures shrunk into tests/fuzz/regressions/.
fuzz: $(STAMP)
	$(PY) tools/fuzz.py --n $(N) --jobs $(JOBS)

clean:
	rm -rf build
