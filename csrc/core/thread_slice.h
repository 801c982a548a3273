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
//
// A crowded machine (more busy threads than cores besides kiln's) wants the opposite: there a
// kiln thread that has a core should keep it until its node is done, because a node's thread
// taken off its core holds up the graph for a busy process's whole turn (4-8 ms), whatever the
// other kiln thread does. While a team runs (contended_pool.h), its threads ask for a 3 ms slice
// instead: beside three busy processes the seed training step's worst 1 s median over 5 s went
// from 2967-7364 us to 2332-4128 us (8 alternating runs each; docs/benchmarks_log.md).
#pragma once

#include <cstdint>

namespace kiln {

// Gives the calling thread the short slice once (later calls cost a thread-local read). Does
// nothing where the kernel refuses (older kernels, other systems) or the slice is set to 0.
void RequestShortSlice();

// The slice in microseconds that kiln asks for: KILN_THREAD_SLICE_US (0 turns it off), else 100.
int64_t ShortSliceMicros();

// The slice of a team's threads on a crowded machine: KILN_CROWDED_SLICE_US (0: keep the short
// slice), else 3000.
int64_t CrowdedSliceMicros();

// Gives the calling thread the crowded slice (crowded) or the short one back; a system call only
// when that changes the thread's slice, and nothing on a thread that never asked for the short
// slice or where the kernel refused it.
void UseCrowdedSlice(bool crowded);

struct ThreadSliceStats {
  int64_t applied = 0;  // threads given the slice
  int64_t refused = 0;  // threads the kernel refused it (too old a kernel, not Linux)
};
ThreadSliceStats GetThreadSliceStats();

}  // namespace kiln
