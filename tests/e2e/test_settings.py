"""Settings that change decisions (reference §1.5, §1.6, §3.6, §4.6, §4.7, §6.2, §2.4) and bad settings."""

import unittest

import harness
from harness import Sluice

TRANSPORTS = ('grpc', 'json')

BASIC = """
domain: s
descriptors:
  - key: one
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: two
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: three
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: five
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: ten
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: key2
    rate_limit: {unit: hour, requests_per_unit: 20}
  - key: key3
    rate_limit: {unit: day, requests_per_unit: 10}
  - key: free
  - key: unl
    rate_limit: {unlimited: true}
"""


class ServerPerClass(unittest.TestCase):
    env = {}
    rules = {'s.yaml': BASIC}
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = Sluice(rules=cls.rules, env=cls.env)

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.close()

    def setUp(self):
        harness.avoid_window_edge('HOUR')

    def decide(self, transport, descriptors, hits_addend=None, domain='s'):
        return self.server.decide(transport, domain, descriptors, hits_addend)


class GlobalShadowMode(ServerPerClass):
    env = {'SHADOW_MODE': 'true'}

    def test_overall_ok_but_status_stays_over_limit(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                d = self.decide(t, [[('one', t)]])
                self.assertEqual((d.overall, d.statuses[0].code, d.statuses[0].remaining), ('OK', 'OK', 0), d)
                for _ in range(2):
                    d = self.decide(t, [[('one', t)], [('ten', t)]])
                    self.assertEqual(d.overall, 'OK', d)   # /json: 200 (checked by decide)
                    self.assertEqual(d.statuses[0].code, 'OVER_LIMIT', d)
                    self.assertEqual(d.statuses[0].remaining, 0, d)
                    self.assertEqual(d.statuses[0].limit, (1, 'HOUR'), d)
                    self.assertEqual(d.statuses[1].code, 'OK', d)


class ResponseHeaders(ServerPerClass):
    env = {'LIMIT_RESPONSE_HEADERS_ENABLED': 'true'}
    names = ('RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset')

    def assertHeaders(self, d, limit, remaining):
        self.assertEqual([k for k, _ in d.headers], list(self.names), d)
        values = dict(d.headers)
        self.assertEqual(values[self.names[0]], str(limit), d)
        self.assertEqual(values[self.names[1]], str(remaining), d)
        reset = int(values[self.names[2]])
        resets = [s.reset for s in d.statuses if s.reset is not None]
        self.assertTrue(any(abs(reset - r) <= 1 for r in resets), d)
        self.assertTrue(1 <= reset <= 3600, d)

    def test_single_descriptor(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                d = self.decide(t, [[('ten', 'single-' + t)]])
                self.assertHeaders(d, 10, 9)
                d = self.decide(t, [[('ten', 'single-' + t)]], hits_addend=9)
                self.assertHeaders(d, 10, 0)
                d = self.decide(t, [[('ten', 'single-' + t)]])
                self.assertEqual(d.overall, 'OVER_LIMIT', d)
                self.assertHeaders(d, 10, 0)

    def test_least_remaining_is_chosen(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                d = self.decide(t, [[('ten', 'least-' + t)], [('five', 'least-' + t)], [('free', 'x')]])
                self.assertHeaders(d, 5, 4)
                d = self.decide(t, [[('ten', 'least2-' + t)], [('five', 'least2-' + t)]], hits_addend=3)
                self.assertHeaders(d, 5, 2)
                # a tie keeps the first one
                d = self.decide(t, [[('three', 'tie-' + t)], [('five', 'tie-' + t)]], hits_addend=3)
                self.assertEqual([s.remaining for s in d.statuses], [0, 2], d)
                d = self.decide(t, [{'entries': [('five', 'tie2-' + t)], 'hits_addend': 3},
                                    {'entries': [('ten', 'tie2-' + t)], 'hits_addend': 8}])
                self.assertHeaders(d, 5, 2)

    def test_over_limit_descriptor_wins(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                v = 'over-' + t
                self.decide(t, [[('one', v)]])
                self.decide(t, [[('three', v)]], hits_addend=2)
                # [three: OK remaining 0] then [one: OVER_LIMIT remaining 0]: the OVER_LIMIT one is chosen although
                # its remaining is not smaller
                d = self.decide(t, [[('three', v)], [('one', v)]])
                self.assertEqual([(s.code, s.remaining) for s in d.statuses], [('OK', 0), ('OVER_LIMIT', 0)], d)
                self.assertHeaders(d, 1, 0)
                # two OVER_LIMIT descriptors: the last one wins
                d = self.decide(t, [[('one', v)], [('three', v)]])
                self.assertEqual([s.code for s in d.statuses], ['OVER_LIMIT', 'OVER_LIMIT'], d)
                self.assertHeaders(d, 3, 0)

    def test_no_headers_without_a_limit(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                d = self.decide(t, [[('free', 'x')], [('unl', 'y')]])
                self.assertEqual(d.headers, [], d)
                d = self.decide(t, [[('ten', 'x')]], domain='unknown-domain')
                self.assertEqual(d.headers, [], d)


class CustomHeaderNames(ResponseHeaders):
    env = {'LIMIT_RESPONSE_HEADERS_ENABLED': 'true', 'LIMIT_LIMIT_HEADER': 'X-My-Limit',
           'LIMIT_REMAINING_HEADER': 'X-My-Remaining', 'LIMIT_RESET_HEADER': 'X-My-Reset'}
    names = ('X-My-Limit', 'X-My-Remaining', 'X-My-Reset')


class HeadersDisabledByDefault(ServerPerClass):
    def test_no_headers(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                d = self.decide(t, [[('ten', 'off-' + t)]])
                self.assertEqual(d.headers, [], d)


class IetfFormatWithoutHeaders(ServerPerClass):
    env = {'LIMIT_RESPONSE_HEADERS_FORMAT': 'ietf'}

    def test_is_a_warning_naming_both_settings(self):
        self.server.wait_for_log('LIMIT_RESPONSE_HEADERS_FORMAT=ietf has no effect without '
                            'LIMIT_RESPONSE_HEADERS_ENABLED=true')
        self.assertEqual(self.decide('json', [[('ten', 'ietf-off')]]).headers, [])


class CountingWithSettings:
    """Plain counting must be unaffected by settings that tune the cache."""

    def test_counting(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                v = 'count-' + t
                expect = [('OK', 1), ('OK', 0), ('OVER_LIMIT', 0), ('OVER_LIMIT', 0), ('OVER_LIMIT', 0)]
                got = []
                for _ in expect:
                    d = self.decide(t, [[('two', v)]])
                    got.append((d.statuses[0].code, d.statuses[0].remaining))
                    self.assertEqual(d.overall, d.statuses[0].code, d)
                self.assertEqual(got, expect)
                # a 0-hit check on the over-limit key is over limit too
                d = self.decide(t, [{'entries': [('two', v)], 'hits_addend': 0}])
                self.assertEqual(d.statuses[0].code, 'OVER_LIMIT', d)
                # other counters are untouched; a request with one over-limit key and one fresh key
                d = self.decide(t, [[('two', v)], [('ten', v)]])
                self.assertEqual(d.overall, 'OVER_LIMIT', d)
                self.assertEqual([(s.code, s.remaining) for s in d.statuses], [('OVER_LIMIT', 0), ('OK', 9)], d)
                d = self.decide(t, [[('two', v + '-other')]])
                self.assertEqual((d.statuses[0].code, d.statuses[0].remaining), ('OK', 1), d)


class CacheKeyPrefix(CountingWithSettings, ServerPerClass):
    env = {'CACHE_KEY_PREFIX': 'myprefix:'}


class NearLimitRatio(CountingWithSettings, ServerPerClass):
    env = {'NEAR_LIMIT_RATIO': '0.5'}


class LocalCache(CountingWithSettings, ServerPerClass):
    env = {'LOCAL_CACHE_SIZE_IN_BYTES': '1048576'}


class StopIncrementWhenOverLimit(ServerPerClass):
    env = {'STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT': 'true'}
    stop_mode = True

    def test_reference_integration_expectation(self):
        # reference §4.6: key2 20/unit and key3 10/unit in one request, 15 iterations
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                harness.avoid_window_edge('HOUR')
                v = 'stop-' + t
                for i in range(1, 16):
                    d = self.decide(t, [[('key2', v)], [('key3', v)]])
                    got = [(s.code, s.remaining) for s in d.statuses]
                    if i <= 10:
                        self.assertEqual(d.overall, 'OK', (i, d))
                        self.assertEqual(got, [('OK', 20 - i), ('OK', 10 - i)], (i, d))
                    else:
                        self.assertEqual(d.overall, 'OVER_LIMIT', (i, d))
                        key2 = 10 if self.stop_mode else 20 - i
                        self.assertEqual(got, [('OK', key2), ('OVER_LIMIT', 0)], (i, d))


class IncrementWhenOverLimitByDefault(StopIncrementWhenOverLimit):
    env = {}
    stop_mode = False


MERGE_A = """
domain: merged
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 1}
"""
MERGE_B = """
domain: merged
descriptors:
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 2}
"""


class MergeDomainConfig(ServerPerClass):
    env = {'MERGE_DOMAIN_CONFIG': 'true'}
    rules = {'a.yaml': MERGE_A, 'b.yaml': MERGE_B}

    def test_both_files_apply(self):
        for t in TRANSPORTS:
            with self.subTest(transport=t):
                d = self.decide(t, [[('a', t)], [('b', t)]], domain='merged')
                self.assertEqual([s.limit for s in d.statuses], [(1, 'HOUR'), (2, 'HOUR')], d)
                self.assertEqual([s.remaining for s in d.statuses], [0, 1], d)


class MergeDomainConfigOff(unittest.TestCase):
    def test_duplicate_domain_fails_start(self):
        with Sluice(rules={'a.yaml': MERGE_A, 'b.yaml': MERGE_B}, wait_ready=False) as s:
            rc = s.wait_exit(10)
            self.assertEqual(rc, 1, s.log())
            self.assertIn("duplicate domain 'merged'", s.log())


class BadSettings(unittest.TestCase):
    """An invalid value stops start-up with exit code 1 and a message naming the variable."""

    cases = [
        ('PORT', 'abc'),
        ('GRPC_PORT', '99999'),
        ('NEAR_LIMIT_RATIO', '2'),
        ('SHADOW_MODE', 'maybe'),
        ('LOG_LEVEL', 'loud'),
        ('BACKEND_TYPE', 'foo'),
        ('CONFIG_TYPE', 'bar'),
        ('STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT', 'yes please'),
        ('LOCAL_CACHE_SIZE_IN_BYTES', '-1'),
        ('EXPIRATION_JITTER_MAX_SECONDS', 'x'),
        ('MERGE_DOMAIN_CONFIG', 'nope'),
    ]

    def test_bad_values(self):
        for name, value in self.cases:
            with self.subTest(setting=name, value=value):
                with Sluice(rules={'s.yaml': BASIC}, env={name: value}, wait_ready=False) as s:
                    rc = s.wait_exit(10)
                    self.assertIsNotNone(rc, '%s=%s: the server started anyway' % (name, value))
                    self.assertEqual(rc, 1, s.log())
                    self.assertIn(name, s.log())


if __name__ == '__main__':
    unittest.main()
