#include "ratelimit/service/service.hpp"

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <optional>
#include <unordered_set>

#include "core/strings.hpp"
#include "ratelimit/limiter/cache_key.hpp"

namespace sluice::ratelimit::service {

namespace {

using code = rls_response;

std::optional<std::string> validate(const rls_request& request) {
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

// The stats key of a limit override: "<domain>.<k1>[_<v1>].<k2>[_<v2>]...".
std::string override_stats_key(std::string_view domain, std::span<const config::entry> entries) {
  std::string key(domain);
  for (const auto& e : entries) {
    key += core::cat(".", e.key);
    if (!e.value.empty()) key += core::cat("_", e.value);
  }
  return key;
}

}  // namespace

// One decision in flight: owns everything the backend and the response need until done is called.
class request_state final : public limiter::completion {
 public:
  request_state(rate_limit_service& service, const rls_request& request, rls_response& response,
                rate_limit_service::done_fn done)
      : service_(service),
        request_(request),
        response_(response),
        done_(std::move(done)),
        held_(service.acquire_rules()),
        rules_(*held_->rules) {}
  ~request_state() { service_.release_rules(held_); }
  request_state(const request_state&) = delete;
  request_state& operator=(const request_state&) = delete;

  void resolve();
  void start();
  void complete(const limiter::backend_error* error) noexcept override;

 private:
  void finish();
  void add_headers();

  rate_limit_service& service_;
  const rls_request& request_;
  rls_response& response_;
  rate_limit_service::done_fn done_;
  rate_limit_service::held_rules* held_;  // keeps the rule nodes alive until done
  const config::rule_set& rules_;
  boost::container::small_vector<config::entry, 8> entries_;
  limiter::small_vector<const std::string*>
      names_;  // per descriptor: the matched rule's name, for `replaces`
  limiter::work work_;
  bool prechecking_ = false;
};

void request_state::resolve() {
  const int n = request_.descriptors_size();
  std::size_t total_entries = 0;
  for (const auto& d : request_.descriptors()) total_entries += static_cast<std::size_t>(d.entries_size());
  entries_.reserve(total_entries);
  work_.domain = request_.domain();
  work_.items.resize(static_cast<std::size_t>(n));
  names_.assign(static_cast<std::size_t>(n), nullptr);
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

    if (domain == nullptr) {
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
      item.limit = limiter::applied_limit{
          d.limit().requests_per_unit(), static_cast<config::unit>(d.limit().unit()), nullptr, false,
          config::rule_stats::make_bounded(service_.stats_, request_.domain(), key)};
      continue;
    }
    auto m = rules_.get_limit(*domain, item.entries);
    if (m.node == nullptr) continue;
    const auto& rule = *m.node->limit;
    names_[static_cast<std::size_t>(i)] = &rule.name;
    for (const auto& r : rule.replaces) replaced.insert(r);
    if (rule.unlimited) {
      item.unlimited = true;
      continue;
    }
    item.limit = limiter::applied_limit{
        rule.requests_per_unit, rule.unit, &rule.name, m.node->shadow_mode,
        m.stats_key ? config::rule_stats::make_bounded(service_.stats_, request_.domain(), *m.stats_key)
                    : m.node->stats};
    item.shared_values = std::move(m.shared_values);
  }

  // A limit named in another matched limit's `replaces` is not enforced and not counted (reference §3.2).
  if (!replaced.empty()) {
    for (std::size_t i = 0; i < work_.items.size(); ++i) {
      if (names_[i] != nullptr && !names_[i]->empty() && replaced.contains(*names_[i])) {
        work_.items[i].limit.reset();
        work_.items[i].unlimited = false;
      }
    }
  }
}

void request_state::start() {
  auto& limiter = service_.limiter_;
  limiter.prepare(work_);
  if (limiter.wants_precheck(work_)) {
    prechecking_ = true;
    service_.backend_.get(work_.ops, work_.values, *this);
  } else {
    service_.backend_.increment(work_.ops, work_.values, *this);
  }
}

void request_state::complete(const limiter::backend_error* error) noexcept {
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
      service_.backend_.increment(work_.ops, work_.values, *this);
      return;
    } else {
      finish();
    }
  } catch (const std::exception& e) {
    failure = service_error{error_kind::internal, core::cat("internal error: ", e.what())};
  }
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

  bool over = std::ranges::any_of(*list, [](const auto& s) { return s.code() == code::OVER_LIMIT; });
  response_.set_overall_code(over ? code::OVER_LIMIT : code::OK);
  if (service_.settings_.response_headers_enabled) add_headers();
  if (over && service_.settings_.global_shadow_mode) {
    response_.set_overall_code(code::OK);
    service_.global_shadow_mode_.inc();
  }
}

// upstream's choice (reference §6.2): the limited status with the least remaining, but the last OVER_LIMIT
// wins.
void request_state::add_headers() {
  const code::DescriptorStatus* chosen = nullptr;
  std::uint32_t min_remaining = UINT32_MAX;
  for (const auto& s : response_.statuses()) {
    if (s.has_current_limit() && s.limit_remaining() < min_remaining) {
      min_remaining = s.limit_remaining();
      chosen = &s;
    }
    if (s.code() == code::OVER_LIMIT) chosen = &s;
  }
  if (chosen == nullptr) return;
  const auto& settings = service_.settings_;
  auto add = [&](const std::string& name, std::uint64_t value) {
    auto* h = response_.add_response_headers_to_add();
    h->set_key(name);
    h->set_value(core::cat(value));
  };
  std::int64_t unit_seconds = config::unit_seconds(static_cast<config::unit>(chosen->current_limit().unit()));
  add(settings.limit_header, chosen->current_limit().requests_per_unit());
  add(settings.remaining_header, chosen->limit_remaining());
  add(settings.reset_header,
      static_cast<std::uint64_t>(limiter::seconds_until_reset(work_.now, unit_seconds)));
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

void rate_limit_service::should_rate_limit(const rls_request& request, rls_response& response, done_fn done) {
  if (auto problem = validate(request)) {
    service_error_.inc();
    service_error e{error_kind::invalid_argument, std::move(*problem)};
    done(&e);
    return;
  }
  if (current_ == nullptr || !current_->rules) {
    service_error_.inc();
    service_error e{error_kind::unavailable, "no rate limit configuration loaded"};
    done(&e);
    return;
  }
  auto state = std::make_unique<request_state>(*this, request, response, std::move(done));
  state->resolve();
  // From here the state owns itself: complete() deletes it, possibly before start() returns.
  state.release()->start();
}

}  // namespace sluice::ratelimit::service
