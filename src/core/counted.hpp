#pragma once
// Counts in messages, singular for one.

#include <concepts>
#include <string>
#include <string_view>

#include "core/strings.hpp"

namespace sluice::core {

// counted(1, "row", "rows") == "1 row", counted(2, "row", "rows") == "2 rows".
template <std::integral T>
std::string counted(T n, std::string_view singular, std::string_view plural) {
  return cat(n, " ", n == 1 ? singular : plural);
}

}  // namespace sluice::core
