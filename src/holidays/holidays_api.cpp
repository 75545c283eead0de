#include "holidays/holidays_api.hpp"

#include <boost/beast/http/field.hpp>

#include "core/strings.hpp"
#include "holidays/envelope.hpp"
#include "net/http/query.hpp"

namespace sluice::holidays {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

namespace {

enum class format { json, xml, ics, unknown };

// The API's texts (reference holidays-api.md §4, the v2 server codes list).
constexpr std::string_view invalid_method = "Invalid method";
constexpr std::string_view key_required = "API key is required (?key=)";
constexpr std::string_view key_invalid = "Invalid API key";
constexpr std::string_view key_banned = "The provided API key has been banned";
constexpr std::string_view bad_callback =
    "Invalid callback: expected a JavaScript identifier or dotted path such as myResponse or app.onHolidays";

constexpr std::string_view json_type = "application/json; charset=utf-8";
constexpr std::string_view jsonp_type = "application/javascript; charset=utf-8";
constexpr std::string_view xml_type = "application/xml; charset=utf-8";
constexpr std::string_view ics_type = "text/calendar; charset=utf-8";
constexpr std::size_t max_callback_chars = 128;

format format_of(std::string_view path) {
  std::string_view rest = path.substr(method_path.size());
  if (rest == ".json") return format::json;
  if (rest == ".xml") return format::xml;
  if (rest == ".ics") return format::ics;
  return format::unknown;
}

bool identifier_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
}

bool identifier_part(char c) {
  return identifier_start(c) || (c >= '0' && c <= '9');
}

// One response: the envelope in the request's format (json for ics and unknown formats, which have none),
// wrapped as JSONP when a callback was given.
net::http::response envelope(const net::http::request& req, format f, const meta& m, std::string_view data,
                             const std::optional<std::string>& callback) {
  auto status = static_cast<bhttp::status>(m.status);
  if (f == format::xml) return net::http::make_response(req, status, xml_type, xml_document(m, data));
  if (!callback) return net::http::make_response(req, status, json_type, json_document(m, data));
  std::string body = json_document(m, data);
  body.insert(0, *callback + "(");
  body.push_back(')');
  auto res = net::http::make_response(req, status, jsonp_type, std::move(body));
  res.set("X-Content-Type-Options", "nosniff");
  return res;
}

}  // namespace

bool is_callback_name(std::string_view s) {
  if (s.empty() || s.size() > max_callback_chars) return false;
  bool at_start = true;
  for (char c : s) {
    if (c == '.' && !at_start) {
      at_start = true;
    } else if (at_start ? identifier_start(c) : identifier_part(c)) {
      at_start = false;
    } else {
      return false;
    }
  }
  return !at_start;
}

holidays_api::holidays_api(const holiday_list& list, const auth::api_key_store* keys, bool require_key,
                           const core::clock& clock)
    : list_(list), keys_(keys), require_key_(require_key), clock_(clock) {}

void holidays_api::add_routes(net::http::router& routes) const {
  auto handler = [this](const net::http::request& req) -> asio::awaitable<net::http::response> {
    co_return respond(req);
  };
  // The documented formats by exact path; any other suffix (a format the API does not have) by prefix.
  for (std::string_view suffix : {".json", ".xml", ".ics"})
    routes.add(core::cat(method_path, suffix), handler);
  routes.add_prefix(std::string(method_path), handler);
}

net::http::response holidays_api::respond(const net::http::request& req) const {
  std::string_view target = req.target();
  const format f = format_of(target.substr(0, target.find('?')));
  meta m;
  m.timestamp = clock_.now_seconds();
  auto error = [&](unsigned status, std::string_view message, const std::optional<std::string>& callback) {
    m.status = status;
    m.message = message;
    return envelope(req, f, m, f == format::xml ? xml_no_data : json_no_data, callback);
  };

  if (req.method() != bhttp::verb::get) {
    auto res =
        error(405, core::cat("Method ", std::string_view(req.method_string()), " is not allowed; use GET"),
              std::nullopt);
    res.set(bhttp::field::allow, "GET");
    return res;
  }

  auto key = net::http::query_param(target, "key");
  if (key && key->empty()) key.reset();
  auth::key_check check;
  if (key && keys_) check = keys_->lookup(*key);
  if (check.state == auth::key_state::valid) m.requests = requests_.add(check.id);
  if (check.state == auth::key_state::disabled) m.requests = requests_.get(check.id);

  std::optional<std::string> callback;
  if (f == format::json) callback = net::http::query_param(target, "callback");
  if (callback && !is_callback_name(*callback)) return error(400, bad_callback, std::nullopt);
  if (f == format::unknown) return error(501, invalid_method, std::nullopt);
  if (require_key_) {
    if (!key) return error(511, key_required, callback);
    if (check.state == auth::key_state::unknown) return error(401, key_invalid, callback);
    if (check.state == auth::key_state::disabled) return error(403, key_banned, callback);
  }

  const auto list = list_.current();
  switch (f) {
    case format::xml:
      return envelope(req, f, m, list->xml_data, std::nullopt);
    case format::ics:
      return net::http::make_response(req, bhttp::status::ok, ics_type, list->ics);
    default:
      return envelope(req, f, m, list->json_data, callback);
  }
}

}  // namespace sluice::holidays
