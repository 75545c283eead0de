#pragma once
// Text helpers shared by the line-based sinks (statsd, DogStatsD, stdout).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::stats {

// Go's strconv.AppendFloat(v, 'f', decimals) and fmt's "%f" (decimals = 6).
void append_fixed(std::string& out, double v, int decimals);

// Go's strconv.FormatFloat(v, 'f', -1): the shortest text that reads back as v, never in exponent form.
void append_shortest(std::string& out, double v);

// Cuts '\n'-terminated lines into chunks of at most `max_bytes` at line boundaries (UDP datagrams, atomic
// pipe writes); a line longer than that is a chunk of its own.
std::vector<std::string_view> split_lines(std::string_view lines, std::size_t max_bytes);

}  // namespace sluice::stats
