#include <doctest/doctest.h>

#include <string>
#include <variant>
#include <vector>

#include "ratelimit/client/client_flags.hpp"

using namespace sluice::ratelimit::client;

namespace {

client_options parse_ok(std::vector<std::string_view> args) {
  auto parsed = parse_client_flags(args);
  if (auto* error = std::get_if<std::string>(&parsed)) FAIL(*error);
  REQUIRE(std::holds_alternative<client_options>(parsed));
  return std::get<client_options>(parsed);
}

std::string parse_error(std::vector<std::string_view> args) {
  auto parsed = parse_client_flags(args);
  REQUIRE(std::holds_alternative<std::string>(parsed));
  return std::get<std::string>(parsed);
}

}  // namespace

TEST_CASE("client flags: upstream's defaults and forms") {
  auto d = parse_ok({});
  CHECK(d.dial_string == "localhost:8081");
  CHECK(d.hits_addend == 1);
  CHECK(d.timeout == std::chrono::seconds(5));
  CHECK_FALSE(d.use_tls);

  auto o =
      parse_ok({"-dial_string", "h:1", "--domain=dom", "-descriptors", "a=1,b=", "--descriptors", "c=x y",
                "-json", "-grpc-use-tls=false", "-hits_addend=0", "-negative_hits", "-timeout", "250ms"});
  CHECK(o.dial_string == "h:1");
  CHECK(o.domain == "dom");
  REQUIRE(o.descriptors.size() == 2);
  CHECK(o.descriptors[0] == std::vector<std::pair<std::string, std::string>>{{"a", "1"}, {"b", ""}});
  CHECK(o.descriptors[1] == std::vector<std::pair<std::string, std::string>>{{"c", "x y"}});
  CHECK(o.json);
  CHECK_FALSE(o.use_tls);
  CHECK(o.hits_addend == 0);
  CHECK(o.negative_hits);
  CHECK(o.timeout == std::chrono::milliseconds(250));

  auto tls = parse_ok({"-grpc-use-tls", "-grpc-server-ca-file", "ca.pem", "-grpc-cert-file", "c.pem",
                       "-grpc-key-file", "k.pem", "-grpc-server-name", "localhost", "-unix", "/tmp/s"});
  CHECK(tls.use_tls);
  CHECK(tls.server_ca_file == "ca.pem");
  CHECK(tls.cert_file == "c.pem");
  CHECK(tls.key_file == "k.pem");
  CHECK(tls.server_name == "localhost");
  CHECK(tls.unix_socket == "/tmp/s");
  CHECK(std::holds_alternative<help_requested>(parse_client_flags(std::vector<std::string_view>{"-h"})));
  // An empty key is the server's to refuse (upstream's client sends it); `--` ends the flags, as in Go.
  CHECK(parse_ok({"-descriptors", "=v", "--"}).descriptors[0][0] ==
        std::pair<std::string, std::string>{"", "v"});
  CHECK(parse_ok({"-hits_addend", "18446744073709551615"}).hits_addend == UINT64_MAX);
}

TEST_CASE("client flags: each mistake named") {
  CHECK(parse_error({"-descriptors", "a"}) ==
        "invalid descriptor list 'a': expected key=value pairs separated by commas");
  CHECK(parse_error({"-descriptors", "a=1,b=2=3"}) ==
        "invalid descriptor list 'a=1,b=2=3': expected key=value pairs separated by commas");
  CHECK(parse_error({"-descriptors", "a=1,"}).starts_with("invalid descriptor list"));
  CHECK(parse_error({"-nope"}) == "flag provided but not defined: -nope");
  CHECK(parse_error({"-domain"}) == "flag needs an argument: -domain");
  CHECK(parse_error({"domain"}) == "unexpected argument 'domain': every argument is a flag (see -help)");
  CHECK(parse_error({"--", "x"}) == "unexpected argument '--': every argument is a flag (see -help)");
  CHECK(parse_error({"-json=maybe"}) == "invalid boolean value 'maybe' for -json");
  CHECK(parse_error({"-hits_addend", "-1"}) ==
        "invalid value '-1' for -hits_addend: expected an integer from 0 to 18446744073709551615");
  CHECK(parse_error({"-hits_addend", "18446744073709551616"})
            .starts_with("invalid value '18446744073709551616'"));
  CHECK(parse_error({"-hits_addend="}).starts_with("invalid value '' for -hits_addend"));
  CHECK(parse_error({"-timeout", "0s"}).starts_with("invalid value '0s' for -timeout"));
  CHECK(parse_error({"-grpc-use-tls", "-grpc-cert-file", "c.pem"}) ==
        "-grpc-cert-file and -grpc-key-file go together (mutual TLS needs both)");
  CHECK(parse_error({"-grpc-server-ca-file", "ca.pem"}) == "TLS flags given without -grpc-use-tls");
  // upstream's tracing flag is accepted (commands from its docs keep working) with a warning.
  CHECK(parse_ok({"-oltp-protocol", "grpc"}).warnings ==
        std::vector<std::string>{"-oltp-protocol is ignored: this client exports no traces"});
  CHECK(parse_ok({"-oltp-protocol="}).warnings.empty());
}
