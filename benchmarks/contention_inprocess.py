"""Issue #16 point 5: the contention target when the competition comes from inside the process:
kiln.dataset's worker threads decoding and augmenting JPEGs (ImageFolder -> Decode ->
RandomResizedCrop(224) -> flip -> Normalize -> HWC2CHW -> batch 64, as bench_dataset.py) while
kiln Graph runs the sweep's workloads on the same 2 cores, taking the pipeline's batches between
calls as fast as it makes them, as a training loop does. Every figure follows the sweep's
protocol (the worst of 5 one-second medians of the calls' times; taking a batch is not timed).
"""
# Usage: PYTHONPATH=build/<dir>/python python benchmarks/contention_inprocess.py [--threads 2]
#            [--workers 2] [--dir /tmp/kiln-bench-images]
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln as ms  # noqa: E402
from _common import contended_time, load_report, table  # noqa: E402
from bench_dataset import make_images, mindspore_style  # noqa: E402
from contention_sweep import TARGETS, build_workloads  # noqa: E402
from kiln import dataset as ds  # noqa: E402
from kiln.dataset import vision  # noqa: E402


def timed_while_loading(fn, batches, every, figures=5, seconds=1.0):
    """The protocol's figure for `fn` inside a loop that takes the next batch from the pipeline
    (not timed) before every `every`-th call: `every` matches the call's quiet time to the
    pipeline's time per batch, so the workers decode ahead the whole time without the loop
    waiting on them (a call that follows a wait for data runs on a cold core: measured, the
    batch-1 forward took 370-530 us instead of 40 after a 20 ms wait, on 1 thread too)."""
    clock, worst, calls = time.perf_counter, 0.0, 0
    for _ in range(figures):
        samples, end = [], clock() + seconds
        while True:
            if calls % every == 0:
                next(batches)
            calls += 1
            start = clock()
            fn()
            stop = clock()
            samples.append(stop - start)
            if stop >= end:
                break
        worst = max(worst, statistics.median(samples))
    return worst


def seconds_per_batch(batches, count=20):
    start = time.perf_counter()
    for _ in range(count):
        next(batches)
    return (time.perf_counter() - start) / count


def endless_batches(folder, workers):
    """Batches of the pipeline, epoch after epoch; counts the images in `delivered`."""
    while True:
        data = mindspore_style(ds, vision, folder, workers, 64)
        for image, _ in data.create_tuple_iterator(output_numpy=True):
            endless_batches.delivered += image.shape[0]
            yield image


endless_batches.delivered = 0


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2, help="the pipeline's worker threads")
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "kiln-bench-images"))
    parser.add_argument("--figures", type=int, default=5)
    args = parser.parse_args()
    make_images(args.dir, 2000, 256)
    ms.set_num_threads(args.threads)
    ms.set_context(mode=ms.GRAPH_MODE)
    workloads = build_workloads(ms, None, None, ["kiln"])
    quiet = {name: contended_time(fns["kiln"], args.figures) for name, fns in workloads}
    quiet_load = load_report()
    batches = endless_batches(args.dir, args.workers)
    per_batch = seconds_per_batch(batches)  # the pipeline alone, its workers warmed up
    start, delivered = time.perf_counter(), endless_batches.delivered
    beside = {name: timed_while_loading(fns["kiln"], batches,
                                        max(1, round(per_batch / quiet[name])), args.figures)
              for name, fns in workloads}
    rate = (endless_batches.delivered - delivered) / (time.perf_counter() - start)
    busy_load = load_report()
    limit = TARGETS[args.workers] if args.workers in TARGETS else None
    rows = []
    for name, _ in workloads:
        ratio = beside[name] / quiet[name]
        verdict = "-" if limit is None else ("yes" if ratio <= limit else f"no: > {limit:g}×")
        rows.append([name, f"{quiet[name] * 1e6:.1f}", f"{beside[name] * 1e6:.1f}",
                     f"{ratio:.2f}×", verdict])
    print(f"kiln Graph, {args.threads} threads; beside: a kiln.dataset pipeline with "
          f"{args.workers} workers in the same process, its batches taken between calls as "
          f"fast as it makes them ({64 / per_batch:.0f} images/s alone, {rate:.0f} while "
          f"timed); target as beside {args.workers} busy process(es)")
    print(table(["workload", "quiet µs", "beside the pipeline µs", "ratio", "target"], rows))
    print(f"- quiet: {quiet_load}\n- beside the pipeline: {busy_load}")
    print(f"- contention monitor: {ms._C.contention_stats()}; slices: "
          f"{ms._C.thread_slice_stats()}")


if __name__ == "__main__":
    main()
