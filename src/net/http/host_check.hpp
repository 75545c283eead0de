#pragma once
// The debug listener's defence against DNS rebinding: a page a browser loaded from an attacker's name that
// now resolves to 127.0.0.1 sends that name in `Host`. Accepted: no Host at all (not a browser), IP
// literals (v4, bracketed v6), `localhost`, and the names of DEBUG_ALLOWED_HOSTS (case-insensitive; "*"
// accepts every name). The port, if any, is ignored.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/problem.hpp"

namespace sluice::net::http {

class host_check {
 public:
  explicit host_check(std::vector<std::string> allowed = {});
  // Why `host` (a Host header's value) is refused, or nothing when it is accepted.
  core::problem refuse(std::string_view host) const;

 private:
  std::vector<std::string> allowed_;  // lower case
  bool any_ = false;
};

}  // namespace sluice::net::http
