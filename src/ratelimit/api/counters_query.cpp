#include "ratelimit/api/counters_query.hpp"

#include <algorithm>

#include "core/problem.hpp"
#include "core/strings.hpp"

namespace sluice::ratelimit::api {

namespace {

constexpr std::size_t max_entries = 64;

using entry_list = std::vector<std::pair<std::string, std::string>>;

std::optional<std::string> percent_decoded(std::string_view raw) {
  bool malformed = false;
  std::string out = core::percent_decode(raw, &malformed);
  if (malformed) return std::nullopt;
  return out;
}

// application/x-www-form-urlencoded, as Go's url.QueryUnescape: '+' is a space, "%2B" a plus sign.
std::optional<std::string> form_decoded(std::string_view raw) {
  std::string spaced(raw);
  std::replace(spaced.begin(), spaced.end(), '+', ' ');
  return percent_decoded(spaced);
}

// What an error message quotes of a client's text.
std::string_view shown(std::string_view text) {
  return text.substr(0, 64);
}

bool is_token_name(std::string_view name) {
  for (auto n : {"token", "access_token", "authorization", "bearer", "admin_token", "key", "api_key"})
    if (core::iequals(name, n)) return true;
  return false;
}

// `descriptor=`'s value into `out`. With a raw '=' it is the documented form
// (docs/guides/operate.md#counters-look-at-reset-set: split, then each part percent-decoded); without one, a
// client library escaped the whole value: decoded first, then read alike.
core::problem read_descriptor(std::string_view raw, entry_list& out) {
  if (raw.empty()) return std::string("descriptor must not be empty: give it as k1=v1,k2=v2");
  const bool escaped_whole = raw.find('=') == std::string_view::npos;
  std::string decoded;
  if (escaped_whole) {
    auto d = form_decoded(raw);
    if (!d) return std::string("descriptor has a malformed %-escape");
    decoded = std::move(*d);
  }
  const auto parts = core::split(escaped_whole ? std::string_view(decoded) : raw, ',');
  if (parts.size() > max_entries) return core::cat("descriptor has more than ", max_entries, " entries");
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto part = parts[i];
    const auto at = part.find('=');
    if (at == std::string_view::npos)
      return core::cat("descriptor entry ", i + 1, " '", shown(part),
                       "' has no '=': give it as key=value (a value holding ',' needs entry=key=value)");
    std::optional<std::string> key(part.substr(0, at)), value(part.substr(at + 1));
    if (!escaped_whole) {
      key = percent_decoded(*key);
      value = percent_decoded(*value);
      if (!key || !value) return core::cat("descriptor entry ", i + 1, " has a malformed %-escape");
    }
    if (key->empty()) return core::cat("descriptor entry ", i + 1, " has an empty key");
    out.emplace_back(std::move(*key), std::move(*value));
  }
  return std::nullopt;
}

// One `entry=` parameter (the `n`th) into `out`: decoded whole, then split at its first '='.
core::problem read_entry(std::string_view raw, std::size_t n, entry_list& out) {
  if (n > max_entries) return core::cat("more than ", max_entries, " entry parameters");
  auto text = form_decoded(raw);
  if (!text) return core::cat("entry ", n, " has a malformed %-escape");
  const auto at = text->find('=');
  if (at == std::string::npos)
    return core::cat("entry ", n, " '", shown(*text), "' has no '=': give it as entry=key=value");
  if (at == 0) return core::cat("entry ", n, " has an empty key");
  out.emplace_back(text->substr(0, at), text->substr(at + 1));
  return std::nullopt;
}

}  // namespace

std::variant<counters_query, std::string> parse_counters_query(std::string_view target) {
  const auto question = target.find('?');
  if (question == std::string_view::npos)
    return std::string("the query needs domain and descriptor (or entry)");
  counters_query q;
  bool have_domain = false, have_descriptor = false;
  std::size_t entry_params = 0;
  for (auto pair : core::split(target.substr(question + 1), '&')) {
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    const auto raw_name = pair.substr(0, eq);
    const auto raw_value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    const auto name = form_decoded(raw_name);
    if (!name) return core::cat("a parameter's name has a malformed %-escape");
    if (is_token_name(*name))
      return core::cat("parameter '", *name,
                       "': a token is never accepted in the URL; send it as Authorization: Bearer <token>");
    if (*name == "domain") {
      if (have_domain) return std::string("domain is given twice");
      have_domain = true;
      auto v = form_decoded(raw_value);
      if (!v) return std::string("domain has a malformed %-escape");
      if (v->empty()) return std::string("domain must not be empty");
      q.domain = std::move(*v);
    } else if (*name == "descriptor") {
      if (have_descriptor) return std::string("descriptor is given twice");
      have_descriptor = true;
      if (auto problem = read_descriptor(raw_value, q.entries)) return *problem;
    } else if (*name == "entry") {
      if (auto problem = read_entry(raw_value, ++entry_params, q.entries)) return *problem;
    } else if (*name == "used") {
      if (q.used) return std::string("used is given twice");
      std::uint64_t n = 0;
      if (!core::parse_unsigned(raw_value, n))
        return core::cat("used must be a whole number of hits, 0 or more (got '", shown(raw_value), "')");
      q.used = n;
    } else {
      return core::cat("unknown parameter '", shown(*name),
                       "': the counters API takes domain, descriptor or entry, and (PUT) used");
    }
  }
  if (have_descriptor && entry_params > 0)
    return std::string(
        "descriptor and entry cannot be combined: give the entries either as descriptor=k1=v1,k2=v2 or as "
        "entry=k=v, once per entry");
  if (!have_domain) return std::string("the query needs domain (domain=D)");
  if (!have_descriptor && entry_params == 0)
    return std::string("the query needs descriptor (descriptor=k1=v1,k2=v2, or entry=k=v once per entry)");
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
