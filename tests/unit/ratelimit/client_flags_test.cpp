#include <doctest/doctest.h>

#include <string>
#include <variant>
#include <vector>

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>

#include "ratelimit/client/client_flags.hpp"
#include "ratelimit/client/connect_error.hpp"
#include "ratelimit/client/counters_cmd.hpp"

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

namespace {

struct sample_options {
  std::string name;
  bool strict = false;
};

const flag_spec<sample_options> sample_specs[] = {{.name = "name", .text = &sample_options::name},
                                                  {.name = "strict", .boolean = &sample_options::strict},
                                                  {.name = "dial_string", .refused = "is another command's"}};

std::optional<std::variant<help_requested, std::string>> parse_sample(
    std::vector<std::string_view> args, sample_options& o, std::vector<std::string_view>* operands) {
  return parse_flags(std::span<const std::string_view>(args),
                     std::span<const flag_spec<sample_options>>(sample_specs), o, operands);
}

}  // namespace

TEST_CASE("flag parser: operands before, between and after the flags; `--` ends the flags") {
  sample_options o;
  std::vector<std::string_view> operands;
  CHECK_FALSE(parse_sample({"dir", "--strict", "--name=x", "more", "--", "-not-a-flag"}, o, &operands));
  CHECK(o.strict);
  CHECK(o.name == "x");
  CHECK(operands == std::vector<std::string_view>{"dir", "more", "-not-a-flag"});
  // Without an operand list every argument is a flag, as upstream's client.
  CHECK(std::get<std::string>(*parse_sample({"dir"}, o, nullptr)) ==
        "unexpected argument 'dir': every argument is a flag (see -help)");
}

TEST_CASE("flag parser: each mistake named with the dashes it was given") {
  sample_options o;
  std::vector<std::string_view> operands;
  CHECK(std::get<std::string>(*parse_sample({"d", "--name"}, o, &operands)) ==
        "flag needs an argument: --name");
  CHECK(std::get<std::string>(*parse_sample({"-name"}, o, &operands)) == "flag needs an argument: -name");
  CHECK(std::get<std::string>(*parse_sample({"--nope=1"}, o, &operands)) ==
        "flag provided but not defined: --nope");
  CHECK(std::get<std::string>(*parse_sample({"--strict=maybe"}, o, &operands)) ==
        "invalid boolean value 'maybe' for --strict");
  CHECK(std::get<std::string>(*parse_sample({"-dial_string", "x"}, o, &operands)) ==
        "-dial_string is another command's");
  CHECK(std::get<std::string>(*parse_sample({"--dial_string=x"}, o, &operands)) ==
        "--dial_string is another command's");
  for (std::string_view help : {"-h", "--help", "-help"}) {
    CAPTURE(help);
    CHECK(std::holds_alternative<help_requested>(*parse_sample({"d", help}, o, &operands)));
  }
}

TEST_CASE("a connection that fails is said in one wording, without a library's framing") {
  CHECK(cannot_connect("127.0.0.1:6070", "connection refused") ==
        "cannot connect to 127.0.0.1:6070: connection refused");
  CHECK(error_reason(boost::asio::error::connection_refused, std::chrono::seconds(5)) ==
        "connection refused");
  CHECK(error_reason(boost::beast::error::timeout, std::chrono::seconds(5)) == "no answer within 5s");
  CHECK(error_reason(boost::asio::error::host_not_found, std::chrono::seconds(5)) ==
        "cannot resolve the host name");
  CHECK(grpc_reason(
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect "
            "to remote host: Connection refused") == "connection refused");
  CHECK(grpc_reason(
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:443: Peer name x is "
            "not in peer certificate") == "peer name x is not in peer certificate");
  CHECK(grpc_reason(
            "failed to connect to all addresses; last error: UNKNOWN: ipv6:[::1]:443: Handshake failed") ==
        "handshake failed");
  CHECK(grpc_reason("DNS resolution failed for nosuch.invalid:1: C-ares status is not ARES_SUCCESS") ==
        "cannot resolve the host name");
}

TEST_CASE("sluice counters: -entry takes the value verbatim and is sent as entry= parameters") {
  auto parsed = parse_counters_flags(std::vector<std::string_view>{
      "get", "--domain", "ops", "--entry", "tag=a,b", "-entry=k==", "--entry", "sp=x y+z"});
  if (auto* error = std::get_if<std::string>(&parsed)) FAIL(*error);
  const auto& o = std::get<counters_options>(parsed);
  CHECK(o.entries ==
        std::vector<std::pair<std::string, std::string>>{{"tag", "a,b"}, {"k", "="}, {"sp", "x y+z"}});
  CHECK(counters_target(o) == "/counters?domain=ops&entry=tag%3Da%2Cb&entry=k%3D%3D&entry=sp%3Dx%20y%2Bz");
  auto readme_form = std::get<counters_options>(
      parse_counters_flags(std::vector<std::string_view>{"get", "-domain", "ops", "-descriptor", "a=1,b=2"}));
  CHECK(counters_target(readme_form) == "/counters?domain=ops&descriptor=a=1,b=2");
  for (auto args :
       {std::vector<std::string_view>{"get", "-domain", "d", "-descriptor", "a=1", "-entry", "b=2"},
        std::vector<std::string_view>{"get", "-domain", "d", "-entry", "b=2", "-descriptor", "a=1"}}) {
    CHECK(std::get<std::string>(parse_counters_flags(args)).find("cannot be combined") != std::string::npos);
  }
  CHECK(std::get<std::string>(parse_counters_flags(std::vector<std::string_view>{"get", "-entry", "=v"})) ==
        "invalid value '=v' for -entry: expected key=value (a key, then the value)");
}
