# Makefile - the README's two commands: `make demo` and `make test` (each builds first).
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: build demo test test-cpp test-python bench lint

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

bench: build
	$(PY) benchmarks/run_all.py

# C++ sources under clang-format (.clang-format); csrc/ops/op_list.def is an X-macro list, not C++.
CPP_SOURCES = $(sort $(shell find csrc bindings tools tests/cpp benchmarks/cpp -name '*.cc' -o -name '*.h'))

lint:
	$(PY) -m ruff check python tests benchmarks examples
	$(VENV)/bin/clang-format --dry-run --Werror $(CPP_SOURCES)
