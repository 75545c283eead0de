#include "auth/api_key_store.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstring>
#include <memory>
#include <stdexcept>

#include "auth/api_key_file.hpp"
#include "core/env.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace sluice::auth {

namespace {

// OpenSSL 3's one-shot SHA256() looks the algorithm up on every call (a sixth of an echo request's
// instructions); the algorithm is fetched once and each thread reuses one digest context.
std::array<unsigned char, 32> digest_of(std::string_view key) {
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  thread_local std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                           &EVP_MD_CTX_free);
  std::array<unsigned char, 32> out{};
  if (sha256 == nullptr || !ctx || EVP_DigestInit_ex2(ctx.get(), sha256, nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), key.data(), key.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), out.data(), nullptr) != 1) {
    throw std::runtime_error("SHA-256 is not available from OpenSSL");
  }
  return out;
}

}  // namespace

api_key_store::api_key_store(std::string file)
    : table_(std::make_shared<const table>()),
      file_(std::move(file), [this](const std::string& text) { return apply(text); }) {}

key_check api_key_store::lookup(std::string_view key) const {
  const auto digest = digest_of(key);
  const auto snapshot = table_.load();
  // Every entry is compared, and the match is picked without a branch on the comparison, so the time taken
  // depends only on the number of keys.
  const table& keys = *snapshot;
  std::size_t found = keys.size();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    std::size_t equal = CRYPTO_memcmp(digest.data(), keys[i].digest.data(), digest.size()) == 0;
    std::size_t mask = ~(equal - 1);  // all ones when equal
    found = (i & mask) | (found & ~mask);
  }
  if (found == keys.size()) return {};
  std::uint64_t id = 0;
  std::memcpy(&id, digest.data(), sizeof id);
  return {keys[found].enabled ? key_state::valid : key_state::disabled, keys[found].name, id};
}

core::problem api_key_store::apply(const std::string& text) {
  auto parsed = parse_api_key_file(text);
  if (!parsed.error.empty()) return parsed.error;
  auto fresh = std::make_shared<table>();
  fresh->reserve(parsed.keys.size());
  std::size_t enabled = 0;
  for (auto& k : parsed.keys) {
    fresh->push_back({digest_of(k.key), std::move(k.name), k.enabled});
    enabled += k.enabled ? 1 : 0;
  }
  table_.store(std::move(fresh));
  core::log_info(file(), ": loaded ", parsed.keys.size(), " API keys (", enabled, " enabled)");
  return std::nullopt;
}

std::unique_ptr<api_key_store> open_api_keys(const std::string& file) {
  if (file.empty()) return nullptr;
  try {
    return std::make_unique<api_key_store>(file);
  } catch (const std::runtime_error& e) {
    throw core::settings_error(core::cat("API_KEYS_FILE: ", e.what()));
  }
}

}  // namespace sluice::auth
