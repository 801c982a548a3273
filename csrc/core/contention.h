// contention.h - notices when other processes take this process's cores, so that kernels stop
// splitting work across threads that would only wait for each other.
//
// The signal is the calling thread's own run-queue wait (Linux schedstat "run_delay"): the time
// it was ready to run but had no core. Beside as many busy processes as cores, a thread waits a
// quarter to a half of the time; quiet, or beside fewer busy processes than cores, it hardly
// waits at all. While it waits a lot, a parallel region mostly waits for a descheduled worker
// (measured: the seed training step 2.6x slower on 2 threads than on 1 beside 2 busy
// processes), so kernels run on the calling thread alone until the machine calms down.
#pragma once

#include <cstdint>

namespace kiln {

// True while the machine is oversubscribed, judged from the calling thread's recent run-queue
// waits. Costs a clock read; every 10 ms of a thread's use it also reads /proc (~2 us).
bool MachineContended();

// True while, besides being contended, the machine is crowded: other threads alone keep more
// threads runnable than there are cores (/proc/loadavg's running count, the same readings'
// moving average). There a compiled graph runs as a team (runtime/dataflow.h), which measured
// 2x faster beside three busy processes on 2 cores but slower beside one, where kiln's two
// threads mostly have cores and split each product between them instead.
bool MachineCrowded();

struct ContentionStats {
  int64_t checks = 0;            // run-queue readings taken
  int64_t contended_checks = 0;  // readings that left the average above the threshold
  double last_fraction = 0;      // the last reading: waiting time / wall time
  bool contended = false;        // the state now
  bool crowded = false;          // MachineCrowded's state now
  bool available = false;        // false where the kernel exposes no schedstat
};
ContentionStats GetContentionStats();

// The runnable threads other than the caller in the text of /proc/loadavg (the fourth field's
// "running" count, less one), or -1 when the text is not in that form. MachineCrowded reads it.
int OthersRunnableIn(const char* loadavg);

// Tests and experiments: 1 forces the contended and crowded state, 0 the quiet one, -1 (the
// default) measures.
void SetContentionOverride(int state);

}  // namespace kiln
