"""MindSpore's nn.dynamic_lr: lists holding one learning rate per step (piecewise constant,
exponential, natural-exponential, inverse-time, cosine and polynomial decay, warm-up), for an
optimizer's `learning_rate`. Formulas, argument checks and defaults are MindSpore 2.x's:
current_epoch = floor(i / step_per_epoch)."""
import math

from kiln.ops import _core

__all__ = ["piecewise_constant_lr", "exponential_decay_lr", "natural_exp_decay_lr",
           "inverse_decay_lr", "cosine_decay_lr", "polynomial_decay_lr", "warmup_lr"]


def _float(value, who, name, allow_zero=False):
    """A float (MindSpore's check_is_float: an int is a TypeError), > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, float):
        raise TypeError(f"{who}: {name} must be a float, got {type(value).__name__} {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{who}: {name} must be {'>= 0' if allow_zero else '> 0'}, got "
                         f"{value}")
    return value


def _decay_args(who, learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                is_stair):
    _core.positive_int_arg(total_step, who, "total_step")
    _core.positive_int_arg(step_per_epoch, who, "step_per_epoch")
    _core.positive_int_arg(decay_epoch, who, "decay_epoch")
    _float(learning_rate, who, "learning_rate")
    _float(decay_rate, who, "decay_rate")
    if not isinstance(is_stair, bool):
        raise TypeError(f"{who}: is_stair must be a bool, got {is_stair!r}")


def piecewise_constant_lr(milestone, learning_rates):
    """learning_rates[t] for the steps in [milestone[t - 1], milestone[t])."""
    who = "piecewise_constant_lr"
    for name, value in (("milestone", milestone), ("learning_rates", learning_rates)):
        if not isinstance(value, (tuple, list)):
            raise TypeError(f"{who}: {name} must be a list or tuple, got {type(value).__name__}")
    if len(milestone) != len(learning_rates):
        raise ValueError(f"{who}: milestone and learning_rates must have the same length, got "
                         f"{len(milestone)} and {len(learning_rates)}")
    out, last = [], 0
    for i, (m, lr) in enumerate(zip(milestone, learning_rates)):
        _core.positive_int_arg(m, who, f"milestone[{i}]")
        if isinstance(lr, bool) or not isinstance(lr, float):
            raise TypeError(f"{who}: learning_rates[{i}] must be a float, got {lr!r}")
        if m < last:
            raise ValueError(f"{who}: milestone must be increasing, got milestone[{i}] = {m} "
                             f"after {last}")
        out += [lr] * (m - last)
        last = m
    return out


def exponential_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                         is_stair=False):
    """learning_rate * decay_rate ^ (current_epoch / decay_epoch) (floored with is_stair)."""
    _decay_args("exponential_decay_lr", learning_rate, decay_rate, total_step, step_per_epoch,
                decay_epoch, is_stair)
    out = []
    for i in range(total_step):
        p = (i // step_per_epoch) / decay_epoch
        out.append(learning_rate * decay_rate ** (math.floor(p) if is_stair else p))
    return out


def natural_exp_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                         is_stair=False):
    """learning_rate * e^(-decay_rate * current_epoch); with is_stair current_epoch is rounded
    down to a multiple of decay_epoch."""
    _decay_args("natural_exp_decay_lr", learning_rate, decay_rate, total_step, step_per_epoch,
                decay_epoch, is_stair)
    out = []
    for i in range(total_step):
        epoch = i // step_per_epoch
        if is_stair:
            epoch = math.floor(epoch / decay_epoch) * decay_epoch
        out.append(learning_rate * math.e ** (-decay_rate * epoch))
    return out


def inverse_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                     is_stair=False):
    """learning_rate / (1 + decay_rate * current_epoch / decay_epoch) (floored with is_stair)."""
    _decay_args("inverse_decay_lr", learning_rate, decay_rate, total_step, step_per_epoch,
                decay_epoch, is_stair)
    out = []
    for i in range(total_step):
        p = (i // step_per_epoch) / decay_epoch
        out.append(learning_rate / (1 + decay_rate * (math.floor(p) if is_stair else p)))
    return out


def cosine_decay_lr(min_lr, max_lr, total_step, step_per_epoch, decay_epoch):
    """min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(pi * min(current_epoch, decay_epoch) /
    decay_epoch))."""
    who = "cosine_decay_lr"
    _float(min_lr, who, "min_lr", allow_zero=True)
    _float(max_lr, who, "max_lr")
    for name, value in (("total_step", total_step), ("step_per_epoch", step_per_epoch),
                        ("decay_epoch", decay_epoch)):
        _core.positive_int_arg(value, who, name)
    if min_lr >= max_lr:
        raise ValueError(f"{who}: max_lr must be greater than min_lr, got max_lr={max_lr}, "
                         f"min_lr={min_lr}")
    delta = 0.5 * (max_lr - min_lr)
    return [min_lr + delta * (1 + math.cos(math.pi * min(i // step_per_epoch, decay_epoch)
                                           / decay_epoch)) for i in range(total_step)]


def polynomial_decay_lr(learning_rate, end_learning_rate, total_step, step_per_epoch,
                        decay_epoch, power, update_decay_epoch=False):
    """(learning_rate - end) * (1 - tmp_epoch / tmp_decay_epoch)^power + end, where
    tmp_epoch = min(current_epoch, decay_epoch); with update_decay_epoch tmp_epoch is
    current_epoch and tmp_decay_epoch = decay_epoch * max(ceil(current_epoch / decay_epoch), 1).
    """
    who = "polynomial_decay_lr"
    _float(learning_rate, who, "learning_rate")
    _float(end_learning_rate, who, "end_learning_rate", allow_zero=True)
    _float(power, who, "power")
    for name, value in (("total_step", total_step), ("step_per_epoch", step_per_epoch),
                        ("decay_epoch", decay_epoch)):
        _core.positive_int_arg(value, who, name)
    if not isinstance(update_decay_epoch, bool):
        raise TypeError(f"{who}: update_decay_epoch must be a bool, got {update_decay_epoch!r}")
    delta = learning_rate - end_learning_rate
    out = []
    for i in range(total_step):
        epoch = i // step_per_epoch
        if update_decay_epoch:
            span, tmp = decay_epoch * max(math.ceil(epoch / decay_epoch), 1), epoch
        else:
            span, tmp = decay_epoch, min(epoch, decay_epoch)
        out.append(delta * (1 - tmp / span) ** power + end_learning_rate)
    return out


def warmup_lr(learning_rate, total_step, step_per_epoch, warmup_epoch):
    """learning_rate * min(current_epoch, warmup_epoch) / warmup_epoch (0 in the first
    epoch)."""
    who = "warmup_lr"
    _float(learning_rate, who, "learning_rate", allow_zero=True)
    for name, value in (("warmup_epoch", warmup_epoch), ("total_step", total_step),
                        ("step_per_epoch", step_per_epoch)):
        _core.positive_int_arg(value, who, name)
    return [learning_rate * min(i // step_per_epoch, warmup_epoch) / warmup_epoch
            for i in range(total_step)]
