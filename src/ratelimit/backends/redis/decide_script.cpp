#include "ratelimit/backends/redis/decide_script.hpp"

#include <algorithm>
#include <variant>
#include <vector>

#include "core/strings.hpp"

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

std::string holder_slots_key(std::string_view key) {
  return core::cat(key, "_slots");
}

namespace {

// Ops with a second key: a sliding window's previous window, a concurrency limit's holders' slots.
bool two_keys(const limiter::counter_op& op) {
  return op.kind() == limiter::op_kind::sliding || op.per_holder();
}

// What the script is told of an op's algorithm (its spec, decide_script_lua.cpp): the limit and two numbers,
// by algorithm: sliding: the window's length and start (0: epoch-aligned); gcra: the emission interval and
// the tolerance (no limit); concurrency: the slice and the slices a lease spans, or per holder the lease.
struct spec_numbers {
  std::uint64_t limit = 0;
  std::int64_t first = 0, second = 0;
};

spec_numbers numbers_of(const limiter::counter_op& op) {
  struct visitor {
    spec_numbers operator()(const limiter::fixed_window_op& a) const { return {a.limit}; }
    spec_numbers operator()(const limiter::sliding_window_op& a) const {
      return {a.limit, a.window_us, a.window_start_us};
    }
    spec_numbers operator()(const limiter::gcra_op& a) const { return {0, a.emission_us, a.tolerance_us}; }
    spec_numbers operator()(const limiter::lease_op& a) const {
      return {a.limit, a.timing.slice_us, a.timing.slices};
    }
    spec_numbers operator()(const limiter::holder_op& a) const { return {a.limit, a.lease_us}; }
  };
  return std::visit(visitor{}, op.algorithm);
}

// The ops of one call mostly share a few rules: each distinct (kind, usage, limit and numbers) is sent once
// and named by its index, so an op costs the script two or three arguments.
struct spec {
  limiter::op_kind kind;
  bool per_holder;
  bool usage;
  std::uint64_t limit;
  std::int64_t first, second;  // numbers_of
  bool operator==(const spec&) const = default;
};

struct spec_table {
  std::vector<spec> specs;
  std::vector<std::size_t> spec_of;   // per op, in send order: its spec's index, from 1
  std::vector<std::size_t> first_op;  // per group, its first op's place in spec_of
};

spec_table specs_of(std::span<const script_group> groups, std::size_t ops) {
  spec_table t;
  t.spec_of.reserve(ops);
  t.first_op.reserve(groups.size());
  for (const auto& g : groups) {
    t.first_op.push_back(t.spec_of.size());
    for (auto i : g.indexes) {
      const auto& op = g.ops[i];
      const auto numbers = numbers_of(op);
      const spec s{op.kind(), op.per_holder(), op.usage, numbers.limit, numbers.first, numbers.second};
      auto it = std::find(t.specs.begin(), t.specs.end(), s);
      if (it == t.specs.end()) it = t.specs.insert(t.specs.end(), s);
      t.spec_of.push_back(static_cast<std::size_t>(it - t.specs.begin()) + 1);
    }
  }
  return t;
}

// Runs: groups in a row of the same independent GCRA ops (keys, specs and hits; no key twice in a group),
// which differ only in their time. Element g is the length of the run group g starts (1: no run).
std::vector<std::size_t> runs_of(std::span<const script_group> groups, const spec_table& t) {
  auto gcra_only = [&](const script_group& g) {
    for (std::size_t x = 0; x < g.indexes.size(); ++x) {
      const auto& op = g.ops[g.indexes[x]];
      if (op.kind() != limiter::op_kind::gcra || op.refund || op.usage) return false;
      for (std::size_t y = 0; y < x; ++y)
        if (g.ops[g.indexes[y]].key == op.key) return false;
    }
    return g.mode == limiter::batch_mode::independent;
  };
  auto same = [&](std::size_t a, std::size_t b) {
    const auto &ga = groups[a], &gb = groups[b];
    if (ga.indexes.size() != gb.indexes.size()) return false;
    for (std::size_t x = 0; x < ga.indexes.size(); ++x) {
      const auto &oa = ga.ops[ga.indexes[x]], &ob = gb.ops[gb.indexes[x]];
      if (oa.key != ob.key || oa.increment != ob.increment ||
          t.spec_of[t.first_op[a] + x] != t.spec_of[t.first_op[b] + x])
        return false;
    }
    return true;
  };
  std::vector<std::size_t> run(groups.size(), 1);
  for (std::size_t g = 0; g < groups.size(); g += run[g]) {
    if (gcra_only(groups[g]))
      while (g + run[g] < groups.size() && gcra_only(groups[g + run[g]]) && same(g, g + run[g])) ++run[g];
  }
  return run;
}

}  // namespace

void push_decide(rd::request& out, std::span<const script_group> groups, bool whole) {
  std::size_t ops = 0;
  for (const auto& g : groups) ops += g.indexes.size();
  const spec_table table = specs_of(groups, ops);
  const auto& [specs, spec_of, first_op] = table;
  const auto run = runs_of(groups, table);
  std::size_t keys = 0;
  for (std::size_t g = 0; g < groups.size(); g += run[g])
    for (auto i : groups[g].indexes) keys += two_keys(groups[g].ops[i]) ? 2 : 1;
  // The holders' slots keys, made once (the views into them must last until the request is encoded).
  std::vector<std::string> slots_keys;
  slots_keys.reserve(keys);
  // Every number's text lives in one buffer sized up front, so the views into it stay valid.
  std::string numbers;
  numbers.reserve((ops * 3 + specs.size() * 3 + groups.size() * 2 + 2) * 21);
  auto number = [&](std::int64_t n) {
    const std::size_t at = numbers.size();
    core::append_to(numbers, n);
    return std::string_view(numbers).substr(at);
  };
  std::vector<std::string_view> args;
  args.reserve(4 + keys + specs.size() * 4 + groups.size() * 3 + ops * 3);
  args.push_back(whole ? "EVAL" : "EVALSHA");
  args.push_back(whole ? decide_script : decide_script_sha());
  args.push_back(number(static_cast<std::int64_t>(keys)));
  for (std::size_t g = 0; g < groups.size(); g += run[g]) {
    for (auto i : groups[g].indexes) {
      const auto& op = groups[g].ops[i];
      args.push_back(op.key);
      if (const auto* sliding = op.as<limiter::sliding_window_op>()) args.push_back(sliding->previous_key);
      if (op.per_holder()) args.push_back(slots_keys.emplace_back(holder_slots_key(op.key)));
    }
  }
  args.push_back(number(static_cast<std::int64_t>(specs.size())));
  for (const auto& s : specs) {
    // Usage accounting in upper case.
    static constexpr std::string_view letters[2][4] = {{"c", "s", "g", "k"}, {"C", "S", "G", "K"}};
    args.push_back(s.per_holder ? "h" : letters[s.usage ? 1 : 0][static_cast<std::size_t>(s.kind)]);
    args.push_back(number(static_cast<std::int64_t>(s.limit)));
    args.push_back(number(s.first));
    args.push_back(number(s.second));
  }
  for (std::size_t gi = 0; gi < groups.size(); gi += run[gi]) {
    const auto& g = groups[gi];
    std::size_t n = first_op[gi];
    if (run[gi] > 1) {
      args.push_back("r");
      args.push_back(number(static_cast<std::int64_t>(run[gi])));
      args.push_back(number(static_cast<std::int64_t>(g.indexes.size())));
      for (auto i : g.indexes) {
        args.push_back(number(static_cast<std::int64_t>(spec_of[n++])));
        args.push_back(number(static_cast<std::int64_t>(g.ops[i].increment)));
      }
      for (std::size_t r = gi; r < gi + run[gi]; ++r)
        args.push_back(number(groups[r].ops[groups[r].indexes.front()].now_us));
      continue;
    }
    args.push_back(g.mode == limiter::batch_mode::all_or_nothing  ? "a"
                   : g.mode == limiter::batch_mode::evaluate_only ? "e"
                                                                  : "i");
    args.push_back(number(g.ops[g.indexes.front()].now_us));
    args.push_back(number(static_cast<std::int64_t>(g.indexes.size())));
    for (auto i : g.indexes) {
      const auto& op = g.ops[i];
      // Its spec and its role in the group's verdict, in one number.
      const std::uint32_t role = g.quota_as_advisory && op.role >= limiter::op_role::first_quota
                                     ? limiter::op_role::advisory
                                     : op.role;
      args.push_back(number(static_cast<std::int64_t>(spec_of[n++]) + (std::int64_t{role} << 24)));
      // Hits given back are sent negative.
      const auto hits = static_cast<std::int64_t>(op.increment);
      args.push_back(op.refund && hits == 0 ? "-0" : number(op.refund ? -hits : hits));
      if (op.kind() != limiter::op_kind::gcra && op.kind() != limiter::op_kind::concurrency)
        args.push_back(number(op.ttl_seconds));
      if (const auto* h = op.as<limiter::holder_op>()) args.push_back(h->holder.value_or(std::string_view()));
    }
  }
  out.push(std::span<const std::string_view>(args.data(), args.size()));
}

std::optional<bool> read_decide_reply(const rd::value& reply, std::size_t& at,
                                      std::span<const limiter::counter_op> ops,
                                      std::span<const std::size_t> indexes,
                                      std::span<limiter::op_result> results) {
  const auto& e = reply.elements;
  if (reply.type != rd::value::kind::array) return std::nullopt;
  auto next = [&](std::uint64_t& out) {
    if (at >= e.size() || e[at].type != rd::value::kind::integer || e[at].integer < 0) return false;
    out = static_cast<std::uint64_t>(e[at++].integer);
    return true;
  };
  std::uint64_t applied = 0;
  if (!next(applied)) return std::nullopt;
  for (auto index : indexes) {
    auto& r = results[index];
    const auto kind = ops[index].kind();
    if (!next(r.value)) return std::nullopt;
    if (kind == limiter::op_kind::concurrency) {
      std::uint64_t oldest = 0;
      if (!next(r.before) || !next(r.expired) || !next(oldest)) return std::nullopt;
      r.oldest_end_us = static_cast<std::int64_t>(oldest);
      if (ops[index].per_holder() && (!next(r.holders) || !next(r.holder_slots))) return std::nullopt;
      continue;
    }
    if (kind == limiter::op_kind::sliding && !next(r.previous)) return std::nullopt;
    if (kind != limiter::op_kind::gcra && !next(r.before)) return std::nullopt;
  }
  return applied == 1;
}

// How many reply elements a group takes.
std::size_t decide_reply_size(std::span<const limiter::counter_op> ops,
                              std::span<const std::size_t> indexes) {
  std::size_t n = 1;
  for (auto i : indexes) {
    const auto kind = ops[i].kind();
    n += kind == limiter::op_kind::gcra          ? 1
         : ops[i].per_holder()                   ? 6
         : kind == limiter::op_kind::concurrency ? 4
         : kind == limiter::op_kind::sliding     ? 3
                                                 : 2;
  }
  return n;
}

}  // namespace sluice::ratelimit::backends::redis
