// The holidays API end to end inside the process: routes, formats, JSONP, key checks and request counts, and
// the list's reloads, with a fake clock and real files.

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>
#include <map>
#include <string>
#include <vector>

#include "../../support/temp_dir.hpp"
#include "holidays/holidays_api.hpp"
#include "holidays/settings.hpp"

namespace {

using namespace sluice;
using namespace sluice::holidays;
namespace bhttp = boost::beast::http;

constexpr std::string_view keys_yaml =
    "keys:\n  - {key: good, name: alice}\n  - {key: other}\n  - {key: banned, enabled: false}\n";

struct fixture {
  testing::temp_dir dir{"sluice-holidays"};
  core::fake_clock clock{1795345730};
  std::filesystem::path csv =
      dir.write("holidays.csv", "name,date\nNew Year's Day,2012-01-02\nFamily Day,\n");
  holiday_list list{csv.string(), clock};
  auth::api_key_store keys{dir.write("keys.yaml", std::string(keys_yaml)).string()};

  net::http::response get(const holidays_api& api, std::string target,
                          bhttp::verb method = bhttp::verb::get) const {
    net::http::request req{method, target, 11};
    return api.respond(req);
  }
};

boost::json::object meta_of(const net::http::response& res) {
  return boost::json::parse(res.body()).at("meta").as_object();
}

core::env_reader env(std::map<std::string, std::string> values) {
  return core::env_reader(std::move(values));
}

std::int64_t requests_of(const net::http::response& res) {
  return meta_of(res).at("requests").as_int64();
}

}  // namespace

TEST_CASE("holidays api: json envelope with the list in file order and the clock's time") {
  fixture f;
  holidays_api api(f.list, nullptr, false, f.clock);
  auto res = f.get(api, "/events/holidays.json");
  CHECK(res.result() == bhttp::status::ok);
  CHECK(res[bhttp::field::content_type] == "application/json; charset=utf-8");
  auto body = boost::json::parse(res.body()).as_object();
  CHECK(body.at("meta").at("timestamp").as_int64() == 1795345730);
  CHECK(body.at("meta").at("requests").as_int64() == -1);
  CHECK(body.at("meta").at("method_id").as_int64() == 1423);
  auto& data = body.at("data").as_array();
  REQUIRE(data.size() == 2);
  CHECK(data[0].at("name").as_string() == "New Year's Day");
  CHECK(data[1].at("date").is_null());
  f.clock.advance(5);
  CHECK(meta_of(f.get(api, "/events/holidays.json")).at("timestamp").as_int64() == 1795345735);
}

TEST_CASE("holidays api: xml and ics content types; another format is 501 Invalid method") {
  fixture f;
  holidays_api api(f.list, nullptr, false, f.clock);
  auto xml = f.get(api, "/events/holidays.xml?callback=ignored");
  CHECK(xml.result() == bhttp::status::ok);
  CHECK(xml[bhttp::field::content_type] == "application/xml; charset=utf-8");
  CHECK(xml.body().find("<name>New Year's Day</name>") != std::string::npos);
  auto ics = f.get(api, "/events/holidays.ics");
  CHECK(ics[bhttp::field::content_type] == "text/calendar; charset=utf-8");
  CHECK(ics.body().starts_with("BEGIN:VCALENDAR\r\n"));
  for (std::string target : {"/events/holidays.csv", "/events/holidays", "/events/holidays.JSON?key=good"}) {
    auto res = f.get(api, target);
    CHECK(res.result() == bhttp::status::not_implemented);
    CHECK(meta_of(res).at("message").as_string() == "Invalid method");
    CHECK(boost::json::parse(res.body()).at("data").as_object().empty());
  }
  auto post = f.get(api, "/events/holidays.xml", bhttp::verb::post);
  CHECK(post.result() == bhttp::status::method_not_allowed);
  CHECK(post[bhttp::field::allow] == "GET");
  CHECK(post.body().find("<status>405</status>") != std::string::npos);
}

TEST_CASE("holidays api: JSONP wraps the envelope; a callback that is not an identifier path is a 400") {
  fixture f;
  holidays_api api(f.list, nullptr, false, f.clock);
  auto res = f.get(api, "/events/holidays.json?callback=app.on_Holidays%24");
  CHECK(res.result() == bhttp::status::ok);
  CHECK(res[bhttp::field::content_type] == "application/javascript; charset=utf-8");
  CHECK(res.body().starts_with("app.on_Holidays$({\n  \"meta\":{"));
  CHECK(res.body().ends_with("\n})"));
  for (std::string bad : std::vector<std::string>{"alert(1)", "a-b", "a..b", "a.", ".a", "1abc", "", "a%20b",
                                                  std::string(129, 'a')}) {
    auto rejected = f.get(api, "/events/holidays.json?callback=" + bad);
    CHECK(rejected.result() == bhttp::status::bad_request);
    CHECK(rejected[bhttp::field::content_type] == "application/json; charset=utf-8");
    CHECK(std::string(meta_of(rejected).at("message").as_string()).starts_with("Invalid callback"));
  }
  CHECK(is_callback_name(std::string(128, 'a')));
  CHECK(is_callback_name("$._a1.B"));
}

TEST_CASE("holidays api: required keys answer 511, 401 and 403 in the format asked for") {
  fixture f;
  holidays_api api(f.list, &f.keys, true, f.clock);
  auto missing = f.get(api, "/events/holidays.json");
  CHECK(missing.result() == bhttp::status::network_authentication_required);
  CHECK(meta_of(missing).at("message").as_string() == "API key is required (?key=)");
  CHECK(meta_of(missing).at("status").as_int64() == 511);
  CHECK(f.get(api, "/events/holidays.json?key=").result() == bhttp::status::network_authentication_required);
  auto unknown = f.get(api, "/events/holidays.json?key=nope");
  CHECK(unknown.result() == bhttp::status::unauthorized);
  CHECK(meta_of(unknown).at("message").as_string() == "Invalid API key");
  auto banned = f.get(api, "/events/holidays.xml?key=banned");
  CHECK(banned.result() == bhttp::status::forbidden);
  CHECK(banned.body().find("<message>The provided API key has been banned</message>") != std::string::npos);
  CHECK(banned.body().find("<requests>0</requests>") != std::string::npos);
  CHECK(banned.body().ends_with("<data></data>\n</response>\n"));
  auto wrapped = f.get(api, "/events/holidays.json?callback=cb");
  CHECK(wrapped.result() == bhttp::status::network_authentication_required);
  CHECK(wrapped.body().starts_with("cb({"));
  auto ics = f.get(api, "/events/holidays.ics?key=nope");
  CHECK(ics.result() == bhttp::status::unauthorized);
  CHECK(ics[bhttp::field::content_type] == "application/json; charset=utf-8");
}

TEST_CASE("holidays api: meta.requests counts each valid key's requests") {
  fixture f;
  holidays_api api(f.list, &f.keys, true, f.clock);
  CHECK(requests_of(f.get(api, "/events/holidays.json?key=good")) == 1);
  CHECK(f.get(api, "/events/holidays.xml?key=good").body().find("<requests>2</requests>") !=
        std::string::npos);
  CHECK(requests_of(f.get(api, "/events/holidays.json?key=other")) == 1);
  CHECK(requests_of(f.get(api, "/events/holidays.json?key=good")) == 3);
  // Keys not required: a valid key is still counted, anything else is served as anonymous.
  holidays_api open(f.list, &f.keys, false, f.clock);
  CHECK(requests_of(f.get(open, "/events/holidays.json?key=good")) == 1);
  CHECK(requests_of(f.get(open, "/events/holidays.json?key=nope")) == -1);
  CHECK(f.get(open, "/events/holidays.json?key=banned").result() == bhttp::status::ok);
  CHECK(requests_of(f.get(open, "/events/holidays.json")) == -1);
}

TEST_CASE("holiday list: a reload serves the new file; a bad file keeps the previous list") {
  fixture f;
  auto first = f.list.current();
  REQUIRE(first->holidays.size() == 2);
  f.dir.write("holidays.csv", "date,holiday\n2026-01-01,New Year\xE2\x80\x99s Day\n");
  CHECK_FALSE(f.list.reload());
  auto second = f.list.current();
  REQUIRE(second->holidays.size() == 1);
  CHECK(second->json_data.find("New Year\xE2\x80\x99s Day") != std::string::npos);
  f.dir.write("holidays.csv", "name,date\nok,2026-01-01\nbad,2026-02-30\n");
  auto error = f.list.reload();
  REQUIRE(error);
  CHECK(*error == f.csv.string() + ": line 3: date '2026-02-30' is not a Y-m-d calendar date");
  CHECK(f.list.current() == second);
}

TEST_CASE("holiday list: a bad file at start-up names the file and the line") {
  testing::temp_dir dir("sluice-holidays");
  core::fake_clock clock;
  auto path = dir.write("h.csv", "name,date\na,2012-01-01,x\n");
  try {
    holiday_list list(path.string(), clock);
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == path.string() + ": line 2: 3 fields, the header has 2");
  }
}

TEST_CASE("holiday list: the built-in list is the shipped file, all 205 holidays") {
  core::fake_clock clock;
  holiday_list list("", clock);
  CHECK(list.source() == "built-in");
  const auto& holidays = list.current()->holidays;
  REQUIRE(holidays.size() == 205);
  CHECK(holidays.front().name == "New Year's Day");
  CHECK(holidays.front().date == "2012-01-02");
  // Source order: each year's named holidays, then its additional days.
  CHECK(holidays.back().name == "Additional Day");
  CHECK(holidays.back().date == "2026-01-02");
  CHECK(holidays[holidays.size() - 2].date == "2026-08-03");
  bool curly = false;
  for (const auto& h : holidays) curly = curly || h.name == "New Year\xE2\x80\x99s Day";
  CHECK(curly);
}

TEST_CASE("holidays settings: on by default; keys required need API_KEYS_FILE") {
  auto s = read_settings(env({}));
  REQUIRE(s);
  CHECK(s->csv_file == "");
  CHECK_FALSE(s->require_key);
  CHECK_FALSE(read_settings(env({{"HOLIDAYS_ENABLED", "false"}})));
  try {
    read_settings(env({{"HOLIDAYS_REQUIRE_KEY", "true"}}));
    FAIL("no exception");
  } catch (const core::settings_error& e) {
    CHECK(std::string(e.what()) == "API_KEYS_FILE is required when HOLIDAYS_REQUIRE_KEY=true");
  }
  CHECK(read_settings(env({{"HOLIDAYS_REQUIRE_KEY", "1"}, {"API_KEYS_FILE", "k.yaml"}}))->require_key);
}
