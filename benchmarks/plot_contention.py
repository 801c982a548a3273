"""Draws docs/contention.png from a contention_sweep.py table: each framework's time beside busy
processes as a multiple of its own quiet time, per workload, with issue #16's limits."""
# Usage: python benchmarks/plot_contention.py benchmarks/contention_results.md docs/contention.png
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LIMITS = {"1 busy": 2.5, "2 busy": 4.0, "3 busy": 5.0}
COLORS = {"kiln Graph": "tab:blue", "JAX jit": "tab:orange", "PyTorch eager": "tab:green"}


def read_table(path):
    """(level names, {workload: {framework: [ratio per level]}}) from the sweep's table."""
    rows = [line.strip().strip("|").split("|") for line in open(path)
            if line.startswith("|") and not line.startswith("|---")]
    header = [c.strip() for c in rows[0]]
    levels = [h[: -len(" / quiet")] for h in header if h.endswith(" / quiet")]
    columns = [header.index(f"{level} / quiet") for level in levels]
    data = {}
    for cells in rows[1:]:
        cells = [c.strip() for c in cells]
        ratios = [float(cells[i].rstrip("×")) for i in columns]
        data.setdefault(cells[0], {})[cells[1]] = ratios
    return levels, data


def plot(levels, data, out):
    fig, axes = plt.subplots(1, len(data), figsize=(4 * len(data), 4), sharey=True)
    for ax, (workload, frameworks) in zip(axes, data.items()):
        for framework, ratios in frameworks.items():
            ax.plot(range(len(levels)), ratios, marker="o", label=framework,
                    color=COLORS.get(framework))
        limits = [LIMITS.get(level) for level in levels]
        ax.plot(range(len(levels)), limits, "k--", linewidth=1, label="issue #16 limit")
        ax.set_xticks(range(len(levels)), levels, rotation=45, ha="right")
        ax.set_yscale("log")
        ax.set_title(workload, fontsize=9)
    axes[0].set_ylabel("time / its quiet time (log)")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)


if __name__ == "__main__":
    plot(*read_table(sys.argv[1]), sys.argv[2])
