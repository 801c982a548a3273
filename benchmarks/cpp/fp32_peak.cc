// fp32_peak.cc - prints this machine's fp32 FMA peak in GFLOP/s on all OpenMP threads.
//
// The peak loop of gemm_libraries.cc alone, small enough for bench_ops.py to build and run on
// the fly, so matmul throughput is always reported against the peak of the machine it ran on.
// Build: g++ -O3 -march=native -fopenmp fp32_peak.cc -o fp32_peak
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>

int main() {
  const long iters = 200'000'000 / 16;
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {  // best of five: other work on the machine only slows it
    auto start = std::chrono::steady_clock::now();
    int threads = 1;
#pragma omp parallel
    {
#pragma omp single
      threads = omp_get_num_threads();
      // Twelve independent accumulators cover FMA latency on two pipes; distinct seeds keep the
      // compiler from merging the chains.
      __m512 acc[12];
      for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
      const __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
      for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) acc[j] = _mm512_fmadd_ps(acc[j], x, y);
      }
      __m512 sum = acc[0];
      for (int j = 1; j < 12; ++j) sum = _mm512_add_ps(sum, acc[j]);
      float sink[16];
      _mm512_storeu_ps(sink, sum);
      if (sink[0] == 42.f) std::printf("!");
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double gflops = 2.0 * 16 * 12 * iters * threads / seconds / 1e9;
    if (gflops > best) best = gflops;
  }
  std::printf("%.1f\n", best);
}
