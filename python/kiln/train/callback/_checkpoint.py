"""CheckpointConfig and ModelCheckpoint: save the training network (parameters and optimizer
state) every N steps or seconds, keep the newest keep_checkpoint_max files."""
import numbers
import os
import re
import time

from kiln.nn.cell import Cell
from kiln.train.callback._callback import Callback
from kiln.train.serialization import save_checkpoint

__all__ = ["CheckpointConfig", "ModelCheckpoint"]


def _non_negative_int(value, name):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"For 'CheckpointConfig', '{name}' must be a non-negative int, but got "
                         f"{value!r}.")
    return int(value)


class CheckpointConfig:
    """When ModelCheckpoint saves and how many files it keeps. save_checkpoint_steps wins over
    save_checkpoint_seconds, keep_checkpoint_max over keep_checkpoint_per_n_minutes (as in
    MindSpore); at least one of the four must be set. append_info adds "epoch_num"/"step_num"
    (names in a list) and the entries of a dict to every file."""

    def __init__(self, save_checkpoint_steps=1, save_checkpoint_seconds=0, keep_checkpoint_max=5,
                 keep_checkpoint_per_n_minutes=0, integrated_save=True, async_save=False,
                 saved_network=None, append_info=None, enc_key=None, enc_mode="AES-GCM",
                 exception_save=False, **kwargs):
        steps = _non_negative_int(save_checkpoint_steps, "save_checkpoint_steps")
        seconds = _non_negative_int(save_checkpoint_seconds, "save_checkpoint_seconds")
        keep_max = _non_negative_int(keep_checkpoint_max, "keep_checkpoint_max")
        per_minutes = _non_negative_int(keep_checkpoint_per_n_minutes,
                                        "keep_checkpoint_per_n_minutes")
        if saved_network is not None and not isinstance(saved_network, Cell):
            raise TypeError(f"For 'CheckpointConfig', the type of 'saved_network' must be None "
                            f"or Cell, but got {type(saved_network)}.")
        if not steps and not seconds and not keep_max and not per_minutes:
            raise ValueError("For 'CheckpointConfig', the input arguments "
                             "'save_checkpoint_steps', 'save_checkpoint_seconds', "
                             "'keep_checkpoint_max' and 'keep_checkpoint_per_n_minutes' can't be "
                             "all None or 0.")
        for name, flag in (("integrated_save", integrated_save), ("async_save", async_save),
                           ("exception_save", exception_save)):
            if not isinstance(flag, bool):
                raise TypeError(f"For 'CheckpointConfig', '{name}' must be a bool, but got "
                                f"{type(flag).__name__}.")
        self._save_checkpoint_steps = steps
        self._save_checkpoint_seconds = None if steps else seconds
        self._keep_checkpoint_max = keep_max
        self._keep_checkpoint_per_n_minutes = None if keep_max else per_minutes
        if not keep_max and not per_minutes:
            self._keep_checkpoint_max = 1
        self._integrated_save = integrated_save
        self._async_save = async_save
        self._saved_network = saved_network
        self._append_dict = self._parse_append_info(append_info)
        self._enc_key = enc_key
        self._enc_mode = enc_mode
        self.exception_save = exception_save
        self._kwargs = kwargs

    @staticmethod
    def _parse_append_info(info):
        if info is None or info == []:
            return None
        if isinstance(info, dict):
            info = [info]
        if not isinstance(info, list):
            raise TypeError(f"For 'CheckpointConfig', 'append_info' must be a list or dict, but "
                            f"got {type(info).__name__}.")
        out = {}
        for item in info:
            if isinstance(item, dict):
                out.update(item)
            elif item in ("epoch_num", "step_num"):
                out[item] = 0
            else:
                raise ValueError(f"For 'CheckpointConfig', the items of 'append_info' must be "
                                 f"'epoch_num', 'step_num' or a dict, but got {item!r}.")
        return out

    save_checkpoint_steps = property(lambda self: self._save_checkpoint_steps)
    save_checkpoint_seconds = property(lambda self: self._save_checkpoint_seconds)
    keep_checkpoint_max = property(lambda self: self._keep_checkpoint_max)
    keep_checkpoint_per_n_minutes = property(lambda self: self._keep_checkpoint_per_n_minutes)
    integrated_save = property(lambda self: self._integrated_save)
    async_save = property(lambda self: self._async_save)
    saved_network = property(lambda self: self._saved_network)
    append_dict = property(lambda self: self._append_dict)
    enc_key = property(lambda self: self._enc_key)
    enc_mode = property(lambda self: self._enc_mode)

    def get_checkpoint_policy(self):
        return {"save_checkpoint_steps": self.save_checkpoint_steps,
                "save_checkpoint_seconds": self.save_checkpoint_seconds,
                "keep_checkpoint_max": self.keep_checkpoint_max,
                "keep_checkpoint_per_n_minutes": self.keep_checkpoint_per_n_minutes,
                "saved_network": self.saved_network}


def _free_prefix(directory, prefix):
    """MindSpore never overwrites an earlier run: when `prefix-*.ckpt` (or `prefix_N-*.ckpt`)
    exists, the new files are named prefix_M with M one past the largest N found."""
    pattern = re.compile(re.escape(prefix) + r"(?:_(\d+))?-.*\.ckpt$")
    suffix = 0
    for name in os.listdir(directory):
        found = pattern.match(name)
        if found:
            suffix = max(suffix, int(found.group(1)) + 1 if found.group(1) else 1)
    return f"{prefix}_{suffix}" if suffix else prefix


class CheckpointManager:
    """The checkpoint files of one prefix in a directory, oldest first."""

    def __init__(self, directory, prefix):
        self._pattern = re.compile(re.escape(prefix) + r"-(\d+)_(\d+)\.ckpt$")
        self._directory = directory
        self.files = []

    def refresh(self):
        found = []
        for name in os.listdir(self._directory):
            match = self._pattern.match(name)
            if match:
                path = os.path.join(self._directory, name)
                # Modification time first (what MindSpore sorts by); epoch and step break the
                # ties of files written within the clock's resolution.
                found.append((os.stat(path).st_mtime_ns, int(match.group(1)),
                              int(match.group(2)), path))
        self.files = [item[-1] for item in sorted(found)]

    def remove(self, path):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        if path in self.files:
            self.files.remove(path)

    def keep_one_per_minutes(self, minutes, now):
        """Of the files written in the last `minutes`, keeps only the oldest."""
        recent = [f for f in self.files if now - os.path.getmtime(f) < 60 * minutes]
        for path in recent[1:]:
            self.remove(path)


class ModelCheckpoint(Callback):
    """Saves the training network -- parameters and the optimizer's state (moments, global_step,
    learning_rate) -- as ``{directory}/{prefix}-{epoch}_{step_in_epoch}.ckpt`` following
    `config`, and once more when training ends. Files are written atomically."""

    def __init__(self, prefix="CKP", directory=None, config=None):
        super().__init__()
        if not isinstance(prefix, str) or "/" in prefix:
            raise ValueError(f"For 'ModelCheckpoint', the argument 'prefix' for checkpoint file "
                             f"name is invalid, it must be string and does not contain '/', but "
                             f"got {prefix}.")
        if directory is not None and not isinstance(directory, (str, os.PathLike)):
            raise ValueError(f"For 'ModelCheckpoint', 'directory' must be a str, but got "
                             f"{type(directory).__name__}.")
        if config is None:
            config = CheckpointConfig()
        elif not isinstance(config, CheckpointConfig):
            raise TypeError(f"For 'ModelCheckpoint', the type of argument 'config' should be "
                            f"'CheckpointConfig', but got {type(config)}.")
        self._config = config
        self._directory = os.path.abspath(os.fspath(directory) if directory else os.getcwd())
        os.makedirs(self._directory, exist_ok=True)
        self._prefix = _free_prefix(self._directory, prefix)
        self._manager = CheckpointManager(self._directory, self._prefix)
        self._append_dict = dict(config.append_dict or {})
        # Values given in append_info are offsets (a resumed run counts on from them).
        self._epoch_offset = self._append_dict.get("epoch_num", 0)
        self._step_offset = self._append_dict.get("step_num", 0)
        self._last_triggered_step = 0
        self._last_time = self._last_time_for_keep = time.time()
        self._latest_ckpt_file_name = ""

    @property
    def latest_ckpt_file_name(self):
        return self._latest_ckpt_file_name

    def on_train_step_end(self, run_context):
        self._save_ckpt(run_context.original_args())

    def on_train_end(self, run_context):
        self._save_ckpt(run_context.original_args(), force=True)

    def _due(self, cb_params, force):
        steps, seconds = self._config.save_checkpoint_steps, self._config.save_checkpoint_seconds
        if steps:
            return force or cb_params.cur_step_num >= self._last_triggered_step + steps
        if seconds:
            now = time.time()
            if force or now - self._last_time > seconds:
                self._last_time = now
                return True
        return False

    def _rotate(self):
        self._manager.refresh()
        keep_max = self._config.keep_checkpoint_max
        per_minutes = self._config.keep_checkpoint_per_n_minutes
        if keep_max:
            while len(self._manager.files) >= keep_max:
                self._manager.remove(self._manager.files[0])
        elif per_minutes:
            now = time.time()
            if now - self._last_time_for_keep < per_minutes * 60:
                self._manager.keep_one_per_minutes(per_minutes, now)

    def _save_ckpt(self, cb_params, force=False):
        if cb_params.cur_step_num == self._last_triggered_step or not self._due(cb_params, force):
            return
        step_in_epoch = (cb_params.cur_step_num - 1) % cb_params.batch_num + 1
        name = f"{self._prefix}-{cb_params.cur_epoch_num}_{step_in_epoch}.ckpt"
        os.makedirs(self._directory, exist_ok=True)
        self._rotate()
        self._last_time_for_keep = time.time()
        self._last_triggered_step = cb_params.cur_step_num
        if "epoch_num" in self._append_dict:
            self._append_dict["epoch_num"] = self._epoch_offset + cb_params.cur_epoch_num
        if "step_num" in self._append_dict:
            self._append_dict["step_num"] = self._step_offset + cb_params.cur_step_num
        network = self._config.saved_network or cb_params.train_network
        path = os.path.join(self._directory, name)
        save_checkpoint(network, path, self._config.integrated_save, self._config.async_save,
                        self._append_dict or None, self._config.enc_key, self._config.enc_mode)
        self._latest_ckpt_file_name = path

    def save_breakpoint(self, cb_params):
        """With exception_save: the training network as it was when training failed, as
        ``{prefix}-{epoch}_{step_in_epoch}_breakpoint.ckpt`` (Model calls this)."""
        if not self._config.exception_save or not cb_params.get("cur_step_num"):
            return None
        step_in_epoch = (cb_params.cur_step_num - 1) % cb_params.batch_num + 1
        path = os.path.join(self._directory, f"{self._prefix}-{cb_params.cur_epoch_num}_"
                                             f"{step_in_epoch}_breakpoint.ckpt")
        network = self._config.saved_network or cb_params.train_network
        save_checkpoint(network, path, self._config.integrated_save)
        return path
