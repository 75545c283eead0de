#include "auth/api_key_store.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <filesystem>
#include <memory>
#include <stdexcept>

#include "auth/api_key_file.hpp"
#include "core/log.hpp"
#include "core/read_file.hpp"
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
    : file_(std::move(file)), table_(std::make_shared<const table>()) {
  if (auto error = load(true)) throw std::runtime_error(*error);
}

api_key_store::~api_key_store() {
  stop();
}

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
  return {keys[found].enabled ? key_state::valid : key_state::disabled, keys[found].name};
}

std::optional<std::string> api_key_store::reload() {
  return load(false);
}

std::optional<std::string> api_key_store::load(bool initial) {
  std::lock_guard lock(reload_mutex_);
  std::string error;
  auto text = core::read_file(file_, error);
  if (!text) error = core::cat("cannot read the file: ", error);
  if (text && !initial && *text == loaded_text_)
    return std::nullopt;  // another file of the directory changed
  api_key_file parsed;
  if (text) {
    parsed = parse_api_key_file(*text);
    error = parsed.error;
  }
  if (!error.empty()) {
    error = core::cat(file_, ": ", error);
    if (!initial) core::log_error(error, " (keeping the ", size(), " API keys loaded before)");
    return error;
  }
  auto fresh = std::make_shared<table>();
  fresh->reserve(parsed.keys.size());
  std::size_t enabled = 0;
  for (auto& k : parsed.keys) {
    fresh->push_back({digest_of(k.key), std::move(k.name), k.enabled});
    enabled += k.enabled ? 1 : 0;
  }
  table_.store(std::move(fresh));
  loaded_text_ = std::move(*text);
  core::log_info(file_, ": loaded ", parsed.keys.size(), " API keys (", enabled, " enabled)");
  return std::nullopt;
}

void api_key_store::watch(boost::asio::any_io_executor ex, std::chrono::milliseconds debounce) {
  std::filesystem::path path = std::filesystem::absolute(file_);
  std::vector<core::file_watch::target> targets{{path.parent_path().string(), std::nullopt}};
  watch_ =
      std::make_unique<core::file_watch>(std::move(ex), std::move(targets), debounce, [this] { reload(); });
  watch_->start();
}

void api_key_store::stop() {
  if (watch_) watch_->stop();
}

}  // namespace sluice::auth
