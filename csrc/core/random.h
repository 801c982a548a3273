// random.h - the global random generator behind dropout, random ops and initializers.
//
// Each random kernel takes one 64-bit seed from the global generator (or uses the op's own seed
// attribute) and draws from a local engine, so results depend only on set_seed and call order.
#pragma once

#include <cstdint>

namespace kiln {

void SetGlobalSeed(uint64_t seed);
// The next seed for a random kernel; advances the global generator. Thread-safe.
uint64_t NextKernelSeed();

}  // namespace kiln
