#include "ratelimit/service/service.hpp"

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <optional>
#include <unordered_set>

#include "core/strings.hpp"
#include "ratelimit/limiter/cache_key.hpp"
#include "ratelimit/service/request_state.hpp"
#include "ratelimit/service/response_extras.hpp"
#include "ratelimit/service/table_rows.hpp"
#include "tracing/proto_text.hpp"

namespace sluice::ratelimit::service {

namespace {

using code = rls_response;

}  // namespace

std::optional<std::string> validate_request(const rls_request& request) {
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

void request_state::resolve() {
  const int n = request_.descriptors_size();
  std::size_t total_entries = 0;
  for (const auto& d : request_.descriptors()) total_entries += static_cast<std::size_t>(d.entries_size());
  // (operator control may add one entry per descriptor: a holder_key rule's key, below)
  entries_.reserve(total_entries + (control_ ? static_cast<std::size_t>(n) : 0));
  work_.domain = request_.domain();
  work_.calendars = &service_.calendars_;
  work_.items.resize(static_cast<std::size_t>(n));
  nodes_.assign(static_cast<std::size_t>(n), nullptr);
  row_tags_.resize(static_cast<std::size_t>(n));
  if (control_) {
    control_->keys.resize(static_cast<std::size_t>(n));
    control_->replaced.assign(static_cast<std::size_t>(n), false);
  }
  const config::descriptor_node* domain = rules_.find_domain(request_.domain());
  std::unordered_set<std::string_view> replaced;

  for (int i = 0; i < n; ++i) {
    const auto& d = request_.descriptors(i);
    auto& item = work_.items[static_cast<std::size_t>(i)];
    const std::size_t first = entries_.size();
    for (const auto& e : d.entries()) entries_.push_back({e.key(), e.value()});
    item.entries =
        std::span<const config::entry>(entries_).subspan(first, static_cast<std::size_t>(d.entries_size()));
    item.hits =
        d.has_hits_addend() ? d.hits_addend().value() : std::max<std::uint64_t>(1, request_.hits_addend());
    item.negative = d.is_negative_hits();

    if (domain == nullptr) {
      if (control_) continue;  // (no stat changes)
      // Unknown domains are client-chosen: bounded, past the bound they count into one series.
      service_.stats_
          .get_counter_bounded(core::cat("ratelimit.service.rate_limit.",
                                         stats::sanitize_stat_name(request_.domain()), ".domain_not_found"),
                               "ratelimit.service.rate_limit.overflow.domain_not_found")
          .inc();
      continue;
    }
    if (d.has_limit()) {
      auto key = override_stats_key(request_.domain(), item.entries);
      auto& lw = item.limits.emplace_back();
      lw.limit.requests_per_unit = d.limit().requests_per_unit();
      lw.limit.unit = static_cast<config::unit>(d.limit().unit());
      if (control_) {
        control_->keys[static_cast<std::size_t>(i)].push_back(std::move(key));
      } else {
        lw.limit.stats = config::rule_stats::make_bounded(service_.stats_, request_.domain(), key);
      }
      continue;
    }
    auto m = rules_.get_limit(*domain, item.entries);
    if (m.node == nullptr && control_) {
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
    if (m.node == nullptr) continue;
    const auto& rule = *m.node->limit;
    nodes_[static_cast<std::size_t>(i)] = m.node;
    for (const auto& r : rule.replaces) replaced.insert(r);
    for (const auto& more : m.node->more_limits)
      for (const auto& r : more.replaces) replaced.insert(r);
    if (rule.unlimited) {
      item.unlimited = true;
      continue;
    }
    add_limit(i, rule, *m.node, m.stats_key);
    for (const auto& more : m.node->more_limits) add_limit(i, more, *m.node, m.stats_key);
    if (m.node->table && service_.tables_ != nullptr) use_table(static_cast<std::size_t>(i), *m.node);
    all_or_nothing_ = all_or_nothing_ || m.node->count_only_admitted;
    item.shared_values = std::move(m.shared_values);
  }

  // A limit named in another matched limit's `replaces` is not enforced and not counted (reference §3.2).
  if (!replaced.empty()) {
    for (std::size_t i = 0; i < work_.items.size(); ++i) {
      const auto* node = nodes_[i];
      if (node != nullptr && is_replaced(*node, replaced)) {
        work_.items[i].limits.clear();
        work_.items[i].unlimited = false;
        nodes_[i] = nullptr;
        if (control_) {
          control_->keys[i].clear();
          control_->replaced[i] = true;
        }
      }
    }
  }
}

// A rule's limit; with detailed_metric or value_to_metric, its counters are under the request's stats key.
void request_state::add_limit(std::size_t i, const config::rate_limit& rule,
                              const config::descriptor_node& node,
                              const std::optional<std::string>& stats_key) {
  auto stats = rule.stats;
  if (control_) {
    control_->keys[i].push_back(
        stats_key ? rule.stats_suffix.empty() ? *stats_key : core::cat(*stats_key, ".", rule.stats_suffix)
                  : config::limit_stats_key(node, rule));
  } else if (stats_key) {
    const auto key = rule.stats_suffix.empty() ? *stats_key : core::cat(*stats_key, ".", rule.stats_suffix);
    stats = config::rule_stats::make_bounded(service_.stats_, request_.domain(), key);
  }
  work_.items[i].limits.emplace_back().limit = limiter::applied_limit::of_rule(rule, node, stats);
}

// The node's table row for the descriptor's value (its last entry's, where the rule matched), in place of the
// rule's limit; a Redis row not cached is read before the decision goes on.
void request_state::use_table(std::size_t i, const config::descriptor_node& node) {
  auto& item = work_.items[i];
  const std::string_view value = item.entries.back().value;
  const auto found = service_.tables_->find(*node.table, value);
  if (found.fetch) {
    fetches_.push_back({*node.table, value});
    fetched_items_.push_back(i);
  } else if (found.row) {
    apply_table_row(item, *found.row, *node.limit, row_tags_[i]);
  }
}

void request_state::start_after_tables() {
  if (fetches_.empty()) return start();
  service_.tables_->fetch(fetches_, [this] {
    for (std::size_t k = 0; k < fetches_.size(); ++k) {
      const std::size_t i = fetched_items_[k];
      const auto* node = nodes_[i];
      // (a descriptor another's `replaces` took out has nothing to change)
      if (node == nullptr || work_.items[i].limits.empty()) continue;
      const auto found = service_.tables_->find(fetches_[k].ref, fetches_[k].value);
      if (found.row) apply_table_row(work_.items[i], *found.row, *node->limit, row_tags_[i]);
    }
    start();
  });
}

void request_state::start() {
  if (control_) return start_control();
  auto& limiter = service_.limiter_;
  work_.all_or_nothing = all_or_nothing_ || service_.settings_.count_only_admitted;
  for (std::size_t i = 0; i < work_.items.size(); ++i) work_.items[i].quota = is_quota(i);
  limiter.prepare(work_);
  if (execution_.recording() && !work_.ops.empty()) {
    const auto described = service_.backend_.describe_for_trace(work_.ops);
    if (described.name != nullptr) {
      backend_span_ = service_.tracer_->start_child(execution_, described.name);
      for (std::size_t i = 0; i < described.count_size; ++i)
        backend_span_.set_attribute(described.counts[i].first, described.counts[i].second);
    }
  }
  if (limiter.wants_precheck(work_)) {
    prechecking_ = true;
    service_.backend_.get(work_.ops, work_.values, *this);
  } else {
    service_.backend_.increment(work_.ops, work_.values, *this, work_.mode);
  }
}

void request_state::complete(const limiter::backend_error* error) noexcept {
  if (control_) return complete_control(error);
  std::unique_ptr<request_state> self(this);
  // The outcome is settled first and `done` called once, after: a `done` that throws is never called again.
  std::optional<service_error> failure;
  try {
    if (error != nullptr) {
      service_.backend_error_.inc();
      if (service_.settings_.fail_open) {
        // Fail open: every descriptor passes, uncounted; the backend error is still counted (redis_error).
        service_.fail_open_.inc();
        for (std::size_t i = 0; i < work_.items.size(); ++i) response_.add_statuses()->set_code(code::OK);
        response_.set_overall_code(code::OK);
      } else {
        failure = service_error{error_kind::unavailable, error->message};
      }
    } else if (prechecking_) {
      prechecking_ = false;
      service_.limiter_.apply_precheck(work_);
      self.release();
      service_.backend_.increment(work_.ops, work_.values, *this, work_.mode);
      return;
    } else {
      finish();
    }
  } catch (const std::exception& e) {
    failure = service_error{error_kind::internal, core::cat("internal error: ", e.what())};
  }
  backend_span_.end();
  execution_.end();
  auto done = std::move(done_);
  try {
    done(failure ? &*failure : nullptr);
  } catch (...) {
    // A completion must not throw; nothing more can be told to the caller.
  }
}

void request_state::finish() {
  limiter::small_vector<limiter::response_status*> statuses;
  statuses.reserve(work_.items.size());
  auto* list = response_.mutable_statuses();
  list->Reserve(static_cast<int>(work_.items.size()));
  for (std::size_t i = 0; i < work_.items.size(); ++i) statuses.push_back(list->Add());
  service_.limiter_.finish(work_, statuses);
  if (service_.top_ != nullptr) record_top(*service_.top_, statuses);

  const auto overall = overall_code();
  response_.set_overall_code(overall);
  const auto& settings = service_.settings_;
  if (settings.response_headers_enabled || settings.request_headers_enabled)
    add_limit_headers(response_, settings, work_.items, nodes_, request_.domain());
  if (settings.response_dynamic_metadata) add_dynamic_metadata(response_, request_, nodes_);
  if (settings.limited_by_metadata)
    add_limited_by(response_, request_.domain(), work_.items, nodes_, settings.global_shadow_mode);
  if (overall == code::OVER_LIMIT && settings.global_shadow_mode) {
    response_.set_overall_code(code::OK);
    service_.global_shadow_mode_.inc();
  }
}

// Each counted descriptor's hits, and its over-limit answer (the status says OVER_LIMIT: shadow mode's are
// not), under its rule: the node's stats path without the domain, or "(override)" for a limit sent in the
// request.
void request_state::record_top(stats::top_recorder& top,
                               std::span<limiter::response_status* const> statuses) const {
  const std::string_view domain = request_.domain();
  for (std::size_t i = 0; i < work_.items.size(); ++i) {
    const auto& item = work_.items[i];
    if (item.limits.empty() || item.negative) continue;
    const auto* node = nodes_[i];
    stats::top_id id(node != nullptr ? std::string_view(node->stats_key) : domain, node == nullptr);
    const auto shown = item.entries.first(std::min(item.entries.size(), stats::top_max_entries));
    for (const auto& e : shown) id.add_entry(e.key, e.value);
    const bool more = shown.size() < item.entries.size();
    if (more) id.add_more();
    auto describe = [&](std::string& text) {
      const std::string_view rule = node != nullptr ? config::rule_path(*node, domain) : "(override)";
      stats::top_text_begin(text, domain, rule);
      for (const auto& e : shown) {
        if (top.hash_values()) {
          stats::top_text_entry_hashed(text, e.key, e.value);
        } else {
          stats::top_text_entry(text, e.key, e.value);
        }
      }
      if (more) stats::top_text_more(text);
    };
    if (item.hits > 0) top.hit(work_.now, id.value(), item.hits, describe);  // a peek (hits 0) is no hit
    if (statuses[i]->code() == code::OVER_LIMIT) top.over_limit(work_.now, id.value(), 1, describe);
  }
}

// A quota descriptor (quota_mode on its rule, or QUOTA_MODE for every descriptor) over its limit shows it in
// its status, but does not make the request over limit on its own (reference §3.5).
bool request_state::is_quota(std::size_t i) const {
  return service_.settings_.global_quota_mode || (nodes_[i] != nullptr && nodes_[i]->quota_mode);
}

// OVER_LIMIT when a normal descriptor is over, or when there are quota descriptors and all of them are over.
// Unlimited descriptors count on neither side.
code::Code request_state::overall_code() const {
  bool normal_over = false;
  std::size_t quota = 0;
  std::size_t quota_over = 0;
  for (std::size_t i = 0; i < work_.items.size(); ++i) {
    if (work_.items[i].unlimited) continue;
    const bool over = response_.statuses(static_cast<int>(i)).code() == code::OVER_LIMIT;
    if (is_quota(i)) {
      ++quota;
      quota_over += over ? 1 : 0;
    } else {
      normal_over = normal_over || over;
    }
  }
  return normal_over || (quota > 0 && quota_over == quota) ? code::OVER_LIMIT : code::OK;
}

rate_limit_service::rate_limit_service(settings s, limiter::limiter& limiter, limiter::backend& backend,
                                       stats::store& stats)
    : settings_(std::move(s)),
      limiter_(limiter),
      backend_(backend),
      stats_(stats),
      service_error_(stats.get_counter("ratelimit.service.call.should_rate_limit.service_error")),
      backend_error_(stats.get_counter("ratelimit.service.call.should_rate_limit.redis_error")),
      global_shadow_mode_(stats.get_counter("ratelimit.service.global_shadow_mode")),
      fail_open_(stats.get_counter("ratelimit.service.fail_open")) {}

rate_limit_service::~rate_limit_service() {
  // Decisions still in flight (a stop that abandoned them) keep theirs: leaked rather than freed under them.
  if (current_ != nullptr && current_->decisions == 0) delete current_;
}

void rate_limit_service::set_rules(std::shared_ptr<const config::rule_set> rules) {
  if (current_ != nullptr && current_->decisions == 0) delete current_;
  current_ = new held_rules{std::move(rules), 0};
}

rate_limit_service::held_rules* rate_limit_service::acquire_rules() {
  ++current_->decisions;
  return current_;
}

void rate_limit_service::release_rules(held_rules* held) {
  if (--held->decisions == 0 && held != current_) delete held;
}

void rate_limit_service::should_rate_limit(const rls_request& request, rls_response& response, done_fn done,
                                           const tracing::span* parent) {
  tracing::span execution;
  if (tracer_ != nullptr && parent != nullptr) {
    execution = tracer_->start_child(*parent, "ShouldRateLimit Execution");
    if (execution.recording()) {
      execution.set_attribute("domain", request.domain());
      execution.set_attribute("request string", tracing::go_text(request));
    }
  }
  if (auto problem = validate_request(request)) {
    service_error_.inc();
    service_error e{error_kind::invalid_argument, std::move(*problem)};
    execution.end();
    done(&e);
    return;
  }
  if (current_ == nullptr || !current_->rules) {
    service_error_.inc();
    service_error e{error_kind::unavailable, "no rate limit configuration loaded"};
    execution.end();
    done(&e);
    return;
  }
  auto state =
      std::make_unique<request_state>(*this, request, response, std::move(done), std::move(execution));
  state->resolve();
  // From here the state owns itself: complete() deletes it, possibly before start() returns.
  state.release()->start_after_tables();
}

}  // namespace sluice::ratelimit::service
