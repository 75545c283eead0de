#include "ratelimit/service/resolution.hpp"

#include <algorithm>
#include <unordered_set>

#include "core/strings.hpp"
#include "ratelimit/limiter/cache_key.hpp"
#include "ratelimit/service/response_extras.hpp"
#include "ratelimit/service/table_rows.hpp"

namespace sluice::ratelimit::service {

core::problem validate_request(const rls_request& request) {
  if (request.domain().empty()) return "rate limit domain must not be empty";
  if (request.descriptors().empty()) return "rate limit descriptor list must not be empty";
  for (int i = 0; i < request.descriptors_size(); ++i) {
    const auto& d = request.descriptors(i);
    for (int j = 0; j < d.entries_size(); ++j) {
      if (d.entries(j).key().empty())
        return core::cat("descriptors[", i, "].entries[", j, "]: key must not be empty");
    }
    // upstream crashes on these (UnitToDivider panics); refuse them instead.
    if (d.has_limit() && (d.limit().unit() < 1 || d.limit().unit() > 6)) {
      return core::cat("descriptors[", i,
                       "].limit.unit: an override needs a unit of SECOND, MINUTE, HOUR, DAY, MONTH or YEAR");
    }
  }
  return std::nullopt;
}

namespace {

// Whether any limit of the node is named in another matched limit's `replaces`.
bool is_replaced(const config::descriptor_node& node, const std::unordered_set<std::string_view>& replaced) {
  auto named = [&](const config::rate_limit& l) { return !l.name.empty() && replaced.contains(l.name); };
  return named(*node.limit) || std::ranges::any_of(node.more_limits, named);
}

}  // namespace

void resolution::resolve() {
  const bool inspecting = purpose_ == resolving::for_inspection;
  const int n = request.descriptors_size();
  std::size_t total_entries = 0;
  for (const auto& d : request.descriptors()) total_entries += static_cast<std::size_t>(d.entries_size());
  // (operator control may add one entry per descriptor: a holder_key rule's key, below)
  entries_.reserve(total_entries + (inspecting ? static_cast<std::size_t>(n) : 0));
  work.domain = request.domain();
  work.calendars = &service.calendars_;
  work.items.resize(static_cast<std::size_t>(n));
  nodes.assign(static_cast<std::size_t>(n), nullptr);
  row_tags_.resize(static_cast<std::size_t>(n));
  if (inspecting) {
    keys.resize(static_cast<std::size_t>(n));
    replaced.assign(static_cast<std::size_t>(n), false);
  }
  const config::descriptor_node* domain = rules_.find_domain(request.domain());
  std::unordered_set<std::string_view> replaced_names;

  for (int i = 0; i < n; ++i) resolve_descriptor(i, domain, replaced_names);
  drop_replaced(replaced_names);
}

// Descriptor i: its entries and hits, and the limits that apply (its override, or its rule's, or a table's
// row in place of the rule's); the names its rule `replaces` go into `replaced_names`.
void resolution::resolve_descriptor(int i, const config::descriptor_node* domain,
                                    std::unordered_set<std::string_view>& replaced_names) {
  const bool inspecting = purpose_ == resolving::for_inspection;
  const auto& d = request.descriptors(i);
  auto& item = work.items[static_cast<std::size_t>(i)];
  const std::size_t first = entries_.size();
  for (const auto& e : d.entries()) entries_.push_back({e.key(), e.value()});
  item.entries =
      std::span<const config::entry>(entries_).subspan(first, static_cast<std::size_t>(d.entries_size()));
  item.hits =
      d.has_hits_addend() ? d.hits_addend().value() : std::max<std::uint64_t>(1, request.hits_addend());
  item.negative = d.is_negative_hits();

  if (domain == nullptr) {
    if (inspecting) return;  // (no stat changes)
    // Unknown domains are client-chosen: bounded, past the bound they count into one series.
    service.stats_
        .get_counter_bounded(core::cat("ratelimit.service.rate_limit.",
                                       stats::sanitize_stat_name(request.domain()), ".domain_not_found"),
                             "ratelimit.service.rate_limit.overflow.domain_not_found")
        .inc();
    return;
  }
  if (d.has_limit()) return add_override(i);
  auto m = rules_.get_limit(*domain, item.entries);
  if (m.node == nullptr && inspecting) {
    // A counter per holder (holder_key) addressed without its holder: the whole set of holders, named by
    // the rule's key with no value. (This descriptor's entries are the last ones added: one more follows
    // them in place, within the reserved room.)
    if (const std::string* key = rules_.holder_key_below(*domain, item.entries)) {
      entries_.push_back({*key, {}});
      item.entries = std::span<const config::entry>(entries_).subspan(first, item.entries.size() + 1);
      item.whole_holder_set = true;
      m = rules_.get_limit(*domain, item.entries);
    }
  }
  if (m.node == nullptr) return;
  const auto& rule = *m.node->limit;
  nodes[static_cast<std::size_t>(i)] = m.node;
  for (const auto& r : rule.replaces) replaced_names.insert(r);
  for (const auto& more : m.node->more_limits)
    for (const auto& r : more.replaces) replaced_names.insert(r);
  if (rule.unlimited) {
    item.unlimited = true;
    return;
  }
  add_limit(i, rule, *m.node, m.stats_key);
  for (const auto& more : m.node->more_limits) add_limit(i, more, *m.node, m.stats_key);
  if (m.node->table && service.tables_ != nullptr) use_table(static_cast<std::size_t>(i), *m.node);
  all_or_nothing = all_or_nothing || m.node->count_only_admitted;
  item.shared_values = std::move(m.shared_values);
}

// The limit descriptor i sends itself (an override), counted under the override's stats key.
void resolution::add_override(int i) {
  const auto& limit = request.descriptors(i).limit();
  auto& item = work.items[static_cast<std::size_t>(i)];
  auto key = override_stats_key(request.domain(), item.entries);
  auto& lw = item.limits.emplace_back();
  lw.limit.requests_per_unit = limit.requests_per_unit();
  lw.limit.unit = static_cast<config::unit>(limit.unit());
  if (purpose_ == resolving::for_inspection) {
    keys[static_cast<std::size_t>(i)].push_back(std::move(key));
  } else {
    lw.limit.stats = config::rule_stats::make_bounded(service.stats_, request.domain(), key);
  }
}

// A limit named in another matched limit's `replaces` is not enforced and not counted (reference §3.2).
void resolution::drop_replaced(const std::unordered_set<std::string_view>& replaced_names) {
  if (replaced_names.empty()) return;
  for (std::size_t i = 0; i < work.items.size(); ++i) {
    const auto* node = nodes[i];
    if (node != nullptr && is_replaced(*node, replaced_names)) {
      work.items[i].limits.clear();
      work.items[i].unlimited = false;
      nodes[i] = nullptr;
      if (purpose_ == resolving::for_inspection) {
        keys[i].clear();
        replaced[i] = true;
      }
    }
  }
}

// A rule's limit; with detailed_metric or value_to_metric, its counters are under the request's stats key.
void resolution::add_limit(std::size_t i, const config::rate_limit& rule, const config::descriptor_node& node,
                           const std::optional<std::string>& stats_key) {
  auto stats = rule.stats;
  if (purpose_ == resolving::for_inspection) {
    keys[i].push_back(stats_key ? rule.stats_suffix.empty() ? *stats_key
                                                            : core::cat(*stats_key, ".", rule.stats_suffix)
                                : config::limit_stats_key(node, rule));
  } else if (stats_key) {
    const auto key = rule.stats_suffix.empty() ? *stats_key : core::cat(*stats_key, ".", rule.stats_suffix);
    stats = config::rule_stats::make_bounded(service.stats_, request.domain(), key);
  }
  work.items[i].limits.emplace_back().limit = limiter::applied_limit::of_rule(rule, node, stats);
}

// The node's table row for the descriptor's value (its last entry's, where the rule matched), in place of the
// rule's limit; a Redis row not cached is read before the decision goes on.
void resolution::use_table(std::size_t i, const config::descriptor_node& node) {
  auto& item = work.items[i];
  const std::string_view value = item.entries.back().value;
  const auto found = service.tables_->find(*node.table, value);
  if (found.fetch) {
    fetches_.push_back({*node.table, value});
    fetched_items_.push_back(i);
  } else if (found.row) {
    apply_table_row(item, *found.row, *node.limit, row_tags_[i]);
  }
}

void resolution::fetch_tables(std::function<void()> then) {
  service.tables_->fetch(fetches_, [this, then = std::move(then)] {
    for (std::size_t k = 0; k < fetches_.size(); ++k) {
      const std::size_t i = fetched_items_[k];
      const auto* node = nodes[i];
      // (a descriptor another's `replaces` took out has nothing to change)
      if (node == nullptr || work.items[i].limits.empty()) continue;
      const auto found = service.tables_->find(fetches_[k].ref, fetches_[k].value);
      if (found.row) apply_table_row(work.items[i], *found.row, *node->limit, row_tags_[i]);
    }
    then();
  });
}

}  // namespace sluice::ratelimit::service
