#pragma once
// An environment setting, declared once by the module that reads it (in its settings.cpp): its name, what it
// takes, its default as a user writes it, and what it does in a line. env_reader reads through these
// declarations (the default comes from here); `sluice settings` and docs/reference/settings.md print them;
// the start-up check warns of a variable one or two edits away from a declared name.

#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::core {

struct setting {
  std::string_view name;
  std::string_view kind;  // what it takes: bool, duration, whole number, number, text, path, list, map, a|b|c
  // As written in the environment; empty: unset. A default computed at start-up is in parentheses (the code
  // passes it to env_reader).
  std::string_view default_value;
  std::string_view meaning;

  bool computed_default() const { return default_value.starts_with('('); }
};

// Settings read under several prefixes: REDIS_URL and REDIS_PERSECOND_URL. Declared once with the first
// prefix; the others are made from it, their meanings led by `note` ("Per-second store: ").
class setting_family {
 public:
  struct variant {
    std::string_view prefix;
    std::string_view note;
    std::vector<std::pair<std::string_view, std::string_view>> defaults = {};  // (suffix, default) of its own
    std::string_view every_default = {};  // when set, every member's default (then these)
  };
  setting_family(std::span<const setting> first, std::string_view first_prefix, std::vector<variant> others);
  setting_family(const setting_family&) = delete;
  setting_family& operator=(const setting_family&) = delete;

  // The declaration of `<prefix><suffix>`; throws std::logic_error when there is none (a bug, not a user's).
  const setting& at(std::string_view prefix, std::string_view suffix) const;
  // Every member under every prefix, the first prefix's first.
  std::span<const setting> all() const { return all_; }

 private:
  std::deque<std::string> text_;  // the made members' names and meanings (stable addresses)
  std::vector<setting> all_;
};

// How far apart two names are: insertions, deletions, substitutions and swaps of neighbours (at most `most`
// + 1 is returned when farther).
std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t most);

}  // namespace sluice::core
