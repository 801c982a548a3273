# Makefile - the README's two commands: `make demo` and `make test` (each builds first).
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: build demo test test-cpp test-python bench lint fuzz-checkpoint-short

build:
	bash scripts/bootstrap.sh

demo: build
	$(PY) examples/demo.py

test: build
	$(MAKE) --no-print-directory test-cpp test-python lint

test-cpp:
	$(VENV)/bin/ctest --test-dir build/wheel --output-on-failure -j2

test-python:
	cd tests/python && ../../$(PY) -m pytest -q -p no:cacheprovider .

# About 25 s of libFuzzer (atheris) on the checkpoint loader, seeded with checkpoints kiln saves;
# any finding is written to build/fuzz/ and fails the target. Needs `make build` first.
fuzz-checkpoint-short:
	mkdir -p build/fuzz
	$(PY) tests/fuzz/fuzz_checkpoint.py -max_total_time=25 -artifact_prefix=build/fuzz/

bench: build
	$(PY) benchmarks/run_all.py

# C++ sources under clang-format (.clang-format); csrc/ops/op_list.def is an X-macro list, not C++.
CPP_SOURCES = $(sort $(shell find csrc bindings tools tests/cpp benchmarks/cpp -name '*.cc' -o -name '*.h'))

lint:
	$(PY) -m ruff check python tests benchmarks examples
	$(VENV)/bin/clang-format --dry-run --Werror $(CPP_SOURCES)
