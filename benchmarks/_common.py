"""Shared benchmark helpers: best-of timing, optional PyTorch, the machine's fp32 peak."""
import os
import shutil
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def best_time(fn, number, repeat=7, warmup=3):
    """Seconds per call: the best of `repeat` runs of `number` calls.

    The minimum, not the mean: on a shared machine other work only ever adds time.
    """
    # NumPy's OpenBLAS, PyTorch's and kiln's OpenMP each keep their worker threads spinning for
    # a while after a parallel call; on a 2-core machine a spinning idle pool of the previous
    # framework halves the next one's speed. Let them fall asleep first.
    time.sleep(0.1)
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def import_torch(threads):
    """PyTorch (for comparison only, never a kiln dependency) on `threads` threads, or None."""
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        return None
    torch.set_num_threads(threads)
    return torch


def measure_peak_gflops(threads):
    """fp32 FMA peak on `threads` threads, built from benchmarks/cpp/fp32_peak.cc; None if no
    compiler is available."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "fp32_peak")
        subprocess.run([compiler, "-O3", "-march=native", "-fopenmp",
                        os.path.join(HERE, "cpp", "fp32_peak.cc"), "-o", exe], check=True)
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        out = subprocess.run([exe], check=True, capture_output=True, text=True, env=env)
        return float(out.stdout.strip())


def table(headers, rows):
    """A Markdown table, so results paste straight into docs/benchmarks.md."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
