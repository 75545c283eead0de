#pragma once
// Redis Cluster's key → hash slot mapping: CRC16 (XMODEM) of the key, or of its hash tag `{...}`, modulo
// 16384.

#include <cstdint>
#include <string_view>

namespace sluice::redis {

inline constexpr std::size_t cluster_slots = 16384;

std::uint16_t hash_slot(std::string_view key);

}  // namespace sluice::redis
