"""The gRPC server (libnghttp2, src/net/h2 + src/net/grpc; issue 11) end to end, with grpcio, curl and certificates
made with openssl: statuses for bad calls, message size limits, gzip, metadata, deadlines, HTTP/2 requests that are
not gRPC, the unix socket, TLS and mutual TLS with certificate reloads, GRPC_MAX_CONNECTION_AGE, graceful shutdown
with calls in flight, health Watch, and exact counts with several workers."""

import gzip
import os
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import unittest

os.environ.setdefault('GRPC_VERBOSITY', 'NONE')  # grpcio's own log of the TLS refusals the tests provoke

import grpc  # noqa: E402

import harness  # noqa: E402
from harness import RedisServer, Sluice, TlsCerts, health_pb2, rls_pb2, rls_request_proto  # noqa: E402

LIMIT = 100000
RULES = """
domain: g
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 100000}
"""

RLS = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit'
CHECK = '/grpc.health.v1.Health/Check'
WATCH = '/grpc.health.v1.Health/Watch'
MIB = 1024 * 1024


# ---------------------------------------------------------------------------------------------------------------
# Clients


def new_channel(target, credentials=None, compression=None, options=()):
    """A channel with a connection of its own: grpcio shares connections between channels to the same target unless
    told otherwise, and several tests need one connection per channel."""
    opts = [('grpc.enable_http_proxy', 0), ('grpc.use_local_subchannel_pool', 1)] + list(options)
    if credentials is not None:
        return grpc.secure_channel(target, credentials, options=opts, compression=compression)
    return grpc.insecure_channel(target, options=opts, compression=compression)


def tcp_channel(sluice, **kw):
    return new_channel('127.0.0.1:%d' % sluice.grpc_port, **kw)


def rls_call(ch, request, timeout=5.0, **kw):
    """ShouldRateLimit on channel `ch` -> rls_pb2.RateLimitResponse (raises grpc.RpcError)."""
    stub = ch.unary_unary(RLS, request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
                          response_deserializer=rls_pb2.RateLimitResponse.FromString)
    return stub(request, timeout=timeout, **kw)


def raw_call(ch, path, body, timeout=5.0):
    """A unary call with `body` (bytes) sent as the message, whatever it is. -> the response bytes."""
    return ch.unary_unary(path, request_serializer=lambda b: b, response_deserializer=lambda b: b)(body,
                                                                                                     timeout=timeout)


def decision(value='v'):
    return rls_request_proto('g', [[('k', value)]])


def remaining(resp):
    return resp.statuses[0].limit_remaining


def request_of_size(size, fill='x'):
    """A RateLimitRequest for domain g whose serialized size is exactly `size` bytes."""
    req = decision('')
    value = fill * max(0, size - req.ByteSize())
    for _ in range(5):
        req = decision(value)
        diff = size - req.ByteSize()
        if diff == 0:
            return req
        value = value + fill * diff if diff > 0 else value[:diff]
    raise AssertionError('cannot make a request of exactly %d bytes' % size)


def rpc_error(test, fn, *args, **kw):
    """Calls fn, which must fail with a grpc.RpcError. -> the error."""
    with test.assertRaises(grpc.RpcError) as ctx:
        fn(*args, **kw)
    return ctx.exception


def grpc_frame(message, compress=False):
    """A gRPC length-prefixed message; gzip-compressed (flag 1) when `compress`."""
    data = message.SerializeToString()
    if compress:
        data = gzip.compress(data)
    return (b'\1' if compress else b'\0') + struct.pack('>I', len(data)) + data


def curl(port, args, path=RLS, prior_knowledge=True, timeout=5.0):
    """curl -s -i [--http2-prior-knowledge] <args> http://127.0.0.1:<port><path>.
    -> (curl exit code, HTTP status or None, {header name: value, and grpc-status/grpc-message from the trailers
    when there are some}, seconds)."""
    cmd = ['curl', '-s', '-i', '--max-time', str(timeout)]
    if prior_knowledge:
        cmd.append('--http2-prior-knowledge')
    start = time.monotonic()
    r = subprocess.run(cmd + list(args) + ['http://127.0.0.1:%d%s' % (port, path)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout + 5,
                       env=harness.base_env())
    elapsed = time.monotonic() - start
    head, _, rest = r.stdout.decode('latin-1').partition('\r\n\r\n')
    m = re.match(r'HTTP/2 (\d+)', head)
    fields = dict((k.lower(), v) for k, v in re.findall(r'(?m)^([A-Za-z0-9-]+): ([^\r\n]*)\r?$', head))
    # curl prints the trailers right after the body, which has no line end of its own
    fields.update(re.findall(r'(grpc-status|grpc-message): ([^\r\n]*)\r\n', rest))
    return r.returncode, int(m.group(1)) if m else None, fields, elapsed


def curl_grpc(port, frame, timeout=5.0, headers=()):
    """A hand-made unary ShouldRateLimit call with curl: `frame` (bytes) as the body. -> as curl()."""
    with tempfile.NamedTemporaryFile() as body:
        body.write(frame)
        body.flush()
        args = ['-H', 'content-type: application/grpc', '-H', 'te: trailers']
        for h in headers:
            args += ['-H', h]
        return curl(port, args + ['--data-binary', '@' + body.name], timeout=timeout)


class Watcher:
    """grpc.health.v1.Health/Watch for one service on its own channel; a thread collects the statuses (names)."""

    def __init__(self, target, service, timeout=30.0):
        self.channel = new_channel(target)
        stub = self.channel.unary_stream(WATCH, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                                         response_deserializer=health_pb2.HealthCheckResponse.FromString)
        self.call = stub(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        self.statuses = []
        self.error = None
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        try:
            for r in self.call:
                self.statuses.append(health_pb2.HealthCheckResponse.ServingStatus.Name(r.status))
        except grpc.RpcError as e:
            self.error = e
        finally:
            self.ended.set()

    def wait_for(self, statuses, timeout=5.0):
        """Waits until the statuses received so far are exactly `statuses` (a list); any other sequence fails."""

        def arrived():
            got = list(self.statuses)
            if got != statuses[:len(got)]:
                raise AssertionError('Watch sent %r, want %r' % (got, statuses))
            return got == statuses

        harness.wait_until(arrived, timeout=timeout, message='Watch to send %r' % statuses,
                           describe=lambda: 'got %r, error %r' % (self.statuses, self.error))

    def close(self):
        self.call.cancel()
        self.ended.wait(5)
        self.channel.close()


def server_connections(port):
    """The remote ports of the established TCP connections to 127.0.0.1:<port> (from /proc/net/tcp)."""
    peers = set()
    with open('/proc/net/tcp') as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if state == '01' and local == '0100007F:%04X' % port:
                peers.add(int(remote.split(':')[1], 16))
    return peers


# ---------------------------------------------------------------------------------------------------------------
# Redis


def redis_env(redis, **extra):
    """Settings for a sluice counting in `redis` (as test_redis.py)."""
    env = {'BACKEND_TYPE': 'redis', 'EXPIRATION_JITTER_MAX_SECONDS': '0'}
    env.update(redis.sluice_env())
    env.update(extra)
    return env


def redis_key(value, t=None):
    """The Redis key counting descriptor k=<value> of domain g in the hour holding time t."""
    t = time.time() if t is None else t
    return 'g_k_%s_%d' % (value, int(t) // 3600 * 3600)


def start_redis_sluice(test, redis, **env):
    s = Sluice(rules={'g.yaml': RULES}, env=redis_env(redis, **env))
    test.addCleanup(s.close)
    harness.wait_until(lambda: s.health() == 'SERVING', message='sluice healthy', describe=s.log_tail)
    return s


# ---------------------------------------------------------------------------------------------------------------
# Calls: statuses, sizes, compression, metadata


class Calls(unittest.TestCase):
    """One server with the default settings (memory backend, two workers)."""

    @classmethod
    def setUpClass(cls):
        cls.s = Sluice(rules={'g.yaml': RULES})
        cls.ch = tcp_channel(cls.s)

    @classmethod
    def tearDownClass(cls):
        cls.ch.close()
        cls.s.close()

    def setUp(self):
        harness.avoid_window_edge('HOUR', 5)

    def test_unknown_method_and_service(self):
        """An unknown method of a served service and an unknown service are UNIMPLEMENTED, named as grpc-go does."""
        e = rpc_error(self, raw_call, self.ch, '/envoy.service.ratelimit.v3.RateLimitService/Nope', b'')
        self.assertEqual((e.code(), e.details()),
                         (grpc.StatusCode.UNIMPLEMENTED,
                          'unknown method Nope for service envoy.service.ratelimit.v3.RateLimitService'))
        e = rpc_error(self, raw_call, self.ch, '/x.Y/Z', b'')
        self.assertEqual((e.code(), e.details()), (grpc.StatusCode.UNIMPLEMENTED, 'unknown service x.Y'))

    def test_health_check_of_an_unknown_service(self):
        """Health/Check of a service nobody registered: NOT_FOUND "unknown service"."""
        e = rpc_error(self, harness.grpc_health, self.s.grpc_port, 'no.such.Service')
        self.assertEqual((e.code(), e.details()), (grpc.StatusCode.NOT_FOUND, 'unknown service'))

    def test_bad_requests(self):
        """An empty domain is INVALID_ARGUMENT with the reason; a body that is not protobuf is INTERNAL, for
        ShouldRateLimit and for Health/Check."""
        e = rpc_error(self, rls_call, self.ch, rls_request_proto('', [[('k', 'v')]]))
        self.assertEqual((e.code(), e.details()),
                         (grpc.StatusCode.INVALID_ARGUMENT, 'rate limit domain must not be empty'))
        garbage = b'\x0a\x05ab'  # field 1, length 5, but only 2 bytes follow
        for path in (RLS, CHECK):
            with self.subTest(path=path):
                e = rpc_error(self, raw_call, self.ch, path, garbage)
                self.assertEqual((e.code(), e.details()),
                                 (grpc.StatusCode.INTERNAL, 'grpc: error unmarshalling request'))
        self.assertEqual(remaining(rls_call(self.ch, decision('after-bad'))), LIMIT - 1)

    def test_300_kb_request(self):
        """A request far larger than the HTTP/2 windows (64 KiB at first) arrives whole: flow control works."""
        value = ''.join(chr(ord('a') + i % 26) for i in range(300000))
        first = rls_call(self.ch, decision(value))
        self.assertEqual((first.overall_code, remaining(first)), (rls_pb2.RateLimitResponse.OK, LIMIT - 1))
        # the same 300,000 bytes again count on the same key: nothing was lost or reordered
        self.assertEqual(remaining(rls_call(self.ch, decision(value))), LIMIT - 2)
        self.assertEqual(remaining(rls_call(self.ch, decision(value[:-1] + 'A'))), LIMIT - 1)

    def test_default_max_message_is_4_mib(self):
        """Without GRPC_MAX_RECV_MESSAGE_BYTES a request of 4 MiB + 1 bytes is RESOURCE_EXHAUSTED, and the
        connection keeps serving."""
        e = rpc_error(self, rls_call, self.ch, request_of_size(4 * MIB + 1), timeout=15)
        self.assertEqual((e.code(), e.details()),
                         (grpc.StatusCode.RESOURCE_EXHAUSTED,
                          'grpc: received message larger than max (%d vs. %d)' % (4 * MIB + 1, 4 * MIB)))
        self.assertEqual(remaining(rls_call(self.ch, decision('after-big'))), LIMIT - 1)

    def test_gzip_requests(self):
        """A client compressing its requests with gzip is understood: the decompressed value counts on the same key
        as the same value sent uncompressed. grpcio compresses (with gzip set on the channel) whenever that makes
        the message smaller; curl sends a frame compressed here, to be sure."""
        rc, status, fields, _ = curl_grpc(self.s.grpc_port, grpc_frame(decision('curl-gzip'), compress=True),
                                          headers=['grpc-encoding: gzip'])
        self.assertEqual((rc, status, fields.get('grpc-status')), (0, 200, '0'), fields)
        self.assertEqual(remaining(rls_call(self.ch, decision('curl-gzip'))), LIMIT - 2)
        value = 'gzip-' + 'z' * 200000
        with tcp_channel(self.s, compression=grpc.Compression.Gzip) as gz:
            self.assertEqual(remaining(rls_call(gz, decision(value))), LIMIT - 1)
            self.assertEqual(remaining(rls_call(gz, decision('small-gzip'))), LIMIT - 1)
        self.assertEqual(remaining(rls_call(self.ch, decision(value))), LIMIT - 2)
        self.assertEqual(remaining(rls_call(self.ch, decision('small-gzip'))), LIMIT - 2)

    def test_custom_metadata_is_ignored(self):
        """Metadata the server does not know (text and binary) changes nothing."""
        md = [('x-custom', 'hello'), ('x-request-id', '42'), ('x-trace-bin', b'\x00\x01\xff')]
        self.assertEqual(remaining(rls_call(self.ch, decision('md'), metadata=md)), LIMIT - 1)
        self.assertEqual(remaining(rls_call(self.ch, decision('md'), metadata=md)), LIMIT - 2)

    def test_wrong_content_type_is_415(self):
        """An HTTP/2 POST that is not application/grpc: HTTP 415, grpc-status 13 and a message naming the type."""
        rc, status, fields, _ = curl(self.s.grpc_port, ['-H', 'content-type: text/plain', '--data-binary', 'hi'])
        self.assertEqual((rc, status), (0, 415), fields)
        self.assertEqual(fields.get('grpc-status'), '13', fields)
        self.assertIn('text/plain', fields.get('grpc-message', ''), fields)

    def test_get_is_405(self):
        """An HTTP/2 GET: HTTP 405."""
        rc, status, fields, _ = curl(self.s.grpc_port, ['-X', 'GET'])
        self.assertEqual((rc, status), (0, 405), fields)
        self.assertEqual(fields.get('grpc-status'), '13', fields)

    def test_grpc_trailers_over_plain_http2(self):
        """A hand-made gRPC call with curl gets HTTP 200 and grpc-status 0 in the trailers."""
        rc, status, fields, _ = curl_grpc(self.s.grpc_port, grpc_frame(decision('curl')))
        self.assertEqual((rc, status, fields.get('grpc-status')), (0, 200, '0'), fields)
        self.assertEqual(remaining(rls_call(self.ch, decision('curl'))), LIMIT - 2)

    def test_http1_client_does_not_crash_the_server(self):
        """HTTP/1.1 requests (no HTTP/2 preface) on the gRPC port are refused without harm."""
        for args in ([], ['-X', 'POST', '-H', 'content-type: application/grpc', '--data-binary', 'x'],
                     ['--http2']):  # --http2 on http:// is an HTTP/1.1 Upgrade: h2c request
            with self.subTest(args=args):
                rc, status, fields, _ = curl(self.s.grpc_port, args, prior_knowledge=False, timeout=3)
                self.assertNotEqual(status, 200, fields)
                self.assertTrue(self.s.running(), self.s.log_tail())
        self.assertEqual(remaining(rls_call(self.ch, decision('after-h1'))), LIMIT - 1)
        self.assertEqual(self.s.health(), 'SERVING')


class MessageLimit(unittest.TestCase):
    """GRPC_MAX_RECV_MESSAGE_BYTES=2048."""

    @classmethod
    def setUpClass(cls):
        cls.s = Sluice(rules={'g.yaml': RULES}, env={'GRPC_MAX_RECV_MESSAGE_BYTES': '2048'})
        cls.ch = tcp_channel(cls.s)

    @classmethod
    def tearDownClass(cls):
        cls.ch.close()
        cls.s.close()

    def test_limit_is_inclusive(self):
        """A message of exactly the limit is served; one byte more is RESOURCE_EXHAUSTED with both sizes."""
        harness.avoid_window_edge('HOUR', 5)
        self.assertEqual(remaining(rls_call(self.ch, request_of_size(2048))), LIMIT - 1)
        e = rpc_error(self, rls_call, self.ch, request_of_size(2049))
        self.assertEqual((e.code(), e.details()), (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                                   'grpc: received message larger than max (2049 vs. 2048)'))
        self.assertEqual(remaining(rls_call(self.ch, request_of_size(2048))), LIMIT - 2)

    def test_limit_applies_after_decompression(self):
        """A gzip message small on the wire but over the limit once decompressed is RESOURCE_EXHAUSTED (as in
        grpc-go and gRPC C++: the limit bounds the memory a request may take); under the limit it is served."""
        bomb = grpc_frame(decision('b' * 100000), compress=True)
        self.assertLess(len(bomb), 2048)
        rc, status, fields, _ = curl_grpc(self.s.grpc_port, bomb, headers=['grpc-encoding: gzip'])
        self.assertEqual((status, fields.get('grpc-status')), (200, '8'), fields)
        self.assertRegex(fields.get('grpc-message', ''), r'^grpc: received message larger than max \(\d+ vs\. 2048\)$')
        fits = grpc_frame(decision('c' * 1900), compress=True)
        rc, status, fields, _ = curl_grpc(self.s.grpc_port, fits, headers=['grpc-encoding: gzip'])
        self.assertEqual((status, fields.get('grpc-status')), (200, '0'), fields)
        with tcp_channel(self.s, compression=grpc.Compression.Gzip) as gz:
            e = rpc_error(self, rls_call, gz, decision('b' * 100000))
            self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, e.details())
            self.assertEqual(remaining(rls_call(gz, decision('c' * 1900))), LIMIT - 2)

    def test_minimum_is_1024(self):
        """A limit under 1024 bytes is refused at start-up, naming the setting."""
        log = Sluice.failed_start(self, {'GRPC_MAX_RECV_MESSAGE_BYTES': '1000'})
        self.assertIn('GRPC_MAX_RECV_MESSAGE_BYTES', log)


# ---------------------------------------------------------------------------------------------------------------
# Unix socket


class UnixSocket(unittest.TestCase):
    def test_concurrent_channels_over_the_unix_socket(self):
        """GRPC_UDS with four workers: four connections calling at once are all counted, health answers, and the
        TCP port is not listened on."""
        d = tempfile.mkdtemp(prefix='sluice-grpc-uds-')
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, 'rls.sock')
        s = Sluice(rules={'g.yaml': RULES}, env={'GRPC_UDS': path, 'IO_THREADS': '4'})
        self.addCleanup(s.close)
        harness.avoid_window_edge('HOUR', 5)
        errors = []

        # The channels are made and closed on this thread: grpcio (Debian's 1.51) once aborted the whole test
        # process while four threads made and closed channels at the same time (a TSan CI run).
        channels = [new_channel('unix:' + path) for _ in range(4)]
        for ch in channels:
            self.addCleanup(ch.close)

        def client(ch):
            try:
                for _ in range(25):
                    rls_call(ch, decision('uds'))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=client, args=(ch,)) for ch in channels]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(errors, [])
        with new_channel('unix:' + path) as ch:
            self.assertEqual(remaining(rls_call(ch, decision('uds'))), LIMIT - 101)
            resp = ch.unary_unary(CHECK, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                                  response_deserializer=health_pb2.HealthCheckResponse.FromString)(
                health_pb2.HealthCheckRequest(service='ratelimit'), timeout=5)
            self.assertEqual(resp.status, health_pb2.HealthCheckResponse.SERVING)
        with tcp_channel(s) as ch:
            e = rpc_error(self, rls_call, ch, decision('tcp'), timeout=2)
            self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e.details())


# ---------------------------------------------------------------------------------------------------------------
# Deadlines and shutdown, with a Redis that stops answering


class PausedRedis(unittest.TestCase):
    def setUp(self):
        harness.avoid_window_edge('HOUR', 15)
        self.redis = RedisServer()
        self.addCleanup(self.redis.close)
        self.addCleanup(self.redis.resume)

    def test_deadline_exceeded_while_redis_is_paused(self):
        """Redis paused and REDIS_OP_TIMEOUT=5s: a call with a 0.3 s deadline fails DEADLINE_EXCEEDED in about
        0.3 s. curl (which does not enforce grpc-timeout itself) shows the server ends the call; afterwards counts
        go on, agreeing with Redis."""
        s = start_redis_sluice(self, self.redis, REDIS_OP_TIMEOUT='5s')
        ch = tcp_channel(s)
        self.addCleanup(ch.close)
        self.assertEqual(remaining(rls_call(ch, decision('dl'))), LIMIT - 1)
        self.redis.pause()
        try:
            start = time.monotonic()
            e = rpc_error(self, rls_call, ch, decision('dl'), timeout=0.3)
            took = time.monotonic() - start
            self.assertEqual(e.code(), grpc.StatusCode.DEADLINE_EXCEEDED, e.details())
            self.assertLess(took, 1.5)
            # the server's own deadline: curl waits for the server (up to 4 s)
            rc, status, fields, took = curl_grpc(s.grpc_port, grpc_frame(decision('dl')), timeout=4,
                                                 headers=['grpc-timeout: 300m'])
            self.assertEqual((status, fields.get('grpc-status'), fields.get('grpc-message')),
                             (200, '4', 'Deadline Exceeded'), 'curl exit %d after %.2fs: %r' % (rc, took, fields))
            self.assertLess(took, 1.5)
            # a call the client cancels (RST_STREAM) while its answer is pending
            stub = ch.unary_unary(RLS, request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
                                  response_deserializer=rls_pb2.RateLimitResponse.FromString)
            f = stub.future(decision('dl'), timeout=10)
            time.sleep(0.2)
            self.assertTrue(f.cancel())
        finally:
            self.redis.resume()
        # The abandoned increments reach Redis once it answers again, possibly on another worker's connection
        # than the calls below: wait until the stored count stops moving. Then every answer agrees with it.
        last, steady_since = None, time.monotonic()
        while time.monotonic() - steady_since < 0.3:
            now = self.redis.get(redis_key('dl'))
            if now != last:
                last, steady_since = now, time.monotonic()
            time.sleep(0.05)
        for i in range(4):
            resp = rls_call(ch, decision('dl'))
            stored = int(self.redis.get(redis_key('dl')))
            self.assertEqual(remaining(resp), LIMIT - stored, 'call %d after resume' % i)
        self.assertGreaterEqual(stored, 5)  # 1 before, 4 after; up to 3 abandoned ones may have counted too
        self.assertTrue(s.running())

    def test_graceful_shutdown_finishes_calls_in_flight(self):
        """SIGTERM with ten calls waiting on a paused Redis: once Redis answers they all complete OK, each with its
        own count, new calls are refused, and the process exits 0 within SHUTDOWN_GRACE_PERIOD."""
        s = start_redis_sluice(self, self.redis, REDIS_OP_TIMEOUT='10s', SHUTDOWN_GRACE_PERIOD='5s')
        ch = tcp_channel(s)
        self.addCleanup(ch.close)
        self.assertEqual(remaining(rls_call(ch, decision('sd'))), LIMIT - 1)
        stub = ch.unary_unary(RLS, request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
                              response_deserializer=rls_pb2.RateLimitResponse.FromString)
        self.redis.pause()
        futures = [stub.future(decision('sd'), timeout=10) for _ in range(10)]
        time.sleep(0.3)  # the calls reach the server
        self.assertFalse(any(f.done() for f in futures), [f.exception() for f in futures if f.done()])
        t_sig = time.monotonic()
        s.terminate()
        time.sleep(0.5)
        with tcp_channel(s) as late:
            e = rpc_error(self, rls_call, late, decision('late'), timeout=3)
            self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e.details())
        self.redis.resume()
        answers, failed = [], []
        for f in futures:
            try:
                answers.append(remaining(f.result(timeout=10)))
            except grpc.RpcError as e:
                failed.append('%s %s' % (e.code(), e.details()))
        self.assertEqual(failed, [], s.log_tail())
        self.assertEqual(sorted(answers), list(range(LIMIT - 11, LIMIT - 1)))
        rc = s.wait_exit(5.5 - (time.monotonic() - t_sig))
        took = time.monotonic() - t_sig
        self.assertEqual(rc, 0, 'exit code %r %.1fs after SIGTERM; %s' % (rc, took, s.log_tail()))
        # the calls ended about 0.5 s after SIGTERM: with nothing left to finish the grace period is not waited out
        self.assertLess(took, 2.5)
        self.assertEqual(self.redis.get(redis_key('sd')), '11')


# ---------------------------------------------------------------------------------------------------------------
# Connections: maximum age


class MaxConnectionAge(unittest.TestCase):
    def test_calls_survive_connection_rotation(self):
        """GRPC_MAX_CONNECTION_AGE=1s: for 4 s of calls from three threads on one channel (so calls are in flight
        when the server says GOAWAY) the server replaces the connection several times, and not one call fails or is
        counted twice."""
        s = Sluice(rules={'g.yaml': RULES},
                   env={'GRPC_MAX_CONNECTION_AGE': '1s', 'GRPC_MAX_CONNECTION_AGE_GRACE': '1s'})
        self.addCleanup(s.close)
        harness.avoid_window_edge('HOUR', 10)
        peers = set()
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peers.update(server_connections(s.grpc_port))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        failures = []
        oks = []
        with tcp_channel(s) as ch:
            end = time.monotonic() + 4.0

            def client():
                n = 0
                while time.monotonic() < end:
                    try:
                        rls_call(ch, decision('age'))
                        n += 1
                    except grpc.RpcError as e:
                        failures.append('%.2fs before the end: %s %s' % (end - time.monotonic(), e.code(),
                                                                          e.details()))
                    time.sleep(0.005)
                oks.append(n)

            clients = [threading.Thread(target=client) for _ in range(3)]
            for c in clients:
                c.start()
            for c in clients:
                c.join(20)
            last = rls_call(ch, decision('age'))
        stop.set()
        sampler.join(5)
        ok = sum(oks)
        self.assertEqual(len(oks), 3)
        self.assertEqual(failures, [], '%d of %d calls failed' % (len(failures), ok + len(failures)))
        self.assertGreater(ok, 100)
        self.assertEqual(remaining(last), LIMIT - ok - 1)
        self.assertGreaterEqual(len(peers), 3, 'connections seen: %r' % sorted(peers))


# ---------------------------------------------------------------------------------------------------------------
# Health Watch


class HealthWatch(unittest.TestCase):
    def watch(self, sluice, service):
        w = Watcher('127.0.0.1:%d' % sluice.grpc_port, service)
        self.addCleanup(w.close)
        return w

    def test_watch_follows_health_on_every_connection(self):
        """Watch on 'ratelimit' over four connections (four workers) sends SERVING at once, then NOT_SERVING when
        the last rule file goes (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED), then SERVING when it is back. '' sends
        SERVING, an unknown name SERVICE_UNKNOWN."""
        s = Sluice(rules={'g.yaml': RULES}, env={'HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED': 'true',
                                                 'IO_THREADS': '4'})
        self.addCleanup(s.close)
        watchers = [self.watch(s, 'ratelimit') for _ in range(4)]
        everything = self.watch(s, '')
        unknown = self.watch(s, 'no.such.Service')
        for w in watchers:
            w.wait_for(['SERVING'])
        everything.wait_for(['SERVING'])
        unknown.wait_for(['SERVICE_UNKNOWN'])
        s.remove_rule('g.yaml')
        for w in watchers:
            w.wait_for(['SERVING', 'NOT_SERVING'])
        s.write_rule('g.yaml', RULES)
        for w in watchers:
            w.wait_for(['SERVING', 'NOT_SERVING', 'SERVING'])
        time.sleep(0.2)
        self.assertEqual(everything.statuses, ['SERVING'])
        self.assertEqual(unknown.statuses, ['SERVICE_UNKNOWN'])
        self.assertTrue(all(w.error is None for w in watchers + [everything, unknown]))

    def test_sigterm_sends_not_serving(self):
        """SIGTERM makes the service NOT_SERVING: an open Watch is told before the server goes, and the process
        still exits 0 once the grace period ends the stream."""
        s = Sluice(rules={'g.yaml': RULES}, env={'SHUTDOWN_GRACE_PERIOD': '2s'})
        self.addCleanup(s.close)
        w = self.watch(s, 'ratelimit')
        w.wait_for(['SERVING'])
        s.terminate()
        w.wait_for(['SERVING', 'NOT_SERVING'], timeout=2)
        self.assertEqual(s.wait_exit(5), 0, s.log_tail())
        self.assertTrue(w.ended.wait(5), 'the Watch stream did not end after the server exited')


# ---------------------------------------------------------------------------------------------------------------
# Exact counts with several workers


class ExactCounts(unittest.TestCase):
    THREADS = 8
    PER_THREAD = 250

    def hammer(self, s, value):
        """THREADS threads, each with its own channel (its own connection), send PER_THREAD decisions for one key,
        alternating gRPC and /json. -> the remaining count one more decision reports."""
        errors = []

        def client(n):
            try:
                with tcp_channel(s) as ch:
                    for i in range(self.PER_THREAD):
                        if (n + i) % 2:
                            rls_call(ch, decision(value))
                        else:
                            status, _, body = harness.post_json(s.http_port,
                                                                harness.rls_request_json('g', [[('k', value)]]))
                            if status != 200:
                                raise AssertionError('/json: HTTP %d %r' % (status, body))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append('thread %d: %r' % (n, e))

        harness.avoid_window_edge('HOUR', 30)
        threads = [threading.Thread(target=client, args=(n,)) for n in range(self.THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        with tcp_channel(s) as ch:
            return remaining(rls_call(ch, decision(value)))

    def test_memory_backend_with_four_workers(self):
        """IO_THREADS=4, memory backend: 2000 decisions from 8 connections, all counted once."""
        s = Sluice(rules={'g.yaml': RULES}, env={'IO_THREADS': '4'})
        self.addCleanup(s.close)
        self.assertEqual(self.hammer(s, 'shared'), LIMIT - self.THREADS * self.PER_THREAD - 1)

    def test_redis_backend_with_four_workers(self):
        """IO_THREADS=4, Redis backend: the same, and Redis holds the same count."""
        redis = RedisServer()
        self.addCleanup(redis.close)
        s = start_redis_sluice(self, redis, IO_THREADS='4')
        total = self.THREADS * self.PER_THREAD + 1
        self.assertEqual(self.hammer(s, 'shared'), LIMIT - total)
        self.assertEqual(redis.get(redis_key('shared')), str(total))


# ---------------------------------------------------------------------------------------------------------------
# TLS


def make_leaf(certs, name, cn, san, usage, ca=None):
    """One more certificate from TlsCerts' own openssl recipe (a CA-signed EC leaf). -> (cert path, key path)."""
    return certs._leaf(name, cn, san, usage, ca=ca)


def read(path):
    with open(path, 'rb') as f:
        return f.read()


def tls_channel(sluice, ca, cert=None, key=None):
    creds = grpc.ssl_channel_credentials(root_certificates=read(ca), private_key=read(key) if key else None,
                                         certificate_chain=read(cert) if cert else None)
    return tcp_channel(sluice, credentials=creds)


def tls_outcome(sluice, ca, cert=None, key=None):
    """One call over a new TLS connection. -> 'OK' or the status code name."""
    with tls_channel(sluice, ca, cert, key) as ch:
        try:
            rls_call(ch, decision('tls'), timeout=3)
            return 'OK'
        except grpc.RpcError as e:
            return e.code().name


class TlsServer(unittest.TestCase):
    """One server certificate in copies the reload test overwrites."""

    def setUp(self):
        self.certs = TlsCerts()
        self.addCleanup(self.certs.close)
        d = os.path.join(self.certs.dir, 'serving')
        os.mkdir(d)
        self.cert, self.key = os.path.join(d, 'cert.pem'), os.path.join(d, 'key.pem')
        shutil.copy(self.certs.server, self.cert)
        shutil.copy(self.certs.server_key, self.key)

    def start(self, **env):
        env.update({'GRPC_SERVER_USE_TLS': 'true', 'GRPC_SERVER_TLS_CERT': self.cert,
                    'GRPC_SERVER_TLS_KEY': self.key})
        s = Sluice(rules={'g.yaml': RULES}, env=env)
        self.addCleanup(s.close)
        return s

    def install(self, cert, key):
        """Replaces the served files (key first, each with a rename)."""
        for src, dst in ((key, self.key), (cert, self.cert)):
            shutil.copy(src, dst + '.new')
            os.replace(dst + '.new', dst)


class Tls(TlsServer):
    def test_tls(self):
        """GRPC_SERVER_USE_TLS: calls over TLS succeed; a plaintext client and a client that does not trust the
        CA are refused."""
        s = self.start()
        self.assertEqual(tls_outcome(s, self.certs.ca), 'OK')
        with tcp_channel(s) as plain:
            e = rpc_error(self, rls_call, plain, decision('plain'), timeout=3)
            self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e.details())
        self.assertEqual(tls_outcome(s, self.certs.other_ca), 'UNAVAILABLE')
        self.assertTrue(s.running())
        # flow control through TLS: a 300 KB request, twice on the same key
        with tls_channel(s, self.certs.ca) as ch:
            value = 'tls-' + ''.join(chr(ord('a') + i % 26) for i in range(300000))
            self.assertEqual(remaining(rls_call(ch, decision(value))), LIMIT - 1)
            self.assertEqual(remaining(rls_call(ch, decision(value))), LIMIT - 2)

    def test_certificate_rotation(self):
        """New files (from a second CA) are served within seconds without a restart; a broken file keeps the
        certificate in use."""
        s = self.start()
        self.assertEqual(tls_outcome(s, self.certs.ca), 'OK')
        cert2, key2 = make_leaf(self.certs, 'server2', 'localhost', 'DNS:localhost,IP:127.0.0.1', 'serverAuth',
                                ca=(self.certs.other_ca, self.certs.other_ca_key))
        self.install(cert2, key2)
        harness.wait_until(lambda: tls_outcome(s, self.certs.other_ca) == 'OK', timeout=5,
                           message='the new certificate served', describe=s.log_tail)
        self.assertIn('reloaded the gRPC server certificate', s.log())
        self.assertEqual(tls_outcome(s, self.certs.ca), 'UNAVAILABLE')  # the old one is gone
        time.sleep(0.3)  # let the reloads of the two renames finish
        seen = len(s.log())
        with open(self.cert, 'w') as f:
            f.write('not a certificate\n')
        s.wait_for_log('keeping the previous certificate', since=seen, message='the broken file refused')
        self.assertEqual(tls_outcome(s, self.certs.other_ca), 'OK')
        self.assertTrue(s.running())


class MutualTls(TlsServer):
    def test_client_certificates_required(self):
        """GRPC_CLIENT_TLS_CACERT: a client certificate from that CA (clientAuth) is accepted; none, one from
        another CA, or one for servers only (serverAuth) is refused."""
        s = self.start(GRPC_CLIENT_TLS_CACERT=self.certs.ca)
        c = self.certs
        self.assertEqual(tls_outcome(s, c.ca, c.client, c.client_key), 'OK')
        self.assertEqual(tls_outcome(s, c.ca), 'UNAVAILABLE')
        self.assertEqual(tls_outcome(s, c.ca, c.other_client, c.other_client_key), 'UNAVAILABLE')
        self.assertEqual(tls_outcome(s, c.ca, c.wrong, c.wrong_key), 'UNAVAILABLE')
        self.assertEqual(tls_outcome(s, c.ca, c.client, c.client_key), 'OK')

    def test_client_san(self):
        """GRPC_CLIENT_TLS_SAN: only a client certificate naming it as a DNS SAN is accepted (not as the CN)."""
        c = self.certs
        good = make_leaf(c, 'good-client', 'someone', 'DNS:good.client', 'clientAuth')
        bad = make_leaf(c, 'bad-client', 'good.client', 'DNS:bad.client', 'clientAuth')
        cn_only = make_leaf(c, 'cn-client', 'good.client', None, 'clientAuth')
        s = self.start(GRPC_CLIENT_TLS_CACERT=c.ca, GRPC_CLIENT_TLS_SAN='good.client')
        self.assertEqual(tls_outcome(s, c.ca, *good), 'OK')
        self.assertEqual(tls_outcome(s, c.ca, *bad), 'UNAVAILABLE')
        self.assertEqual(tls_outcome(s, c.ca, *cn_only), 'UNAVAILABLE')
        self.assertEqual(tls_outcome(s, c.ca, c.client, c.client_key), 'UNAVAILABLE')
        self.assertEqual(tls_outcome(s, c.ca, *good), 'OK')


class TlsStartUp(unittest.TestCase):
    def test_bad_tls_settings_stop_start_up(self):
        """Missing or inconsistent TLS settings stop the start with a message naming the setting."""
        with TlsCerts() as c:
            cases = [
                ({'GRPC_SERVER_USE_TLS': 'true', 'GRPC_SERVER_TLS_CERT': '/nonexistent/cert.pem',
                  'GRPC_SERVER_TLS_KEY': c.server_key}, "GRPC_SERVER_TLS_CERT: cannot use '/nonexistent/cert.pem'"),
                ({'GRPC_SERVER_USE_TLS': 'true'}, 'GRPC_SERVER_TLS_CERT'),
                ({'GRPC_SERVER_USE_TLS': 'true', 'GRPC_SERVER_TLS_CERT': c.server, 'GRPC_SERVER_TLS_KEY': c.server_key,
                  'GRPC_CLIENT_TLS_SAN': 'x'}, 'GRPC_CLIENT_TLS_CACERT'),
            ]
            for env, message in cases:
                with self.subTest(env=env):
                    self.assertIn(message, Sluice.failed_start(self, env))


if __name__ == '__main__':
    unittest.main()
