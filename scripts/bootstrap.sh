#!/usr/bin/env bash
# bootstrap.sh - installs what kiln needs on a fresh Debian machine and builds it into .venv.
#
# System packages (Debian): GoogleTest (C++ tests), Protocol Buffers (model files), libzip
# (kiln-run's .npz files), LAPACK (svd, qr), libjpeg-turbo and OpenCV core/imgproc (kiln.dataset's
# image ops), OpenMPI (kiln.communication's libkiln_comm.so, mpirun), a C++ compiler. oneDNN
# (matmul/conv) and oneTBB (the thread pool) come from PyPI with the other Python packages:
# Debian's oneDNN runs only on OpenMP (docs/architecture.md, "Threading"). Python packages go into .venv, so the system Python is
# never modified. Re-running is cheap: installed packages are skipped and the C++ build is
# incremental (build/wheel).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
# shellcheck source=scripts/apt_install.sh
source scripts/apt_install.sh

missing=()
[ -d /usr/include/gtest ] || missing+=(libgtest-dev)
# Protocol Buffers: the MindIR model files export and load read and write (csrc/engine).
[ -f /usr/include/google/protobuf/message.h ] || missing+=(libprotobuf-dev)
command -v protoc >/dev/null || missing+=(protobuf-compiler)
# libzip: kiln-run reads and writes .npz files.
[ -f /usr/include/zip.h ] || missing+=(libzip-dev)
# libjpeg-turbo and OpenCV's core and imgproc: kiln.dataset's native image ops (decode, resize).
dpkg -s libjpeg62-turbo-dev >/dev/null 2>&1 || missing+=(libjpeg62-turbo-dev)
[ -f /usr/include/opencv4/opencv2/imgproc.hpp ] || missing+=(libopencv-core-dev libopencv-imgproc-dev)
# OpenMPI: data-parallel training (docs/distributed.md); headers, libmpi and mpirun.
dpkg -s libopenmpi-dev >/dev/null 2>&1 || missing+=(libopenmpi-dev)
command -v mpirun >/dev/null || missing+=(openmpi-bin)
# LAPACK: svd and qr (csrc/ops/linalg_decomp.cc).
dpkg -s liblapack-dev >/dev/null 2>&1 || missing+=(liblapack-dev)
command -v gcc >/dev/null || missing+=(gcc)
command -v g++ >/dev/null || missing+=(g++)
command -v make >/dev/null || missing+=(make)
apt_install bootstrap "${missing[@]}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip >/dev/null
"$PY" -m pip install -q -r requirements-dev.txt

echo "bootstrap: building kiln (C++ engine, tests and Python extension)"
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} "$PY" -m pip install -q --no-build-isolation . \
  -Ccmake.define.KILN_BUILD_TESTS=ON
