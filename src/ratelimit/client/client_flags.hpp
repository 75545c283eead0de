#pragma once
// The flags of `sluice client`, parsed as Go's flag package parses upstream's client_cmd (flag_parser.hpp).

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/problem.hpp"
#include "ratelimit/client/flag_parser.hpp"

namespace sluice::ratelimit::client {

struct client_options {
  std::string dial_string = "localhost:8081";
  std::string unix_socket;  // -unix: dial this socket instead of dial_string
  std::string domain;
  // One per -descriptors flag: its key=value pairs in order.
  std::vector<std::vector<std::pair<std::string, std::string>>> descriptors;
  // upstream's client always sends 1. Above 2^32-1, or 0 (which the request-level field reads as 1: the check
  // that consumes nothing), it goes in each descriptor's hits_addend instead.
  std::uint64_t hits_addend = 1;
  bool negative_hits = false;  // every descriptor's is_negative_hits
  bool use_tls = false;
  std::string server_ca_file;  // empty: the system's CA certificates
  std::string cert_file;       // client certificate and key, for mutual TLS
  std::string key_file;
  std::string server_name;  // the name the server's certificate must carry, when not the dial host
  std::chrono::nanoseconds timeout = std::chrono::seconds(5);
  bool json = false;                  // print the response as JSON only
  std::string oltp_protocol;          // upstream's tracing flag: accepted and printed, nothing exported
  std::vector<std::string> warnings;  // flags accepted but without effect
};

// The options, help_requested for -h/-help, or an error message naming the flag.
std::variant<client_options, help_requested, std::string> parse_client_flags(
    std::span<const std::string_view> args);
// "k=v,k2=v2" (each pair exactly one '='; values may be empty) appended to `out`; an error names the text.
core::problem parse_key_values(std::string_view flag_value,
                               std::vector<std::pair<std::string, std::string>>& out);
// -hits_addend's value into `out`; an error names the flag.
core::problem parse_hits_addend(std::string_view value, std::uint64_t& out);
// A Go duration over zero into `out`; an error names the flag and gives `example`.
core::problem parse_positive_duration(std::string_view flag, std::string_view value, std::string_view example,
                                      std::chrono::nanoseconds& out);
// What is wrong with the TLS flags together (nothing when they go together), for every command that has them.
core::problem tls_flags_error(const client_options& o);

extern const std::string_view client_usage;

}  // namespace sluice::ratelimit::client
