#include "ratelimit/service/decision.hpp"

#include <algorithm>

#include "core/strings.hpp"
#include "ratelimit/service/response_extras.hpp"

namespace sluice::ratelimit::service {

namespace {

using code = rls_response;

}  // namespace

void decision::resolve() {
  resolution_.resolve();
}

void decision::start() {
  resolution_.after_tables([this] { send(); });
}

void decision::send() {
  auto& limiter = service_.limiter_;
  work_.all_or_nothing = resolution_.all_or_nothing || service_.settings_.count_only_admitted;
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

void decision::complete(const limiter::backend_error* error) noexcept {
  std::unique_ptr<decision> self(this);
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

void decision::finish() {
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
    add_limit_headers(response_, settings, work_.items, resolution_.nodes, resolution_.request.domain());
  if (settings.response_dynamic_metadata)
    add_dynamic_metadata(response_, resolution_.request, resolution_.nodes);
  if (settings.limited_by_metadata)
    add_limited_by(response_, resolution_.request.domain(), work_.items, resolution_.nodes,
                   settings.global_shadow_mode);
  if (overall == code::OVER_LIMIT && settings.global_shadow_mode) {
    response_.set_overall_code(code::OK);
    service_.global_shadow_mode_.inc();
  }
}

// Each counted descriptor's hits, and its over-limit answer (the status says OVER_LIMIT: shadow mode's are
// not), under its rule: the node's stats path without the domain, or "(override)" for a limit sent in the
// request.
void decision::record_top(stats::top_recorder& top,
                          std::span<limiter::response_status* const> statuses) const {
  const std::string_view domain = resolution_.request.domain();
  for (std::size_t i = 0; i < work_.items.size(); ++i) {
    const auto& item = work_.items[i];
    if (item.limits.empty() || item.negative) continue;
    const auto* node = resolution_.nodes[i];
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
bool decision::is_quota(std::size_t i) const {
  return service_.settings_.global_quota_mode ||
         (resolution_.nodes[i] != nullptr && resolution_.nodes[i]->quota_mode);
}

// OVER_LIMIT when a normal descriptor is over, or when there are quota descriptors and all of them are over.
// Unlimited descriptors count on neither side.
code::Code decision::overall_code() const {
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

}  // namespace sluice::ratelimit::service
