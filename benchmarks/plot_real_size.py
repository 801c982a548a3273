"""Draws docs/real_size.png from bench_real_size.py's output: each framework's time per model
relative to kiln Graph (forward and training step), and how kiln Graph's step time and working
memory grow with the model's size."""
# Usage: python benchmarks/plot_real_size.py benchmarks/real_size_results.md docs/real_size.png
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FRAMEWORKS = ["kiln PyNative", "kiln Graph", "PyTorch eager", "torch.compile", "JAX jit"]


def read(path):
    """[(model, step GFLOP, {framework: (forward ms, step ms, peak - setup MiB)})]."""
    models, current = [], None
    for line in open(path):
        head = re.match(r"### (\w+): forward [\d.]+ GFLOP, training step ([\d.]+) GFLOP", line)
        if head:
            current = (head.group(1), float(head.group(2)), {})
            models.append(current)
        elif current and line.startswith("| ") and not line.startswith("| framework"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] in FRAMEWORKS and len(cells) == 10:
                current[2][cells[0]] = (float(cells[1]), float(cells[3]), float(cells[9]))
    return models


def plot(models, out):
    fig, (fwd, step, grow) = plt.subplots(1, 3, figsize=(15, 4.2))
    width = 0.8 / len(FRAMEWORKS)
    for k, framework in enumerate(FRAMEWORKS):
        xs = [i + (k - len(FRAMEWORKS) / 2) * width for i in range(len(models))]
        for ax, col in ((fwd, 0), (step, 1)):
            ratios = [m[2][framework][col] / m[2]["kiln Graph"][col] if framework in m[2]
                      else 0 for m in models]
            ax.bar(xs, ratios, width, label=framework)
    for ax, what in ((fwd, "forward"), (step, "training step")):
        ax.axhline(1.0, color="k", linewidth=0.8)
        ax.set_xticks(range(len(models)), [m[0] for m in models])
        ax.set_ylabel(f"{what} time / kiln Graph's")
        ax.set_title(f"{what}, 2 threads (higher is slower than kiln Graph)", fontsize=9)
    fwd.legend(fontsize=8)
    flops = [m[1] for m in models]
    grow.loglog(flops, [m[2]["kiln Graph"][1] for m in models], "o-", label="step time, ms")
    grow.loglog(flops, [m[2]["kiln Graph"][2] for m in models], "s--",
                label="peak memory over setup, MiB")
    for m in models:
        grow.annotate(m[0], (m[1], m[2]["kiln Graph"][1]), fontsize=8)
    grow.set_xlabel("training-step GFLOP")
    grow.set_title("kiln Graph: growth from the seed network to BERT-base", fontsize=9)
    grow.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)


if __name__ == "__main__":
    plot(read(sys.argv[1]), sys.argv[2])
