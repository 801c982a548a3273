"""ProgressBar (a live line per epoch, plain lines when not on a terminal) and LossPlot (a PNG
of the loss and the evaluation results over the steps)."""
import sys
import time

from kiln.train.callback._callback import Callback
from kiln.train.callback._monitors import loss_value

__all__ = ["ProgressBar", "LossPlot"]


def _format_metrics(results):
    return ", ".join(f"{k}: {v:.4f}" if isinstance(v, float) else f"{k}: {v}"
                     for k, v in (results or {}).items())


class ProgressBar(Callback):
    """One line per epoch, as tqdm draws it: on a terminal the line is redrawn after every step
    (``Epoch 2/10 [=====>    ] 120/200  loss 0.3412  85.1 step/s``); when `file` is not a
    terminal (a log, a pipe) nothing is drawn while the epoch runs and one plain line is written
    when it ends. fit's evaluation results are added to the epoch's line. kiln's own callback
    (MindSpore users had MindInsight)."""

    def __init__(self, width=30, file=None):
        super().__init__()
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"For 'ProgressBar', 'width' must be a positive int, got {width!r}")
        self.width = width
        self._file = file
        self._start = None
        self._loss = None

    @property
    def file(self):
        return self._file if self._file is not None else sys.stdout

    def _live(self):
        isatty = getattr(self.file, "isatty", None)
        return bool(isatty and isatty())

    @staticmethod
    def _epochs(cb_params):
        total = cb_params.get("epoch_num", 0) + cb_params.get("initial_epoch", 0)
        return f"Epoch {cb_params.cur_epoch_num}/{total}"

    def on_train_epoch_begin(self, run_context):
        self._start = time.time()
        self._loss = None

    def _bar(self, done, total):
        filled = self.width * done // max(total, 1)
        head = ">" if filled < self.width else ""
        return "[" + "=" * filled + head + " " * (self.width - filled - len(head)) + "]"

    def on_train_step_end(self, run_context):
        cb_params = run_context.original_args()
        self._loss = loss_value(cb_params.net_outputs)
        if not self._live():
            return
        total = cb_params.batch_num
        done = (cb_params.cur_step_num - 1) % total + 1
        rate = done / max(time.time() - self._start, 1e-9)
        self.file.write(f"\r{self._epochs(cb_params)} {self._bar(done, total)} {done}/{total}"
                        f"  loss {self._loss:.4f}  {rate:.1f} step/s")
        self.file.flush()

    def on_train_epoch_end(self, run_context):
        cb_params = run_context.original_args()
        seconds = time.time() - (self._start or time.time())
        total = cb_params.batch_num
        line = f"{self._epochs(cb_params)}: {total}/{total} steps"
        if isinstance(self._loss, float):
            line += f", loss {self._loss:.4f}"
        line += f", {seconds:.2f}s"
        metrics = _format_metrics(cb_params.get("eval_results"))
        if metrics:
            line += f", {metrics}"
        self.file.write(("\r" + line + "\033[K\n") if self._live() else line + "\n")
        self.file.flush()


def _pyplot():
    try:
        import matplotlib  # noqa: PLC0415 - an optional extra, imported when used
    except ImportError:
        raise ImportError("LossPlot draws with matplotlib, which is not installed: install "
                          "kiln's 'plot' extra (pip install kiln[plot]) or matplotlib") from None
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # noqa: PLC0415
    return plt


class LossPlot(Callback):
    """Writes a PNG (`filename`) of the training loss over the steps and, when used with fit,
    the evaluation results (eval_loss, metrics) at the step each epoch ended; redrawn at the end
    of every epoch, so the file is current while training runs. Needs matplotlib (the optional
    extra ``pip install kiln[plot]``). kiln's own callback."""

    def __init__(self, filename="training.png"):
        super().__init__()
        self._plt = _pyplot()  # fail now, not after hours of training
        self.filename = str(filename)
        self.steps, self.losses = [], []
        self.eval_steps, self.eval_results = [], {}
        self._offset = 0

    def on_train_begin(self, run_context):
        self.steps, self.losses = [], []
        self.eval_steps, self.eval_results = [], {}
        cb_params = run_context.original_args()
        self._offset = cb_params.get("initial_epoch", 0) * cb_params.batch_num

    def on_train_step_end(self, run_context):
        cb_params = run_context.original_args()
        loss = loss_value(cb_params.net_outputs)
        if isinstance(loss, float):
            self.steps.append(self._offset + cb_params.cur_step_num)
            self.losses.append(loss)

    def on_train_epoch_end(self, run_context):
        cb_params = run_context.original_args()
        results = cb_params.get("eval_results")
        if results:
            self.eval_steps.append(self._offset + cb_params.cur_step_num)
            for name, value in results.items():
                self.eval_results.setdefault(name, []).append(float(value))
        self.draw()

    def draw(self):
        plt = self._plt
        rows = 1 + any(name != "eval_loss" for name in self.eval_results)
        fig, axes = plt.subplots(rows, 1, figsize=(8, 3.2 * rows), squeeze=False)
        ax = axes[0][0]
        ax.plot(self.steps, self.losses, lw=1, label="training loss")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        if "eval_loss" in self.eval_results:
            ax.plot(self.eval_steps, self.eval_results["eval_loss"], "o-", label="eval_loss")
        ax.legend()
        if rows == 2:
            ax = axes[1][0]
            for name, values in self.eval_results.items():
                if name != "eval_loss":
                    ax.plot(self.eval_steps, values, "o-", label=name)
            ax.set_xlabel("step")
            ax.set_ylabel("metric")
            ax.legend()
        fig.tight_layout()
        fig.savefig(self.filename, dpi=80)
        plt.close(fig)
