// convert.h - value conversion between any two element types, through float for 16-bit floats.
#pragma once

#include <type_traits>

#include "core/dtype.h"

namespace kiln::cpu {

template <typename To, typename From>
inline To Convert(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<compute_t<From>>(value) != compute_t<From>(0);
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(static_cast<compute_t<From>>(value)));
  } else {
    return static_cast<To>(static_cast<compute_t<From>>(value));
  }
}

}  // namespace kiln::cpu
