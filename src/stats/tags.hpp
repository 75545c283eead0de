#pragma once
// EXTRA_TAGS as gostats applies them: only to the stats of the ratelimit* scopes, as ".__key=value" suffixes
// of the statsd name (keys sorted; '.', ':' and '|' in values become '_'; an empty key or value is left out).
// DogStatsD sends the same pairs as real tags.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::stats {

using tag_list = std::vector<std::pair<std::string, std::string>>;

// Whether EXTRA_TAGS apply to this stat (upstream tags the "ratelimit" and "ratelimit_server" scopes only).
bool takes_extra_tags(std::string_view name);

// gostats' ReplaceChars: '.', ':' and '|' would split the name or break the line format.
std::string sanitize_tag_value(std::string_view value);

// A stat's own tags are written into its registered name the way gostats serializes them
// ("ratelimit.memcache.multiget.__code=success"): the name without them, and the tags.
std::pair<std::string, tag_list> split_own_tags(std::string_view name);

// The statsd name: the stat's own tags and, when takes_extra_tags(name), the extra ones, all as ".__k=v" in
// key order (gostats sorts them together).
std::string statsd_tagged_name(std::string_view name, const tag_list& extra_tags);

}  // namespace sluice::stats
