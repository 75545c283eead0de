#include "ratelimit/backends/memory/snapshot_format.hpp"

#include <zlib.h>

#include <cstring>

#include "core/strings.hpp"

namespace sluice::ratelimit::backends::memory {

namespace {

constexpr std::string_view magic = "SLUICEMS";
constexpr std::size_t header_size = 8 + 4 + 8 + 8;
constexpr std::size_t count_at = 8 + 4 + 8;

template <typename T>
void put(std::string& out, T v) {
  auto u = static_cast<std::make_unsigned_t<T>>(v);
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

template <typename T>
T get(std::string_view bytes, std::size_t at) {
  std::make_unsigned_t<T> u = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    u |= static_cast<std::make_unsigned_t<T>>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return static_cast<T>(u);
}

std::uint32_t crc_of(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes lengths in uInt: feed large files in pieces.
  while (!bytes.empty()) {
    const std::size_t n = std::min<std::size_t>(bytes.size(), 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(n));
    bytes.remove_prefix(n);
  }
  return static_cast<std::uint32_t>(crc);
}

}  // namespace

snapshot_encoder::snapshot_encoder() {
  out_.append(magic);
  put<std::uint32_t>(out_, snapshot_version);
  put<std::int64_t>(out_, 0);   // written_at, set by finish()
  put<std::uint64_t>(out_, 0);  // count, set by finish()
}

bool snapshot_encoder::add(std::string_view key, std::uint64_t value, std::int64_t expires_at) {
  if (key.size() > max_snapshot_key) return false;
  out_.push_back(0);
  put<std::uint32_t>(out_, static_cast<std::uint32_t>(key.size()));
  out_.append(key);
  put<std::uint64_t>(out_, value);
  put<std::int64_t>(out_, expires_at);
  ++count_;
  return true;
}

bool snapshot_encoder::add_leases(std::string_view key, const limiter::lease_slices& slices,
                                  std::int64_t expires_at) {
  if (key.size() > max_snapshot_key || slices.empty() || slices.size() > max_snapshot_slices) return false;
  out_.push_back(1);
  put<std::uint32_t>(out_, static_cast<std::uint32_t>(key.size()));
  out_.append(key);
  put<std::int64_t>(out_, expires_at);
  put<std::uint32_t>(out_, static_cast<std::uint32_t>(slices.size()));
  for (const auto& [slice, count] : slices) {
    put<std::int64_t>(out_, slice);
    put<std::uint64_t>(out_, count);
  }
  ++count_;
  return true;
}

bool snapshot_encoder::add_holders(std::string_view key, const limiter::lease_holders& holders,
                                   std::int64_t expires_at) {
  if (key.size() > max_snapshot_key || holders.empty() || holders.size() > max_snapshot_holders) return false;
  for (const auto& h : holders)
    if (h.holder.size() > max_snapshot_key) return false;
  out_.push_back(2);
  put<std::uint32_t>(out_, static_cast<std::uint32_t>(key.size()));
  out_.append(key);
  put<std::int64_t>(out_, expires_at);
  put<std::uint32_t>(out_, static_cast<std::uint32_t>(holders.size()));
  for (const auto& h : holders) {
    put<std::uint32_t>(out_, static_cast<std::uint32_t>(h.holder.size()));
    out_.append(h.holder);
    put<std::uint64_t>(out_, h.slots);
    put<std::int64_t>(out_, h.end_us);
  }
  ++count_;
  return true;
}

std::string snapshot_encoder::finish(std::int64_t written_at) {
  std::string head;
  put<std::int64_t>(head, written_at);
  put<std::uint64_t>(head, count_);
  out_.replace(12, head.size(), head);
  put<std::uint32_t>(out_, crc_of(out_));
  return std::move(out_);
}

core::problem read_snapshot(std::string_view bytes, const snapshot_visitor& visit,
                            const snapshot_lease_visitor& leases, const snapshot_holder_visitor& holders) {
  if (bytes.size() < magic.size() || bytes.substr(0, magic.size()) != magic)
    return std::string("not a Sluice memory snapshot");
  if (bytes.size() < header_size + 4) return core::cat("truncated (", bytes.size(), " bytes)");
  const auto version = get<std::uint32_t>(bytes, 8);
  if (version < oldest_snapshot_version || version > snapshot_version) {
    return core::cat("version ", version, " (this Sluice reads versions ", oldest_snapshot_version, " to ",
                     snapshot_version, ")");
  }
  const unsigned char last_kind = version == 1 ? 1 : 2;
  const std::string_view body = bytes.substr(0, bytes.size() - 4);
  if (crc_of(body) != get<std::uint32_t>(bytes, bytes.size() - 4))
    return std::string("checksum mismatch (truncated or corrupt)");
  const auto count = get<std::uint64_t>(bytes, count_at);
  // Every entry is checked before any is handed out.
  for (int pass = 0; pass < 2; ++pass) {
    std::size_t at = header_size;
    for (std::uint64_t i = 0; i < count; ++i) {
      const auto truncated = [&] { return core::cat("truncated at entry ", i, " of ", count); };
      if (body.size() - at < 5) return truncated();
      const auto kind = static_cast<unsigned char>(body[at]);
      if (kind > last_kind) return core::cat("entry ", i, " is of an unknown kind (", kind, ")");
      const auto length = get<std::uint32_t>(body, at + 1);
      if (length > max_snapshot_key) return core::cat("entry ", i, " has a key of ", length, " bytes");
      at += 5;
      if (body.size() - at < std::size_t{length} + (kind == 0 ? 16 : 12)) return truncated();
      const std::string_view key = body.substr(at, length);
      at += length;
      if (kind == 0) {
        if (pass == 1) visit(key, get<std::uint64_t>(body, at), get<std::int64_t>(body, at + 8));
        at += 16;
        continue;
      }
      const auto expires_at = get<std::int64_t>(body, at);
      const auto slices = get<std::uint32_t>(body, at + 8);
      at += 12;
      if (kind == 2) {
        const auto n = slices;
        if (n == 0 || n > max_snapshot_holders) return core::cat("entry ", i, " has ", n, " lease holders");
        limiter::lease_holders held;
        for (std::uint32_t k = 0; k < n; ++k) {
          if (body.size() - at < 4) return truncated();
          const auto size = get<std::uint32_t>(body, at);
          if (size > max_snapshot_key) return core::cat("entry ", i, " has a holder of ", size, " bytes");
          at += 4;
          if (body.size() - at < std::size_t{size} + 16) return truncated();
          if (pass == 1) {
            held.push_back({std::string(body.substr(at, size)), get<std::uint64_t>(body, at + size),
                            get<std::int64_t>(body, at + size + 8)});
          }
          at += std::size_t{size} + 16;
        }
        if (pass == 1 && holders) holders(key, held, expires_at);
        continue;
      }
      if (slices == 0 || slices > max_snapshot_slices)
        return core::cat("entry ", i, " has ", slices, " lease slices");
      if (body.size() - at < std::size_t{slices} * 16) return truncated();
      limiter::lease_slices held;
      for (std::uint32_t k = 0; k < slices; ++k, at += 16) {
        held.emplace_back(get<std::int64_t>(body, at), get<std::uint64_t>(body, at + 8));
        if (k > 0 && held[k].first <= held[k - 1].first)
          return core::cat("entry ", i, ": lease slices out of order");
      }
      if (pass == 1 && leases) leases(key, held, expires_at);
    }
    if (at != body.size()) return core::cat(body.size() - at, " bytes after the last of ", count, " entries");
  }
  return std::nullopt;
}

}  // namespace sluice::ratelimit::backends::memory
