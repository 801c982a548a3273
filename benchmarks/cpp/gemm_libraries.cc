// gemm_libraries.cc - measures fp32 peak and matmul throughput of oneDNN and OpenBLAS.
//
// Decides which library backs kiln's matmul: run it, compare GFLOP/s with the measured peak.
// Build: g++ -O3 -march=native -fopenmp gemm_libraries.cc -ldnnl -lopenblas -o gemm_libraries
#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <dnnl.hpp>
#include <vector>

namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Peak: independent FMA chains on 512-bit registers, on every OpenMP thread.
double MeasurePeakGflops() {
  const long iters = 200'000'000 / 16;
  double start = Seconds();
  int threads = 1;
#pragma omp parallel
  {
#pragma omp single
    threads = omp_get_num_threads();
    // Twelve named accumulators: enough independent chains to cover FMA latency on two pipes.
    // Distinct starting values, so the compiler cannot merge the chains into one.
    __m512 a0 = _mm512_set1_ps(0.f), a1 = _mm512_set1_ps(1.f), a2 = _mm512_set1_ps(2.f);
    __m512 a3 = _mm512_set1_ps(3.f), a4 = _mm512_set1_ps(4.f), a5 = _mm512_set1_ps(5.f);
    __m512 a6 = _mm512_set1_ps(6.f), a7 = _mm512_set1_ps(7.f), a8 = _mm512_set1_ps(8.f);
    __m512 a9 = _mm512_set1_ps(9.f), a10 = _mm512_set1_ps(10.f), a11 = _mm512_set1_ps(11.f);
    const __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
    for (long i = 0; i < iters; ++i) {
      a0 = _mm512_fmadd_ps(a0, x, y);
      a1 = _mm512_fmadd_ps(a1, x, y);
      a2 = _mm512_fmadd_ps(a2, x, y);
      a3 = _mm512_fmadd_ps(a3, x, y);
      a4 = _mm512_fmadd_ps(a4, x, y);
      a5 = _mm512_fmadd_ps(a5, x, y);
      a6 = _mm512_fmadd_ps(a6, x, y);
      a7 = _mm512_fmadd_ps(a7, x, y);
      a8 = _mm512_fmadd_ps(a8, x, y);
      a9 = _mm512_fmadd_ps(a9, x, y);
      a10 = _mm512_fmadd_ps(a10, x, y);
      a11 = _mm512_fmadd_ps(a11, x, y);
    }
    __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                               _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    sum = _mm512_add_ps(sum, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    float sink[16];
    _mm512_storeu_ps(sink, sum);
    if (sink[0] == 42.f) std::printf("!");
  }
  double elapsed = Seconds() - start;
  return 2.0 * 16 * 12 * iters * threads / elapsed / 1e9;
}

double OnednnGflops(int m, int k, int n, int reps) {
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  memory::desc a_md({m, k}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc b_any({k, n}, memory::data_type::f32, memory::format_tag::any);
  memory::desc c_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
  matmul::primitive_desc pd(matmul::desc(a_md, b_any, c_md), eng);
  std::vector<float> a(m * k, 1.f), b(k * n, 0.5f), c(m * n);
  memory a_mem(a_md, eng, a.data()), c_mem(c_md, eng, c.data());
  memory b_plain({{k, n}, memory::data_type::f32, memory::format_tag::ab}, eng, b.data());
  memory b_packed(pd.weights_desc(), eng);
  reorder(b_plain, b_packed).execute(strm, b_plain, b_packed);
  matmul prim(pd);
  auto run = [&] {
    prim.execute(strm,
                 {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_packed}, {DNNL_ARG_DST, c_mem}});
  };
  for (int i = 0; i < 10; ++i) run();
  double start = Seconds();
  for (int i = 0; i < reps; ++i) run();
  strm.wait();
  return 2.0 * m * k * n * reps / (Seconds() - start) / 1e9;
}

double OpenblasGflops(int m, int k, int n, int reps) {
  std::vector<float> a(m * k, 1.f), b(k * n, 0.5f), c(m * n);
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.f, a.data(), k, b.data(), n,
                0.f, c.data(), n);
  };
  for (int i = 0; i < 10; ++i) run();
  double start = Seconds();
  for (int i = 0; i < reps; ++i) run();
  return 2.0 * m * k * n * reps / (Seconds() - start) / 1e9;
}

}  // namespace

int main() {
  double peak = MeasurePeakGflops();
  std::printf("measured fp32 peak: %.1f GFLOP/s (%d threads)\n", peak, omp_get_max_threads());
  struct Shape {
    int m, k, n;
  } shapes[] = {{64, 784, 512}, {64, 512, 512}, {64, 512, 10}, {1, 784, 512}, {1024, 256, 256}};
  std::printf("%-16s %12s %12s %10s %10s\n", "m x k x n", "oneDNN", "OpenBLAS", "dnnl%pk",
              "blas%pk");
  for (auto s : shapes) {
    int reps = s.m == 1 ? 20000 : 2000;
    double d = OnednnGflops(s.m, s.k, s.n, reps), o = OpenblasGflops(s.m, s.k, s.n, reps);
    std::printf("%4dx%4dx%4d   %12.1f %12.1f %9.0f%% %9.0f%%\n", s.m, s.k, s.n, d, o,
                100 * d / peak, 100 * o / peak);
  }
}
