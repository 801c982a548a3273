"""OnRequestExit: a signal (SIGTERM by default) ends training or evaluation after the current
step, saving the network as a checkpoint (and a MindIR file) that the next run resumes from."""
import os
import signal

from kiln.train.callback._callback import Callback


def _bool(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"OnRequestExit: {name} must be a bool, got {type(value).__name__}")
    return value


class OnRequestExit(Callback):
    """When the process receives `sig`, the running ``Model.train``/``eval`` finishes its step
    and stops; then the network is saved as ``{directory}/{file_name}_train.ckpt`` (with
    ``save_mindir``, also exported as ``_train.mindir`` from the last batch), or ``_eval`` for
    evaluation. When training begins and that checkpoint exists, it is loaded into the training
    network first, so a restarted job continues where the stopped one left off (evaluation
    prefers ``_eval.ckpt``, then ``_train.ckpt``). The handler is installed for the run and the
    previous one restored after it; a signal that cannot be caught (SIGKILL) is refused."""

    def __init__(self, save_ckpt=True, save_mindir=True, file_name="Net", directory="./",
                 sig=signal.SIGTERM):
        super().__init__()
        self.save_ckpt = _bool("save_ckpt", save_ckpt)
        self.save_mindir = _bool("save_mindir", save_mindir)
        if not isinstance(file_name, str) or not file_name or "/" in file_name:
            raise ValueError(f"OnRequestExit: file_name must be a non-empty str without '/', "
                             f"got {file_name!r}")
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"OnRequestExit: directory must be a str, got "
                            f"{type(directory).__name__}")
        if isinstance(sig, bool) or not isinstance(sig, int):
            raise TypeError(f"OnRequestExit: sig must be a signal number, got {sig!r}")
        if sig in (getattr(signal, "SIGKILL", None), getattr(signal, "SIGSTOP", None)):
            raise ValueError(f"OnRequestExit: signal {signal.Signals(sig).name} cannot be caught")
        self.sig = signal.Signals(sig)
        self._base = os.path.join(os.path.abspath(os.fspath(directory)), file_name)
        self.exit = False  # set by the handler
        self._previous = None

    # ---- training ----
    def on_train_begin(self, run_context):
        self._install()
        self._resume(run_context.original_args().train_network, ("train",))

    def on_train_step_end(self, run_context):
        self._stop_if_asked(run_context)

    def on_train_epoch_end(self, run_context):
        self._stop_if_asked(run_context)

    def on_train_end(self, run_context):
        self._restore()
        cb_params = run_context.original_args()
        self._save(cb_params.train_network, cb_params.get("train_dataset_element"), "train")

    # ---- evaluation ----
    def on_eval_begin(self, run_context):
        self._install()
        self._resume(run_context.original_args().eval_network, ("eval", "train"))

    def on_eval_step_end(self, run_context):
        self._stop_if_asked(run_context)

    def on_eval_end(self, run_context):
        self._restore()
        cb_params = run_context.original_args()
        self._save(cb_params.eval_network, cb_params.get("eval_dataset_element"), "eval")

    # ---- helpers ----
    def path(self, kind, suffix):
        """Where the `kind` ("train" or "eval") file with `suffix` (".ckpt", ".mindir") goes."""
        return f"{self._base}_{kind}{suffix}"

    def _handle(self, signum, frame):
        self.exit = True

    def _install(self):
        self._previous = signal.signal(self.sig, self._handle)

    def _restore(self):
        if self._previous is not None:
            signal.signal(self.sig, self._previous)
            self._previous = None

    def _stop_if_asked(self, run_context):
        if self.exit:
            run_context.request_stop()

    def _resume(self, network, kinds):
        from kiln.train.serialization import load_checkpoint  # noqa: PLC0415

        if not self.save_ckpt:
            return
        for kind in kinds:
            if os.path.isfile(self.path(kind, ".ckpt")):
                load_checkpoint(self.path(kind, ".ckpt"), net=network)
                return

    def _save(self, network, batch, kind):
        from kiln.train.model_export import export  # noqa: PLC0415
        from kiln.train.serialization import save_checkpoint  # noqa: PLC0415

        if not self.exit:
            return
        os.makedirs(os.path.dirname(self._base), exist_ok=True)
        if self.save_ckpt:
            save_checkpoint(network, self.path(kind, ".ckpt"))
        if self.save_mindir:
            if batch is None:
                raise RuntimeError("OnRequestExit: save_mindir needs a batch the network ran on; "
                                   "the run stopped before its first step")
            export(network, *batch, file_name=self.path(kind, ""), file_format="MINDIR")
