#pragma once
// Part of the composition root (with main.cpp): where the rules come from at start-up — the rule files, the
// xDS client (CONFIG_TYPE=GRPC_XDS_SOTW), or both — and the first loads Sluice waits for before opening its
// ports.

#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>

#include "core/stop_signals.hpp"
#include "ratelimit/service/limit_tables_source.hpp"
#include "ratelimit/service/rules_source.hpp"
#include "ratelimit/settings.hpp"
#include "ratelimit/xds/client.hpp"

namespace sluice {

// CONFIG_TYPE lists GRPC_XDS_SOTW: the client that streams its rules into `rules`, started. Null otherwise.
std::unique_ptr<ratelimit::xds::client> start_xds(const ratelimit::module_settings& rl,
                                                  boost::asio::io_context& control,
                                                  ratelimit::service::rules_source& rules);

// The first rules of each source CONFIG_TYPE lists: the files loaded, then (with `xds`) the first xDS
// response whose rules load, waited for while the control loop runs and the files are watched (SIGTERM or
// SIGINT, from `stop_signals`, end the wait). -> the exit code when Sluice must not start: 1
// when the files did not load (and FORCE_START_WITHOUT_INITIAL_CONFIG is off), 0 when a signal came first.
std::optional<int> load_first_rules(ratelimit::service::rules_source& rules,
                                    const ratelimit::module_settings& rl, ratelimit::xds::client* xds,
                                    boost::asio::io_context& control, core::stop_signals& stop_signals);

// LIMIT_TABLES_*: the table files loaded (a bad one is logged; rules naming it will not load) and `rules`
// loaded against the tables. false when LIMIT_TABLES_DIR cannot be read: Sluice must not start.
bool load_limit_tables(ratelimit::service::limit_tables_source& tables,
                       ratelimit::service::rules_source& rules, const ratelimit::module_settings& rl);
// Once the first rules are in: the table files are loaded again after each change, and a table that appears
// has the rule files loaded again (rules that named it may load now).
void watch_limit_tables(ratelimit::service::limit_tables_source& tables,
                        ratelimit::service::rules_source& rules, const ratelimit::module_settings& rl,
                        boost::asio::io_context& control);

}  // namespace sluice
