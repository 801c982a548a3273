// thread_slice.h - asks Linux for a short scheduler slice on the threads that run kernels.
//
// Under the EEVDF scheduler (Linux 6.6 and later), a thread that wakes up preempts the running
// one only when its virtual deadline is earlier, and the deadline is its slice ahead. With the
// default slice (1.4 ms on a 2-core machine) an idle oneTBB worker that yielded its core to a
// busy process comes back too late to share the next kernel: beside two busy processes at
// nice 19 the seed network's forward ran at one thread's speed (410-460 us, quiet 224 us on 2
// threads). A 100 us slice (sched_setattr's sched_runtime for SCHED_OTHER threads, Linux 6.12
// and later, no privilege needed; nice and policy unchanged) brought it back to 223-243 us.
// The slice changes how finely the CPU is shared, never each thread's share (that is its nice).
#pragma once

#include <cstdint>

namespace kiln {

// Gives the calling thread the short slice once (later calls cost a thread-local read). Does
// nothing where the kernel refuses (older kernels, other systems) or the slice is set to 0.
void RequestShortSlice();

// The slice in microseconds that kiln asks for: KILN_THREAD_SLICE_US (0 turns it off), else 100.
int64_t ShortSliceMicros();

struct ThreadSliceStats {
  int64_t applied = 0;  // threads given the slice
  int64_t refused = 0;  // threads the kernel refused it (too old a kernel, not Linux)
};
ThreadSliceStats GetThreadSliceStats();

}  // namespace kiln
