"""OpenTelemetry tracing (TRACING_* and OTEL_* settings; reference §1.9; issue 16), exported to the collectors of
tests/e2e/otlp_collector.py: the spans of ShouldRateLimit over gRPC and POST /json with their attributes, the
Redis and memcached backends' spans, the resource, the incoming W3C and B3 context, parent-based ratio sampling,
the exporter's settings (endpoints, headers, compression, TLS, protocol, batch size), a collector that is down or
refuses a batch, and bad settings that stop start-up."""

import itertools
import json
import os
import re
import socket
import time
import unittest

import grpc

import harness
import rls_pb2  # noqa: E402  (generated; harness put it on sys.path)
from harness import RedisServer, Sluice, TlsCerts
from memcached import MemcachedServer
from otlp_collector import HttpCollector, collector

RULES = """
domain: trace
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000}
  - key: once
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: ps
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: free
"""

DOMAIN = 'trace'
SERVER = {'grpc': 'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit', 'json': 'POST /json'}
EXECUTION = 'ShouldRateLimit Execution'
REMAINING = 'NewJsonHandler Remaining Execution'
REDIS_SPAN = 'Redis Pipeline Execution'
MEMCACHED_SPAN = 'Memcached Fetch Execution'
TRANSPORTS = ('grpc', 'json')
OK = {'grpc': 'OK', 'json': 200}

UUID4 = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$')
HEX_ID = {16: re.compile(r'^[0-9a-f]{32}$'), 8: re.compile(r'^[0-9a-f]{16}$')}

# Spans reach the collector ~100 ms after a request instead of the default 5 s.
FAST_EXPORT = {'TRACING_ENABLED': 'true', 'OTEL_BSP_SCHEDULE_DELAY': '100'}
SPAN_WAIT = 8.0  # seconds to wait for spans that should come within ~0.2 s
QUIET = 0.6      # seconds without exports after which nothing more is expected (6 schedule delays)

# OTLP span flags (make_export_request): bit 8 "whether the parent is remote is known", bit 9 "it is".
FLAG_REMOTE_KNOWN, FLAG_REMOTE = 0x100, 0x200

_markers = itertools.count(1)


def marker():
    """A descriptor value no other request uses: finds a request's spans through its "request string"."""
    return 'm%d-%s' % (next(_markers), os.urandom(4).hex())


def new_ids():
    """A random (trace id, span id) in hex, as an upstream service sends them."""
    return os.urandom(16).hex(), os.urandom(8).hex()


def traceparent(trace_id, span_id, flags='01'):
    return '00-%s-%s-%s' % (trace_id, span_id, flags)


def tracing_env(col, **extra):
    """Tracing on with fast batches, exporting to `col` over its own protocol."""
    env = dict(FAST_EXPORT, OTEL_EXPORTER_OTLP_ENDPOINT=col.endpoint)
    if col.transport == 'grpc':
        env['TRACING_EXPORTER_PROTOCOL'] = 'grpc'
    env.update(extra)
    return env


def wait_healthy(sluice):
    # a backend in another process: answering decisions only once connected
    harness.wait_until(lambda: sluice.healthcheck()[0] == 200 and sluice.health() == 'SERVING', timeout=5,
                       message='sluice healthy', describe=sluice.log_tail)


# ---------------------------------------------------------------------------------------------------------------
# Requests carrying trace headers


def _should_rate_limit(port):
    return harness.channel(port).unary_unary('/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
                                             request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
                                             response_deserializer=rls_pb2.RateLimitResponse.FromString)


def send(transport, sluice, descriptors, headers=None, domain=DOMAIN, hits_addend=None, body=None):
    """One decision over 'grpc' or 'json' with `headers` as gRPC metadata or HTTP headers. -> over gRPC the overall
    code's name ('OK', 'OVER_LIMIT') or, on an error, the status code's name ('INVALID_ARGUMENT'); over /json the
    HTTP status (200, 429, 400). `body`: a /json body sent verbatim instead."""
    headers = headers or {}
    if transport == 'grpc':
        request = harness.rls_request_proto(domain, descriptors, hits_addend)
        try:
            response = _should_rate_limit(sluice.grpc_port)(request, metadata=tuple(headers.items()), timeout=5)
        except grpc.RpcError as e:
            return e.code().name
        return rls_pb2.RateLimitResponse.Code.Name(response.overall_code)
    if body is None:
        body = json.dumps(harness.rls_request_json(domain, descriptors, hits_addend))
    status, _, _ = harness.http_request(sluice.http_port, '/json', body=body, method='POST',
                                        headers=dict({'Content-Type': 'application/json'}, **headers))
    return status


# ---------------------------------------------------------------------------------------------------------------
# Finding a request's spans


def request_string(span):
    return str(span.attributes.get('request string', ''))


def spans_of_trace(col, trace_id, names, timeout=SPAN_WAIT):
    """Waits until the trace has a span of each name in `names`. -> {name: span} of all its spans so far; fails
    when a name repeats (a batch exported twice, or a span recorded twice)."""

    def complete():
        spans = col.trace(trace_id)
        return spans if set(names) <= {s.name for s in spans} else None

    spans = harness.wait_until(complete, timeout=timeout, message='spans %s of trace %s' % (sorted(names), trace_id),
                               describe=col.describe)
    by_name = {}
    for s in spans:
        if s.name in by_name:
            raise AssertionError('two spans named %r in trace %s: %r' % (s.name, trace_id, spans))
        by_name[s.name] = s
    return by_name


def spans_of_request(col, mark, names, timeout=SPAN_WAIT):
    """The spans of the one request that had a descriptor value `mark` (its execution span's request string shows
    it), once its trace has a span of each name in `names`. -> {name: span}."""
    found = col.wait_for_spans(lambda s: s.name == EXECUTION and 'value:"%s"' % mark in request_string(s),
                               timeout=timeout, message='the execution span of the request with %s' % mark)
    if len(found) != 1:
        raise AssertionError('%d execution spans for the request with %s: %r' % (len(found), mark, found))
    return spans_of_trace(col, found[0].trace_id, names, timeout)


class TracingCase(unittest.TestCase):
    def collector(self, protocol='http', **kwargs):
        c = collector(protocol, **kwargs)
        self.addCleanup(c.stop)
        return c

    def sluice(self, env, **kwargs):
        """A Sluice with RULES, stopped (before the collectors made earlier: cleanups run last first) at the end."""
        s = Sluice(rules={'trace.yaml': RULES}, env=env, **kwargs)
        self.addCleanup(s.close)
        return s

    def roundtrip(self, sluice, col, transport='grpc', timeout=SPAN_WAIT):
        """One decision with a fresh marker over `transport`. -> its spans {name: span} once its server and execution
        spans reached `col`."""
        mark = marker()
        self.assertEqual(send(transport, sluice, [[('k', mark)]]), OK[transport], sluice.log_tail(10))
        return spans_of_request(col, mark, {SERVER[transport], EXECUTION}, timeout)

    def assertChild(self, child, parent):
        """`child` is an INTERNAL span of the same trace whose parent is `parent`."""
        self.assertEqual(child.kind, 'INTERNAL', child)
        self.assertEqual(child.trace_id, parent.trace_id, child)
        self.assertEqual(child.parent_span_id, parent.span_id, (child, parent))
        self.assertNotEqual(child.span_id, parent.span_id, child)
        self.assertRegex(child.span_id, HEX_ID[8])

    def assertInt(self, span, name, value):
        got = span.attributes.get(name)
        self.assertTrue(isinstance(got, int) and not isinstance(got, bool), '%s: %r is no int: %r' % (name, got, span))
        self.assertEqual(got, value, span)


class SharedServer(TracingCase):
    """One collector (`protocol`) and one Sluice exporting to it (with `env` and extra_env()) for the whole class;
    the backend servers start_backends() makes are started first and closed last."""

    protocol = 'http'
    env = {}
    col = None
    s = None
    backends = ()

    @classmethod
    def start_backends(cls):
        """-> the servers the class's Sluice uses (Redis, memcached), started."""
        return ()

    def store_span(self, transport, entries, name):
        """One decision with `entries` (key, value; a None value becomes a fresh marker) -> its store span `name`,
        checked to be a child of its "ShouldRateLimit Execution"."""
        mark = marker()
        descriptors = [[(k, v or mark)] for k, v in entries]
        self.assertEqual(send(transport, self.s, descriptors), OK[transport])
        spans = spans_of_request(self.col, mark, {SERVER[transport], EXECUTION, name})
        self.assertChild(spans[name], spans[EXECUTION])
        return spans[name]

    @classmethod
    def extra_env(cls):
        return {}

    @classmethod
    def setUpClass(cls):
        cls.backends = []
        try:
            for server in cls.start_backends():
                cls.backends.append(server)
            cls.col = collector(cls.protocol)
            cls.s = Sluice(rules={'trace.yaml': RULES}, env=tracing_env(cls.col, **dict(cls.env, **cls.extra_env())))
            if cls.backends:
                wait_healthy(cls.s)
        except BaseException:
            cls.tearDownClass()  # not called by unittest when setUpClass fails
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.s is not None:
                cls.s.close()
                cls.s = None
            if cls.col is not None:
                cls.col.stop()
                cls.col = None
        finally:
            for server in cls.backends:
                server.close()
            cls.backends = []


# ---------------------------------------------------------------------------------------------------------------
# Off by default


class Disabled(TracingCase):
    def test_off_by_default_and_when_false_nothing_is_exported(self):
        col = self.collector()
        for enabled in (None, 'false'):
            with self.subTest(TRACING_ENABLED=enabled):
                # Everything else set, and a sampled parent: still no export, not even a connection.
                env = {'TRACING_ENABLED': enabled, 'OTEL_BSP_SCHEDULE_DELAY': '100',
                       'OTEL_EXPORTER_OTLP_ENDPOINT': col.endpoint}
                with Sluice(rules={'trace.yaml': RULES}, env=env) as s:
                    for t in TRANSPORTS:
                        headers = {'traceparent': traceparent(*new_ids())}
                        self.assertEqual(send(t, s, [[('k', 'off')]], headers), OK[t])
                    self.assertIn('Tracing disabled', s.log())
                    time.sleep(QUIET)
                    self.assertEqual((col.exports, col.errors), ([], []), col.describe())


# ---------------------------------------------------------------------------------------------------------------
# The spans of a decision (memory backend, OTLP/HTTP, every request sampled)


class Spans(SharedServer):
    def test_grpc_server_span_and_its_execution_child(self):
        mark = marker()
        t0 = time.time_ns()
        self.assertEqual(send('grpc', self.s, [[('k', mark)], [('free', 'x')]]), 'OK')
        t1 = time.time_ns()
        spans = spans_of_request(self.col, mark, {SERVER['grpc'], EXECUTION})
        server, execution = spans[SERVER['grpc']], spans[EXECUTION]
        self.assertEqual(server.kind, 'SERVER', server)
        self.assertEqual(server.parent_span_id, '', server)  # no context came in: a new trace
        self.assertRegex(server.trace_id, HEX_ID[16])
        self.assertNotEqual(server.trace_id, '0' * 32)
        self.assertRegex(server.span_id, HEX_ID[8])
        self.assertEqual({k: server.attributes.get(k) for k in ('rpc.system', 'rpc.service', 'rpc.method')},
                         {'rpc.system': 'grpc', 'rpc.service': 'envoy.service.ratelimit.v3.RateLimitService',
                          'rpc.method': 'ShouldRateLimit'}, server)
        self.assertInt(server, 'rpc.grpc.status_code', 0)
        self.assertChild(execution, server)
        self.assertEqual(execution.attributes.get('domain'), DOMAIN, execution)
        for part in ('domain:"trace"', 'key:"k"', 'value:"%s"' % mark, 'key:"free"', 'value:"x"'):
            self.assertIn(part, request_string(execution))
        # Times: inside the call, the child inside its parent.
        slack = 500 * 10**6
        self.assertTrue(t0 - slack <= server.start <= execution.start <= execution.end <= server.end <= t1 + slack,
                        (t0, server.start, execution.start, execution.end, server.end, t1))
        self.assertEqual(server.flags & (FLAG_REMOTE_KNOWN | FLAG_REMOTE), FLAG_REMOTE_KNOWN, hex(server.flags))

    def test_grpc_over_limit_is_still_status_code_0(self):
        # OVER_LIMIT is an answer, not a gRPC error.
        mark = marker()
        self.assertEqual(send('grpc', self.s, [[('once', mark)]], hits_addend=2), 'OVER_LIMIT')
        server = spans_of_request(self.col, mark, {SERVER['grpc'], EXECUTION})[SERVER['grpc']]
        self.assertInt(server, 'rpc.grpc.status_code', 0)

    def test_grpc_invalid_argument_is_status_code_3(self):
        trace_id, span_id = new_ids()  # found by its trace: the request string of an invalid request is no help
        headers = {'traceparent': traceparent(trace_id, span_id)}
        self.assertEqual(send('grpc', self.s, [[('k', 'v')]], headers, domain=''), 'INVALID_ARGUMENT')
        server = spans_of_trace(self.col, trace_id, {SERVER['grpc']})[SERVER['grpc']]
        self.assertInt(server, 'rpc.grpc.status_code', 3)
        self.assertEqual(server.attributes.get('rpc.method'), 'ShouldRateLimit', server)

    def test_memory_backend_has_no_backend_span(self):
        spans = self.roundtrip(self.s, self.col)
        trace_id = spans[EXECUTION].trace_id
        self.col.settle(QUIET)
        self.assertEqual(sorted(s.name for s in self.col.trace(trace_id)), sorted([SERVER['grpc'], EXECUTION]))

    def test_json_server_span_and_its_two_children(self):
        mark = marker()
        t0 = time.time_ns()
        self.assertEqual(send('json', self.s, [[('k', mark)]]), 200)
        t1 = time.time_ns()
        spans = spans_of_request(self.col, mark, {SERVER['json'], EXECUTION, REMAINING})
        server, execution, remaining = spans[SERVER['json']], spans[EXECUTION], spans[REMAINING]
        self.assertEqual(server.kind, 'SERVER', server)
        self.assertEqual(server.parent_span_id, '', server)
        self.assertEqual(server.attributes.get('http.method'), 'POST', server)
        self.assertEqual(server.attributes.get('http.target'), '/json', server)
        self.assertInt(server, 'http.status_code', 200)
        self.assertChild(execution, server)
        self.assertChild(remaining, server)
        self.assertEqual(execution.attributes.get('domain'), DOMAIN, execution)
        self.assertIn('domain:"trace"', request_string(execution))
        self.assertIn('overall_code:OK', str(remaining.attributes.get('response')), remaining)
        slack = 500 * 10**6
        for child in (execution, remaining):
            self.assertTrue(t0 - slack <= server.start <= child.start <= child.end <= server.end <= t1 + slack,
                            (t0, server, child, t1))

    def test_json_over_limit_is_429(self):
        mark = marker()
        self.assertEqual(send('json', self.s, [[('once', mark)]], hits_addend=2), 429)
        spans = spans_of_request(self.col, mark, {SERVER['json'], EXECUTION, REMAINING})
        self.assertInt(spans[SERVER['json']], 'http.status_code', 429)
        self.assertIn('overall_code:OVER_LIMIT', str(spans[REMAINING].attributes.get('response')), spans[REMAINING])

    def test_json_bad_body_is_400(self):
        trace_id, span_id = new_ids()
        status = send('json', self.s, None, {'traceparent': traceparent(trace_id, span_id)}, body='{not json')
        self.assertEqual(status, 400)
        server = spans_of_trace(self.col, trace_id, {SERVER['json']})[SERVER['json']]
        self.assertInt(server, 'http.status_code', 400)
        self.assertEqual((server.attributes.get('http.method'), server.attributes.get('http.target')),
                         ('POST', '/json'), server)

    def test_every_request_is_sampled_at_the_default_rate(self):
        # A hundred in a row, so the exporter goes through many batches on a keep-alive connection.
        marks = [(TRANSPORTS[i % 2], marker()) for i in range(100)]
        for t, mark in marks:
            self.assertEqual(send(t, self.s, [[('k', mark)]]), OK[t], self.s.log_tail(10))
        for t, mark in marks:
            spans_of_request(self.col, mark, {SERVER[t], EXECUTION} | ({REMAINING} if t == 'json' else set()))
        self.assertTrue(self.s.running())

    def test_default_resource(self):
        server = self.roundtrip(self.s, self.col)[SERVER['grpc']]
        self.assertEqual(server.resource.get('service.name'), 'RateLimit', server.resource)
        self.assertEqual(server.resource.get('service.namespace', ''), '', server.resource)
        instance = server.resource.get('service.instance.id')
        self.assertRegex(str(instance), UUID4)
        # The same in every batch of this process (the only one exporting to this collector).
        self.assertEqual({s.resource.get('service.instance.id') for s in self.col.spans()}, {instance})
        self.assertNotIn('Tracing disabled', self.s.log())

    def test_instance_id_is_new_for_each_process(self):
        first = self.roundtrip(self.s, self.col)[SERVER['grpc']].resource.get('service.instance.id')
        col = self.collector()
        with Sluice(rules={'trace.yaml': RULES}, env=tracing_env(col)) as other:
            second = self.roundtrip(other, col)[SERVER['grpc']].resource.get('service.instance.id')
        self.assertRegex(str(second), UUID4)
        self.assertNotEqual(first, second)

    def test_exports_are_protobuf_posts_to_v1_traces(self):
        self.roundtrip(self.s, self.col, 'json')
        exports = self.col.wait_for_exports(1)
        self.assertEqual(self.col.refused(), [], self.col.describe())
        for e in exports:
            self.assertEqual((e.method, e.path), ('POST', '/v1/traces'), e)
            self.assertEqual(e.headers.get('content-type'), 'application/x-protobuf', e.headers)


class Resource(TracingCase):
    def test_service_name_namespace_and_instance_id_from_the_settings(self):
        col = self.collector()
        s = self.sluice(tracing_env(col, TRACING_SERVICE_NAME='edge-rls', TRACING_SERVICE_NAMESPACE='payments',
                                    TRACING_SERVICE_INSTANCE_ID='rls-7'))
        server = self.roundtrip(s, col)[SERVER['grpc']]
        self.assertEqual({k: server.resource.get(k) for k in ('service.name', 'service.namespace',
                                                               'service.instance.id')},
                         {'service.name': 'edge-rls', 'service.namespace': 'payments', 'service.instance.id': 'rls-7'})

    def test_opentelemetry_variables_win_over_tracing_ones(self):
        col = self.collector()
        s = self.sluice(tracing_env(col, TRACING_SERVICE_NAME='envoy-ratelimit', TRACING_SERVICE_NAMESPACE='gw',
                                    OTEL_SERVICE_NAME='edge-limits',
                                    OTEL_RESOURCE_ATTRIBUTES='service.namespace=team%20a,deployment.environment=prod'))
        server = self.roundtrip(s, col)[SERVER['grpc']]
        self.assertEqual({k: server.resource.get(k) for k in ('service.name', 'service.namespace',
                                                               'deployment.environment')},
                         {'service.name': 'edge-limits', 'service.namespace': 'team a', 'deployment.environment': 'prod'})

    def test_otel_sdk_disabled_turns_tracing_off(self):
        col = self.collector()
        s = self.sluice(tracing_env(col, OTEL_SDK_DISABLED='true'))
        self.assertIn('Tracing disabled', s.log())

    def test_otel_traces_sampler_over_tracing_sampling_rate(self):
        col = self.collector()
        # TRACING_SAMPLING_RATE=0 alone records nothing without a parent; always_on records even what an
        # unsampled parent asked not to.
        s = self.sluice(tracing_env(col, TRACING_SAMPLING_RATE='0', OTEL_TRACES_SAMPLER='always_on'))
        self.roundtrip(s, col)
        trace_id, span_id = new_ids()
        self.assertEqual(send('grpc', s, [[('k', marker())]], {'traceparent': traceparent(trace_id, span_id, '00')}),
                         'OK')
        spans_of_trace(col, trace_id, {SERVER['grpc'], EXECUTION})
        self.assertIn('(always_on)', s.log())
        log = Sluice.failed_start(self, tracing_env(col, OTEL_TRACES_SAMPLER='jaeger_remote'))
        self.assertIn('OTEL_TRACES_SAMPLER', log)


# ---------------------------------------------------------------------------------------------------------------
# Backends' spans, under "ShouldRateLimit Execution"


class RedisSpans(SharedServer):
    @classmethod
    def start_backends(cls):
        return [RedisServer()]

    @classmethod
    def extra_env(cls):
        return dict(cls.backends[0].sluice_env(), BACKEND_TYPE='redis')

    def test_pipeline_span_counts_two_commands_per_limited_key(self):
        # INCRBY + EXPIRE per descriptor with a limit; 'free' has none and is not counted.
        cases = [([('k', None)], 2), ([('k', None)], 2), ([('k', None), ('once', None), ('free', 'x')], 4)]
        for i, (entries, length) in enumerate(cases):
            t = TRANSPORTS[i % 2]
            with self.subTest(transport=t, descriptors=len(entries)):
                pipeline = self.store_span(t, entries, REDIS_SPAN)
                self.assertInt(pipeline, 'pipeline length', length)
                self.assertInt(pipeline, 'perSecondPipeline length', 0)


class RedisPerSecondSpans(SharedServer):
    @classmethod
    def start_backends(cls):
        yield RedisServer()
        yield RedisServer()

    @classmethod
    def extra_env(cls):
        main, per_second = cls.backends
        return dict(main.sluice_env(), BACKEND_TYPE='redis', REDIS_PERSECOND='true',
                    **per_second.sluice_env(prefix='REDIS_PERSECOND_'))

    def test_per_second_keys_are_counted_in_their_own_pipeline(self):
        pipeline = self.store_span('grpc', [('k', None), ('ps', None), ('once', None)], REDIS_SPAN)
        self.assertInt(pipeline, 'pipeline length', 4)
        self.assertInt(pipeline, 'perSecondPipeline length', 2)


class MemcachedSpans(SharedServer):
    @classmethod
    def start_backends(cls):
        return [MemcachedServer()]

    @classmethod
    def extra_env(cls):
        return {'BACKEND_TYPE': 'memcache', 'MEMCACHE_HOST_PORT': '127.0.0.1:%d' % cls.backends[0].port}

    def test_fetch_span_counts_the_keys_to_get(self):
        cases = [([('k', None)], 1), ([('k', None), ('once', None), ('free', 'x')], 2)]
        for i, (entries, length) in enumerate(cases):
            t = TRANSPORTS[i % 2]
            with self.subTest(transport=t, descriptors=len(entries)):
                fetch = self.store_span(t, entries, MEMCACHED_SPAN)
                self.assertInt(fetch, 'keysToGet length', length)


# ---------------------------------------------------------------------------------------------------------------
# The incoming trace context


class Propagation(SharedServer):
    def assertContinues(self, transport, headers, trace_id, parent_id):
        """A sampled request with `headers` gives a server span in trace `trace_id` whose parent is `parent_id`, and an
        execution span under it. -> the server span."""
        mark = marker()
        self.assertEqual(send(transport, self.s, [[('k', mark)]], headers), OK[transport])
        spans = spans_of_trace(self.col, trace_id, {SERVER[transport], EXECUTION})
        server, execution = spans[SERVER[transport]], spans[EXECUTION]
        self.assertIn('value:"%s"' % mark, request_string(execution))
        self.assertEqual(server.kind, 'SERVER', server)
        self.assertEqual(server.parent_span_id, parent_id, server)
        self.assertChild(execution, server)
        self.assertEqual(server.flags & FLAG_REMOTE, FLAG_REMOTE, hex(server.flags))  # its parent came in
        self.assertEqual(execution.flags & FLAG_REMOTE, 0, hex(execution.flags))
        return server

    def assertNotExported(self, transport, headers, trace_id):
        """A request with `headers` (a parent that did not sample) exports nothing in `trace_id`. Checked after a
        sampled request sent later over the same transport arrived, and a quiet spell."""
        self.assertEqual(send(transport, self.s, [[('k', marker())]], headers), OK[transport])
        self.roundtrip(self.s, self.col, transport)
        self.col.settle(QUIET)
        self.assertEqual(self.col.trace(trace_id), [])

    def test_w3c_traceparent_and_tracestate(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                trace_id, span_id = new_ids()
                server = self.assertContinues(t, {'traceparent': traceparent(trace_id, span_id),
                                                  'tracestate': 'vendor=opaque,other=1'}, trace_id, span_id)
                self.assertEqual(server.trace_state, 'vendor=opaque,other=1', server)

    def test_w3c_not_sampled_exports_nothing_even_at_rate_1(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                trace_id, span_id = new_ids()
                self.assertNotExported(t, {'traceparent': traceparent(trace_id, span_id, '00')}, trace_id)

    def test_b3_single_header(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                trace_id, span_id = new_ids()
                self.assertContinues(t, {'b3': '%s-%s-1' % (trace_id, span_id)}, trace_id, span_id)
                # A 64-bit trace id is padded with zeros to 128 bits.
                short, span_id = os.urandom(8).hex(), os.urandom(8).hex()
                self.assertContinues(t, {'b3': '%s-%s-1' % (short, span_id)}, '0' * 16 + short, span_id)

    def test_b3_multiple_headers(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                trace_id, span_id = new_ids()
                self.assertContinues(t, {'x-b3-traceid': trace_id, 'x-b3-spanid': span_id, 'x-b3-sampled': '1'},
                                     trace_id, span_id)

    def test_b3_not_sampled_exports_nothing(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                trace_id, span_id = new_ids()
                self.assertNotExported(t, {'b3': '%s-%s-0' % (trace_id, span_id)}, trace_id)
                trace_id, span_id = new_ids()
                self.assertNotExported(t, {'x-b3-traceid': trace_id, 'x-b3-spanid': span_id, 'x-b3-sampled': '0'},
                                       trace_id)

    def test_b3_wins_over_traceparent(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                w3c_trace, w3c_span = new_ids()
                b3_trace, b3_span = new_ids()
                self.assertContinues(t, {'traceparent': traceparent(w3c_trace, w3c_span),
                                         'b3': '%s-%s-1' % (b3_trace, b3_span)}, b3_trace, b3_span)
                self.assertEqual(self.col.trace(w3c_trace), [])

    def test_malformed_traceparent_starts_a_new_trace(self):
        for t in TRANSPORTS:
            trace_id, span_id = new_ids()
            for bad in ('nonsense', '00-%s-%s' % (trace_id, span_id), '00-%s-%s-01' % ('0' * 32, span_id),
                        'ff-%s-%s-01' % (trace_id, span_id), '00-%s-%s-01' % (trace_id.upper(), span_id.upper()),
                        '00-%s-%s-01' % (trace_id[:-1], span_id)):
                with self.subTest(transport=t, traceparent=bad):
                    mark = marker()
                    self.assertEqual(send(t, self.s, [[('k', mark)]], {'traceparent': bad}), OK[t])
                    server = spans_of_request(self.col, mark, {SERVER[t], EXECUTION})[SERVER[t]]
                    self.assertEqual(server.parent_span_id, '', server)
                    self.assertNotIn(server.trace_id, (trace_id, '0' * 32), server)
                    self.assertRegex(server.trace_id, HEX_ID[16])


# ---------------------------------------------------------------------------------------------------------------
# Sampling of requests without a parent: TRACING_SAMPLING_RATE


class RateZero(SharedServer):
    env = {'TRACING_SAMPLING_RATE': '0'}

    def test_only_requests_with_a_sampled_parent_are_exported(self):
        for i in range(20):
            t = TRANSPORTS[i % 2]
            self.assertEqual(send(t, self.s, [[('k', 'unsampled')]]), OK[t])
        # Parent-based: a parent that sampled is followed at rate 0.
        sampled = []
        for t in TRANSPORTS:
            trace_id, span_id = new_ids()
            self.assertEqual(send(t, self.s, [[('k', 'parent')]], {'traceparent': traceparent(trace_id, span_id)}),
                             OK[t])
            sampled.append(trace_id)
            server = spans_of_trace(self.col, trace_id, {SERVER[t], EXECUTION})[SERVER[t]]
            self.assertEqual(server.parent_span_id, span_id, server)
        self.col.settle(QUIET)
        self.assertEqual({s.trace_id for s in self.col.spans()}, set(sampled), self.col.describe())


class RateHalf(SharedServer):
    env = {'TRACING_SAMPLING_RATE': '0.5'}

    def test_about_half_the_requests_are_sampled(self):
        for _ in range(400):
            self.assertEqual(send('grpc', self.s, [[('k', 'half')]]), 'OK')
        # A request sent last with a sampled parent; once it arrived and nothing more came, all are in.
        last, span_id = new_ids()
        self.assertEqual(send('grpc', self.s, [[('k', 'half')]], {'traceparent': traceparent(last, span_id)}), 'OK')
        spans_of_trace(self.col, last, {SERVER['grpc'], EXECUTION})
        self.col.settle(QUIET)
        spans = [s for s in self.col.spans() if s.trace_id != last]
        servers = {s.trace_id for s in spans if s.name == SERVER['grpc']}
        executions = {s.trace_id for s in spans if s.name == EXECUTION}
        self.assertTrue(140 <= len(servers) <= 260, '%d of 400 requests sampled at rate 0.5' % len(servers))
        self.assertEqual(executions, servers)  # a trace is sampled whole


# ---------------------------------------------------------------------------------------------------------------
# The exporter's settings


class Exporter(TracingCase):
    def test_endpoint_is_a_base_url_for_http(self):
        col = self.collector(path='/otlp/v1/traces')
        s = self.sluice(tracing_env(col, OTEL_EXPORTER_OTLP_ENDPOINT=col.endpoint + '/otlp'))
        self.roundtrip(s, col)
        self.assertEqual({e.path for e in col.exports}, {'/otlp/v1/traces'}, col.describe())

    def test_traces_endpoint_is_used_as_is_and_wins(self):
        general = self.collector()
        specific = self.collector(path='/custom/path')
        s = self.sluice(tracing_env(general, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=specific.url))
        self.roundtrip(s, specific)
        self.assertEqual(specific.refused(), [], specific.describe())
        general.settle(QUIET)
        self.assertEqual(general.exports, [], general.describe())

    def test_headers_percent_decoded_the_per_signal_list_replacing_the_general_one(self):
        general = 'authorization=Bearer%20abc,x-shared=general,x-list=a%2Cb'
        for protocol in ('http', 'grpc'):
            for traces, expected in ((None, {'authorization': 'Bearer abc', 'x-shared': 'general', 'x-list': 'a,b',
                                             'x-traces': None}),
                                     ('x-traces=2,x-shared=traces', {'authorization': None, 'x-shared': 'traces',
                                                                     'x-list': None, 'x-traces': '2'})):
                with self.subTest(protocol=protocol, traces=traces):
                    col = self.collector(protocol)
                    extra = {'OTEL_EXPORTER_OTLP_HEADERS': general}
                    if traces:
                        extra['OTEL_EXPORTER_OTLP_TRACES_HEADERS'] = traces
                    with Sluice(rules={'trace.yaml': RULES}, env=tracing_env(col, **extra)) as s:
                        self.roundtrip(s, col)
                    for e in col.exports:
                        self.assertEqual({k: e.headers.get(k) for k in expected}, expected, e.headers)

    def test_gzip_compression(self):
        for compression, gzipped in (('gzip', True), ('none', False)):
            with self.subTest(compression=compression):
                col = self.collector()
                with Sluice(rules={'trace.yaml': RULES},
                            env=tracing_env(col, OTEL_EXPORTER_OTLP_COMPRESSION=compression)) as s:
                    self.roundtrip(s, col)
                self.assertEqual({e.gzip for e in col.exports}, {gzipped}, col.describe())
                self.assertEqual({e.headers.get('content-encoding', 'identity') for e in col.exports},
                                 {'gzip' if gzipped else 'identity'}, col.describe())
        # Over gRPC (grpcio hides the message encoding from the service: the spans arriving whole is the check).
        col = self.collector('grpc')
        with Sluice(rules={'trace.yaml': RULES}, env=tracing_env(col, OTEL_EXPORTER_OTLP_COMPRESSION='gzip')) as s:
            self.roundtrip(s, col)

    def test_protocol_choice(self):
        cases = [
            ({'TRACING_EXPORTER_PROTOCOL': ''}, 'http'),
            ({'TRACING_EXPORTER_PROTOCOL': 'http'}, 'http'),
            ({'TRACING_EXPORTER_PROTOCOL': 'grpc'}, 'grpc'),
            # The standard settings when TRACING_EXPORTER_PROTOCOL is unset; the traces one first.
            ({'OTEL_EXPORTER_OTLP_PROTOCOL': 'grpc'}, 'grpc'),
            ({'OTEL_EXPORTER_OTLP_PROTOCOL': 'http/protobuf'}, 'http'),
            ({'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL': 'grpc'}, 'grpc'),
            ({'OTEL_EXPORTER_OTLP_PROTOCOL': 'grpc', 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL': 'http/protobuf'}, 'http'),
            ({'TRACING_EXPORTER_PROTOCOL': 'http', 'OTEL_EXPORTER_OTLP_PROTOCOL': 'grpc'}, 'http'),
        ]
        for env, protocol in cases:
            with self.subTest(env=env):
                with collector(protocol) as col, \
                        Sluice(rules={'trace.yaml': RULES},
                               env=dict(FAST_EXPORT, OTEL_EXPORTER_OTLP_ENDPOINT=col.endpoint, **env)) as s:
                    self.roundtrip(s, col)
                    self.assertEqual(col.refused(), [], col.describe())

    def test_grpc_endpoint_without_scheme_and_insecure(self):
        col = self.collector('grpc')
        s = self.sluice(dict(FAST_EXPORT, TRACING_EXPORTER_PROTOCOL='grpc', OTEL_EXPORTER_OTLP_ENDPOINT=col.address,
                             OTEL_EXPORTER_OTLP_INSECURE='true'))
        self.roundtrip(s, col)

    def test_batches_hold_at_most_max_export_batch_size(self):
        col = self.collector()
        s = self.sluice(tracing_env(col, OTEL_BSP_MAX_EXPORT_BATCH_SIZE='3'))
        for _ in range(10):
            self.assertEqual(send('grpc', s, [[('k', 'batch')]]), 'OK')
        col.wait_for_spans(count=20)
        col.settle(QUIET)
        self.assertEqual(len(col.spans()), 20, col.describe())
        self.assertLessEqual(max(len(e.spans()) for e in col.exports), 3, col.describe())


class Tls(TracingCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = TlsCerts()

    @classmethod
    def tearDownClass(cls):
        cls.certs.close()

    def tls(self):
        return {'cert': self.certs.server, 'key': self.certs.server_key}

    def test_collector_trusted_through_the_certificate_setting(self):
        for protocol in ('http', 'grpc'):
            with self.subTest(protocol=protocol):
                col = self.collector(protocol, tls=self.tls())
                self.assertTrue(col.endpoint.startswith('https://localhost:'))
                with Sluice(rules={'trace.yaml': RULES},
                            env=tracing_env(col, OTEL_EXPORTER_OTLP_CERTIFICATE=self.certs.ca)) as s:
                    self.roundtrip(s, col)

    def test_an_untrusted_collector_gets_no_spans(self):
        # The test CA is in no trust store: the handshake is refused, decisions go on.
        col = self.collector(tls=self.tls())
        s = self.sluice(tracing_env(col, OTEL_EXPORTER_OTLP_TIMEOUT='1000', OTEL_BSP_EXPORT_TIMEOUT='1000'))
        for t in TRANSPORTS:
            self.assertEqual(send(t, s, [[('k', 'untrusted')]]), OK[t])
        harness.wait_until(lambda: col.errors, timeout=SPAN_WAIT, message='a refused TLS handshake',
                           describe=col.describe)
        self.assertEqual(col.exports, [], col.describe())


# ---------------------------------------------------------------------------------------------------------------
# When the collector fails


def spans_dropped(sluice):
    """The tracing.spans_dropped counter from the debug port's /stats (0 while absent)."""
    _, _, body = harness.http_get(sluice.debug_port, '/stats')
    for line in body.splitlines():
        name, _, value = line.partition(': ')
        if name == 'tracing.spans_dropped' or name.endswith('.tracing.spans_dropped'):
            return int(value)
    return 0


class CollectorFailures(TracingCase):
    def test_down_collector_costs_decisions_nothing_and_spans_flow_once_it_is_up(self):
        port = harness.free_port()
        s = self.sluice(dict(FAST_EXPORT, OTEL_EXPORTER_OTLP_ENDPOINT='http://127.0.0.1:%d' % port,
                             OTEL_BSP_MAX_QUEUE_SIZE='8', OTEL_BSP_MAX_EXPORT_BATCH_SIZE='8',
                             OTEL_EXPORTER_OTLP_TIMEOUT='1000', OTEL_BSP_EXPORT_TIMEOUT='1000'))
        started = time.monotonic()
        slowest = 0.0
        for i in range(200):
            t = TRANSPORTS[i % 2]
            t0 = time.monotonic()
            self.assertEqual(send(t, s, [[('k', 'down')]]), OK[t])
            slowest = max(slowest, time.monotonic() - t0)
        self.assertLess(slowest, 1.0, 'the slowest decision took %.3fs' % slowest)
        self.assertLess(time.monotonic() - started, 20.0)
        # 400 spans into a queue of 8 that nothing empties.
        harness.wait_until(lambda: spans_dropped(s) > 0, timeout=SPAN_WAIT, message='tracing.spans_dropped > 0',
                           describe=s.log_tail)
        self.assertTrue(s.running())

        # The collector comes up: the exporter gets through again (after its backoff).
        col = HttpCollector(port=port)
        try:
            marks = []

            def arrived():
                mark = marker()
                marks.append(mark)
                send('grpc', s, [[('k', mark)]])
                return col.spans()

            harness.wait_until(arrived, timeout=40.0, interval=0.5, message='spans once the collector is up',
                               describe=col.describe)
            self.assertEqual(col.refused(), [], col.describe())
        finally:
            s.stop()  # before the collector, so its last batch has somewhere to go
            col.stop()

    def test_a_collector_that_never_answers_does_not_hold_up_shutdown(self):
        # It accepts connections (the kernel's backlog) and never reads or answers: the export in flight waits
        # for OTEL_EXPORTER_OTLP_TIMEOUT (10 s by default). A stop cancels it and gives what is queued one short
        # try, so Sluice exits within seconds.
        for protocol in ('http', 'grpc'):
            with self.subTest(protocol=protocol):
                silent = socket.socket()
                silent.bind(('127.0.0.1', 0))
                silent.listen(16)
                try:
                    env = dict(FAST_EXPORT, OTEL_EXPORTER_OTLP_ENDPOINT='http://127.0.0.1:%d' % silent.getsockname()[1])
                    if protocol == 'grpc':
                        env['TRACING_EXPORTER_PROTOCOL'] = 'grpc'
                    s = self.sluice(env)
                    for i in range(20):
                        self.assertEqual(send(TRANSPORTS[i % 2], s, [[('k', 'silent')]]), OK[TRANSPORTS[i % 2]])
                    time.sleep(0.5)  # an export is in flight now
                    for i in range(20):
                        send(TRANSPORTS[i % 2], s, [[('k', 'silent')]])  # and more spans are queued
                    started = time.monotonic()
                    s.terminate()
                    self.assertEqual(s.wait_exit(timeout=8.0), 0, s.log_tail())
                    self.assertLess(time.monotonic() - started, 5.0, s.log_tail())
                finally:
                    silent.close()

    def test_a_refused_batch_is_sent_again(self):
        for protocol, refusal in (('http', 503), ('grpc', grpc.StatusCode.UNAVAILABLE)):
            with self.subTest(protocol=protocol):
                col = self.collector(protocol)
                col.fail(refusal, count=1)
                with Sluice(rules={'trace.yaml': RULES}, env=tracing_env(col)) as s:
                    self.roundtrip(s, col, timeout=20.0)
                refused = col.refused()
                self.assertEqual([e.status for e in refused], [refusal if protocol == 'http' else refusal.name],
                                 col.describe())
                again = {sp.span_id for sp in col.spans()}
                self.assertLessEqual({sp.span_id for sp in refused[0].spans()}, again, col.describe())


# ---------------------------------------------------------------------------------------------------------------
# Bad settings


class BadSettings(unittest.TestCase):
    """A bad tracing setting stops start-up (exit code not 0) with a message naming it."""

    cases = [
        ('TRACING_EXPORTER_PROTOCOL', 'udp', {}),
        ('TRACING_SAMPLING_RATE', 'half', {}),
        ('OTEL_EXPORTER_OTLP_HEADERS', 'novalue', {}),
        ('OTEL_EXPORTER_OTLP_TRACES_HEADERS', 'a=1,novalue', {}),
        ('OTEL_EXPORTER_OTLP_HEADERS', 'k=a%0D%0Ab', {}),
        ('OTEL_EXPORTER_OTLP_COMPRESSION', 'brotli', {}),
        ('OTEL_EXPORTER_OTLP_CERTIFICATE', '/nonexistent/ca.pem', {'scheme': 'https'}),
        ('OTEL_EXPORTER_OTLP_PROTOCOL', 'http/json', {}),
        ('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'http/json', {}),
    ]

    def test_bad_values(self):
        port = harness.dead_port()  # nothing listens: only start-up is under test
        for name, value, extra in self.cases:
            with self.subTest(setting=name, value=value):
                env = dict(FAST_EXPORT, OTEL_EXPORTER_OTLP_ENDPOINT='%s://localhost:%d' % (extra.get('scheme', 'http'),
                                                                                           port))
                env[name] = value
                with Sluice(rules={'trace.yaml': RULES}, env=env, wait_ready=False) as s:
                    rc = s.wait_exit(10)
                    self.assertIsNotNone(rc, '%s=%s: the server started anyway' % (name, value))
                    self.assertNotEqual(rc, 0, s.log())
                    self.assertIn(name, s.log() + s.stdout())


if __name__ == '__main__':
    unittest.main()
