// derived_cache.cc - the per-storage slots behind DerivedLookup, under one process-wide lock.
#include "kernels/cpu/derived_cache.h"

#include <mutex>

namespace kiln::cpu {
namespace {

// A few values per storage: one weight may be read in more than one layout (batch 1 and batch
// 64 take different kernels); more than that replaces the oldest.
constexpr size_t kSlotsPerStorage = 4;

struct Slot {
  DerivedKey key;               // the caller's key, then the view's offset, shape and strides
  uint64_t version = 0;         // the storage's write version the value was made from
  std::shared_ptr<void> value;  // null: seen once at `version`, not made yet
};

struct Slots {
  std::vector<Slot> slots;
};

std::mutex g_mutex;
DerivedCacheStats g_stats;

DerivedKey FullKey(const Tensor& t, const DerivedKey& key) {
  DerivedKey full = key;
  full.push_back(t.offset());
  full.push_back(static_cast<int64_t>(t.dtype()));
  for (int64_t d : t.shape()) full.push_back(d);
  for (int64_t s : t.strides()) full.push_back(s);
  return full;
}

}  // namespace

std::shared_ptr<void> DerivedLookup(const Tensor& t, const DerivedKey& key,
                                    const std::function<std::shared_ptr<void>()>& make) {
  Storage& storage = *t.storage();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (storage.numpy_alias()) {
    g_stats.skips++;
    return nullptr;
  }
  if (!storage.derived()) storage.derived() = std::make_shared<Slots>();
  auto& slots = static_cast<Slots*>(storage.derived().get())->slots;
  const DerivedKey full = FullKey(t, key);
  const uint64_t version = storage.write_version();
  for (Slot& slot : slots) {
    if (slot.key != full) continue;
    if (slot.version == version && slot.value) {
      g_stats.hits++;
      return slot.value;
    }
    if (slot.version != version) {  // written since: forget the value, count this as a sighting
      slot.version = version;
      slot.value.reset();
      g_stats.skips++;
      return nullptr;
    }
    slot.value = make();  // the second request at one version
    g_stats.makes++;
    return slot.value;
  }
  if (slots.size() >= kSlotsPerStorage) slots.erase(slots.begin());
  slots.push_back(Slot{full, version, nullptr});
  g_stats.skips++;
  return nullptr;
}

DerivedCacheStats GetDerivedCacheStats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_stats;
}

}  // namespace kiln::cpu
