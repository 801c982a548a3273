// random.cc - a mutex-guarded 64-bit Mersenne Twister handing out per-kernel seeds.
#include "core/random.h"

#include <mutex>
#include <random>

namespace kiln {
namespace {

struct GlobalGenerator {
  std::mutex mutex;
  std::mt19937_64 engine{std::random_device{}()};
};

GlobalGenerator& Global() {
  static GlobalGenerator* generator = new GlobalGenerator();
  return *generator;
}

}  // namespace

void SetGlobalSeed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(Global().mutex);
  Global().engine.seed(seed);
}

uint64_t NextKernelSeed() {
  std::lock_guard<std::mutex> lock(Global().mutex);
  return Global().engine();
}

}  // namespace kiln
