"""ctc_loss: the connectionist temporal classification loss (MindSpore's ops.ctc_loss, which
returns the loss and log_alpha) as a forward recursion in log space made of registry ops, so its
gradient follows from theirs. The recursion runs over the time steps one op group per step (in
compiled code the steps are unrolled: T is a static shape)."""
import numbers

from kiln.common import dtype as mstype
from kiln.ops._core import call, is_tensor
from kiln.ops.function.array import one_hot_checked

__all__ = ["ctc_loss"]

# log(0) stand-in: finite, so unreachable states keep finite gradients (exp() of it is 0).
_NEG = -1e30
_IMPOSSIBLE = -1e29


def _check(op, log_probs, targets, input_lengths, target_lengths, blank, reduction,
           zero_infinity):
    if not is_tensor(log_probs) or not log_probs.dtype.is_floating_point:
        raise TypeError(f"{op}: log_probs must be a floating-point Tensor")
    for name, t in (("targets", targets), ("input_lengths", input_lengths),
                    ("target_lengths", target_lengths)):
        if not is_tensor(t) or t.dtype not in (mstype.int32, mstype.int64):
            raise TypeError(f"{op}: {name} must be an int32 or int64 Tensor")
    if len(log_probs.shape) != 3 or len(targets.shape) != 2:
        raise ValueError(f"{op}: log_probs must be (T, N, C) and targets (N, S), got shapes "
                         f"{tuple(log_probs.shape)} and {tuple(targets.shape)}")
    t_len, n, c = log_probs.shape
    for name, t in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if tuple(t.shape) != (n,):
            raise ValueError(f"{op}: {name} must have shape ({n},), got {tuple(t.shape)}")
    if targets.shape[0] != n:
        raise ValueError(f"{op}: targets must have {n} rows, got shape {tuple(targets.shape)}")
    if isinstance(blank, bool) or not isinstance(blank, numbers.Integral) or not 0 <= blank < c:
        raise ValueError(f"{op}: blank must be an int in [0, {c}), got {blank!r}")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    if not isinstance(zero_infinity, bool):
        raise TypeError(f"{op}: zero_infinity must be a bool, got {zero_infinity!r}")


def _extended_labels(targets, blank):
    """(N, 2S + 1): blank, t_1, blank, t_2, ..., t_S, blank."""
    n, s = targets.shape
    blanks = call("fill", (), ((n, s), blank, targets.dtype._enum))
    pairs = call("reshape", (call("concat", (call("expand_dims", (blanks,), (-1,)),
                                            call("expand_dims", (targets,), (-1,))), (-1,)),),
                 ((n, 2 * s),))
    last = call("fill", (), ((n, 1), blank, targets.dtype._enum))
    return call("concat", (pairs, last), (1,))


def _shift(alpha, k):
    """alpha moved k states to the right along axis 1, filled with log(0)."""
    n, width = alpha.shape
    if k >= width:
        return call("fill", (), ((n, width), _NEG, alpha.dtype._enum))
    head = call("fill", (), ((n, k), _NEG, alpha.dtype._enum))
    body = call("strided_slice", (alpha,), ((0, 0), (n, width - k), (1, 1)))
    return call("concat", (head, body), (1,))


def _logsumexp3(a, b, c):
    m = call("maximum", (call("maximum", (a, b)), c))
    total = call("add", (call("add", (call("exp", (call("sub", (a, m)),)),
                                      call("exp", (call("sub", (b, m)),)))),
                         call("exp", (call("sub", (c, m)),))))
    return call("add", (m, call("log", (total,))))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Negative log-likelihood of each target sequence under (T, N, C) log-probabilities,
    summed over all CTC alignments; returns (loss, log_alpha (N, T, 2S + 1)). 'mean' divides
    each loss by its target length (at least 1) and averages over the batch."""
    op = "ctc_loss"
    _check(op, log_probs, targets, input_lengths, target_lengths, blank, reduction,
           zero_infinity)
    steps, n, classes = log_probs.shape
    width = 2 * targets.shape[1] + 1
    dtype = log_probs.dtype
    ext = _extended_labels(targets, blank)
    hot = call("cast", (one_hot_checked(ext, classes, 1, 0, -1, f"{op}: target class"),),
               (dtype._enum,))                                           # (N, L, C)
    # emissions[t, n, s] = log_probs[t, n, ext[n, s]]
    emissions = call("transpose", (call("matmul", (call("transpose", (log_probs,), ((1, 0, 2),)),
                                                   call("transpose", (hot,), ((0, 2, 1),)))),),
                     ((1, 0, 2),))
    two_back = call("concat", (call("fill", (), ((n, 2), blank, ext.dtype._enum)),
                               call("strided_slice", (ext,), ((0, 0), (n, width - 2), (1, 1)))),
                    (1,))
    skip = call("logical_and", (call("not_equal", (ext, blank)),
                                call("not_equal", (ext, two_back))))
    start = call("less", (call("arange", (), (0, width, 1, ext.dtype._enum)), 2))
    alpha = call("where", (start, call("squeeze", (call("strided_slice", (emissions,), (
        (0, 0, 0), (1, n, width), (1, 1, 1))),), ((0,),)), _NEG))
    lengths = call("reshape", (input_lengths,), ((n, 1),))
    alphas = [alpha]
    for t in range(1, steps):
        e_t = call("squeeze", (call("strided_slice", (emissions,), ((t, 0, 0), (t + 1, n, width),
                                                                  (1, 1, 1))),), ((0,),))
        moved = call("where", (skip, _shift(alpha, 2), _NEG))
        new = call("add", (_logsumexp3(alpha, _shift(alpha, 1), moved), e_t))
        alpha = call("where", (call("less", (t, lengths)), new, alpha))  # frozen past the end
        alphas.append(alpha)
    ends = call("reshape", (call("mul", (target_lengths, 2)),), ((n, 1),))
    positions = call("arange", (), (0, width, 1, ext.dtype._enum))
    last = call("logical_or", (call("equal", (positions, ends)),
                               call("equal", (positions, call("sub", (ends, 1))))))
    masked = call("where", (last, alpha, _NEG))
    peak = call("reduce_max", (masked,), ((1,), True))
    total = call("reduce_sum", (call("exp", (call("sub", (masked, peak)),)),), ((1,), False, None))
    log_likelihood = call("add", (call("reshape", (peak,), ((n,),)), call("log", (total,))))
    impossible = call("less", (log_likelihood, _IMPOSSIBLE))
    loss = call("where", (impossible, float("inf"), call("neg", (log_likelihood,))))
    if zero_infinity:
        loss = call("where", (impossible, 0.0, loss))
    log_alpha = call("transpose", (call("concat", tuple(call("expand_dims", (a,), (0,))
                                                        for a in alphas), (0,)),), ((1, 0, 2),))
    # As MindSpore reports it: -inf for the states past each sequence's own 2 * S_n + 1 and
    # for the time steps past its input length.
    state_ok = call("reshape", (call("less_equal", (positions, ends)),), ((n, 1, width),))
    time_ok = call("less", (call("reshape", (call("arange", (), (0, steps, 1,
                                                                  lengths.dtype._enum)),),
                                         ((1, steps, 1),)),
                            call("reshape", (input_lengths,), ((n, 1, 1),))))
    valid = call("logical_and", (call("logical_and", (state_ok, time_ok)),
                                 call("greater_equal", (log_alpha, _IMPOSSIBLE))))
    log_alpha = call("where", (valid, log_alpha, float("-inf")))
    if reduction == "sum":
        loss = call("reduce_sum", (loss,), (None, False, None))
    elif reduction == "mean":
        per = call("maximum", (call("cast", (target_lengths,), (dtype._enum,)), 1.0))
        loss = call("reduce_mean", (call("div", (loss, per)),), (None, False))
    return loss, log_alpha
