#include "core/strings.hpp"

namespace sluice::core::detail {

void append(std::string& out, double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(end - buf));
}

}  // namespace sluice::core::detail
