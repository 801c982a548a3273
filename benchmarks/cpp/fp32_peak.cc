// fp32_peak.cc - prints this machine's fp32 FMA peak in GFLOP/s on all OpenMP threads.
//
// The peak loop of gemm_libraries.cc alone, small enough for bench_ops.py to build and run on
// the fly, so matmul throughput is always reported against the peak of the machine it ran on.
// Build: g++ -O3 -march=native -fopenmp fp32_peak.cc -o fp32_peak
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>

// The widest FMA vectors this machine has: AVX-512, else AVX2 (+FMA).
#if defined(__AVX512F__)
using Vec = __m512;
constexpr int kLanes = 16;
inline Vec Broadcast(float v) { return _mm512_set1_ps(v); }
inline Vec Fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec Add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline void Store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
#else
using Vec = __m256;
constexpr int kLanes = 8;
inline Vec Broadcast(float v) { return _mm256_set1_ps(v); }
inline Vec Fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec Add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline void Store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
#endif

int main() {
  const long iters = 200'000'000 / kLanes;
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
      Vec acc[12];
      for (int i = 0; i < 12; ++i) acc[i] = Broadcast(static_cast<float>(i));
      const Vec x = Broadcast(1.0000001f), y = Broadcast(0.9999999f);
      for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) acc[j] = Fma(acc[j], x, y);
      }
      Vec sum = acc[0];
      for (int j = 1; j < 12; ++j) sum = Add(sum, acc[j]);
      float sink[kLanes];
      Store(sink, sum);
      if (sink[0] == 42.f) std::printf("!");
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double gflops = 2.0 * kLanes * 12 * iters * threads / seconds / 1e9;
    if (gflops > best) best = gflops;
  }
  std::printf("%.1f\n", best);
}
