"""Usage budgets (issue 41, part 1): `accounting: usage` on the memory backend, one Redis (exact and with
REDIS_SYNC_INTERVAL), a Redis Cluster of three masters and memcached. An AI gateway's flow as Envoy sends it over
gRPC (a check of 0 hits in the request phase, the tokens reported after the response with apply_on_stream_done,
an estimate settled with is_negative_hits), concurrent reports that all count, and a refused all-or-nothing request
whose reported usage still counts."""

import math
import threading
import time
import unittest
import urllib.parse
import uuid

import harness
from harness import ClusterSetup, RedisServer, Sluice
from memcached import MemcachedServer
from test_redis import attempt, wait_healthy

HOUR = 3600
LIMIT = 1000
INTERVAL = HOUR / LIMIT  # GCRA's emission interval: 3.6 s

RULES = """
domain: ai
descriptors:
  - key: fixed
    rate_limit: {unit: hour, requests_per_unit: 1000, accounting: usage}
  - key: sliding
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: sliding_window, accounting: usage}
  - key: gcra
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: gcra, accounting: usage}
  - key: admission_sliding
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: sliding_window}
  - key: gate
    count_only_admitted: true
    rate_limit: {unit: hour, requests_per_unit: 1}
"""

servers = {}


def setUpModule():
    servers['redis'] = RedisServer()
    servers['cluster'] = ClusterSetup()
    servers['memcache'] = MemcachedServer()


def tearDownModule():
    for s in servers.values():
        s.close()


def tenant():
    return 't' + uuid.uuid4().hex[:10]


class BackendCase:
    backend = None
    env = {}
    algorithms = ('fixed', 'sliding', 'gcra')
    sluice = None
    batched = False  # batched counting: Redis and each worker's view catch up after the decisions

    def settle(self, key, value, used):
        """Batched counting: waits until Redis holds `used` hits of the descriptor and no worker holds one unsent
        (the counters API reads Redis and adds every worker's unsent hits), so that a refund sent next cannot
        reach Redis before the hits it gives back. Two intervals and a round trip on an idle machine; a deadline,
        not a fixed sleep, on a busy one. GCRA is decided in Redis, exactly."""
        if not self.batched or key == 'gcra':
            return
        target = '/counters?domain=ai&entry=' + urllib.parse.quote('%s=%s' % (key, value), safe='')

        def in_redis():
            status, _, body = harness.http_get(self.sluice.debug_port, target)
            limit = body['limits'][0] if status == 200 else {}
            return limit if (limit.get('used'), limit.get('unsent', 0)) == (used, 0) else None
        harness.wait_until(in_redis, timeout=15, message='%s=%s: %d hits in Redis, none unsent' % (key, value, used),
                           describe=lambda: repr(harness.http_get(self.sluice.debug_port, target)[2]) + '\n' + self.sluice.log_tail(30))

    def check_until(self, key, value, accept, transport='grpc'):
        """The check once accept(code, remaining, reset) holds, or the last one at the deadline: a worker's view of a
        batched counter is read again within two intervals and a round trip. Exact backends are asked once."""
        deadline = time.monotonic() + (15 if self.batched else 0)
        while True:
            last = self.check(key, value, transport)
            if accept(*last) or time.monotonic() >= deadline:
                return last
            time.sleep(0.05)

    @classmethod
    def setUpClass(cls):
        env = dict(harness.backend_env(cls.backend, servers), **cls.env)
        cls.sluice = Sluice(rules={'ai.yaml': RULES}, env=env)
        try:
            wait_healthy(cls.sluice)
        except BaseException:
            cls.sluice.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.sluice.close()

    def send(self, key, value, hits, negative=False, transport='grpc', more=()):
        d = {'entries': [(key, value)], 'hits_addend': hits}
        if negative:
            d['is_negative_hits'] = True
        outcome, detail, _ = attempt(self.sluice, transport, 'ai', list(more) + [d])
        self.assertEqual(outcome, 'ok', detail)
        return detail

    def check(self, key, value, transport='grpc'):
        """The request phase: 0 hits. -> (code, limit_remaining, duration_until_reset)."""
        s = self.send(key, value, 0, transport=transport).statuses[0]
        return s.code, s.remaining, s.reset

    def test_an_ai_gateway_call_checked_reported_and_settled(self):
        for algorithm in self.algorithms:
            with self.subTest(algorithm=algorithm):
                t = tenant()
                self.assertEqual(self.check(algorithm, t)[:2], ('OK', LIMIT))
                # After the response: 1500 tokens, more than the whole budget. Envoy ignores the answer; the
                # tokens count.
                self.assertEqual(self.send(algorithm, t, 1500).overall, 'OVER_LIMIT')
                self.settle(algorithm, t, 1500)
                for transport in ('grpc', 'json'):
                    code, remaining, reset = self.check_until(algorithm, t, lambda c, r, _: (c, r) == ('OVER_LIMIT', 0),
                                                              transport)
                    self.assertEqual((code, remaining), ('OVER_LIMIT', 0), transport)
                if algorithm == 'gcra':  # a hit fits again once the debt is within the bucket: 500.x intervals
                    self.assertTrue(abs(reset - (500 + 1) * INTERVAL) <= 2 * INTERVAL, reset)
                # The next call reserves an estimate of 100 (OVER_LIMIT: the proxy refuses it, and the estimate
                # is given back when the request ends), then 800 of the 1500 are refunded as a correction.
                self.assertEqual(self.send(algorithm, t, 100).overall, 'OVER_LIMIT')
                self.send(algorithm, t, 100, negative=True)
                started = time.time()
                self.assertEqual(self.send(algorithm, t, 800, negative=True).overall, 'OK')
                self.settle(algorithm, t, 700)

                def refunded(c, r, _):
                    drift = math.ceil((time.time() - started) / INTERVAL) if algorithm == 'gcra' else 0
                    return c == 'OK' and 300 <= r <= 300 + drift + 1  # 1000 − 700
                code, remaining, _ = self.check_until(algorithm, t, refunded)
                self.assertTrue(refunded(code, remaining, None), (code, remaining))

    def test_concurrent_reports_all_count(self):
        threads, reports, hits = 6, 40, 37
        total = threads * reports * hits  # 8880: nearly nine budgets
        for algorithm in self.algorithms:
            with self.subTest(algorithm=algorithm):
                t = tenant()
                errors = []
                started = time.time()

                def report(n):
                    for _ in range(reports):
                        outcome, detail, _ = attempt(self.sluice, 'grpc' if n % 2 else 'json', 'ai',
                                                     [{'entries': [(algorithm, t)], 'hits_addend': hits}])
                        if outcome != 'ok':
                            errors.append(detail)

                workers = [threading.Thread(target=report, args=(n,)) for n in range(threads)]
                for w in workers:
                    w.start()
                for w in workers:
                    w.join()
                self.assertEqual(errors, [])
                # Every hit counted: giving back all but 999 leaves exactly 1 (a lost report would leave more).
                self.settle(algorithm, t, total)
                self.send(algorithm, t, total - (LIMIT - 1), negative=True)
                self.settle(algorithm, t, LIMIT - 1)

                def one_left(c, r, _):
                    drift = math.ceil((time.time() - started) / INTERVAL) if algorithm == 'gcra' else 0
                    return c == 'OK' and 1 <= r <= 1 + drift
                code, remaining, _ = self.check_until(algorithm, t, one_left)
                self.assertTrue(one_left(code, remaining, None), (code, remaining))

    def test_admission_counts_none_of_a_refused_report(self):
        # What usage fixes: a sliding window under admission refuses a report past the budget and counts none.
        t = tenant()
        self.assertEqual(self.send('admission_sliding', t, 1500).overall, 'OVER_LIMIT')
        self.assertEqual(self.check('admission_sliding', t)[:2], ('OK', LIMIT))


class AllOrNothing:
    """A request with a count_only_admitted descriptor: refused as a whole, its reported usage still counts."""

    def test_usage_counts_in_a_refused_all_or_nothing_request(self):
        for algorithm in self.algorithms:
            with self.subTest(algorithm=algorithm):
                t, g = tenant(), tenant()
                gate = [{'entries': [('gate', g)]}]
                self.assertEqual(self.send(algorithm, t, 10, more=gate).overall, 'OK')
                self.assertEqual(self.send(algorithm, t, 10, more=gate).overall, 'OVER_LIMIT')  # the gate
                self.assertEqual(self.send(algorithm, t, 2000, more=gate).overall, 'OVER_LIMIT')
                self.settle(algorithm, t, 2020)
                self.send(algorithm, t, 2000, negative=True)
                self.settle(algorithm, t, 20)
                # 20 counted (GCRA: a few seconds may have refilled one)
                code, remaining, _ = self.check_until(algorithm, t, lambda c, r, _: c == 'OK' and r in (980, 981))
                self.assertEqual((code, remaining in (980, 981)), ('OK', True), remaining)


class MemoryTest(BackendCase, AllOrNothing, unittest.TestCase):
    backend = 'memory'


class RedisTest(BackendCase, AllOrNothing, unittest.TestCase):
    backend = 'redis'

    def test_a_gcra_debt_outlives_its_bucket_in_redis(self):
        t = tenant()
        self.send('gcra', t, 3000)  # the arrival time 3000 intervals (10800 s) on; the bucket is 3600 s
        key = '{ai_gcra_%s_}3600s_gcra' % t
        pttl = servers['redis'].pttl(key)
        self.assertGreater(pttl, (3000 * INTERVAL - 10) * 1000, key)


class RedisSyncTest(BackendCase, AllOrNothing, unittest.TestCase):
    """Each worker decides from its view, at most two intervals and a round trip old
    (docs/concepts/batched-counting.md). A flush whose reply comes after REDIS_OP_TIMEOUT is sent again, and counts
    twice if Redis had applied it (the "at least once" of docs/concepts/batched-counting.md). On a loaded machine a
    reply took over the default 250 ms: a report's hits then arrived again after the count had settled (1 in 6 runs
    beside a CPU hog; forced with 2 ms, every run). These tests check that every hit counts exactly once when no reply
    is lost, so they give replies 5 s."""
    backend = 'redis'
    env = {'REDIS_SYNC_INTERVAL': '50ms', 'REDIS_OP_TIMEOUT': '5s'}
    batched = True


class ClusterTest(BackendCase, AllOrNothing, unittest.TestCase):
    backend = 'cluster'


class MemcacheTest(BackendCase, unittest.TestCase):
    backend = 'memcache'
    algorithms = ('fixed', 'sliding')  # memcached has no GCRA


if __name__ == '__main__':
    unittest.main()
