#pragma once
// Typed reads of environment variables, with upstream's (Go envconfig) formats. Every bad value throws a
// settings_error whose message names the variable and what it accepts. Used only at start-up, from main.

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/setting.hpp"

namespace sluice::core {

class settings_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class env_reader {
 public:
  using lookup_fn = std::function<std::optional<std::string>(const std::string&)>;

  // Reads the process environment.
  env_reader();
  // Reads a fixed map (tests).
  explicit env_reader(std::map<std::string, std::string> values);

  // An unset or empty variable yields the default.
  std::string get_string(const std::string& name, std::string_view def) const;
  // Go strconv.ParseBool: 1 t T TRUE true True 0 f F FALSE false False.
  bool get_bool(const std::string& name, bool def) const;
  std::uint64_t get_uint(const std::string& name, std::uint64_t def, std::uint64_t min,
                         std::uint64_t max) const;
  double get_double(const std::string& name, double def, double min, double max) const;
  // Go time.ParseDuration: "300ms", "1.5h", "2h45m"; a bare "0" is allowed.
  std::chrono::nanoseconds get_duration(const std::string& name, std::chrono::nanoseconds def) const;
  // envconfig's map: "k1:v1,k2:v2", exactly one ':' per item; a repeated key keeps its last value. Sorted by
  // key; unset or blank: empty.
  std::vector<std::pair<std::string, std::string>> get_map(const std::string& name) const;
  // One of a fixed set of words; case-insensitive when asked.
  std::string get_choice(const std::string& name, std::string_view def,
                         std::initializer_list<std::string_view> allowed, bool case_insensitive) const;

  // The same through a declaration (core/setting.hpp): its name, and its default (parsed from the
  // declaration, unless computed at start-up: then given here).
  std::string get_string(const setting& s) const;
  bool get_bool(const setting& s) const;
  bool get_bool(const setting& s, bool computed) const;
  std::uint64_t get_uint(const setting& s, std::uint64_t min, std::uint64_t max) const;
  std::uint64_t get_uint(const setting& s, std::uint64_t computed, std::uint64_t min,
                         std::uint64_t max) const;
  double get_double(const setting& s, double min, double max) const;
  std::chrono::nanoseconds get_duration(const setting& s) const;
  std::vector<std::pair<std::string, std::string>> get_map(const setting& s) const;
  // One of the words of its kind ("a|b|c").
  std::string get_choice(const setting& s, bool case_insensitive) const;
  // Whether the variable is set (to anything, even empty).
  bool is_set(const setting& s) const { return lookup_(std::string(s.name)).has_value(); }
  // Every variable of the environment, by name (the start-up check of unknown names).
  std::vector<std::string> names() const;

 private:
  std::optional<std::string> raw(const std::string& name) const;
  std::string choose(const std::string& name, std::string_view def, std::span<const std::string_view> allowed,
                     bool case_insensitive) const;
  lookup_fn lookup_;
  std::function<std::vector<std::string>()> names_;
};

// A comma-separated setting's parts, in order, empty ones dropped.
std::vector<std::string> split_list(const std::string& list);
// A duration setting in whole milliseconds.
inline std::chrono::milliseconds to_ms(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

// Exposed for tests and for other parsers of the same formats.
std::optional<bool> parse_go_bool(std::string_view s);
// A whole string as a finite number (strtod's forms).
std::optional<double> parse_number(std::string_view s);
std::optional<std::chrono::nanoseconds> parse_go_duration(std::string_view s);
// As Go's time.Duration.String(): "5s", "1m30s", "1h0m0s", "1.5ms", "0s".
std::string format_go_duration(std::chrono::nanoseconds d);

}  // namespace sluice::core
