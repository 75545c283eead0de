#include "ratelimit/config/value_regex.hpp"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <vector>

#include "core/strings.hpp"

namespace sluice::ratelimit::config {

namespace {

RE2::Options options() {
  RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(64 << 20);  // a set of a thousand patterns fits; more memory is refused, not used
  return o;
}

}  // namespace

struct value_regex_set::impl {
  RE2::Set set{options(), RE2::ANCHOR_BOTH};
};

value_regex_set::value_regex_set(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
value_regex_set::~value_regex_set() = default;

std::string value_regex_set::check(const std::string& pattern) {
  if (pattern.size() > max_pattern_bytes)
    return core::cat("longer than ", max_pattern_bytes, " bytes (", pattern.size(), ")");
  RE2 re(pattern, options());
  if (!re.ok()) return re.error();
  return {};
}

std::shared_ptr<const value_regex_set> value_regex_set::build(std::span<const std::string> patterns,
                                                              std::string& error) {
  auto i = std::make_unique<impl>();
  for (const auto& p : patterns) {
    if (auto problem = check(p); !problem.empty()) {
      error = core::cat("value_regex '", p, "': ", problem);
      return nullptr;
    }
    std::string why;
    if (i->set.Add(p, &why) < 0) {
      error = core::cat("value_regex '", p, "': ", why);
      return nullptr;
    }
  }
  if (!i->set.Compile()) {
    error = core::cat("the ", patterns.size(),
                      " value_regex patterns of one level need more memory than RE2 allows");
    return nullptr;
  }
  return std::shared_ptr<const value_regex_set>(new value_regex_set(std::move(i)));
}

int value_regex_set::first_match(std::string_view value) const {
  thread_local std::vector<int> matched;  // no allocation per decision once it has grown
  matched.clear();
  if (!impl_->set.Match(value, &matched) || matched.empty()) return -1;
  return *std::min_element(matched.begin(), matched.end());
}

}  // namespace sluice::ratelimit::config
