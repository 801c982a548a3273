#!/usr/bin/env bash
# fuzz_ir.sh SECONDS - builds the libFuzzer targets (clang, ASan+UBSan) and fuzzes one: the IR
# reader (default), with FUZZ_TARGET=model the model-file loader, with FUZZ_TARGET=ckpt the
# MindSpore .ckpt parser, or with FUZZ_TARGET=jpeg the dataset's native JPEG decode + crop (both
# built on their own, without the engine).
#
# Installs clang and libFuzzer (Debian) only when missing, so `make test` never pays for them. The
# kiln core is built with clang into build/fuzz against the oneDNN and oneTBB of $VENV; the target
# runs kernels on one thread (reproducible runs). The seed corpus is the repo's IR files and IR printed
# from compiled graphs (tests/fuzz/corpus_ir); new inputs go to build/fuzz/corpus_ir, crashes to
# build/fuzz/crash-*. Extra arguments go to libFuzzer (e.g. -runs=N, -jobs=N).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-30}
shift || true
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/cmake" ]; then
  echo "fuzz_ir: no cmake in $VENV; run 'make build' (scripts/bootstrap.sh) first" >&2
  exit 2
fi

missing=()
command -v clang++ >/dev/null || missing+=(clang)
compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null ||
  missing+=(libclang-rt-14-dev)
# shellcheck source=scripts/apt_install.sh
source scripts/apt_install.sh
apt_install fuzz_ir "${missing[@]}"

"$VENV/bin/cmake" -S . -B build/fuzz -G Ninja -DCMAKE_MAKE_PROGRAM="$(realpath "$VENV/bin/ninja")" \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON \
  -DKILN_BUILD_PYTHON=OFF -DKILN_BUILD_TESTS=ON -DKILN_DEPS_PREFIX="$(realpath "$VENV")" >/dev/null
# FUZZ_EXTRA_TARGETS (e.g. "kiln_tests kiln-cli"): more of this instrumented build, so that CI
# runs the C++ suite under clang's ASan+UBSan without a second instrumented build.
# shellcheck disable=SC2086
TARGET=${FUZZ_TARGET:-ir}  # ir: IR text (fuzz_ir); model: model files (fuzz_model); ckpt: .ckpt
# jpeg: the dataset's native JPEG decode + crop window (fuzz_jpeg)
if [ "$TARGET" = jpeg ]; then
  "$VENV/bin/ninja" -C build/fuzz -j"${CMAKE_BUILD_PARALLEL_LEVEL:-2}" fuzz_jpeg
  [ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0
  mkdir -p build/fuzz/corpus_jpeg
  # Seeds: small JPEGs (baseline, progressive, grayscale, 4:2:0 and 4:4:4; tests/fuzz/corpus_jpeg).
  exec build/fuzz/fuzz_jpeg -max_total_time="$SECONDS_TO_RUN" -timeout=10 \
    -rss_limit_mb=4096 -max_len=16384 -print_final_stats=1 \
    -artifact_prefix=build/fuzz/jpeg- "$@" build/fuzz/corpus_jpeg tests/fuzz/corpus_jpeg
fi
if [ "$TARGET" = ckpt ]; then
  "$VENV/bin/ninja" -C build/fuzz -j"${CMAKE_BUILD_PARALLEL_LEVEL:-2}" fuzz_ckpt
  [ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0
  mkdir -p build/fuzz/corpus_ckpt
  # Seeds: small .ckpt files MindSpore 2.10 and kiln wrote (tests/fuzz/corpus_ckpt), and the
  # inputs that once failed (regressions_ckpt).
  exec build/fuzz/fuzz_ckpt -max_total_time="$SECONDS_TO_RUN" -timeout=10 \
    -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1 \
    -artifact_prefix=build/fuzz/ckpt- "$@" build/fuzz/corpus_ckpt tests/fuzz/corpus_ckpt \
    tests/fuzz/regressions_ckpt
fi
"$VENV/bin/ninja" -C build/fuzz -j"${CMAKE_BUILD_PARALLEL_LEVEL:-2}" fuzz_ir fuzz_model ${FUZZ_EXTRA_TARGETS:-}
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

mkdir -p "build/fuzz/corpus_$TARGET"
if [ "$TARGET" = model ]; then
  # Seeds: exports of tiny networks (tests/fuzz/make_model_corpus.py), at most 6 KB each.
  exec build/fuzz/fuzz_model -max_total_time="$SECONDS_TO_RUN" -timeout=10 \
    -rss_limit_mb=4096 -max_len=8192 -close_fd_mask=1 -print_final_stats=1 \
    -artifact_prefix=build/fuzz/model- "$@" build/fuzz/corpus_model tests/fuzz/corpus_model
fi
# -close_fd_mask=1: fuzzed `print` nodes write to stdout. -timeout: a single input over 10 s is a
# finding (sizes are bounded, so nothing legitimate takes that long). -max_len=4096: the largest
# seeds (training graphs, 21 KB) would otherwise set the limit and cut executions 6x.
exec build/fuzz/fuzz_ir -max_total_time="$SECONDS_TO_RUN" -timeout=10 \
  -rss_limit_mb=4096 -max_len=4096 -close_fd_mask=1 -print_final_stats=1 \
  -artifact_prefix=build/fuzz/ "$@" \
  build/fuzz/corpus_ir tests/fuzz/corpus_ir tests/fuzz/regressions_ir tests/ir
