#include <doctest/doctest.h>

#include <google/protobuf/struct.pb.h>

#include "ratelimit/xds/backoff.hpp"
#include "ratelimit/xds/resource_yaml.hpp"
#include "ratelimit/xds/sotw_session.hpp"
#include "rls_conf.pb.h"

using namespace sluice;
using namespace sluice::ratelimit;
namespace rls_conf = ::ratelimit::config::ratelimit::v3;

namespace {

rls_conf::RateLimitConfig sample() {
  rls_conf::RateLimitConfig c;
  c.set_name("mesh");
  c.set_domain("123");  // stays a string
  auto& d = *c.add_descriptors();
  d.set_key("true");
  d.set_value("a: b # not a comment");
  d.mutable_rate_limit()->set_unit(rls_conf::MINUTE);
  d.mutable_rate_limit()->set_requests_per_unit(7);
  d.mutable_rate_limit()->set_name("per-minute");
  d.mutable_rate_limit()->add_replaces()->set_name("other");
  d.set_shadow_mode(true);
  d.set_quota_mode(true);
  auto& fields = *d.mutable_metadata()->mutable_fields();
  fields["count"].set_number_value(3);
  fields["ratio"].set_number_value(0.1);
  fields["text"].set_string_value("0x10\n\"quoted\"");
  fields["flag"].set_bool_value(false);
  fields["nothing"].set_null_value(google::protobuf::NULL_VALUE);
  fields["list"].mutable_list_value()->add_values()->set_string_value("x");
  auto& child = *d.add_descriptors();
  child.set_key("week");
  child.mutable_rate_limit()->set_unit(rls_conf::WEEK);
  child.mutable_rate_limit()->set_requests_per_unit(1);
  auto& free = *c.add_descriptors();
  free.set_key("free");
  free.mutable_rate_limit()->set_unlimited(true);  // unit unset: UNKNOWN, accepted with unlimited
  return c;
}

config::load_result load(const rls_conf::RateLimitConfig& c, stats::store& stats) {
  config::config_file file;
  std::string error;
  REQUIRE(xds::to_config_file(c, file, error));
  CHECK(file.name == c.name());
  const config::config_file files[] = {file};
  return config::load_rules(files, false, stats);
}

}  // namespace

TEST_CASE("xDS: a RateLimitConfig loads as the rule file it stands for, strings kept as strings") {
  stats::store stats;
  auto loaded = load(sample(), stats);
  REQUIRE_MESSAGE(loaded.rules, loaded.error);
  const auto* domain = loaded.rules->find_domain("123");
  REQUIRE(domain);
  const auto& node = *domain->children.at("true_a: b # not a comment");
  REQUIRE(node.limit);
  CHECK(node.limit->unit == config::unit::minute);
  CHECK(node.limit->requests_per_unit == 7);
  CHECK(node.limit->name == "per-minute");
  CHECK(node.limit->replaces == std::vector<std::string>{"other"});
  CHECK(node.shadow_mode);
  CHECK(node.quota_mode);
  CHECK_FALSE(node.detailed_metric);
  REQUIRE(node.metadata);
  const auto& m = node.metadata->fields();
  CHECK(m.at("count").number_value() == 3);
  CHECK(m.at("ratio").number_value() == 0.1);
  CHECK(m.at("text").string_value() == "0x10\n\"quoted\"");
  CHECK(m.at("flag").kind_case() == google::protobuf::Value::kBoolValue);
  CHECK(m.at("nothing").kind_case() == google::protobuf::Value::kNullValue);
  CHECK(m.at("list").list_value().values(0).string_value() == "x");
  CHECK(node.children.at("week")->limit->unit == config::unit::week);
  CHECK(domain->children.at("free")->limit->unlimited);
}

TEST_CASE("xDS: rule errors are the file loader's, named by the resource") {
  stats::store stats;
  auto c = sample();
  c.mutable_descriptors(1)->mutable_rate_limit()->set_unlimited(false);
  CHECK(load(c, stats).error == "mesh: invalid rate limit unit 'UNKNOWN'");
  c = sample();
  c.mutable_descriptors(1)->mutable_rate_limit()->set_unit(rls_conf::SECOND);
  CHECK(load(c, stats).error == "mesh: should not specify rate limit unit when unlimited");
  c = sample();
  c.set_domain("");
  CHECK(load(c, stats).error == "mesh: config file cannot have empty domain");
  c = sample();
  *c.add_descriptors() = c.descriptors(0);
  CHECK(load(c, stats).error == "mesh: duplicate descriptor composite key '123.true_a: b # not a comment'");
}

TEST_CASE("xDS: ACK, NACK and the request that opens each stream") {
  xds::sotw_session session({"node-7", {{"zone", "a"}}});
  auto first = session.opening_request();
  CHECK(first.version_info().empty());
  CHECK(first.response_nonce().empty());
  CHECK(first.type_url() == xds::rate_limit_config_type);
  CHECK(first.resource_names_size() == 0);  // wildcard
  CHECK(first.node().id() == "node-7");
  CHECK(first.node().metadata().fields().at("zone").string_value() == "a");

  envoy::service::discovery::v3::DiscoveryResponse good;
  good.set_version_info("v1");
  good.set_nonce("n1");
  good.set_type_url(std::string(xds::rate_limit_config_type));
  good.add_resources()->PackFrom(sample());
  std::vector<config::config_file> files;
  std::string error;
  REQUIRE(xds::sotw_session::decode(good, files, error));
  REQUIRE(files.size() == 1);
  CHECK(files[0].name == "mesh");
  auto ack = session.accept(good);
  CHECK(ack.version_info() == "v1");
  CHECK(ack.response_nonce() == "n1");
  CHECK_FALSE(ack.has_error_detail());

  auto bad = good;
  bad.set_version_info("v2");
  bad.set_nonce("n2");
  bad.mutable_resources(0)->set_value("\xff\xff");
  CHECK_FALSE(xds::sotw_session::decode(bad, files, error));
  CHECK(error == "resource 0 is not a valid RateLimitConfig message");
  auto nack = session.reject(bad, error);
  CHECK(nack.version_info() == "v1");  // still the one accepted
  CHECK(nack.response_nonce() == "n2");
  CHECK(nack.error_detail().message() == error);
  // A new stream opens with the version accepted last, never the refused one, and no nonce.
  auto again = session.opening_request();
  CHECK(again.version_info() == "v1");
  CHECK(again.response_nonce().empty());

  auto other = good;
  other.mutable_resources(0)->set_type_url("type.googleapis.com/envoy.config.cluster.v3.Cluster");
  CHECK_FALSE(xds::sotw_session::decode(other, files, error));
  CHECK(error.starts_with("resource 0 is of type 'type.googleapis.com/envoy.config.cluster.v3.Cluster'"));
  other = good;
  other.set_type_url("type.googleapis.com/envoy.config.cluster.v3.Cluster");
  CHECK_FALSE(xds::sotw_session::decode(other, files, error));

  envoy::service::discovery::v3::DiscoveryResponse empty;  // an empty state of the world: no rules
  empty.set_type_url(std::string(xds::rate_limit_config_type));
  CHECK(xds::sotw_session::decode(empty, files, error));
  CHECK(files.empty());
}

TEST_CASE("xDS backoff: doubles from the initial wait to the maximum, spread by the random factor, reset") {
  double u = 0.5;  // the middle: no spread
  xds::backoff b({std::chrono::seconds(1), std::chrono::seconds(10), 0.5, true}, [&] { return u; });
  CHECK(b.next().count() == 1000);
  CHECK(b.next().count() == 2000);
  CHECK(b.next().count() == 4000);
  CHECK(b.next().count() == 8000);
  CHECK(b.next().count() == 10000);
  CHECK(b.next().count() == 10000);
  b.reset();
  u = 0.0;
  CHECK(b.next().count() == 500);  // 1 s - 50 %
  u = 0.999;
  CHECK(b.next().count() == 2998);                               // 2 s + ~50 %
  for (int i = 0; i < 5; ++i) CHECK(b.next().count() <= 10000);  // never past the maximum
  xds::backoff steady({std::chrono::seconds(1), std::chrono::seconds(4), 0.5, false}, [] { return 0.0; });
  CHECK(steady.next().count() == 1000);
  CHECK(steady.next().count() == 2000);
}
