#include "world.hpp"

#include <stdexcept>

#include "ratelimit/backends/memory/snapshot_file.hpp"
#include "ratelimit/config/yaml_loader.hpp"

namespace sluice::sim {

bool variant_backend::changes_ops(const std::string& variant) {
  return variant == "gcra bucket one deeper" || variant == "holder lease one second short" ||
         variant == "newest-first release";
}

namespace {

struct newest_slice_first {
  std::size_t operator()(const ratelimit::limiter::lease_slices& held) const { return held.size() - 1; }
};

}  // namespace

bool variant_backend::leases_newest_first(std::span<const ratelimit::limiter::counter_op> ops,
                                          std::span<ratelimit::limiter::op_result> results) {
  if (variant_ != "newest-first release" || ops.empty()) return false;
  for (const auto& op : ops)
    if (op.as<ratelimit::limiter::lease_op>() == nullptr) return false;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    const auto* l = op.as<ratelimit::limiter::lease_op>();
    auto found = leases_.find(op.key);
    if (found == leases_.end())
      found = leases_.emplace(std::string(op.key), ratelimit::limiter::lease_slices{}).first;
    const auto out = ratelimit::limiter::apply_lease_op(found->second, l->timing, op.now_us, op.increment,
                                                        op.refund, l->limit, newest_slice_first{});
    results[i].value = out.value;
    results[i].before = out.before;
    results[i].expired = out.expired;
    results[i].oldest_end_us = out.oldest_end_us;
  }
  return true;
}

std::vector<ratelimit::limiter::counter_op> variant_backend::changed(
    std::span<const ratelimit::limiter::counter_op> ops) const {
  std::vector<ratelimit::limiter::counter_op> out(ops.begin(), ops.end());
  for (auto& op : out) {
    if (auto* g = std::get_if<ratelimit::limiter::gcra_op>(&op.algorithm);
        g && variant_ == "gcra bucket one deeper")
      g->tolerance_us += g->emission_us;
    if (auto* h = std::get_if<ratelimit::limiter::holder_op>(&op.algorithm);
        h && variant_ == "holder lease one second short")
      h->lease_us -= 1'000'000;
  }
  return out;
}

// The memory store completes inline: the changed ops need live only during the call (the world gives no
// Redis backend, which reads the ops until it is answered, a variant_backend).
void variant_backend::increment(std::span<const ratelimit::limiter::counter_op> ops,
                                std::span<ratelimit::limiter::op_result> results,
                                ratelimit::limiter::completion& done, ratelimit::limiter::batch_mode mode) {
  if (mode == ratelimit::limiter::batch_mode::independent && leases_newest_first(ops, results))
    return done.complete(nullptr);
  const auto mine = changed(ops);
  real_.increment(mine, results, done, mode);
}

void variant_backend::get(std::span<const ratelimit::limiter::counter_op> ops,
                          std::span<ratelimit::limiter::op_result> results,
                          ratelimit::limiter::completion& done) {
  const auto mine = changed(ops);
  real_.get(mine, results, done);
}

void variant_backend::inspect(std::span<const ratelimit::limiter::counter_op> ops,
                              std::span<ratelimit::limiter::op_result> results,
                              ratelimit::limiter::completion& done) {
  const auto mine = changed(ops);
  real_.inspect(mine, results, done);
}

void variant_backend::overwrite(std::span<const ratelimit::limiter::counter_op> ops,
                                ratelimit::limiter::completion& done) {
  const auto mine = changed(ops);
  real_.overwrite(mine, done);
}

world::world(const std::string& yaml, int workers, checker& check, store_kind store,
             const std::string& variant, const std::string& tables_dir)
    : limiter_clock_(clock, variant == "window off by one second" ? 1'000'000 : 0),
      variant_(variant),
      store_(std::make_unique<ratelimit::backends::memory::memory_backend>(clock, 1'000'000)) {
  clock.set_micros(start_us);
  if (store == store_kind::redis) {
    if (variant_backend::changes_ops(variant))
      throw std::runtime_error("variant '" + variant + "' changes ops, which only the memory store takes");
    redis_ = std::make_unique<redis_stores>(workers, clock, check);
  }
  if (!tables_dir.empty()) {
    ratelimit::service::limit_tables_settings settings;
    settings.directory = tables_dir;
    tables_ = std::make_unique<ratelimit::service::limit_tables_source>(
        settings,
        [this](std::shared_ptr<const ratelimit::service::table_set> set) {
          for (auto& l : lookups_) l->set_tables(set);
        },
        stats_);
    for (int w = 0; w < workers; ++w)
      lookups_.push_back(std::make_unique<ratelimit::service::table_lookup>(std::chrono::seconds(10), nullptr,
                                                                            nullptr, w == 0));
    reload_tables();
  }
  rules_ = load(yaml);
  start_services(static_cast<std::size_t>(workers));
}

world::~world() = default;

void world::reload_tables() {
  // The known-wrong variant "table reload that keeps the old rows": a change that never reaches the workers.
  if (variant_ == "table reload that keeps the old rows" && !lookups_.empty() && rules_ != nullptr) return;
  const auto report = tables_->load();
  if (!report.folder_read || !report.errors.empty())
    throw std::runtime_error(
        "the simulation's limit tables do not load: " +
        (report.errors.empty() ? std::string("the folder cannot be read") : report.errors[0]));
}

std::shared_ptr<const ratelimit::config::rule_set> world::load(const std::string& yaml) {
  std::vector<ratelimit::config::config_file> files{{"sim.yaml", yaml}};
  auto loaded = ratelimit::config::load_rules(files, false, stats_, true, tables_.get());
  if (loaded.rules == nullptr)
    throw std::runtime_error("the simulation's rules do not load: " + loaded.error);
  return loaded.rules;
}

std::uint64_t world::read_counter(const std::string& key) {
  ratelimit::limiter::counter_op op;
  op.key = key;
  op.now_us = clock.now_micros();
  op.algorithm = ratelimit::limiter::fixed_window_op{};
  ratelimit::limiter::op_result result;
  struct done_flag final : ratelimit::limiter::completion {
    bool called = false;
    void complete(const ratelimit::limiter::backend_error*) noexcept override { called = true; }
  } done;
  ratelimit::limiter::backend& store = redis_ ? redis_->backend(0) : *store_;
  store.get({&op, 1}, {&result, 1}, done);
  if (redis_) redis_->run_until([&] { return done.called; });
  return result.value;
}

void world::reload(const std::string& yaml) {
  rules_ = load(yaml);
  for (auto& s : services_) s->set_rules(rules_);
}

void world::start_services(std::size_t workers) {
  services_.clear();
  limiters_.clear();
  variants_.clear();
  for (std::size_t w = 0; w < workers; ++w) {
    ratelimit::limiter::backend* worker_store = redis_
                                                    ? &redis_->backend(static_cast<int>(w))
                                                    : static_cast<ratelimit::limiter::backend*>(store_.get());
    if (variant_backend::changes_ops(variant_))
      worker_store =
          variants_.emplace_back(std::make_unique<variant_backend>(*worker_store, variant_, variant_leases_))
              .get();
    ratelimit::limiter::settings ls;
    ls.expiration_jitter_max_seconds = 0;  // (a replay must be exact)
    limiters_.push_back(std::make_unique<ratelimit::limiter::limiter>(ls, limiter_clock_));
    services_.push_back(std::make_unique<ratelimit::service::rate_limit_service>(
        ratelimit::service::settings{}, *limiters_.back(), *worker_store, stats_));
    services_.back()->set_rules(rules_);
    if (!lookups_.empty()) services_.back()->set_table_lookup(lookups_[w].get());
  }
}

void world::write_snapshot(const std::string& path) const {
  ratelimit::backends::memory::write_snapshot(*store_, path, clock.now_seconds());
}

void world::restart(const std::string& path) {
  auto fresh = std::make_unique<ratelimit::backends::memory::memory_backend>(clock, 1'000'000);
  // The known-wrong variant "restart that reads nothing back" starts empty, as a missing file would.
  const bool forget = variant_ == "restart that reads nothing back";
  const auto restored = ratelimit::backends::memory::restore_snapshot(*fresh, forget ? path + ".none" : path,
                                                                      clock.now_seconds());
  if (restored.error) throw std::runtime_error("the snapshot cannot be read back: " + *restored.error);
  const auto workers = services_.size();
  services_.clear();  // (before the store they decide on)
  limiters_.clear();
  variants_.clear();
  store_ = std::move(fresh);
  start_services(workers);
}

rls_response world::decide(int w, const rls_request& request) {
  rls_response response;
  bool called = false;
  std::string error;
  services_[static_cast<std::size_t>(w)]->should_rate_limit(request, response,
                                                            [&](const ratelimit::service::service_error* e) {
                                                              called = true;
                                                              if (e != nullptr) error = e->message;
                                                            });
  if (redis_) redis_->run_until([&] { return called; });
  if (!called) throw std::runtime_error("the memory store did not decide inline");
  if (!error.empty()) throw std::runtime_error("the service refused a simulated request: " + error);
  return response;
}

arrivals draw_arrivals(random& rng, const rule_shape& shape) {
  const int tenants = static_cast<int>(rng.between(1, 4));
  const int clients = static_cast<int>(rng.between(2, 12));
  return {shape.mean_gap_us, clients, tenants, rng.chance(0.3)};
}

std::string tenant_rules(const rule_shape& shape, const std::string& options, const std::string& descriptor) {
  return "domain: sim\ndescriptors:\n  - key: tenant\n" +
         (descriptor.empty() ? "" : "    " + descriptor + "\n") +
         "    rate_limit: {unit: " + std::string(shape.unit) +
         ", requests_per_unit: " + std::to_string(shape.requests) + options + "}\n";
}

rls_request tenant_report(int tenant, std::uint32_t hits, bool refund) {
  auto request = make_request("sim", {{"tenant", "t" + std::to_string(tenant)}}, 0, refund);
  request.mutable_descriptors(0)->mutable_hits_addend()->set_value(hits);
  return request;
}

rls_request make_request(const std::string& domain,
                         const std::vector<std::pair<std::string, std::string>>& entries, std::uint32_t hits,
                         bool negative) {
  rls_request r;
  r.set_domain(domain);
  auto* d = r.add_descriptors();
  for (const auto& [k, v] : entries) {
    auto* e = d->add_entries();
    e->set_key(k);
    e->set_value(v);
  }
  r.set_hits_addend(hits);
  d->set_is_negative_hits(negative);
  return r;
}

}  // namespace sluice::sim
