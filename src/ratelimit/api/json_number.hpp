#pragma once
// Integers in JSON as Go's protojson reads them: a JSON number or a decimal string, "2.0" and "1e2" allowed,
// "1.5" refused. Used by the /json request reader for its uint32/uint64/enum fields.

#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice::ratelimit::api::detail {

// `text` must be exactly one JSON number (or a string's content). nullopt when it is not an integer in range.
std::optional<std::uint64_t> to_unsigned(std::string_view text, std::uint64_t max);
std::optional<std::int32_t> to_int32(std::string_view text);

}  // namespace sluice::ratelimit::api::detail
