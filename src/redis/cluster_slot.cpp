#include "redis/cluster_slot.hpp"

namespace sluice::redis {

namespace {

std::uint16_t crc16(std::string_view data) {
  std::uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc ^= static_cast<std::uint16_t>(byte << 8);
    for (int i = 0; i < 8; ++i) {
      crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
  }
  return crc;
}

}  // namespace

std::uint16_t hash_slot(std::string_view key) {
  // Only the part between the first '{' and the next '}' counts, when that part is not empty.
  if (auto open = key.find('{'); open != std::string_view::npos) {
    if (auto close = key.find('}', open + 1); close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<std::uint16_t>(crc16(key) % cluster_slots);
}

}  // namespace sluice::redis
