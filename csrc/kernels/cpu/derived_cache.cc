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

std::mutex g_mutex;
DerivedCacheStats g_stats;

struct Slots : DerivedValues {
  std::vector<Slot> slots;

  void DropStale(uint64_t version) override {
    std::vector<std::shared_ptr<void>> stale;  // freed after the lock is released
    std::lock_guard<std::mutex> lock(g_mutex);
    for (Slot& slot : slots)  // an update kernel may have stored the new bytes' value already
      if (slot.version != version && slot.value) stale.push_back(std::move(slot.value));
  }
};

// The slots of `storage`, made on first use; under g_mutex.
std::vector<Slot>& SlotsOf(Storage& storage) {
  if (!storage.derived()) storage.SetDerived(std::make_unique<Slots>());
  return static_cast<Slots*>(storage.derived())->slots;
}

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
  std::vector<Slot>& slots = SlotsOf(storage);
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

std::vector<DerivedKey> DerivedKeysFor(const Tensor& t, int64_t tag) {
  Storage& storage = *t.storage();
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<DerivedKey> keys;
  if (!storage.derived()) return keys;
  const size_t view_part = FullKey(t, {}).size();
  for (const Slot& slot : static_cast<Slots*>(storage.derived())->slots) {
    if (slot.key.size() <= view_part || slot.key[0] != tag) continue;
    DerivedKey key(slot.key.begin(), slot.key.end() - static_cast<std::ptrdiff_t>(view_part));
    if (FullKey(t, key) == slot.key) keys.push_back(std::move(key));
  }
  return keys;
}

void DerivedStore(const Tensor& t, const DerivedKey& key, uint64_t version,
                  std::shared_ptr<void> value) {
  Storage& storage = *t.storage();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (storage.numpy_alias()) return;
  std::vector<Slot>& slots = SlotsOf(storage);
  const DerivedKey full = FullKey(t, key);
  for (Slot& slot : slots) {
    if (slot.key != full) continue;
    slot.version = version;
    slot.value = std::move(value);
    g_stats.makes++;
    return;
  }
  if (slots.size() >= kSlotsPerStorage) slots.erase(slots.begin());
  slots.push_back(Slot{full, version, std::move(value)});
  g_stats.makes++;
}

void ForgetPackedCopies(const Tensor& t) {
  Storage& storage = *t.storage();
  if (!storage.derived()) return;  // nothing was ever derived from these bytes
  std::vector<Slot> forgotten;     // freed after the lock is released
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<Slot>& slots = SlotsOf(storage);
  for (auto it = slots.begin(); it != slots.end();) {
    const int64_t tag = it->key.empty() ? 0 : it->key[0];
    if (tag < kPackRowMajorTag || tag > kConvWeightsTag) {
      ++it;
      continue;
    }
    if (it->value) g_stats.forgotten++;
    forgotten.push_back(std::move(*it));
    it = slots.erase(it);
  }
}

DerivedCacheStats GetDerivedCacheStats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_stats;
}

}  // namespace kiln::cpu
