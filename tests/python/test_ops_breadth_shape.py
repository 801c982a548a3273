"""Shape, creation and product ops added for API breadth (shape_ext.py, creation_ext.py,
linalg_ext.py): values against NumPy in PyNative and compiled, gradients, bad input."""
import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, ops

F32 = np.float32
A = np.arange(1, 7, dtype=F32).reshape(2, 3)
B = np.arange(24, dtype=F32).reshape(2, 3, 4) - 11.5
V = np.array([1.0, -2.0, 0.5], F32)


def both_modes(fn, *args):
    def run(*a):
        return fn(*a)

    return assert_same_in_both_modes(run, *args)


def np_block_diag(*ms_):
    rows = sum(m.shape[0] for m in ms_)
    cols = sum(m.shape[1] for m in ms_)
    out, r, c = np.zeros((rows, cols)), 0, 0
    for m in ms_:
        out[r:r + m.shape[0], c:c + m.shape[1]] = m
        r, c = r + m.shape[0], c + m.shape[1]
    return out


CASES = [
    ("flip", lambda x: ops.flip(x, (0, 2)), lambda b: np.flip(b, (0, 2)), B),
    ("fliplr", ops.fliplr, np.fliplr, A), ("flipud", ops.flipud, np.flipud, A),
    ("reverse", lambda x: ops.reverse(x, [1]), lambda b: np.flip(b, 1), B),
    ("rot90_1", lambda x: ops.rot90(x, 1, (0, 1)), lambda a: np.rot90(a, 1, (0, 1)), A),
    ("rot90_3", lambda x: ops.rot90(x, 3, (1, 2)), lambda b: np.rot90(b, 3, (1, 2)), B),
    ("rot90_m2", lambda x: ops.rot90(x, -2, (0, 2)), lambda b: np.rot90(b, -2, (0, 2)), B),
    ("movedim", lambda x: ops.movedim(x, (0, 1), (2, 0)),
     lambda b: np.moveaxis(b, (0, 1), (2, 0)), B),
    ("moveaxis", lambda x: ops.moveaxis(x, -1, 0), lambda b: np.moveaxis(b, -1, 0), B),
    ("swapdims", lambda x: ops.swapdims(x, 0, 2), lambda b: np.swapaxes(b, 0, 2), B),
    ("unbind", lambda x: ops.unbind(x, 1), lambda b: tuple(np.moveaxis(b, 1, 0)), B),
    ("unstack", ops.unstack, tuple, A),
    ("tensor_split_int", lambda x: ops.tensor_split(x, 3, 2),
     lambda b: tuple(np.array_split(b, 3, 2)), B),
    ("tensor_split_idx", lambda x: ops.tensor_split(x, [1, -1, 9], 2),
     lambda b: tuple(np.array_split(b, [1, 3, 9], 2)), B),
    ("hsplit", lambda x: ops.hsplit(x, 3), lambda b: tuple(np.hsplit(b, 3)), B),
    ("vsplit", lambda x: ops.vsplit(x, [1]), lambda b: tuple(np.vsplit(b, [1])), B),
    ("dsplit", lambda x: ops.dsplit(x, 2), lambda b: tuple(np.dsplit(b, 2)), B),
    ("hstack", lambda x: ops.hstack([x, x * 2]), lambda a: np.hstack([a, a * 2]), A),
    ("vstack", lambda x: ops.vstack((x[0], x)), lambda a: np.vstack((a[0], a)), A),
    ("row_stack", lambda x: ops.row_stack([x, x]), lambda a: np.vstack([a, a]), A),
    ("dstack", lambda x: ops.dstack([x, x]), lambda a: np.dstack([a, a]), A),
    ("column_stack", lambda x: ops.column_stack([x[0], x.T]),
     lambda a: np.column_stack([a[0], a.T]), A),
    ("atleast_1d", lambda x: ops.atleast_1d(x[0, 0]), lambda a: np.atleast_1d(a[0, 0]), A),
    ("atleast_2d", lambda x: ops.atleast_2d([x[0], x]), lambda a: tuple(np.atleast_2d(a[0], a)),
     A),
    ("atleast_3d", lambda x: ops.atleast_3d((x[0], x)), lambda a: tuple(np.atleast_3d(a[0], a)),
     A),
    ("ravel", ops.ravel, np.ravel, B), ("t", ops.t, np.transpose, A),
    ("expand", lambda x: ops.expand(x[:, :1], (4, -1, 5)),
     lambda a: np.broadcast_to(a[:, :1], (4, 2, 5)), A),
    ("expand_as", lambda x: ops.expand_as(x[0], x), lambda a: np.broadcast_to(a[0], a.shape), A),
    ("view_as", lambda x: ops.view_as(x, x.T), lambda a: a.reshape(3, 2), A),
    ("slice", lambda x: ops.slice(x, (0, 1, 1), (-1, 2, 2)), lambda b: b[:, 1:3, 1:3], B),
    ("strided_slice", lambda x: ops.strided_slice(x, (0, 2, 3), (2, 0, 0), (1, -1, -2)),
     lambda b: b[0:2, 2:0:-1, 3:0:-2], B),
    ("strided_slice_masks", lambda x: ops.strided_slice(x, (1, 0, 1), (2, 3, 4), (1, 1, 1),
                                                        begin_mask=2, shrink_axis_mask=1),
     lambda b: b[1, 0:3, 1:4], B),
    ("repeat_interleave", lambda x: ops.repeat_interleave(x, 2, 1),
     lambda a: np.repeat(a, 2, 1), A),
    ("repeat_interleave_list", lambda x: ops.repeat_interleave(x, [1, 0, 3], 1),
     lambda a: np.repeat(a, [1, 0, 3], 1), A),
    ("repeat_interleave_flat", lambda x: ops.repeat_interleave(x, 2),
     lambda a: np.repeat(a, 2), A),
    ("repeat_elements", lambda x: ops.repeat_elements(x, 3, 0), lambda a: np.repeat(a, 3, 0), A),
    ("meshgrid_xy", lambda x: ops.meshgrid(x[0], x[1, :2]),
     lambda a: tuple(np.meshgrid(a[0], a[1, :2])), A),
    ("meshgrid_ij", lambda x: ops.meshgrid(x[0], x[1, :2], x[0], indexing="ij"),
     lambda a: tuple(np.meshgrid(a[0], a[1, :2], a[0], indexing="ij")), A),
    ("cartesian_prod", lambda x: ops.cartesian_prod(x[0], x[1, :2]),
     lambda a: np.array([[p, q] for p in a[0] for q in a[1, :2]]), A),
    ("diagonal", lambda x: ops.diagonal(x, 1, 2, 1),
     lambda b: np.diagonal(b, 1, 2, 1), B),
    ("diagonal_neg", lambda x: ops.diagonal(x, -1), lambda a: np.diagonal(a, -1), A),
    ("diag", lambda x: ops.diag(x[0]), lambda a: np.diag(a[0]), A),
    ("diag_2d", ops.diag, lambda a: np.einsum("ij,ik,jl->ijkl", a, np.eye(2), np.eye(3)), A),
    ("diagflat", lambda x: ops.diagflat(x, -1), lambda a: np.diagflat(a, -1), A),
    ("diag_embed", lambda x: ops.diag_embed(x, 1),
     lambda a: np.stack([np.diag(r, 1) for r in a]), A),
    ("diag_embed_dims", lambda x: ops.diag_embed(x, 0, 0, 2),
     lambda a: np.moveaxis(np.stack([np.diag(r) for r in a]), (1, 2), (0, 2)), A),
    ("block_diag", lambda x: ops.block_diag(x, x[0], x[:1, :1]),
     lambda a: np_block_diag(a, a[:1], a[:1, :1]), A),
    ("outer", lambda x: ops.outer(x[0], x[1]), lambda a: np.outer(a[0], a[1]), A),
    ("ger", lambda x: ops.ger(x[0], x[1, :2]), lambda a: np.outer(a[0], a[1, :2]), A),
    ("inner", lambda x: ops.inner(x, x[0]), lambda a: np.inner(a, a[0]), A),
    ("inner_nd", lambda x: ops.inner(x, x[0]), lambda b: np.inner(b, b[0]), B),
    ("dot", lambda x: ops.dot(x, x.transpose(0, 2, 1)), lambda b: np.dot(b, b.transpose(0, 2, 1)),
     B),
    ("mv", lambda x: ops.mv(x, x[0]), lambda a: a @ a[0], A.T.copy()),
    ("vecdot", lambda x: ops.vecdot(x, x[0], axis=-1), lambda b: np.sum(b * b[0], -1), B),
    ("addmm", lambda x: ops.addmm(x[:, :2], x, x.T, beta=0.5, alpha=2),
     lambda a: 0.5 * a[:, :2] + 2 * a @ a.T, A),
    ("addmv", lambda x: ops.addmv(x[0, :2], x, x[1], alpha=-1),
     lambda a: a[0, :2] - a @ a[1], A),
    ("addbmm", lambda x: ops.addbmm(x[0, :, :3], x, x.transpose(0, 2, 1)[:, :, :3]),
     lambda b: b[0, :, :3] + np.einsum("bij,bjk->ik", b, b.transpose(0, 2, 1)[:, :, :3]), B),
    ("baddbmm", lambda x: ops.baddbmm(x[:, :, :3], x, x.transpose(0, 2, 1)[:, :, :3], 2, 0.5),
     lambda b: 2 * b[:, :, :3] + 0.5 * b @ b.transpose(0, 2, 1)[:, :, :3], B),
    ("addbmm_2d", lambda x: ops.addbmm(x[0, :3, :3], x[0, :3, :3], x[1, :3, :3]),
     lambda b: b[0, :3, :3] + (b[0, :3, :3] @ b[1, :3, :3]).sum(0), B),
    ("baddbmm_2d", lambda x: ops.baddbmm(x[0, :3, :3], x[0, :3, :3], x[1, :3, :3]),
     lambda b: b[0, :3, :3] + b[0, :3, :3] @ b[1, :3, :3], B),
    ("addr", lambda x: ops.addr(x, x[0, :2], x[1], beta=0), lambda a: np.outer(a[0, :2], a[1]),
     A),
    ("tensor_dot", lambda x: ops.tensor_dot(x, x, ((1, 2), (1, 2))),
     lambda b: np.tensordot(b, b, ((1, 2), (1, 2))), B),
    ("tensor_dot_int", lambda x: ops.tensor_dot(x, x.transpose(1, 2, 0), 2),
     lambda b: np.tensordot(b, b.transpose(1, 2, 0), 2), B),
    ("kron", lambda x: ops.kron(x, x[0]), lambda a: np.kron(a, a[0]), A),
    ("cross", lambda x: ops.cross(x, x[::-1]), lambda a: np.cross(a, a[::-1]), A),
    ("cross_dim", lambda x: ops.cross(x.T, x.T * 2 + 1, 0),
     lambda a: np.cross(a.T, a.T * 2 + 1, axis=0), A),
    ("dist", lambda x: ops.dist(x, x * 2, 3), lambda a: np.sum(np.abs(a) ** 3) ** (1 / 3), A),
    ("cdist", lambda x: ops.cdist(x, x + 1),
     lambda b: np.sqrt(((b[:, :, None] - b[:, None] - 1) ** 2).sum(-1)), B),
    ("cosine_similarity", lambda x: ops.cosine_similarity(x, x * x + 1, dim=1),
     lambda b: (b * (b * b + 1)).sum(1) / np.linalg.norm(b, axis=1)
     / np.linalg.norm(b * b + 1, axis=1), B),
    ("vander", lambda x: ops.vander(x[0], 4), lambda a: np.vander(a[0], 4), A),
]


def _flat(v):
    return list(v) if isinstance(v, tuple) else [v]


@pytest.mark.parametrize("name,fn,ref,x", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy_in_both_modes(name, fn, ref, x):
    got, want = _flat(both_modes(fn, Tensor(x))), _flat(ref(x))
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-5, atol=1e-5, err_msg=name)


CREATION = [
    (lambda: ops.eye(2, 3, ms.int32), np.eye(2, 3, dtype=np.int32)),
    (lambda: ops.eye(3), np.eye(3, dtype=F32)),
    (lambda: ops.linspace(-1, 2, 7), np.linspace(-1, 2, 7, dtype=F32)),
    (lambda: ops.linspace(Tensor(0.0), Tensor(1.0), 3), np.array([0, 0.5, 1], F32)),
    (lambda: ops.logspace(0.0, 2.0, 3, base=2), np.array([1, 2, 4], F32)),
    (lambda: ops.range(Tensor(0.0), Tensor(2.0), Tensor(0.5)), np.arange(0, 2, 0.5, dtype=F32)),
    (lambda: ops.range(5, 0, -2), np.array([5, 3, 1], np.int64)),
    (lambda: ops.tril_indices(3, 4, 1), np.stack(np.tril_indices(3, 1, 4))),
    (lambda: ops.triu_indices(4, 3, -1, dtype=ms.int32),
     np.stack(np.triu_indices(4, -1, 3)).astype(np.int32)),
    (lambda: ops.hann_window(5), 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(5) / 5)),
    (lambda: ops.hamming_window(5, False, dtype=ms.float32),
     np.hamming(5).astype(F32)),
    (lambda: ops.bartlett_window(6, False), np.bartlett(6).astype(F32)),
    (lambda: ops.blackman_window(6, False), np.blackman(6).astype(F32)),
    (lambda: ops.blackman_window(1), np.ones(1, F32)),
]


@pytest.mark.parametrize("k", range(len(CREATION)))
def test_creation_matches_numpy(k):
    make, want = CREATION[k]
    got = make()
    assert got.asnumpy().dtype == want.dtype, f"{got.dtype} != {want.dtype}"
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6, atol=1e-7)


def test_facts_and_dtypes():
    x = Tensor(B)
    assert ops.numel(x) == 24 and ops.size(x) == 24 and ops.rank(x) == 3
    assert ops.is_tensor(x) and not ops.is_tensor(B)
    assert ops.is_floating_point(x) and not ops.is_floating_point(Tensor(np.arange(3)))
    assert ops.is_complex(x) is False
    assert ops.type_as(Tensor(np.arange(3)), x).dtype == ms.float32
    assert ops.kron(Tensor(np.arange(3, dtype=np.int32)), Tensor(np.ones(2, np.int32))).dtype == \
        ms.int32
    assert ops.diag(Tensor(np.array([1, 2], np.int32))).dtype == ms.int32
    assert ops.block_diag(Tensor(A), Tensor(np.array([[7]], np.int32))).dtype == ms.float32
    assert ops.vander(Tensor(np.array([1, 2], np.int32))).dtype == ms.int64


GRAD = [
    ("flip", lambda x: ops.flip(x, (0, 1))), ("rot90", lambda x: ops.rot90(x, 1, (0, 1))),
    ("movedim", lambda x: ops.movedim(x, 0, 1)), ("tensor_split", lambda x:
                                                  ops.tensor_split(x, 2, 1)[1]),
    ("repeat_interleave", lambda x: ops.repeat_interleave(x, [2, 0, 1], 1)),
    ("diagonal", lambda x: ops.diagonal(x, 1)), ("diag_embed", lambda x: ops.diag_embed(x)),
    ("diagflat", lambda x: ops.diagflat(x, 1)), ("block_diag", lambda x: ops.block_diag(x, x)),
    ("outer", lambda x: ops.outer(x[0], x[1])), ("inner", lambda x: ops.inner(x, x)),
    ("kron", lambda x: ops.kron(x, x)), ("cross", lambda x: ops.cross(x, x * x)),
    ("tensor_dot", lambda x: ops.tensor_dot(x, x, ((1,), (1,)))),
    ("addmm", lambda x: ops.addmm(x[:, :2], x, x.T, beta=0.5, alpha=2)),
    ("cdist", lambda x: ops.cdist(x, x * 2 + 1)),
    ("cosine_similarity", lambda x: ops.cosine_similarity(x, x * x + 1)),
    ("strided_slice", lambda x: ops.strided_slice(x, (0, 2), (2, 0), (1, -1))),
]


@pytest.mark.parametrize("name,fn", GRAD, ids=[g[0] for g in GRAD])
def test_gradient_matches_finite_differences(name, fn):
    x = np.array([[0.3, -1.2, 2.0], [1.1, 0.7, -0.4]])
    check_grad(fn, x, rtol=1e-4, atol=1e-6)


def test_bad_input_is_a_clear_error():
    x = Tensor(B)
    with pytest.raises(ValueError, match="flip: dims"):
        ops.flip(x, (0, 0))
    with pytest.raises(ValueError, match="rot90: dims"):
        ops.rot90(x, 1, (1, 1))
    with pytest.raises(ValueError, match="movedim"):
        ops.movedim(x, (0, 1), (2,))
    with pytest.raises(ValueError, match="hsplit"):
        ops.hsplit(x, 2)
    with pytest.raises(ValueError, match="dot: input and other must have rank >= 2"):
        ops.dot(Tensor(V), Tensor(V))
    with pytest.raises(ValueError, match="cross: dim 0 must have size 3"):
        ops.cross(Tensor(A), Tensor(A), 0)
    with pytest.raises(ValueError, match="repeat_interleave: repeats"):
        ops.repeat_interleave(Tensor(A), [1, 2], 1)
    with pytest.raises(ValueError, match="t: input must be at most 2-D"):
        ops.t(x)
    with pytest.raises(ValueError, match="slice: begin"):
        ops.slice(Tensor(A), (0, 2), (1, 2))
