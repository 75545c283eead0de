// The echo API's settings: off by default, and every bad value named by its variable.

#include "echo/settings.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

#include "source_paths.hpp"

namespace {

using namespace sluice;

const std::string sample = SLUICE_ETC_DIR "/echo/openapi.yaml";
const std::string keys = SLUICE_ETC_DIR "/echo/api_keys.yaml";

std::string error_of(std::map<std::string, std::string> env) {
  try {
    echo::read_settings(core::env_reader(std::move(env)));
  } catch (const core::settings_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("echo settings: off unless ECHO_OPENAPI_FILE is set") {
  CHECK_FALSE(echo::read_settings(core::env_reader(std::map<std::string, std::string>{})));
  CHECK_FALSE(
      echo::read_settings(core::env_reader(std::map<std::string, std::string>{{"API_KEYS_FILE", keys}})));
}

TEST_CASE("echo settings: the document is loaded; the options carry the service name and CA file") {
  auto s = echo::read_settings(
      core::env_reader({{"ECHO_OPENAPI_FILE", sample}, {"API_KEYS_FILE", keys}, {"ECHO_JWKS_CACERT", keys}}));
  REQUIRE(s);
  CHECK(s->document.operations.size() == 3);
  CHECK(s->api_keys_file == keys);
  auto options = echo::jwt_options_for(*s);
  CHECK(options.service_name == "echo-api.endpoints.YOUR-PROJECT-ID.cloud.goog");
  CHECK(options.extra_ca_file == keys);
  CHECK(auth::open_api_keys(keys)->size() == 1);
}

TEST_CASE("echo settings: errors name the variable") {
  CHECK(error_of({{"ECHO_OPENAPI_FILE", sample}}) ==
        "API_KEYS_FILE is required: operations of " + sample + " (ECHO_OPENAPI_FILE) need an API key");
  CHECK(error_of({{"ECHO_OPENAPI_FILE", "/nonexistent.yaml"}, {"API_KEYS_FILE", keys}}) ==
        "ECHO_OPENAPI_FILE: /nonexistent.yaml: cannot read the file: No such file or directory");
  CHECK(error_of({{"ECHO_OPENAPI_FILE", sample},
                  {"API_KEYS_FILE", keys},
                  {"ECHO_JWKS_CACERT", "/nonexistent.pem"}}) ==
        "ECHO_JWKS_CACERT: cannot read '/nonexistent.pem'");
  try {
    auth::open_api_keys("/nonexistent-keys.yaml");
    FAIL("no exception");
  } catch (const core::settings_error& e) {
    CHECK(std::string(e.what()) ==
          "API_KEYS_FILE: /nonexistent-keys.yaml: cannot read the file: No such file or directory");
  }
}
