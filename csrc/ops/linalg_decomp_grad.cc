// linalg_decomp_grad.cc - gradient rules of svd, qr and triangular_solve, built from registry ops.
//
// Where a decomposition is not differentiable the rules give what the formulas give rather than
// hide it: repeated (or, for u and v of a wide/tall matrix, zero) singular values divide by zero
// (inf/NaN), and a singular R in qr does the same. The extra columns of a full_matrices=True svd
// or of q in a complete qr of a tall matrix are an arbitrary orthonormal completion: their
// gradient is undefined, so svd uses only the first min(m, n) columns (as PyTorch does) and qr
// refuses a gradient through q there.
#include <algorithm>

#include "core/error.h"
#include "ops/linalg_decomp_internal.h"

namespace kiln::linalg_grad {
namespace {

Shape StaticShape(GradBuilder& g, GradVar v, const char* op) {
  Shape s = g.meta(v).shape;
  KILN_CHECK(IsStaticShape(s), Value, op, ": the gradient needs static shapes, got ", ShapeStr(s));
  return s;
}

GradVar MM(GradBuilder& g, GradVar a, GradVar b, bool ta = false, bool tb = false) {
  return g.Emit1(OpKind::MatMul, {a, b}, {ta, tb});
}

// The last two axes swapped.
GradVar T2(GradBuilder& g, GradVar v) {
  const int64_t r = static_cast<int64_t>(g.meta(v).shape.size());
  std::vector<int64_t> perm(r);
  for (int64_t i = 0; i < r; ++i) perm[i] = i;
  std::swap(perm[r - 1], perm[r - 2]);
  return g.Emit1(OpKind::Transpose, {v}, {perm});
}

// v[..., start:start+len] along axis `from_end` (-1: columns, -2: rows).
GradVar Narrow(GradBuilder& g, GradVar v, int from_end, int64_t start, int64_t len) {
  const Shape s = g.meta(v).shape;
  const size_t axis = s.size() + from_end;
  Shape begin(s.size(), 0), end = s, strides(s.size(), 1);
  begin[axis] = start;
  end[axis] = start + len;
  return g.Emit1(OpKind::StridedSlice, {v}, {begin, end, strides});
}

GradVar Unsqueeze(GradBuilder& g, GradVar v, int from_end) {
  const int64_t axis = static_cast<int64_t>(g.meta(v).shape.size()) + 1 + from_end;
  return g.Emit1(OpKind::ExpandDims, {v}, {axis});
}

// A k x k mask (dtype `dt`) of the entries (i, j) for which cmp(j, i) holds: Equal gives the
// identity, GreaterEqual the upper triangle, LessEqual the lower one, Greater/Less strictly.
GradVar Mask(GradBuilder& g, int64_t k, DType dt, OpKind cmp) {
  GradVar idx = g.Emit1(OpKind::Arange, {}, {int64_t{0}, k, int64_t{1}, DType::Int64});
  GradVar rows = g.Emit1(OpKind::Reshape, {idx}, {Shape{k, 1}});
  return CastTo(g, g.Emit1(cmp, {idx, rows}), dt);
}

GradVar AddOr(GradBuilder& g, GradVar acc, GradVar v) { return acc.defined() ? Add(g, acc, v) : v; }

// x R^{-T} for upper triangular R: (R^{-1} x^T)^T.
GradVar SolveRight(GradBuilder& g, GradVar x, GradVar r) {
  GradVar sol = g.Emit1(OpKind::TriangularSolve, {T2(g, x), r}, {true, false, false});
  return T2(g, sol);
}

// The QR gradient for m >= n (q: m x n, r: n x n), as in TensorFlow's QrGrad:
//   gA = q (dr + tril(skew(q^T dq) + skew(r dr^T)) r^{-T}) + (dq - q q^T dq) r^{-T}.
GradVar QrSquareOrDeep(GradBuilder& g, GradVar q, GradVar r, GradVar dq, GradVar dr, int64_t n,
                       DType dt) {
  GradVar qdq = MM(g, q, dq, true, false), rdr = MM(g, r, dr, false, true);
  GradVar skew = Add(g, Sub(g, qdq, T2(g, qdq)), Sub(g, rdr, T2(g, rdr)));
  GradVar tril = Mul(g, skew, Mask(g, n, dt, OpKind::LessEqual));
  GradVar ga = MM(g, q, Add(g, dr, SolveRight(g, tril, r)));
  return Add(g, ga, SolveRight(g, Sub(g, dq, MM(g, q, qdq)), r));
}

}  // namespace

// svd: input = U diag(S) V^T with k = min(m, n) columns in U and V. With E_ij = s_j^2 - s_i^2
// (1 on the diagonal) and skew(X) = X - X^T (PyTorch's svd_backward, real case):
//   gA = U [skew(U^T gU) / E diag(S) + diag(S) skew(V^T gV) / E + diag(gS)] V^T
//        + (I - U U^T) gU S^{-1} V^T        (m > k)
//        + U S^{-1} gV^T (I - V V^T)        (n > k)
std::vector<GradVar> SvdGrad(GradBuilder& g) {
  const bool hs = g.has_out_grad(0), hu = g.has_out_grad(1), hv = g.has_out_grad(2);
  if (!g.wants_input_grad(0) || !(hs || hu || hv)) return {GradVar{}};
  const Shape xs = StaticShape(g, g.input(0), "svd");
  const int64_t m = xs[xs.size() - 2], n = xs[xs.size() - 1], k = std::min(m, n);
  const DType dt = g.meta(g.input(0)).dtype;
  auto first_k = [&](GradVar v) { return g.meta(v).shape.back() > k ? Narrow(g, v, -1, 0, k) : v; };
  GradVar s = g.output(0), u = first_k(g.output(1)), v = first_k(g.output(2));
  GradVar s_row = Unsqueeze(g, s, -2), s_col = Unsqueeze(g, s, -1);
  GradVar gu = hu ? first_k(g.out_grad(1)) : GradVar{},
          gv = hv ? first_k(g.out_grad(2)) : GradVar{};
  GradVar inner;
  if (hu) {
    GradVar j = MM(g, u, gu, true, false);
    inner = Mul(g, Sub(g, j, T2(g, j)), s_row);
  }
  if (hv) {
    GradVar j = MM(g, v, gv, true, false);
    inner = AddOr(g, inner, Mul(g, s_col, Sub(g, j, T2(g, j))));
  }
  if (inner.defined()) {
    GradVar s2 = Mul(g, s, s);
    GradVar e = Sub(g, Unsqueeze(g, s2, -2), Unsqueeze(g, s2, -1));
    inner = Div(g, inner, Add(g, e, Mask(g, k, dt, OpKind::Equal)));
  }
  if (hs)
    inner = AddOr(g, inner, Mul(g, Mask(g, k, dt, OpKind::Equal), Unsqueeze(g, g.out_grad(0), -2)));
  GradVar ga;
  if (m > k && hu) {
    GradVar gus = Div(g, gu, s_row);
    ga = Add(g, MM(g, u, inner), Sub(g, gus, MM(g, u, MM(g, u, gus, true, false))));
    ga = MM(g, ga, v, false, true);
  } else if (n > k && hv) {
    GradVar gvs = Div(g, gv, s_row);
    ga = MM(g, inner, v, false, true);
    ga = Add(g, ga, Sub(g, T2(g, gvs), MM(g, MM(g, gvs, v, true, false), v, false, true)));
    ga = MM(g, u, ga);
  } else {
    ga = MM(g, MM(g, u, inner), v, false, true);
  }
  return {ToInput(g, ga, 0)};
}

// qr: for m < n, A = [X | Y] and R = [U | W] with X = Q U square: X's gradient is the square
// case's with dQ + Y dW^T, and Y's is Q dW.
std::vector<GradVar> QrGrad(GradBuilder& g) {
  const bool hq = g.has_out_grad(0), hr = g.has_out_grad(1);
  if (!g.wants_input_grad(0) || !(hq || hr)) return {GradVar{}};
  const Shape xs = StaticShape(g, g.input(0), "qr");
  const int64_t m = xs[xs.size() - 2], n = xs[xs.size() - 1];
  const DType dt = g.meta(g.input(0)).dtype;
  GradVar q = g.output(0), r = g.output(1), dq = g.out_grad(0), dr = g.out_grad(1);
  if (m > n && AttrBool(g.attrs(), 0)) {
    KILN_CHECK(!hq, Value, "qr: the gradient through Q of a complete QR of a ", m, " x ", n,
               " matrix is undefined (its last ", m - n,
               " columns are any orthonormal completion); use mode='reduced'");
    q = Narrow(g, q, -1, 0, n), dq = Narrow(g, dq, -1, 0, n);
    r = Narrow(g, r, -2, 0, n), dr = Narrow(g, dr, -2, 0, n);
  }
  if (m >= n) return {ToInput(g, QrSquareOrDeep(g, q, r, dq, dr, n, dt), 0)};
  GradVar y = Narrow(g, g.input(0), -1, m, n - m);
  GradVar dw = Narrow(g, dr, -1, m, n - m);
  GradVar dx = QrSquareOrDeep(g, q, Narrow(g, r, -1, 0, m), Add(g, dq, MM(g, y, dw, false, true)),
                              Narrow(g, dr, -1, 0, m), m, dt);
  GradVar ga = g.Emit1(OpKind::Concat, {dx, MM(g, q, dw)}, {static_cast<int64_t>(xs.size() - 1)});
  return {ToInput(g, ga, 0)};
}

// op(A) X = B: gB = op(A)^{-T} gX, g op(A) = -gB X^T, and A's gradient keeps only the triangle
// the solve reads (without the diagonal when it is taken as ones).
std::vector<GradVar> TriangularSolveGrad(GradBuilder& g) {
  const bool upper = AttrBool(g.attrs(), 0), trans = AttrBool(g.attrs(), 1),
             unit = AttrBool(g.attrs(), 2);
  GradVar gx = g.out_grad(0), a = g.input(1), x = g.output(0);
  GradVar gb = g.Emit1(OpKind::TriangularSolve, {gx, a}, {upper, !trans, unit});
  std::vector<GradVar> grads(2);
  if (g.wants_input_grad(0)) grads[0] = ToInput(g, gb, 0);
  if (g.wants_input_grad(1)) {
    const Shape as = StaticShape(g, a, "triangular_solve");
    GradVar ga = Neg(g, trans ? MM(g, x, gb, false, true) : MM(g, gb, x, false, true));
    const OpKind cmp = upper ? (unit ? OpKind::Greater : OpKind::GreaterEqual)
                             : (unit ? OpKind::Less : OpKind::LessEqual);
    grads[1] = ToInput(g, Mul(g, ga, Mask(g, as.back(), g.meta(a).dtype, cmp)), 1);
  }
  return grads;
}

}  // namespace kiln::linalg_grad
