"""The memcache backend (BACKEND_TYPE=memcache; reference §1.8 and §5; issue 14), against real memcached processes
started on free loopback ports (and dnsmasq for SRV): upstream's keys, commands and TTLs read back from memcached
itself, counts exact under concurrency, MONTH and YEAR limits that count, one and three nodes with gomemcache's
choice of node, bad keys, nodes killed and restarted, TLS, SRV discovery and refresh, the start-up settings and the
ratelimit.memcache.* stats."""

import threading
import time
import unittest
import zlib

import grpc

import harness
from harness import Sluice, TlsCerts
from memcached import Dnsmasq, MemcachedServer
from test_redis import FAST, TRANSPORTS, DecisionLoad, attempt, key_for

RULES = """
domain: mc
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: month
    rate_limit: {unit: month, requests_per_unit: 5}
  - key: year
    rate_limit: {unit: year, requests_per_unit: 5}
  - key: spread
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: load
    rate_limit: {unit: hour, requests_per_unit: 100000}
  - key: exact
    rate_limit: {unit: hour, requests_per_unit: 50}
"""


def memcache_env(*servers, **extra):
    env = {'BACKEND_TYPE': 'memcache', 'EXPIRATION_JITTER_MAX_SECONDS': '0',
           'MEMCACHE_HOST_PORT': ','.join('127.0.0.1:%d' % s.port for s in servers)}
    env.update(extra)
    return env


def stats_of(sluice, prefix='ratelimit.memcache.'):
    _, _, body = harness.http_get(sluice.debug_port, '/stats')
    return {k[len(prefix):]: int(v) for k, v in (line.split(': ', 1) for line in body.splitlines())
            if k.startswith(prefix)}


class MemcacheCase(unittest.TestCase):
    def assertUnavailable(self, sluice, transport, descriptors, within=FAST, mention='memcached'):
        outcome, detail, elapsed = attempt(sluice, transport, 'mc', descriptors)
        self.assertEqual(outcome, 'unavailable', '%s: %r; %s' % (transport, detail, sluice.log_tail(10)))
        self.assertIn(mention, detail, transport)
        self.assertLess(elapsed, within, '%s: the failing decision took %.3fs' % (transport, elapsed))
        return detail

    def assertOk(self, sluice, transport, descriptors, hits_addend=None):
        outcome, detail, _ = attempt(sluice, transport, 'mc', descriptors, hits_addend)
        self.assertEqual(outcome, 'ok', '%s: %r; %s' % (transport, detail, sluice.log_tail(10)))
        return detail


# ---------------------------------------------------------------------------------------------------------------
# One node: keys, values, TTLs, commands


class OneNode(MemcacheCase):
    @classmethod
    def setUpClass(cls):
        cls.memcached = MemcachedServer()
        try:
            cls.sluice = Sluice(rules={'mc.yaml': RULES}, env=memcache_env(cls.memcached))
        except BaseException:
            cls.memcached.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.sluice.close()
        cls.memcached.close()

    def setUp(self):
        self.memcached.flush()
        harness.avoid_window_edge('MINUTE', 4)

    def test_counts_keys_and_ttls_as_upstream(self):
        for transport in TRANSPORTS:
            self.memcached.flush()
            value = 'v-' + transport
            t0 = time.time()
            for i in range(3):
                d = self.sluice.decide(transport, 'mc', [[('k', value)]])
                self.assertEqual((d.overall, d.statuses[0].remaining), ('OK', 2 - i), d)
            d = self.sluice.decide(transport, 'mc', [[('k', value)]])
            self.assertEqual((d.overall, d.statuses[0].code, d.statuses[0].remaining), ('OVER_LIMIT', 'OVER_LIMIT', 0))
            key = key_for('mc_k_' + value, 'MINUTE', t0)
            harness.wait_until(lambda: list(self.memcached.keys()) == [key], message='only %s in memcached' % key,
                               describe=self.memcached.keys)
            count, ttl = self.memcached.counter(key)
            self.assertEqual(count, 4)
            # The TTL is the window (no jitter here), set when the key is created and not refreshed.
            self.assertTrue(55 <= ttl <= 60, ttl)

    def test_hits_addend_and_negative_hits(self):
        t0 = time.time()
        d = self.sluice.decide('grpc', 'mc', [[('spread', 'h')]], hits_addend=7)
        self.assertEqual(d.statuses[0].remaining, 993, d)
        key = key_for('mc_spread_h', 'HOUR', t0)
        self.assertEqual(self.memcached.counter(key)[0], 7)
        for transport, hits, left in (('grpc', 3, 4), ('json', 10, 0)):
            if transport == 'grpc':
                req = harness.rls_request_proto('mc', [[('spread', 'h')]], hits)
                req.descriptors[0].is_negative_hits = True
                harness.rls_raw(self.sluice.grpc_port, req)
            else:
                body = harness.rls_request_json('mc', [[('spread', 'h')]], hits)
                body['descriptors'][0]['isNegativeHits'] = True
                status, _, _ = harness.post_json(self.sluice.http_port, body)
                self.assertEqual(status, 200)
            # decr: given back, never below 0, the TTL kept
            self.assertEqual(self.memcached.counter(key)[0], left)
        self.assertGreater(self.memcached.counter(key)[1], 3500)
        # Negative hits on a key memcached does not hold create nothing.
        req = harness.rls_request_proto('mc', [[('spread', 'absent')]], 2)
        req.descriptors[0].is_negative_hits = True
        harness.rls_raw(self.sluice.grpc_port, req)
        self.assertIsNone(self.memcached.counter(key_for('mc_spread_absent', 'HOUR', t0)))

    def test_month_and_year_limits_count(self):
        # upstream sends exptime 2592000+ as is; memcached reads that as a time in 1970 and the key expires at once.
        for unit, seconds in (('month', 2592000), ('year', 31536000)):
            t0 = time.time()
            for i in range(2):
                d = self.sluice.decide('grpc', 'mc', [[(unit, 'x')]])
                self.assertEqual(d.statuses[0].remaining, 4 - i, d)
            key = key_for('mc_%s_x' % unit, unit.upper(), t0)
            count, ttl = self.memcached.counter(key)
            self.assertEqual(count, 2)
            self.assertAlmostEqual(ttl, seconds, delta=5)

    def test_several_descriptors_one_request(self):
        t0 = time.time()
        d = self.sluice.decide('json', 'mc', [[('k', 'a')], [('spread', 'b')], [('k', 'a')], [('nomatch', 'z')]])
        self.assertEqual([s.remaining for s in d.statuses[:3]], [2, 999, 1], d)
        self.assertEqual(d.statuses[3].code, 'OK')
        self.assertEqual(self.memcached.counter(key_for('mc_k_a', 'MINUTE', t0))[0], 2)

    def test_keys_memcached_refuses_fail_clearly_and_reach_no_wire(self):
        commands = ('cmd_get', 'cmd_set', 'incr_misses', 'incr_hits', 'decr_misses', 'decr_hits')
        before = self.memcached.stats()
        for transport in TRANSPORTS:
            detail = self.assertUnavailable(self.sluice, transport, [[('k', 'has space')]], mention='has space')
            self.assertIn('space or a control character', detail)
            detail = self.assertUnavailable(self.sluice, transport, [[('k', 'v' * 300)]],
                                            mention='memcached takes at most 250')
            self.assertIn('cannot count key', detail)
        after = self.memcached.stats()
        self.assertEqual([after[c] - before[c] for c in commands], [0] * len(commands))
        # The connection is still fine.
        self.assertOk(self.sluice, 'grpc', [[('k', 'fine')]])

    def test_healthy(self):
        self.assertEqual(self.sluice.healthcheck()[0], 200)
        self.assertEqual(self.sluice.health(), 'SERVING')

    def test_stats(self):
        before = stats_of(self.sluice)
        self.sluice.decide('grpc', 'mc', [[('spread', 's1')], [('spread', 's2')]])  # two misses: incr, add
        self.sluice.decide('grpc', 'mc', [[('spread', 's1')]])                        # found: incr
        self.memcached.set(key_for('mc_spread_bad', 'HOUR', time.time()), 'text', 3600)
        self.assertUnavailable(self.sluice, 'grpc', [[('spread', 'bad')]], mention='memcached at')

        def delta():
            now = stats_of(self.sluice)
            return {k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)}

        expected = {'multiget.__code=success': 3, 'keys_requested': 4, 'keys_found': 2,
                    'increment.__code=success': 1, 'increment.__code=miss': 2, 'increment.__code=error': 1,
                    'add.__code=success': 2}
        harness.wait_until(lambda: delta() == expected, message='memcache stats', describe=delta)


# ---------------------------------------------------------------------------------------------------------------
# Exact counts: many clients, two Sluice instances, one memcached


class ExactCounts(MemcacheCase):
    def test_no_burst_gets_through(self):
        harness.avoid_window_edge('HOUR', 10)
        with MemcachedServer() as memcached, \
                Sluice(rules={'mc.yaml': RULES}, env=memcache_env(memcached, IO_THREADS='2')) as a, \
                Sluice(rules={'mc.yaml': RULES}, env=memcache_env(memcached, IO_THREADS='2')) as b:
            oks = []
            lock = threading.Lock()

            def client(n):
                server = (a, b)[n % 2]
                for i in range(25):
                    d = server.decide(TRANSPORTS[i % 2], 'mc', [[('exact', 'e')]])
                    with lock:
                        oks.append(d.overall == 'OK')

            threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            # 200 decisions, limit 50: exactly 50 pass (upstream decides on a stale read and lets bursts through).
            self.assertEqual(len(oks), 200)
            self.assertEqual(sum(oks), 50)
            self.assertEqual(memcached.counter(key_for('mc_exact_e', 'HOUR', time.time()))[0], 200)


# ---------------------------------------------------------------------------------------------------------------
# Three nodes


def picked(key, count):
    """gomemcache's node for `key` among `count`."""
    return zlib.crc32(key[:256].encode()) % count


class ThreeNodes(MemcacheCase):
    def test_keys_spread_as_gomemcache_does(self):
        harness.avoid_window_edge('HOUR', 5)
        nodes = [MemcachedServer() for _ in range(3)]
        try:
            with Sluice(rules={'mc.yaml': RULES}, env=memcache_env(*nodes)) as s:
                t0 = time.time()
                values = ['v%d' % i for i in range(24)]
                d = s.decide('grpc', 'mc', [[('spread', v)] for v in values])
                self.assertTrue(all(st.remaining == 999 for st in d.statuses), d)
                d = s.decide('json', 'mc', [[('spread', v)] for v in values[:12]])
                self.assertTrue(all(st.remaining == 998 for st in d.statuses), d)
                seen = [0, 0, 0]
                for i, v in enumerate(values):
                    key = key_for('mc_spread_' + v, 'HOUR', t0)
                    where = [n for n, node in enumerate(nodes) if node.counter(key) is not None]
                    self.assertEqual(where, [picked(key, 3)], key)
                    self.assertEqual(nodes[where[0]].counter(key)[0], 2 if i < 12 else 1)
                    seen[where[0]] += 1
                self.assertTrue(all(seen), seen)

                # One node down: only its keys fail, fast; the others' keep counting. It comes back alone.
                down = picked(key_for('mc_spread_v0', 'HOUR', t0), 3)
                port = nodes[down].port
                nodes[down].kill()
                on_down = [v for v in values if picked(key_for('mc_spread_' + v, 'HOUR', t0), 3) == down]
                elsewhere = [v for v in values if v not in on_down]
                for transport in TRANSPORTS:
                    detail = self.assertUnavailable(s, transport, [[('spread', on_down[0])]])
                    self.assertIn('127.0.0.1:%d' % port, detail)
                    self.assertOk(s, transport, [[('spread', elsewhere[0])]])
                nodes[down].close()
                nodes[down] = MemcachedServer(port=port)
                harness.wait_until(lambda: attempt(s, 'grpc', 'mc', [[('spread', on_down[0])]])[0] == 'ok',
                                   timeout=5, message='the node is used again', describe=s.log_tail)
        finally:
            for n in nodes:
                n.close()


# ---------------------------------------------------------------------------------------------------------------
# Faults


class Faults(MemcacheCase):
    def test_killed_and_restarted_under_load(self):
        harness.avoid_window_edge('HOUR', 10)
        memcached = MemcachedServer()
        try:
            with Sluice(rules={'mc.yaml': RULES.replace('key: load', 'key: k_load')},
                        env=memcache_env(memcached, MEMCACHE_MAX_IDLE_CONNS='4')) as s:
                load = DecisionLoad(s, 'mc')
                try:
                    harness.wait_until(lambda: load.count('ok', 0) >= 40, timeout=10, message='40 decisions')
                    killed = time.monotonic()
                    memcached.kill()
                    harness.wait_until(lambda: load.count('unavailable', killed) >= 20, timeout=10,
                                       message='decisions fail while memcached is down')
                    memcached.start()
                    restarted = time.monotonic()
                    harness.wait_until(lambda: load.count('ok', restarted) >= 40, timeout=10,
                                       message='decisions succeed again', describe=s.log_tail)
                finally:
                    self.assertTrue(load.stop())
                with load.lock:
                    results = list(load.results)
                others = [r for r in results if r[2] not in ('ok', 'unavailable')]
                self.assertEqual(others, [])
                slow = [r for r in results if r[2] == 'unavailable' and r[4] > FAST]
                self.assertEqual(slow, [])
                self.assertTrue(all('memcached' in r[3] for r in results if r[2] == 'unavailable'))
        finally:
            memcached.close()

    def test_fail_open(self):
        memcached = MemcachedServer()
        try:
            with Sluice(rules={'mc.yaml': RULES}, env=memcache_env(memcached, BACKEND_FAIL_OPEN='true')) as s:
                self.assertOk(s, 'grpc', [[('k', 'a')]])
                memcached.kill()
                for transport in TRANSPORTS:
                    d = self.assertOk(s, transport, [[('k', 'a')]])
                    self.assertEqual(d.overall, 'OK')
        finally:
            memcached.close()

    def test_absent_at_start_then_up(self):
        port = harness.free_port()
        with Sluice(rules={'mc.yaml': RULES}, env=memcache_env(MemcachedServer(start=False, port=port))) as s:
            # Healthy anyway (upstream never is with this backend); decisions fail clearly until memcached is up.
            self.assertEqual(s.healthcheck()[0], 200)
            self.assertUnavailable(s, 'grpc', [[('k', 'a')]])
            with MemcachedServer(port=port):
                harness.wait_until(lambda: attempt(s, 'json', 'mc', [[('k', 'a')]])[0] == 'ok', timeout=5,
                                   message='memcached reached', describe=s.log_tail)


# ---------------------------------------------------------------------------------------------------------------
# TLS


class Tls(MemcacheCase):
    def test_tls_with_and_without_client_certificate(self):
        with TlsCerts() as certs:
            for verify in ('none', 'require'):
                tls = {'cert': certs.server, 'key': certs.server_key, 'ca': certs.ca, 'verify': verify,
                       'client_cert': certs.client, 'client_key': certs.client_key}
                with MemcachedServer(tls=tls) as memcached:
                    env = memcache_env(memcached, MEMCACHE_TLS='true', MEMCACHE_TLS_CACERT=certs.ca)
                    env['MEMCACHE_HOST_PORT'] = 'localhost:%d' % memcached.port
                    if verify == 'require':
                        env.update(MEMCACHE_TLS_CLIENT_CERT=certs.client, MEMCACHE_TLS_CLIENT_KEY=certs.client_key)
                    with Sluice(rules={'mc.yaml': RULES}, env=env) as s:
                        harness.wait_until(lambda: attempt(s, 'grpc', 'mc', [[('k', verify)]])[0] == 'ok',
                                           timeout=5, message='a decision over TLS', describe=s.log_tail)
                        self.assertEqual(memcached.counter(key_for('mc_k_' + verify, 'MINUTE', time.time()))[0], 1)
                    if verify == 'require':
                        # Without a client certificate, memcached refuses the connection: a clear error.
                        env.pop('MEMCACHE_TLS_CLIENT_CERT')
                        env.pop('MEMCACHE_TLS_CLIENT_KEY')
                        with Sluice(rules={'mc.yaml': RULES}, env=env) as s:
                            time.sleep(0.5)
                            self.assertUnavailable(s, 'grpc', [[('k', 'x')]])

    def test_server_name_and_chain_are_checked(self):
        with TlsCerts() as certs:
            tls = {'cert': certs.wrong, 'key': certs.wrong_key, 'ca': certs.ca}
            with MemcachedServer(tls=tls) as memcached:
                env = memcache_env(memcached, MEMCACHE_TLS='true', MEMCACHE_TLS_CACERT=certs.ca)
                with Sluice(rules={'mc.yaml': RULES}, env=env) as s:
                    time.sleep(0.5)
                    detail = self.assertUnavailable(s, 'grpc', [[('k', 'x')]])
                    self.assertIn('certificate verify failed', detail + s.log())
                env['MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION'] = 'true'
                with Sluice(rules={'mc.yaml': RULES}, env=env) as s:
                    harness.wait_until(lambda: attempt(s, 'grpc', 'mc', [[('k', 'skip')]])[0] == 'ok', timeout=5,
                                       message='a decision with the name unchecked', describe=s.log_tail)
                env.update(MEMCACHE_TLS_CACERT=certs.other_ca, MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION='true')
                with Sluice(rules={'mc.yaml': RULES}, env=env) as s:
                    time.sleep(0.5)
                    self.assertUnavailable(s, 'grpc', [[('k', 'x')]])


# ---------------------------------------------------------------------------------------------------------------
# SRV


SRV = '_memcache._tcp.sluice.test'


class Srv(MemcacheCase):
    def test_nodes_from_srv_and_refresh(self):
        harness.avoid_window_edge('HOUR', 10)
        nodes = [MemcachedServer() for _ in range(3)]
        dns = None
        try:
            dns = Dnsmasq([(SRV, 'localhost', nodes[0].port), (SRV, 'localhost', nodes[1].port)])
            env = {'BACKEND_TYPE': 'memcache', 'EXPIRATION_JITTER_MAX_SECONDS': '0', 'MEMCACHE_SRV': SRV,
                   'MEMCACHE_SRV_DNS_SERVER': dns.address, 'MEMCACHE_SRV_REFRESH': '200ms'}
            with Sluice(rules={'mc.yaml': RULES}, env=env) as s:

                def check_spread(members, value):
                    # upstream's order: "target:port" strings sorted (the target with its final dot).
                    order = sorted('localhost.:%d' % nodes[m].port for m in members)
                    t0 = time.time()
                    values = ['%s%d' % (value, i) for i in range(12)]
                    d = s.decide('grpc', 'mc', [[('spread', v)] for v in values])
                    self.assertEqual(d.overall, 'OK', d)
                    for v in values:
                        key = key_for('mc_spread_' + v, 'HOUR', t0)
                        want = order[picked(key, len(order))]
                        where = ['localhost.:%d' % n.port for n in nodes if n.counter(key) is not None]
                        self.assertEqual(where, [want], key)

                check_spread([0, 1], 'a')
                dns.restart([(SRV, 'localhost', p.port) for p in nodes])
                s.wait_for_log(lambda log: 'memcached servers from SRV' in log and str(nodes[2].port) in log,
                               timeout=5, message='the refreshed list')
                time.sleep(0.3)  # every worker has it
                check_spread([0, 1, 2], 'b')
                dns.restart([(SRV, 'localhost', nodes[2].port)])
                harness.wait_until(lambda: s.log().count('memcached servers from SRV') >= 2, timeout=5,
                                   message='the second refresh')
                time.sleep(0.3)
                check_spread([2], 'c')
                # A lookup that fails keeps the last list.
                dns.kill()
                s.wait_for_log(lambda log: 'Unable to refresh memcached servers from SRV' in log, timeout=10,
                               message='the failed refresh')
                check_spread([2], 'd')
        finally:
            if dns is not None:
                dns.close()
            for n in nodes:
                n.close()

    def test_srv_that_cannot_be_resolved_stops_start_up(self):
        with Dnsmasq([('_other._tcp.sluice.test', 'localhost', 11211)]) as dns:
            log = Sluice.failed_start(self, {'BACKEND_TYPE': 'memcache', 'MEMCACHE_SRV': SRV,
                                             'MEMCACHE_SRV_DNS_SERVER': dns.address})
            self.assertIn('Unable to fetch servers from SRV: SRV lookup of %s' % SRV, log)


# ---------------------------------------------------------------------------------------------------------------
# Start-up settings


class StartUp(MemcacheCase):
    def test_bad_settings_stop_start_up(self):
        cases = [
            ({'MEMCACHE_HOST_PORT': '127.0.0.1:1', 'MEMCACHE_SRV': SRV}, 'Both MEMCACHE_HOST_PORT and MEMCACHE_SRV are set'),
            ({}, 'BACKEND_TYPE=memcache needs MEMCACHE_HOST_PORT'),
            ({'MEMCACHE_HOST_PORT': 'nohost'}, "'nohost' is not host:port"),
            ({'MEMCACHE_HOST_PORT': '127.0.0.1:1', 'MEMCACHE_TLS': 'true', 'MEMCACHE_TLS_CACERT': '/nonexistent'},
             'MEMCACHE_TLS_CACERT'),
        ]
        for env, message in cases:
            env = dict(env, BACKEND_TYPE='memcache')
            self.assertIn(message, Sluice.failed_start(self, env), env)


if __name__ == '__main__':
    unittest.main()
