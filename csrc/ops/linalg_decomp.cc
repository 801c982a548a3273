// linalg_decomp.cc - matrix decompositions through LAPACK (svd: gesdd, qr: geqrf + orgqr, and
// geqrf/orgqr themselves) and the triangular solve the gradients need; float32 and float64,
// batched over the leading dims.
//
// kiln's matrices are row-major and LAPACK's column-major: a row-major m x n matrix is LAPACK's
// n x m matrix A^T, so each kernel either factors A^T (svd: A^T = V S U^T) or transposes a copy.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/copy.h"
#include "ops/grad.h"
#include "ops/linalg_decomp_internal.h"
#include "ops/registry.h"

extern "C" {  // LAPACK (Fortran: every argument by address, string lengths trailing)
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s,
             float* u, const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork,
             int* iwork, int* info, size_t jobz_len);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
             int* iwork, int* info, size_t jobz_len);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work,
             const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau,
             float* work, const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
}

namespace kiln {
namespace {

template <typename T>
struct Lapack;
template <>
struct Lapack<float> {
  static constexpr auto gesdd = sgesdd_;
  static constexpr auto geqrf = sgeqrf_;
  static constexpr auto orgqr = sorgqr_;
};
template <>
struct Lapack<double> {
  static constexpr auto gesdd = dgesdd_;
  static constexpr auto geqrf = dgeqrf_;
  static constexpr auto orgqr = dorgqr_;
};

// LAPACK takes int sizes; kiln's are int64.
int LapackInt(int64_t v, const char* op) {
  KILN_CHECK(v <= INT32_MAX, Value, op, ": matrix dimension ", v, " is too large for LAPACK");
  return static_cast<int>(v);
}

// Input checks shared by the decompositions: a float32/float64 tensor of rank >= 2.
void RequireMatrices(const TensorMeta& x, const char* op, const char* name) {
  KILN_CHECK(x.dtype == DType::Float32 || x.dtype == DType::Float64, Type, op, ": the dtype of '",
             name, "' must be float32 or float64, got ", DTypeName(x.dtype),
             " (complex dtypes are not in kiln)");
  KILN_CHECK(x.shape.size() >= 2, Value, op, ": '", name,
             "' must have rank >= 2 (..., m, n), got shape ", ShapeStr(x.shape));
}

bool AllFinite(const double* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}
bool AllFinite(const float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

// Runs fn(b) for each matrix b of a batch on the pool; a LAPACK failure in any is reported after
// all have run (an exception must not leave a pool worker).
template <typename Fn>
void ForEachMatrix(int64_t batch, const char* op, Fn fn) {
  std::vector<int> info(batch, 0);
  ParallelFor(batch, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) info[b] = fn(b);
  });
  for (int64_t b = 0; b < batch; ++b)
    KILN_CHECK(info[b] == 0, Runtime, op, ": LAPACK failed on matrix ", b, " of the batch (info ",
               info[b], ", the iteration did not converge)");
}

int64_t BatchOf(const Shape& shape) {
  int64_t n = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i) n *= shape[i];
  return n;
}

// ---- svd(input; full_matrices) -> (s, u, v) with input = u diag(s) v^T, s descending.
std::vector<TensorMeta> InferSvd(const OpDef& def, const std::vector<TensorMeta>& in,
                                 const Attrs& attrs) {
  RequireMatrices(in[0], def.name, "input");
  const Shape& x = in[0].shape;
  const size_t r = x.size();
  const int64_t m = x[r - 2], n = x[r - 1];
  const int64_t k = m < 0 || n < 0 ? -1 : std::min(m, n);
  const bool full = AttrBool(attrs, 0);
  Shape batch(x.begin(), x.end() - 2), s = batch, u = batch, v = batch;
  s.push_back(k);
  u.insert(u.end(), {m, full ? m : k});
  v.insert(v.end(), {n, full ? n : k});
  return {TensorMeta{in[0].dtype, s}, TensorMeta{in[0].dtype, u}, TensorMeta{in[0].dtype, v}};
}

template <typename T>
int SvdOne(const T* a, int64_t m, int64_t n, bool full, T* s, T* u, T* v) {
  const int64_t k = std::min(m, n), uc = full ? m : k, vc = full ? n : k;
  if (k == 0 || !AllFinite(a, m * n)) {  // nothing to factor, or LAPACK would not converge
    const T fill = k == 0 ? T(0) : std::nan("");
    std::fill(s, s + k, fill);
    for (int64_t i = 0; i < m * uc; ++i) u[i] = k == 0 ? T(i / uc == i % uc) : fill;
    for (int64_t i = 0; i < n * vc; ++i) v[i] = k == 0 ? T(i / vc == i % vc) : fill;
    return 0;
  }
  // LAPACK factors the column-major n x m matrix A^T = V S U^T: its VT (uc x m, leading
  // dimension uc) is our row-major U as it stands, and its U (n x vc) is our V transposed.
  const char jobz = full ? 'A' : 'S';
  const int lm = LapackInt(n, "svd"), ln = LapackInt(m, "svd"), ldvt = static_cast<int>(uc);
  std::vector<T> at(a, a + m * n), lu(n * vc);
  std::vector<int> iwork(8 * k);
  int lwork = -1, info = 0;
  T query;
  Lapack<T>::gesdd(&jobz, &lm, &ln, at.data(), &lm, s, lu.data(), &lm, u, &ldvt, &query, &lwork,
                   iwork.data(), &info, 1);
  lwork = static_cast<int>(query);
  std::vector<T> work(std::max(lwork, 1));
  Lapack<T>::gesdd(&jobz, &lm, &ln, at.data(), &lm, s, lu.data(), &lm, u, &ldvt, work.data(),
                   &lwork, iwork.data(), &info, 1);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < vc; ++j) v[i * vc + j] = lu[i + j * n];
  return info;
}

void SvdKernel(KernelContext& ctx) {
  const Tensor x = ctx.inputs[0].Contiguous();
  const int64_t r = x.ndim(), m = x.dim(r - 2), n = x.dim(r - 1), k = std::min(m, n);
  const bool full = AttrBool(ctx.attrs, 0);
  const int64_t uc = full ? m : k, vc = full ? n : k;
  const Tensor &s = ctx.outputs[0], &u = ctx.outputs[1], &v = ctx.outputs[2];
  auto run = [&](auto tag) {
    using T = decltype(tag);
    ForEachMatrix(BatchOf(x.shape()), ctx.def.name, [&](int64_t b) {
      return SvdOne<T>(x.data<T>() + b * m * n, m, n, full, s.data<T>() + b * k,
                       u.data<T>() + b * m * uc, v.data<T>() + b * n * vc);
    });
  };
  if (x.dtype() == DType::Float32)
    run(float{});
  else
    run(double{});
}

// ---- qr(input; complete) -> (q, r): q (..., m, m or k) orthonormal columns, r upper triangular.
std::vector<TensorMeta> InferQr(const OpDef& def, const std::vector<TensorMeta>& in,
                                const Attrs& attrs) {
  RequireMatrices(in[0], def.name, "input");
  const Shape& x = in[0].shape;
  const size_t r = x.size();
  const int64_t m = x[r - 2], n = x[r - 1];
  const int64_t k = m < 0 || n < 0 ? -1 : std::min(m, n);
  const bool complete = AttrBool(attrs, 0);
  Shape q(x.begin(), x.end() - 2), rr = q;
  q.insert(q.end(), {m, complete ? m : k});
  rr.insert(rr.end(), {complete ? m : k, n});
  return {TensorMeta{in[0].dtype, q}, TensorMeta{in[0].dtype, rr}};
}

template <typename T>
int QrOne(const T* a, int64_t m, int64_t n, bool complete, T* q, T* r) {
  const int64_t k = std::min(m, n), qc = complete ? m : k;
  // A column-major copy of a with room for Q's qc columns: orgqr builds Q over it in place.
  std::vector<T> w(m * std::max(n, qc), T(0)), tau(std::max<int64_t>(k, 1));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) w[i + j * m] = a[i * n + j];
  int info = 0;
  if (k > 0) {
    const int lm = LapackInt(m, "qr"), ln = LapackInt(n, "qr"), lk = static_cast<int>(k),
              lq = static_cast<int>(qc);
    int lwork = -1;
    T query;
    Lapack<T>::geqrf(&lm, &ln, w.data(), &lm, tau.data(), &query, &lwork, &info);
    lwork = std::max(static_cast<int>(query), 1);
    std::vector<T> work(lwork);
    Lapack<T>::geqrf(&lm, &ln, w.data(), &lm, tau.data(), work.data(), &lwork, &info);
    for (int64_t i = 0; i < qc; ++i)  // R: the upper triangle geqrf left in w
      for (int64_t j = 0; j < n; ++j) r[i * n + j] = j >= i ? w[i + j * m] : T(0);
    lwork = -1;
    Lapack<T>::orgqr(&lm, &lq, &lk, w.data(), &lm, tau.data(), &query, &lwork, &info);
    lwork = std::max(static_cast<int>(query), 1);
    work.assign(lwork, T(0));
    Lapack<T>::orgqr(&lm, &lq, &lk, w.data(), &lm, tau.data(), work.data(), &lwork, &info);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < qc; ++j) q[i * qc + j] = w[i + j * m];
    return info;
  }
  std::fill(r, r + qc * n, T(0));  // an empty matrix: Q is the identity's first qc columns
  for (int64_t i = 0; i < m * qc; ++i) q[i] = T(i / qc == i % qc);
  return info;
}

void QrKernel(KernelContext& ctx) {
  const Tensor x = ctx.inputs[0].Contiguous();
  const int64_t rank = x.ndim(), m = x.dim(rank - 2), n = x.dim(rank - 1);
  const bool complete = AttrBool(ctx.attrs, 0);
  const int64_t qc = complete ? m : std::min(m, n);
  const Tensor &q = ctx.outputs[0], &r = ctx.outputs[1];
  auto run = [&](auto tag) {
    using T = decltype(tag);
    ForEachMatrix(BatchOf(x.shape()), ctx.def.name, [&](int64_t b) {
      return QrOne<T>(x.data<T>() + b * m * n, m, n, complete, q.data<T>() + b * m * qc,
                      r.data<T>() + b * qc * n);
    });
  };
  if (x.dtype() == DType::Float32)
    run(float{});
  else
    run(double{});
}

// ---- geqrf(input) -> (y, tau): LAPACK's Householder form of QR (R on and above y's diagonal,
// the reflectors below it), and orgqr(y, tau) -> Q (m x n) from the first k reflectors.
std::vector<TensorMeta> InferGeqrf(const OpDef& def, const std::vector<TensorMeta>& in,
                                   const Attrs&) {
  RequireMatrices(in[0], def.name, "input");
  const Shape& x = in[0].shape;
  const int64_t m = x[x.size() - 2], n = x[x.size() - 1];
  Shape tau(x.begin(), x.end() - 2);
  tau.push_back(m < 0 || n < 0 ? -1 : std::min(m, n));
  return {TensorMeta{in[0].dtype, x}, TensorMeta{in[0].dtype, tau}};
}

std::vector<TensorMeta> InferOrgqr(const OpDef& def, const std::vector<TensorMeta>& in,
                                   const Attrs&) {
  RequireMatrices(in[0], def.name, "input");
  const Shape &x = in[0].shape, &tau = in[1].shape;
  KILN_CHECK(in[1].dtype == in[0].dtype, Type, def.name, ": tau must have input's dtype ",
             DTypeName(in[0].dtype), ", got ", DTypeName(in[1].dtype));
  const int64_t m = x[x.size() - 2], n = x[x.size() - 1];
  KILN_CHECK(tau.size() + 1 == x.size() &&
                 Shape(tau.begin(), tau.end() - 1) == Shape(x.begin(), x.end() - 2),
             Value, def.name, ": tau of shape ", ShapeStr(tau), " must have input ", ShapeStr(x),
             "'s batch dims and one more");
  KILN_CHECK(m >= n && n >= tau.back(), Value, def.name, ": needs m >= n >= k for input (..., m, ",
             "n) = ", ShapeStr(x), " and tau (..., k) = ", ShapeStr(tau));
  return {TensorMeta{in[0].dtype, x}};
}

// a (row-major m x n) into column-major w (m x n).
template <typename T>
void ToColumnMajor(const T* a, int64_t m, int64_t n, T* w) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) w[i + j * m] = a[i * n + j];
}
template <typename T>
void FromColumnMajor(const T* w, int64_t m, int64_t n, T* a) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) a[i * n + j] = w[i + j * m];
}

// The LAPACK call `fn(lwork, work)` after its workspace query.
template <typename T, typename Fn>
int WithWorkspace(Fn fn) {
  int lwork = -1;
  T query;
  int info = fn(lwork, &query);
  if (info != 0) return info;
  lwork = std::max(static_cast<int>(query), 1);
  std::vector<T> work(lwork);
  return fn(lwork, work.data());
}

void GeqrfKernel(KernelContext& ctx) {
  const Tensor x = ctx.inputs[0].Contiguous();
  const int64_t r = x.ndim(), m = x.dim(r - 2), n = x.dim(r - 1), k = std::min(m, n);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    ForEachMatrix(BatchOf(x.shape()), ctx.def.name, [&](int64_t b) {
      if (k == 0) return 0;
      std::vector<T> w(m * n);
      ToColumnMajor(x.data<T>() + b * m * n, m, n, w.data());
      const int lm = LapackInt(m, "geqrf"), ln = LapackInt(n, "geqrf");
      T* tau = ctx.outputs[1].data<T>() + b * k;
      const int info = WithWorkspace<T>([&](int lwork, T* work) {
        int i = 0;
        Lapack<T>::geqrf(&lm, &ln, w.data(), &lm, tau, work, &lwork, &i);
        return i;
      });
      FromColumnMajor(w.data(), m, n, ctx.outputs[0].data<T>() + b * m * n);
      return info;
    });
  };
  if (x.dtype() == DType::Float32)
    run(float{});
  else
    run(double{});
}

void OrgqrKernel(KernelContext& ctx) {
  const Tensor x = ctx.inputs[0].Contiguous(), tau = ctx.inputs[1].Contiguous();
  const int64_t r = x.ndim(), m = x.dim(r - 2), n = x.dim(r - 1), k = tau.dim(tau.ndim() - 1);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    ForEachMatrix(BatchOf(x.shape()), ctx.def.name, [&](int64_t b) {
      T* q = ctx.outputs[0].data<T>() + b * m * n;
      if (n == 0) return 0;
      std::vector<T> w(m * n);
      ToColumnMajor(x.data<T>() + b * m * n, m, n, w.data());
      const int lm = LapackInt(m, "orgqr"), ln = LapackInt(n, "orgqr"), lk = static_cast<int>(k);
      const int info = WithWorkspace<T>([&](int lwork, T* work) {
        int i = 0;
        Lapack<T>::orgqr(&lm, &ln, &lk, w.data(), &lm, tau.data<T>() + b * k, work, &lwork, &i);
        return i;
      });
      FromColumnMajor(w.data(), m, n, q);
      return info;
    });
  };
  if (x.dtype() == DType::Float32)
    run(float{});
  else
    run(double{});
}

// ---- triangular_solve(b, a; upper, transpose, unitriangular) -> x with op(a) x = b.
std::vector<TensorMeta> InferTriangularSolve(const OpDef& def, const std::vector<TensorMeta>& in,
                                             const Attrs&) {
  RequireMatrices(in[0], def.name, "b");
  RequireMatrices(in[1], def.name, "A");
  const Shape &b = in[0].shape, &a = in[1].shape;
  KILN_CHECK(in[0].dtype == in[1].dtype, Type, def.name, ": b and A must have one dtype, got ",
             DTypeName(in[0].dtype), " and ", DTypeName(in[1].dtype));
  const size_t rb = b.size(), ra = a.size();
  KILN_CHECK(a[ra - 1] == a[ra - 2], Value, def.name, ": A must be square (..., n, n), got shape ",
             ShapeStr(a));
  KILN_CHECK(b[rb - 2] == a[ra - 1] || b[rb - 2] == -1 || a[ra - 1] == -1, Value, def.name,
             ": b of shape ", ShapeStr(b), " has ", b[rb - 2], " rows, A of shape ", ShapeStr(a),
             " is ", a[ra - 1], " x ", a[ra - 1]);
  KILN_CHECK(Shape(b.begin(), b.end() - 2) == Shape(a.begin(), a.end() - 2), Value, def.name,
             ": batch dimensions of b ", ShapeStr(b), " and A ", ShapeStr(a),
             " differ (broadcast them first)");
  return {TensorMeta{in[0].dtype, b}};
}

template <typename T>
void TriSolveOne(const T* a, T* x, int64_t n, int64_t cols, bool upper, bool trans, bool unit) {
  auto at = [&](int64_t i, int64_t j) { return trans ? a[j * n + i] : a[i * n + j]; };
  const bool back = upper != trans;  // op(a) is upper triangular: solve from the last row up
  for (int64_t step = 0; step < n; ++step) {
    const int64_t i = back ? n - 1 - step : step;
    for (int64_t c = 0; c < cols; ++c) {
      double acc = x[i * cols + c];
      const int64_t lo = back ? i + 1 : 0, hi = back ? n : i;
      for (int64_t j = lo; j < hi; ++j) acc -= double(at(i, j)) * double(x[j * cols + c]);
      x[i * cols + c] = static_cast<T>(unit ? acc : acc / double(at(i, i)));
    }
  }
}

void TriangularSolveKernel(KernelContext& ctx) {
  const Tensor a = ctx.inputs[1].Contiguous();
  const Tensor& out = ctx.outputs[0];
  cpu::CopyInto(ctx.inputs[0], out);
  const int64_t r = out.ndim(), n = out.dim(r - 2), cols = out.dim(r - 1);
  const bool upper = AttrBool(ctx.attrs, 0), trans = AttrBool(ctx.attrs, 1),
             unit = AttrBool(ctx.attrs, 2);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    ParallelFor(BatchOf(out.shape()), 1, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b)
        TriSolveOne<T>(a.data<T>() + b * n * n, out.data<T>() + b * n * cols, n, cols, upper, trans,
                       unit);
    });
  };
  if (out.dtype() == DType::Float32)
    run(float{});
  else
    run(double{});
}

}  // namespace

void RegisterLinalgDecompOps(OpRegistry& r) {
  r.Add(MakeOpDef(OpKind::Svd, {"input"}, {{"full_matrices", false}}, InferSvd, SvdKernel,
                  linalg_grad::SvdGrad));
  r.Add(MakeOpDef(OpKind::Qr, {"input"}, {{"complete", false}}, InferQr, QrKernel,
                  linalg_grad::QrGrad));
  // MindSpore 2.10 defines no gradient for Geqrf or Orgqr; the Householder form is an
  // intermediate (qr is the differentiable path).
  r.Add(MakeOpDef(OpKind::Geqrf, {"input"}, {}, InferGeqrf, GeqrfKernel, NotDifferentiable));
  r.Add(MakeOpDef(OpKind::Orgqr, {"input", "tau"}, {}, InferOrgqr, OrgqrKernel, NotDifferentiable));
  r.Add(MakeOpDef(OpKind::TriangularSolve, {"b", "A"},
                  {{"upper", true}, {"transpose", false}, {"unitriangular", false}},
                  InferTriangularSolve, TriangularSolveKernel, linalg_grad::TriangularSolveGrad));
}

}  // namespace kiln
