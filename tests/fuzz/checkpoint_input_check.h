// checkpoint_input_check.h - what the .ckpt fuzzer checks on one input; shared with the ctest
// that replays every input it ever failed on (tests/fuzz/regressions_ckpt).
//
// Any input may be rejected, but only with a kiln::Error. Entries that parse must be what they
// claim (the bytes their shape and type need) and serialize, in slices of any size, to bytes
// that parse back to the same entries. A finding escapes as an exception that is not a
// kiln::Error (or as a crash or sanitizer report).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/checkpoint_file.h"

namespace kiln::fuzz {

inline void CheckCheckpointInput(const std::string& bytes) {
  std::vector<engine::CheckpointEntry> entries;
  try {
    entries = engine::ParseCheckpoint(bytes);
  } catch (const Error&) {
    return;  // rejected with a clear error: fine
  }
  std::string again;
  for (const auto& e : entries) {
    if (e.type != "str") {
      size_t count = engine::CheckpointItemSize(e.type);
      for (int64_t d : e.dims) count *= static_cast<size_t>(d);
      if (count != e.data.size()) throw std::logic_error("an entry's bytes do not fit its shape");
    }
    // Small slices: the multi-slice path runs on every input, not only on 512 MiB tensors.
    again += engine::SerializeCheckpointEntry(e.name, e.type, e.dims, e.data, 7);
  }
  if (entries.empty()) return;
  const auto back = engine::ParseCheckpoint(again);
  if (back.size() != entries.size()) throw std::logic_error("a re-saved checkpoint lost entries");
  for (size_t i = 0; i < back.size(); ++i) {
    if (back[i].name != entries[i].name || back[i].type != entries[i].type ||
        back[i].dims != entries[i].dims || back[i].data != entries[i].data)
      throw std::logic_error("a re-saved checkpoint differs: entry '" + entries[i].name + "'");
  }
}

}  // namespace kiln::fuzz
