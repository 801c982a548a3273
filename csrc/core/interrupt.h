// interrupt.h - lets the embedding (kiln's Python bindings) stop a long-running graph (Ctrl-C).
#pragma once

namespace kiln {

// Called between graph nodes and loop iterations; throws to abandon the run. The engine has no
// signal handling of its own: Python owns SIGINT, so the bindings install a check that asks it.
using InterruptCheck = void (*)();

void SetInterruptCheck(InterruptCheck check);
// Runs the installed check, if any (a no-op outside Python, e.g. kiln-cli).
void CheckInterrupt();

}  // namespace kiln
