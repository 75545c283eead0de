"""Rules from an xDS management server (CONFIG_TYPE=GRPC_XDS_SOTW; reference §1.3, §2.5, §9; issue 15), served by
tests/e2e/xds_server.py (grpcio, the real discovery protos): the initial push and updates, ACKs and NACKs (the
last good rules kept), the server killed and restarted, the node, metadata and headers it sees, TLS and mutual
TLS, a message over XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES, start-up with and without FORCE_START_WITHOUT_INITIAL_CONFIG,
and updates while decisions flow. Decisions are checked over gRPC after each step."""

import socket
import threading
import time
import unittest

import grpc

import harness
from google.protobuf import any_pb2
from harness import Sluice, TlsCerts
from xds_server import XdsServer, config

# Fast retries, without spread, for the tests that restart the server.
FAST_BACKOFF = {'XDS_CLIENT_BACKOFF_INITIAL_INTERVAL': '100ms', 'XDS_CLIENT_BACKOFF_MAX_INTERVAL': '400ms',
                'XDS_CLIENT_BACKOFF_JITTER': 'false'}


def v1():
    return [config('mesh', 'xds', [{'key': 'k', 'unit': 'HOUR', 'requests': 2},
                                   {'key': 'free', 'unlimited': True}])]


def v2():
    return [config('mesh', 'xds', [{'key': 'k', 'unit': 'HOUR', 'requests': 4}]),
            config('extra', 'other', [{'key': 'o', 'value': '1', 'unit': 'MINUTE', 'requests': 1}])]


def xds_env(server, **extra):
    env = {'CONFIG_TYPE': 'GRPC_XDS_SOTW', 'CONFIG_GRPC_XDS_SERVER_URL': '127.0.0.1:%d' % server.port,
           'RUNTIME_ROOT': None, 'RUNTIME_SUBDIRECTORY': None, 'RUNTIME_APPDIRECTORY': None,
           'RUNTIME_WATCH_ROOT': None}
    env.update(extra)
    return env


def codes(sluice, domain, entries, n):
    """The overall codes of n decisions over gRPC, one hit each."""
    return [harness.rls(sluice.grpc_port, domain, [[entries]]).overall_code for _ in range(n)]


OK, OVER = 1, 2


def probe(port, timeout=2.0):
    """GET /healthcheck: 'refused', or the status code (bytes) of an answer within the timeout (a hang raises)."""
    try:
        sock = socket.create_connection(('127.0.0.1', port), timeout=timeout)
    except ConnectionRefusedError:
        return 'refused'
    with sock:
        sock.sendall(b'GET /healthcheck HTTP/1.1\r\nHost: sluice\r\nConnection: close\r\n\r\n')
        return sock.recv(64).split(b' ')[1]


class XdsCase(unittest.TestCase):
    def server(self, **kwargs):
        s = XdsServer(**kwargs)
        self.addCleanup(s.stop)
        return s

    def sluice(self, env, wait_ready=True):
        s = Sluice(env=env, wait_ready=wait_ready)
        self.addCleanup(s.close)
        return s

    def assertCodes(self, sluice, domain, entries, expected):
        harness.avoid_window_edge('MINUTE' if domain == 'other' else 'HOUR', 2)
        self.assertEqual(codes(sluice, domain, entries, len(expected)), expected, sluice.log_tail(10))


class Rules(XdsCase):
    def test_initial_push_then_updates_replace_the_rules(self):
        server = self.server(snapshot=('v1', v1()))
        s = self.sluice(xds_env(server, CONFIG_GRPC_XDS_NODE_ID='rls-7',
                                CONFIG_GRPC_XDS_NODE_METADATA='zone=a,team=edge',
                                CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS='X-Tenant:blue,authorization:Bearer t'))
        server.wait_for_ack('v1')
        first = server.requests[0][1]
        self.assertEqual(first.type_url, 'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig')
        self.assertEqual(list(first.resource_names), [])
        self.assertEqual((first.version_info, first.response_nonce), ('', ''))
        self.assertEqual(first.node.id, 'rls-7')
        self.assertEqual({k: v.string_value for k, v in first.node.metadata.fields.items()},
                         {'zone': 'a', 'team': 'edge'})
        self.assertEqual(server.opened[0].get('x-tenant'), 'blue')
        self.assertEqual(server.opened[0].get('authorization'), 'Bearer t')
        self.assertIn('Successfully loaded the initial ratelimit configs', s.log())

        self.assertCodes(s, 'xds', ('k', 'a'), [OK, OK, OVER])
        self.assertCodes(s, 'xds', ('free', 'x'), [OK] * 3)
        _, _, body = harness.http_get(s.debug_port, '/rlconfig')
        self.assertIn('xds.k: unit=HOUR requests_per_unit=2, shadow_mode: false, quota_mode: false', body)

        nonce = server.push('v2', v2())
        server.wait_for_ack('v2')
        self.assertIn(('v2', nonce), server.acks())
        # The limit is now 4 (the count of 'a' goes on), 'free' is gone, and a second domain came.
        self.assertCodes(s, 'xds', ('k', 'b'), [OK, OK, OK, OK, OVER])
        self.assertEqual(harness.rls(s.grpc_port, 'xds', [[('free', 'x')]]).overall_code, OK)  # no rule: OK
        self.assertCodes(s, 'other', ('o', '1'), [OK, OVER])
        _, _, body = harness.http_get(s.debug_port, '/rlconfig')
        self.assertNotIn('xds.free', body)

        server.push('v3', [])  # an empty state of the world: no rules at all
        server.wait_for_ack('v3')
        self.assertCodes(s, 'other', ('o', '1'), [OK, OK])

    def test_bad_resources_are_nacked_and_the_last_good_rules_stay(self):
        server = self.server(snapshot=('v1', v1()))
        s = self.sluice(xds_env(server))
        server.wait_for_ack('v1')
        # A rule error: NACK with the loader's message, the version still the accepted one.
        nonce = server.push('v2', [config('broken', '', [{'key': 'k'}])])
        version, nacked, message = server.wait_for_nack()
        self.assertEqual((version, nacked), ('v1', nonce))
        self.assertEqual(message, 'broken: config file cannot have empty domain')
        self.assertIn('Error loading new configuration: broken: config file cannot have empty domain', s.log())
        # A resource of another type.
        other = any_pb2.Any(type_url='type.googleapis.com/envoy.config.cluster.v3.Cluster', value=b'')
        nonce = server.push('v3', [other])
        version, nacked, message = server.wait_for_nack(count=2)
        self.assertEqual((version, nacked), ('v1', nonce))
        self.assertIn("resource 0 is of type 'type.googleapis.com/envoy.config.cluster.v3.Cluster'", message)
        # Bytes that are no RateLimitConfig.
        garbage = any_pb2.Any(type_url='type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig',
                              value=b'\xff\xff\xff')
        server.push('v4', [garbage])
        self.assertEqual(server.wait_for_nack(count=3)[2], 'resource 0 is not a valid RateLimitConfig message')
        stats = dict(line.split(': ', 1) for line in
                     harness.http_get(s.debug_port, '/stats')[2].splitlines() if ': ' in line)
        self.assertEqual(stats.get('ratelimit.service.config_load_error'), '3')
        self.assertEqual(stats.get('ratelimit.service.config_load_success'), '1')
        self.assertCodes(s, 'xds', ('k', 'c'), [OK, OK, OVER])  # v1 still
        server.push('v5', v2())
        server.wait_for_ack('v5')
        self.assertCodes(s, 'other', ('o', '1'), [OK, OVER])


class Reconnect(XdsCase):
    def test_server_killed_and_restarted(self):
        server = XdsServer(snapshot=('v1', v1()))
        port = server.port
        s = self.sluice(xds_env(server, **FAST_BACKOFF))
        server.wait_for_ack('v1')
        server.stop()
        s.wait_for_log(lambda log: 'Failed to receive configuration from xDS Management Server' in log,
                       message='the stream failure logged')
        self.assertCodes(s, 'xds', ('k', 'd'), [OK, OK, OVER])  # the rules stay meanwhile
        time.sleep(0.5)  # a few failed attempts
        restarted = self.server(port=port, snapshot=('v2', v2()))
        restarted.wait_for_ack('v2', timeout=10)
        reopened = restarted.requests[0][1]
        self.assertEqual((reopened.version_info, reopened.response_nonce), ('v1', ''))
        self.assertCodes(s, 'other', ('o', '1'), [OK, OVER])
        self.assertIn('Reconnecting to the xDS Management Server', s.log())

    def test_a_refused_version_is_never_acked_after_a_reconnect(self):
        server = XdsServer(snapshot=('v1', v1()))
        port = server.port
        s = self.sluice(xds_env(server, **FAST_BACKOFF))
        server.wait_for_ack('v1')
        server.push('v2', [config('broken', '', [])])
        server.wait_for_nack()
        server.stop()
        restarted = self.server(port=port)
        restarted.wait_for_streams(1)
        harness.wait_until(lambda: restarted.requests, message='the opening request')
        self.assertEqual(restarted.requests[0][1].version_info, 'v1')
        self.assertTrue(s.running())


class StartUp(XdsCase):
    def waiting_sluice(self):
        """Sluice pointed at a free port where no xDS server listens yet, waiting for its first rules.
        -> (sluice, the port to start the server on)."""
        port = harness.free_port()
        s = Sluice(env=xds_env(type('P', (), {'port': port}), **FAST_BACKOFF), start=False)
        self.addCleanup(s.close)
        s.start(wait_ready=False)
        s.wait_for_log(lambda log: 'Waiting for initial ratelimit config update event' in log, message='waiting')
        return s, port

    def test_waits_for_the_first_good_rules_before_opening_its_ports(self):
        s, port = self.waiting_sluice()
        time.sleep(0.5)
        with self.assertRaises(OSError):
            harness.http_get(s.http_port, '/healthcheck', timeout=0.5)
        server = self.server(port=port, snapshot=('bad', [config('broken', '', [])]))
        server.wait_for_nack()
        time.sleep(0.3)
        with self.assertRaises(OSError):  # a refused response is not enough
            harness.http_get(s.http_port, '/healthcheck', timeout=0.5)
        server.push('v1', v1())
        s.wait_ready(timeout=10)
        self.assertCodes(s, 'xds', ('k', 'e'), [OK, OK, OVER])

    def test_every_port_refuses_at_once_while_waiting(self):
        # A probe must never see an open port that does not answer: each port refuses until the rules load.
        s, port = self.waiting_sluice()
        time.sleep(0.3)
        self.assertIn(probe(s.http_port), ('refused', b'503'))
        self.assertEqual(probe(s.grpc_port), 'refused')
        self.assertEqual(probe(s.debug_port), 'refused')
        server = self.server(port=port, snapshot=('v1', v1()))
        s.wait_ready(timeout=10)
        self.assertEqual(s.healthcheck()[0], 200)
        self.assertEqual(harness.http_get(s.debug_port, '/stats')[0], 200)
        self.assertCodes(s, 'xds', ('k', 'e'), [OK, OK, OVER])

    def test_sigterm_while_waiting(self):
        port = harness.dead_port()
        s = Sluice(env=xds_env(type('P', (), {'port': port})), start=False)
        self.addCleanup(s.close)
        s.start(wait_ready=False)
        s.wait_for_log(lambda log: 'Waiting for initial ratelimit config update event' in log, message='waiting')
        s.terminate()
        self.assertEqual(s.wait_exit(10), 0, s.log())

    def test_force_start_answers_without_rules_until_they_come(self):
        port = harness.free_port()
        s = self.sluice(xds_env(type('P', (), {'port': port}), FORCE_START_WITHOUT_INITIAL_CONFIG='true',
                                HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED='true', **FAST_BACKOFF), wait_ready='answer')
        self.assertEqual(s.healthcheck()[0], 500)  # no rules loaded yet
        # No rules yet: decisions fail as with rule files that never loaded.
        with self.assertRaises(grpc.RpcError) as failed:
            harness.rls(s.grpc_port, 'xds', [[('k', 'f')]])
        self.assertEqual(failed.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(failed.exception.details(), 'no rate limit configuration loaded')
        server = self.server(port=port, snapshot=('v1', v1()))
        server.wait_for_ack('v1')
        harness.wait_until(lambda: s.healthcheck()[0] == 200, message='healthy once rules loaded')
        self.assertCodes(s, 'xds', ('k', 'f'), [OK, OK, OVER])


class Transport(XdsCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = TlsCerts()

    @classmethod
    def tearDownClass(cls):
        cls.certs.close()

    def tls_server(self, cert='server', require_client_auth=False):
        c = self.certs
        return self.server(snapshot=('v1', v1()), tls={
            'cert': getattr(c, cert), 'key': getattr(c, cert + '_key'), 'ca': c.ca,
            'require_client_auth': require_client_auth})

    def test_tls(self):
        server = self.tls_server()
        env = xds_env(server, CONFIG_GRPC_XDS_SERVER_USE_TLS='true',
                      CONFIG_GRPC_XDS_SERVER_TLS_CACERT=self.certs.ca)
        env['CONFIG_GRPC_XDS_SERVER_URL'] = 'localhost:%d' % server.port
        s = self.sluice(env)
        server.wait_for_ack('v1')
        self.assertCodes(s, 'xds', ('k', 'g'), [OK, OK, OVER])

    def test_tls_name_from_the_san_setting(self):
        server = self.tls_server(cert='wrong')  # its certificate is for wrong.example
        s = self.sluice(xds_env(server, CONFIG_GRPC_XDS_SERVER_USE_TLS='true',
                                CONFIG_GRPC_XDS_SERVER_TLS_CACERT=self.certs.ca,
                                CONFIG_GRPC_XDS_SERVER_TLS_SAN='wrong.example'))
        server.wait_for_ack('v1')

    def test_mutual_tls(self):
        server = self.tls_server(require_client_auth=True)
        env = xds_env(server, CONFIG_GRPC_XDS_SERVER_USE_TLS='true', CONFIG_GRPC_XDS_SERVER_TLS_CACERT=self.certs.ca,
                      CONFIG_GRPC_XDS_SERVER_TLS_SAN='localhost', CONFIG_GRPC_XDS_CLIENT_TLS_CERT=self.certs.client,
                      CONFIG_GRPC_XDS_CLIENT_TLS_KEY=self.certs.client_key)
        s = self.sluice(env)
        server.wait_for_ack('v1')
        self.assertCodes(s, 'xds', ('k', 'h'), [OK, OK, OVER])

    def test_mutual_tls_without_a_client_certificate_gets_no_rules(self):
        server = self.tls_server(require_client_auth=True)
        s = self.sluice(xds_env(server, CONFIG_GRPC_XDS_SERVER_USE_TLS='true',
                                CONFIG_GRPC_XDS_SERVER_TLS_CACERT=self.certs.ca, CONFIG_GRPC_XDS_SERVER_TLS_SAN='localhost',
                                FORCE_START_WITHOUT_INITIAL_CONFIG='true', **FAST_BACKOFF))
        s.wait_for_log(lambda log: 'Failed to receive configuration from xDS Management Server' in log,
                       message='the refused handshake logged')
        self.assertEqual(server.acks(), [])

    def test_a_message_over_the_size_limit_is_refused_and_the_rules_stay(self):
        server = self.server(snapshot=('v1', v1()))
        s = self.sluice(xds_env(server, XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES='4096', **FAST_BACKOFF))
        server.wait_for_ack('v1')
        big = config('big', 'big', [{'key': 'k%d' % i, 'unit': 'HOUR', 'requests': 1} for i in range(400)])
        self.assertGreater(big.ByteSize(), 4096)
        server.push('v2', [big])
        s.wait_for_log(lambda log: 'Failed to receive configuration from xDS Management Server: rpc error: code = '
                       'RESOURCE_EXHAUSTED desc = Received message larger than max' in log,
                       message='the oversized message refused')
        self.assertNotIn('v2', [v for v, _ in server.acks()])
        self.assertCodes(s, 'xds', ('k', 'i'), [OK, OK, OVER])

    def test_the_default_takes_a_large_message(self):
        server = self.server()
        s = self.sluice(xds_env(server, FORCE_START_WITHOUT_INITIAL_CONFIG='true'))
        big = config('big', 'big', [{'key': 'k%d' % i, 'unit': 'HOUR', 'requests': 1} for i in range(400)])
        server.push('v1', [big])
        server.wait_for_ack('v1')
        self.assertCodes(s, 'big', ('k399', ''), [OK, OVER])


class UnderLoad(XdsCase):
    def test_updates_while_1000_decisions_per_second_flow_lose_none(self):
        server = self.server(snapshot=('v0', v1()))
        s = self.sluice(xds_env(server))
        server.wait_for_ack('v0')
        stub_rls = lambda: harness.rls(s.grpc_port, 'load', [[('user', 'u')]], timeout=5)  # noqa: E731
        results = []
        lock = threading.Lock()
        stop = threading.Event()

        def send(n):
            next_at = time.monotonic()
            while not stop.is_set():
                next_at += 0.008  # 125/s per thread, 8 threads: 1,000/s
                try:
                    code = stub_rls().overall_code
                except grpc.RpcError as e:
                    code = 'error %s %s' % (e.code(), e.details())
                with lock:
                    results.append(code)
                time.sleep(max(0.0, next_at - time.monotonic()))

        threads = [threading.Thread(target=send, args=(n,), daemon=True) for n in range(8)]
        for th in threads:
            th.start()
        started = time.monotonic()
        version = 0
        while time.monotonic() - started < 4:
            version += 1
            # Each version has the load's domain (never limited) and one more of its own.
            server.push('v%d' % version, [config('load', 'load', [{'key': 'user', 'unit': 'HOUR', 'requests': 10**9}]),
                                          config('n%d' % version, 'd%d' % version, [{'key': 'k', 'unit': 'HOUR',
                                                                                    'requests': 1}])])
            time.sleep(0.1)
        server.wait_for_ack('v%d' % version)
        stop.set()
        for th in threads:
            th.join(10)
        elapsed = time.monotonic() - started
        self.assertEqual([r for r in results if r != OK], [], 'every decision answered OK')
        self.assertGreater(len(results) / elapsed, 700, 'the load ran at ~1,000 decisions/s')
        self.assertGreater(version, 20)
        self.assertEqual(server.nacks(), [])
        self.assertCodes(s, 'd%d' % version, ('k', ''), [OK, OVER])


if __name__ == '__main__':
    unittest.main()
