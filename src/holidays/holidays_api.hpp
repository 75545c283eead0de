#pragma once
// GET /events/holidays.{json,xml,ics} on the shared HTTP router, answering like the University of Waterloo
// Open Data API v2: the json/xml envelope (HTTP status = meta.status), JSONP with ?callback=, the calendar as
// text/calendar, and the API's error codes: 501 "Invalid method" for another format, and with keys required
// 511 / 401 / 403 for a missing, unknown or banned ?key=.

#include "auth/api_key_store.hpp"
#include "core/clock.hpp"
#include "holidays/holiday_list.hpp"
#include "holidays/request_counter.hpp"
#include "net/http/router.hpp"

namespace sluice::holidays {

inline constexpr std::string_view method_path = "/events/holidays";

class holidays_api {
 public:
  // `keys` may be null when `require_key` is false; with keys, meta.requests counts each valid key's
  // requests even when keys are not required. All must outlive the api.
  holidays_api(const holiday_list& list, const auth::api_key_store* keys, bool require_key,
               const core::clock& clock);
  holidays_api(const holidays_api&) = delete;
  holidays_api& operator=(const holidays_api&) = delete;

  // Registers /events/holidays and every path starting with it; the api must outlive the router.
  void add_routes(net::http::router& routes) const;

  net::http::response respond(const net::http::request& req) const;

 private:
  const holiday_list& list_;
  const auth::api_key_store* keys_;
  bool require_key_;
  const core::clock& clock_;
  mutable request_counter requests_;
};

// True for a JSONP callback that is a plain JavaScript identifier path: `name` or `a.b.c`, each part
// [A-Za-z_$][A-Za-z0-9_$]*, at most 128 characters.
bool is_callback_name(std::string_view s);

}  // namespace sluice::holidays
