#include "auth/jwt_verifier.hpp"

#include <algorithm>
#include <limits>

#include "auth/jwks_cache.hpp"
#include "auth/jwks_fetcher.hpp"
#include "auth/jwt_signature.hpp"
#include "auth/jwt_token.hpp"
#include "auth/verified_cache.hpp"

namespace sluice::auth {

namespace asio = boost::asio;

namespace {

constexpr std::chrono::seconds fetch_timeout{5};
constexpr std::string_view fetch_failed = "Jwks remote fetch is failed";
constexpr std::string_view no_matching_key = "Jwks doesn't have key to match kid or alg from Jwt";
constexpr std::string_view bad_signature = "Jwt verification fails";

// ESP compares issuers and audiences without scheme and trailing slash: "https://svc/" == "svc".
std::string_view normalize(std::string_view s) {
  if (s.starts_with("https://"))
    s.remove_prefix(8);
  else if (s.starts_with("http://"))
    s.remove_prefix(7);
  if (s.ends_with('/')) s.remove_suffix(1);
  return s;
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
}

// Cache key: the token plus everything about the providers that can change the verdict.
std::string cache_key(std::string_view token, std::span<const jwt_provider> providers) {
  std::string key(token);
  for (const auto& p : providers) {
    key.append("\n").append(p.issuer).append("\x1f").append(p.jwks_uri);
    for (const auto& a : p.audiences) key.append("\x1f").append(a);
  }
  return key;
}

enum class key_check { ok, no_key, bad_signature };

key_check check_keys(const jwk_set& keys, const parsed_jwt& jwt) {
  bool found = false;
  for (const auto& key : keys.keys) {
    if (!key_fits(key, jwt.alg) || (!jwt.kid.empty() && key.kid != jwt.kid)) continue;
    found = true;
    if (verify_signature(key, jwt.alg, jwt.signing_input, jwt.signature)) return key_check::ok;
  }
  return found ? key_check::bad_signature : key_check::no_key;
}

}  // namespace

struct jwt_verifier::impl {
  jwt_options options;
  jwks_cache keys;
  verified_cache verified;

  impl(asio::any_io_executor ex, jwt_options opts, std::shared_ptr<asio::ssl::context> tls)
      : options(std::move(opts)),
        keys(
            std::move(ex), [tls](std::string uri) { return fetch_jwks(std::move(uri), tls, fetch_timeout); },
            jwks_timing{.ttl = options.jwks_cache}),
        verified(options.verified_cache_entries) {}

  bool audience_allowed(const parsed_jwt& jwt, const jwt_provider& provider) const {
    return std::any_of(jwt.audiences.begin(), jwt.audiences.end(), [&](const std::string& aud) {
      auto a = normalize(aud);
      if (!options.service_name.empty() && a == normalize(options.service_name)) return true;
      return std::any_of(provider.audiences.begin(), provider.audiences.end(),
                         [&](const std::string& allowed) { return a == normalize(allowed); });
    });
  }

  // One provider's keys; on an unknown kid, one (rate-limited) refetch in case the keys were rotated.
  asio::awaitable<std::string_view> check_signature(const parsed_jwt& jwt, const std::string& jwks_uri) {
    auto set = co_await keys.get(jwks_uri, false);
    if (!set) co_return fetch_failed;
    auto result = check_keys(*set, jwt);
    if (result == key_check::no_key && !jwt.kid.empty()) {
      auto refreshed = co_await keys.get(jwks_uri, true);
      if (refreshed && refreshed != set) result = check_keys(*refreshed, jwt);
    }
    if (result == key_check::ok) co_return std::string_view{};
    co_return result == key_check::no_key ? no_matching_key : bad_signature;
  }
};

jwt_verifier::jwt_verifier(asio::any_io_executor ex, jwt_options options)
    : impl_(std::make_shared<impl>(ex, options, make_jwks_tls_context(options.extra_ca_file))) {}

jwt_verifier::~jwt_verifier() = default;

asio::awaitable<std::variant<jwt_claims, jwt_failure>> jwt_verifier::verify(
    std::string_view token, std::span<const jwt_provider> providers) {
  auto self = impl_;
  if (token.empty()) co_return jwt_failure{401, "Jwt is missing", false};
  auto fail = [](unsigned status, std::string_view message) {
    return jwt_failure{status, std::string(message), true};
  };
  const auto now = unix_now();
  std::string key = cache_key(token, providers);
  if (auto hit = self->verified.find(key, now)) co_return std::move(*hit);

  // Parse the copy inside `key`: it outlives the suspensions below, whatever the caller does with `token`.
  auto parsed = parse_jwt(std::string_view(key).substr(0, token.size()));
  if (auto* message = std::get_if<std::string_view>(&parsed)) co_return fail(401, *message);
  const auto& jwt = std::get<parsed_jwt>(parsed);

  std::vector<const jwt_provider*> issuer_matches;
  if (!jwt.issuer.empty())
    for (const auto& p : providers)
      if (normalize(p.issuer) == normalize(jwt.issuer)) issuer_matches.push_back(&p);
  if (issuer_matches.empty()) co_return fail(401, "Jwt issuer is not configured");

  const std::int64_t skew = self->options.skew.count();
  // exp and nbf are the token's: any int64, so the sums saturate instead of overflowing.
  const std::int64_t expires = saturating_add(jwt.exp, skew);
  if (jwt.exp != 0 && now > expires) co_return fail(401, "Jwt is expired");
  if (jwt.nbf != 0 && saturating_add(now, skew) < jwt.nbf) co_return fail(401, "Jwt not yet valid");

  std::vector<const jwt_provider*> candidates;
  for (const auto* p : issuer_matches)
    if (self->audience_allowed(jwt, *p)) candidates.push_back(p);
  if (candidates.empty()) co_return fail(403, "Audiences in Jwt are not allowed");

  std::string_view failure;
  std::vector<std::string_view> tried;
  for (const auto* p : candidates) {
    if (std::find(tried.begin(), tried.end(), p->jwks_uri) != tried.end()) continue;
    tried.push_back(p->jwks_uri);
    failure = co_await self->check_signature(jwt, p->jwks_uri);
    if (!failure.empty()) continue;
    jwt_claims claims{jwt.issuer, jwt.subject, jwt.email, jwt.audiences, jwt.payload_json};
    auto max_age = now + self->options.jwks_cache.count();
    self->verified.insert(std::move(key), claims, jwt.exp != 0 ? std::min(expires, max_age) : max_age, now);
    co_return claims;
  }
  co_return fail(401, failure);
}

}  // namespace sluice::auth
