#include <doctest/doctest.h>

#include "core/env.hpp"
#include "stats/mogrifier.hpp"

using namespace sluice;
using namespace sluice::stats;

namespace {

mogrifier_settings tag_mogrifier() {
  return {"TAG",
          R"(^ratelimit\.service\.rate_limit\.(.*)\.(.*)\.(.*)$)",
          "ratelimit.service.rate_limit.$3",
          {{"descriptor", "$2"}, {"domain", "$1"}}};
}

}  // namespace

TEST_CASE("mogrifier: upstream's example") {
  mogrifier_list m({tag_mogrifier()});
  auto out = m.apply("ratelimit.service.rate_limit.mongo_cps.database_users.within_limit");
  REQUIRE(out);
  CHECK(out->name == "ratelimit.service.rate_limit.within_limit");
  CHECK(out->tags == std::vector<std::string>{"descriptor:database_users", "domain:mongo_cps"});
  CHECK_FALSE(m.apply("ratelimit.service.config_load_success"));
}

TEST_CASE("mogrifier: the first match wins; patterns are searched, not anchored") {
  mogrifier_list m(
      {{"A", R"(total_(hits))", "hits.$1.$0", {}}, {"B", "rate_limit", "never", {}}, tag_mogrifier()});
  auto out = m.apply("ratelimit.service.rate_limit.d.k.total_hits");
  REQUIRE(out);
  CHECK(out->name == "hits.hits.total_hits");
  CHECK(out->tags.empty());
  CHECK(m.apply("ratelimit.service.rate_limit.d.k.over_limit")->name == "never");
}

TEST_CASE("mogrifier: $n substitution") {
  boost::smatch groups;
  std::string name = "a.b.c";
  REQUIRE(boost::regex_search(name, groups, boost::regex(R"((\w)\.(\w)\.(\w))")));
  CHECK(expand_groups("$3-$2-$1/$0", groups) == "c-b-a/a.b.c");
  CHECK(expand_groups("$", groups) == "$");
  CHECK(expand_groups("$x$", groups) == "$x$");
  CHECK(expand_groups("cost $9", groups) == "cost ");  // no such group
  CHECK(expand_groups("$01", groups) == "a");          // every digit is the number, as upstream's \$\d+
  CHECK(expand_groups("$10", groups) == "");
}

TEST_CASE("mogrifier: upstream's start-up errors") {
  auto error_of = [](mogrifier_settings s) -> std::string {
    try {
      mogrifier_list m({std::move(s)});
    } catch (const core::settings_error& e) {
      return e.what();
    }
    return "";
  };
  auto m = tag_mogrifier();
  CHECK(error_of(m).empty());
  m.pattern = "";
  CHECK(error_of(m).starts_with("no PATTERN specified for mogrifier TAG"));
  m = tag_mogrifier();
  m.pattern = "[";
  CHECK(error_of(m).starts_with("failed to compile pattern for mogrifier TAG: [: "));
  m = tag_mogrifier();
  m.new_name = "";
  CHECK(error_of(m).starts_with("no NAME specified for mogrifier TAG"));
  m = tag_mogrifier();
  m.tags = {{"", "5"}};
  CHECK(error_of(m).starts_with("no key specified for tag  for mogrifier TAG"));
  m.tags = {{"domain", ""}};
  CHECK(error_of(m).starts_with("no value specified for tag domain for mogrifier TAG"));
}
