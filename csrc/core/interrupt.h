// interrupt.h - lets the embedding (kiln's Python bindings) stop a long-running graph (Ctrl-C).
#pragma once

#include <functional>

namespace kiln {

// Called between graph nodes and loop iterations; throws to abandon the run. The engine has no
// signal handling of its own: Python owns SIGINT, so the bindings install a check that asks it.
using InterruptCheck = void (*)();

void SetInterruptCheck(InterruptCheck check);
// Runs the installed check, if any (a no-op outside Python, e.g. kiln-cli).
void CheckInterrupt();

// Runs `wait` (a wait for another thread, e.g. a dataset queue's feeder) with the host's
// interpreter lock released when the host installed a runner (bindings/module.cc): a graph runs
// holding Python's GIL, and the thread it waits for may be a Python thread needing it.
using BlockingRunner = void (*)(const std::function<void()>& wait);
void SetBlockingRunner(BlockingRunner runner);
void RunBlocking(const std::function<void()>& wait);

}  // namespace kiln
