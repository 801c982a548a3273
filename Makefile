# Makefile - the README's two commands: `make demo` and `make test` (each builds first).
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: build demo test test-cpp test-python bench lint fuzz-checkpoint-short fuzz-dataset-short \
	tsan-dataset tsan-contended-pool \
	asan asan-build asan-cpp asan-python fuzz-ir-short fuzz-ir fuzz-model-short fuzz-ckpt-short fuzz-jpeg-short \
	sanitized-cpp-and-fuzz-ir

build:
	bash scripts/bootstrap.sh

demo: build
	$(PY) examples/demo.py

# All tests: the C++ and Python suites, lint, then the reliability checks (docs/reliability.md):
# the C++ suite under AddressSanitizer + UBSan, the dataset engine's tests under ThreadSanitizer,
# and short fuzz runs of the checkpoint loader, the dataset readers and the IR
# parser/verifier/executor (about 10 minutes more on 2 cores, most of it the one
# instrumented build; `make test-cpp test-python` alone for quick iterations).
test: build
	$(MAKE) --no-print-directory test-cpp test-python lint fuzz-checkpoint-short fuzz-ckpt-short \
	  fuzz-dataset-short fuzz-jpeg-short \
	  tsan-dataset tsan-contended-pool sanitized-cpp-and-fuzz-ir

test-cpp:
	$(VENV)/bin/ctest --test-dir build/wheel --output-on-failure -j2

test-python:
	cd tests/python && ../../$(PY) -m pytest -q -p no:cacheprovider .

# About 25 s of libFuzzer (atheris) on the checkpoint loader, seeded with checkpoints kiln saves;
# any finding is written to build/fuzz/ and fails the target. Needs `make build` first.
fuzz-checkpoint-short:
	mkdir -p build/fuzz
	$(PY) tests/fuzz/fuzz_checkpoint.py -max_total_time=25 -artifact_prefix=build/fuzz/

# About 20 s of libFuzzer (atheris) on kiln.dataset's readers (idx, CIFAR, images).
fuzz-dataset-short:
	mkdir -p build/fuzz
	$(PY) tests/fuzz/fuzz_dataset_readers.py -max_total_time=20 -artifact_prefix=build/fuzz/

bench: build
	$(PY) benchmarks/run_all.py

# C++ sources under clang-format (.clang-format); csrc/ops/op_list.def is an X-macro list, not C++.
CPP_SOURCES = $(sort $(shell find csrc bindings include tools examples/cpp tests/cpp tests/fuzz benchmarks/cpp -name '*.cc' -o -name '*.h'))

lint:
	$(PY) -m ruff check python tests benchmarks examples
	$(VENV)/bin/clang-format --dry-run --Werror $(CPP_SOURCES)

# ---- Sanitizers and fuzzing (docs/reliability.md); `make test` runs the short ones ----
# AddressSanitizer + UndefinedBehaviorSanitizer build with g++ in build/asan (-O2 -g).
ASAN_DIR := build/asan
# CPython itself is not instrumented: the ASan runtime must load first, and CPython's allocations
# are not ours to leak-check. libstdc++ is preloaded too, or ASan's __cxa_throw interceptor finds
# no real function (python does not link libstdc++) and aborts on the first C++ exception. The
# UBSan runtime comes with the instrumented extension. --capture=sys: reports go to the real fd 2.
ASAN_PRELOAD = $$(g++ -print-file-name=libasan.so) $$(g++ -print-file-name=libstdc++.so)
ASAN_ENV := ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1

asan: asan-cpp asan-python

asan-build:
	$(VENV)/bin/cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON -DKILN_BUILD_TESTS=ON \
	  -DPython_EXECUTABLE=$(abspath $(PY)) >/dev/null

# The C++ suite (leak checking on: the tests own every allocation).
asan-cpp: asan-build
	$(VENV)/bin/ninja -C $(ASAN_DIR) -j2 kiln_tests kiln-cli
	ASAN_OPTIONS=abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(VENV)/bin/ctest --test-dir $(ASAN_DIR) --output-on-failure -j2

# The data pipeline's engine under ThreadSanitizer: its C++ tests with only the core files they
# use, in one g++ command (about 40 s on 2 cores); a reported race fails the target. The native
# image ops (vision_*.cc) keep no shared state; they are fuzzed instead (fuzz-jpeg-short).
TSAN_DATASET = build/tsan/test_dataset
tsan-dataset:
	mkdir -p build/tsan
	g++ -std=c++17 -O1 -g -fsanitize=thread -Icsrc $(filter-out csrc/dataset/vision_%,$(wildcard \
	  csrc/dataset/*.cc)) csrc/core/tensor.cc \
	  csrc/core/allocator.cc csrc/core/dtype.cc tests/cpp/test_dataset.cc -lgtest -lgtest_main \
	  -lpthread -o $(TSAN_DATASET)
	TSAN_OPTIONS=halt_on_error=1 ./$(TSAN_DATASET)

# The contended pool's helpers (core/contended_pool.cc) under ThreadSanitizer, built alone with
# its direct tests (a few seconds); oneTBB is not built for TSan, so ParallelFor stays out.
TSAN_POOL = build/tsan/test_contended_pool
tsan-contended-pool:
	mkdir -p build/tsan
	g++ -std=c++17 -O1 -g -fsanitize=thread -Icsrc csrc/core/contended_pool.cc \
	  csrc/core/thread_slice.cc tests/cpp/test_contended_pool.cc -lgtest -lgtest_main -lpthread \
	  -o $(TSAN_POOL)
	TSAN_OPTIONS=halt_on_error=1 ./$(TSAN_POOL)

asan-python: asan-build
	$(VENV)/bin/ninja -C $(ASAN_DIR) -j2 _C kiln_comm
	cd tests/python && LD_PRELOAD="$(ASAN_PRELOAD)" $(ASAN_ENV) \
	  PYTHONPATH=$(CURDIR)/$(ASAN_DIR)/python $(abspath $(PY)) -m pytest -q -p no:cacheprovider \
	  --capture=sys .

# libFuzzer on the IR parser, verifier and executor (clang; installs it on first use).
fuzz-ir-short:
	VENV=$(VENV) bash scripts/fuzz_ir.sh 30

# The IR fuzzer's clang build (ASan + UBSan) also builds the C++ suite; it runs before 30 s of
# fuzzing. `make test` uses this: one instrumented build instead of asan-cpp's g++ one.
sanitized-cpp-and-fuzz-ir:
	FUZZ_BUILD_ONLY=1 FUZZ_EXTRA_TARGETS="kiln_tests kiln-cli" VENV=$(VENV) bash scripts/fuzz_ir.sh
	ASAN_OPTIONS=abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(VENV)/bin/ctest --test-dir build/fuzz --output-on-failure -j2
	VENV=$(VENV) bash scripts/fuzz_ir.sh 30
	FUZZ_TARGET=model VENV=$(VENV) bash scripts/fuzz_ir.sh 20

# libFuzzer on the model-file loader (engine/model_file.h), seeded with exports of tiny networks.
fuzz-model-short:
	FUZZ_TARGET=model VENV=$(VENV) bash scripts/fuzz_ir.sh 30

# The native JPEG decode + crop window (csrc/dataset/vision_jpeg.cc), built alone with clang.
fuzz-jpeg-short:
	FUZZ_TARGET=jpeg VENV=$(VENV) bash scripts/fuzz_ir.sh 30

# The MindSpore .ckpt parser (csrc/engine/checkpoint_file.cc), built alone with clang.
fuzz-ckpt-short:
	FUZZ_TARGET=ckpt VENV=$(VENV) bash scripts/fuzz_ir.sh 30

FUZZ_SECONDS ?= 3600
fuzz-ir:
	VENV=$(VENV) bash scripts/fuzz_ir.sh $(FUZZ_SECONDS)
