#include "stats/statsd_format.hpp"

#include <algorithm>
#include <cmath>

#include "core/strings.hpp"
#include "stats/line_text.hpp"

namespace sluice::stats {

namespace {

// A stat name built from request values could hold a line break, which would inject a line of its own.
void break_no_lines(std::string& name) {
  std::ranges::replace_if(
      name, [](char c) { return c == '\n' || c == '\r'; }, '_');
}

}  // namespace

statsd_format::statsd_format(bool dogstatsd, tag_list extra_tags,
                             const std::vector<mogrifier_settings>& mogrifiers)
    : dogstatsd_(dogstatsd), extra_tags_(std::move(extra_tags)), mogrifiers_(mogrifiers) {}

const statsd_format::head& statsd_format::render(const std::string& name) {
  auto it = heads_.find(name);
  if (it != heads_.end()) return it->second;
  head h;
  if (!dogstatsd_) {
    h.name = statsd_tagged_name(name, extra_tags_);
  } else {
    auto [base, own] = split_own_tags(name);
    std::vector<std::string> tags;
    for (const auto& [key, value] : own) tags.push_back(core::cat(key, ":", value));
    if (takes_extra_tags(name)) {
      for (const auto& [key, value] : extra_tags_) {
        if (!key.empty() && !value.empty()) tags.push_back(core::cat(key, ":", sanitize_tag_value(value)));
      }
    }
    if (auto m = mogrifiers_.apply(base)) {
      h.name = std::move(m->name);
      tags.insert(tags.end(), m->tags.begin(), m->tags.end());
    } else {
      h.name = std::move(base);
    }
    for (const auto& t : tags) h.tags += core::cat(h.tags.empty() ? "|#" : ",", t);
    break_no_lines(h.tags);
  }
  break_no_lines(h.name);
  return heads_.emplace(name, std::move(h)).first->second;
}

void statsd_format::line(std::string& out, const head& h, std::string_view type, double sample_rate) {
  out += '|';
  out += type;
  if (sample_rate < 1.0) {
    out += "|@";
    append_shortest(out, sample_rate);
  }
  out += h.tags;
  out += '\n';
}

void statsd_format::counter(std::string& out, const std::string& name, std::uint64_t delta) {
  const auto& h = render(name);
  out += core::cat(h.name, ":", delta);
  line(out, h, "c", 1.0);
}

void statsd_format::gauge(std::string& out, const std::string& name, std::int64_t value) {
  const auto& h = render(name);
  out += core::cat(h.name, ":", value);
  line(out, h, "g", 1.0);
}

void statsd_format::timer(std::string& out, const std::string& name, double milliseconds,
                          double sample_rate) {
  const auto& h = render(name);
  out += h.name;
  out += ':';
  if (dogstatsd_) {
    out += core::cat(std::isfinite(milliseconds) ? static_cast<std::int64_t>(std::trunc(milliseconds)) : 0);
  } else if (milliseconds >= 0 && milliseconds < 1.8e19 && std::trunc(milliseconds) == milliseconds) {
    out += core::cat(static_cast<std::uint64_t>(milliseconds));
  } else {
    append_fixed(out, milliseconds, 6);
  }
  line(out, h, "ms", sample_rate);
}

}  // namespace sluice::stats
