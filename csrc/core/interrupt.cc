// interrupt.cc - the one installed interrupt check (see interrupt.h).
#include "core/interrupt.h"

#include <atomic>

namespace kiln {
namespace {
std::atomic<InterruptCheck> g_check{nullptr};
std::atomic<BlockingRunner> g_runner{nullptr};
}  // namespace

void SetBlockingRunner(BlockingRunner runner) { g_runner.store(runner, std::memory_order_release); }

void RunBlocking(const std::function<void()>& wait) {
  BlockingRunner runner = g_runner.load(std::memory_order_relaxed);
  if (runner != nullptr) {
    runner(wait);
  } else {
    wait();
  }
}

void SetInterruptCheck(InterruptCheck check) { g_check.store(check, std::memory_order_release); }

void CheckInterrupt() {
  InterruptCheck check = g_check.load(std::memory_order_relaxed);
  if (check != nullptr) check();
}

}  // namespace kiln
