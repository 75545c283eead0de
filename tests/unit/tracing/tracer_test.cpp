#include <doctest/doctest.h>

#include "tracing/tracer.hpp"

using namespace sluice;
using namespace sluice::tracing;

namespace {

struct fixture {
  stats::store stats;
  stats::counter& dropped = stats.get_counter("tracing.spans_dropped");
  sampler always{1.0};
  sampler never{0.0};
};

span_context parent_context(bool sampled) {
  span_context c;
  c.trace_id.fill(0x11);
  c.span_id.fill(0x22);
  c.sampled = sampled;
  c.tracestate = "k=v";
  return c;
}

}  // namespace

TEST_CASE("a request's spans: a root under the incoming context, children under it, queued when they end") {
  fixture f;
  span_queue queue(16);
  tracer t(f.always, queue, f.dropped);
  {
    auto server = t.start("server", span_kind::server, parent_context(true));
    REQUIRE(server.recording());
    server.set_attribute("rpc.system", std::string("grpc"));
    auto child = t.start_child(server, "child");
    child.set_attribute("n", std::int64_t{3});
    child.set_error("broken");
  }  // both end here: the child first
  auto spans = queue.take_all();
  REQUIRE(spans.size() == 2);
  const auto& child = spans[0];
  const auto& server = spans[1];
  CHECK(server.name == "server");
  CHECK(server.kind == span_kind::server);
  CHECK(server.trace_id == parent_context(true).trace_id);
  CHECK(server.parent_span_id == parent_context(true).span_id);
  CHECK(server.parent_is_remote);
  CHECK(server.trace_state == "k=v");
  CHECK(child.trace_id == server.trace_id);
  CHECK(child.parent_span_id == server.span_id);
  CHECK_FALSE(child.parent_is_remote);
  CHECK(child.span_id != server.span_id);
  CHECK(child.error);
  CHECK(child.status_message == "broken");
  CHECK(child.start_unix_nano >= server.start_unix_nano);
  CHECK(child.end_unix_nano <= server.end_unix_nano);
  CHECK(queue.size() == 0);
}

TEST_CASE("sampling: a parent's decision is followed, a new trace gets a fresh id") {
  fixture f;
  span_queue queue(16);
  tracer never(f.never, queue, f.dropped);
  CHECK_FALSE(never.start("s", span_kind::server, std::nullopt).recording());
  CHECK(never.start("s", span_kind::server, parent_context(true)).recording());
  tracer always(f.always, queue, f.dropped);
  auto unsampled = always.start("s", span_kind::server, parent_context(false));
  CHECK_FALSE(unsampled.recording());
  CHECK_FALSE(always.start_child(unsampled, "c").recording());
  queue.take_all();
  {
    auto a = always.start("a", span_kind::server, std::nullopt),
         b = always.start("b", span_kind::server, std::nullopt);
  }
  auto spans = queue.take_all();
  REQUIRE(spans.size() == 2);
  CHECK(spans[0].trace_id != spans[1].trace_id);
  CHECK_FALSE(spans[0].parent_span_id.has_value());
  CHECK(f.dropped.value() == 0);
}

TEST_CASE("a full queue drops spans and counts them, with the spans under a dropped one") {
  fixture f;
  span_queue queue(2);
  tracer t(f.always, queue, f.dropped);
  {
    auto a = t.start("a", span_kind::server, std::nullopt), b = t.start("b", span_kind::server, std::nullopt);
  }
  CHECK(queue.size() == 2);
  {
    auto c = t.start("c", span_kind::server, std::nullopt);
    CHECK_FALSE(c.recording());
    auto child = t.start_child(c, "child");
    CHECK_FALSE(child.recording());
  }
  CHECK(f.dropped.value() == 2);
  // Room made between start and end still cannot save a span that was not recorded; a recorded span that
  // finds the queue full when it ends is dropped then.
  queue.take_all();
  auto d = t.start("d", span_kind::server, std::nullopt);
  {
    auto e = t.start("e", span_kind::server, std::nullopt), g = t.start("g", span_kind::server, std::nullopt);
  }
  d.end();
  CHECK(f.dropped.value() == 3);
  CHECK(queue.take_all().size() == 2);
}
