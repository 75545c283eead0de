#include "ratelimit/api/counters_query.hpp"

#include "core/strings.hpp"

namespace sluice::ratelimit::api {

namespace {

constexpr std::size_t max_entries = 64;

std::optional<std::string> decode(std::string_view raw) {
  bool malformed = false;
  std::string out = core::percent_decode(raw, &malformed);
  if (malformed) return std::nullopt;
  return out;
}

bool is_token_name(std::string_view name) {
  for (auto n : {"token", "access_token", "authorization", "bearer", "admin_token", "key", "api_key"})
    if (core::iequals(name, n)) return true;
  return false;
}

}  // namespace

std::variant<counters_query, std::string> parse_counters_query(std::string_view target) {
  const auto question = target.find('?');
  if (question == std::string_view::npos) return std::string("the query needs domain and descriptor");
  counters_query q;
  bool have_domain = false, have_descriptor = false;
  for (auto pair : core::split(target.substr(question + 1), '&')) {
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    const auto raw_name = pair.substr(0, eq);
    const auto raw_value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    const auto name = decode(raw_name);
    if (!name) return core::cat("a parameter's name has a malformed %-escape");
    if (is_token_name(*name))
      return core::cat("parameter '", *name,
                       "': a token is never accepted in the URL; send it as Authorization: Bearer <token>");
    if (*name == "domain") {
      if (have_domain) return std::string("domain is given twice");
      have_domain = true;
      auto v = decode(raw_value);
      if (!v) return std::string("domain has a malformed %-escape");
      if (v->empty()) return std::string("domain must not be empty");
      q.domain = std::move(*v);
    } else if (*name == "descriptor") {
      if (have_descriptor) return std::string("descriptor is given twice");
      have_descriptor = true;
      if (raw_value.empty()) return std::string("descriptor must not be empty: give it as k1=v1,k2=v2");
      const auto parts = core::split(raw_value, ',');
      if (parts.size() > max_entries) return core::cat("descriptor has more than ", max_entries, " entries");
      for (std::size_t i = 0; i < parts.size(); ++i) {
        const auto part = parts[i];
        const auto at = part.find('=');
        if (at == std::string_view::npos)
          return core::cat("descriptor entry ", i + 1, " '", part, "' has no '=': give it as key=value");
        auto key = decode(part.substr(0, at));
        auto value = decode(part.substr(at + 1));
        if (!key || !value) return core::cat("descriptor entry ", i + 1, " has a malformed %-escape");
        if (key->empty()) return core::cat("descriptor entry ", i + 1, " has an empty key");
        q.entries.emplace_back(std::move(*key), std::move(*value));
      }
    } else if (*name == "used") {
      if (q.used) return std::string("used is given twice");
      std::uint64_t n = 0;
      if (!core::parse_unsigned(raw_value, n))
        return core::cat("used must be a whole number of hits, 0 or more (got '", raw_value.substr(0, 40),
                         "')");
      q.used = n;
    } else {
      return core::cat("unknown parameter '", name->substr(0, 64),
                       "': the counters API takes domain, descriptor and (PUT) used");
    }
  }
  if (!have_domain) return std::string("the query needs domain (domain=D)");
  if (!have_descriptor) return std::string("the query needs descriptor (descriptor=k1=v1,k2=v2)");
  return q;
}

std::string descriptor_text(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out;
  for (const auto& [k, v] : entries) {
    if (!out.empty()) out += ',';
    out += k;
    out += '=';
    out += v;
  }
  return out;
}

}  // namespace sluice::ratelimit::api
