#pragma once
// A limit table's row in place of its rule's `rate_limit` (docs/guides/tenant-tables.md): the row's
// requests_per_unit (0 refuses every request; `unlimited` is unlimited) and, when it names one, its unit.
// Everything else is the rule's: algorithm, accounting, shadow mode, stats, name.

#include <string>

#include "ratelimit/config/limit_table.hpp"
#include "ratelimit/config/rule_set.hpp"
#include "ratelimit/limiter/limiter.hpp"

namespace sluice::ratelimit::service {

// `item` holds the rule's one limit. When the row's unit changes the limit's counter key, the key's tag is
// written into `tag` (which must outlive the decision).
void apply_table_row(limiter::descriptor_work& item, const config::table_row& row,
                     const config::rate_limit& rule, std::string& tag);

}  // namespace sluice::ratelimit::service
