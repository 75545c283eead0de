"""value_regex rules (issue 32; docs/concepts/rules.md#regular-expressions-on-values-value_regex): precedence at
one level (exact, wildcard, patterns in file order, key alone), whole-value matching, nesting, per-value counters,
stats and /rlconfig by pattern, a bad pattern refused by a reload (the last good rules stay), over gRPC and /json
on the memory backend and on a real Redis (whose keys are upstream's, with the request's value)."""

import os
import unittest

import harness
from harness import RedisServer, Sluice

RULES = r"""
domain: rx
descriptors:
  - key: path
    value: /api/health
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: path
    value: "/api/v1/*"
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: path
    value_regex: "/api/v[0-9]+/users/[0-9]+"
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: path
    value_regex: "/api/.*"
    rate_limit: {unit: hour, requests_per_unit: 50}
  - key: path
    rate_limit: {unit: hour, requests_per_unit: 500}
  - key: tenant
    value_regex: "t-[0-9]{3}"
    descriptors:
      - key: op
        value_regex: "read|list"
        shadow_mode: true
        rate_limit: {unit: hour, requests_per_unit: 1}
"""

servers = {}


def setUpModule():
    servers['redis'] = RedisServer()


def tearDownModule():
    for s in servers.values():
        s.close()


class Case:
    backend = None

    @classmethod
    def setUpClass(cls):
        env = {'BACKEND_TYPE': cls.backend, 'EXPIRATION_JITTER_MAX_SECONDS': '0'}
        if cls.backend == 'redis':
            env.update(servers['redis'].sluice_env())
        cls.s = Sluice(rules={'rx.yaml': RULES}, env=env)

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def limit(self, path, transport='grpc'):
        return self.s.limit_of('rx', [('path', path)], transport)

    def test_precedence_and_whole_value(self):
        harness.avoid_window_edge('HOUR')
        for transport in ('grpc', 'json'):
            with self.subTest(transport=transport):
                self.assertEqual(self.limit('/api/health', transport), (1000, 'HOUR'))
                self.assertEqual(self.limit('/api/v1/users/7', transport), (100, 'HOUR'))  # the wildcard first
                self.assertEqual(self.limit('/api/v3/users/%s' % transport, transport)[0], 50)  # not digits
                self.assertEqual(self.limit('/api/v3/orders', transport), (50, 'HOUR'))
                self.assertEqual(self.limit('/web', transport), (500, 'HOUR'))
                self.assertEqual(self.limit('x/api/v3/orders', transport), (500, 'HOUR'))  # the whole value

    def test_each_value_counts_on_its_own(self):
        harness.avoid_window_edge('HOUR')
        tag = self.backend
        a, b = '/api/v2/users/1%s' % len(tag), '/api/v2/users/2%s' % len(tag)
        got = [self.s.decide(t, 'rx', [[('path', a)]]).overall for t in ('grpc', 'json', 'grpc')]
        self.assertEqual(got, ['OK', 'OK', 'OVER_LIMIT'])
        d = self.s.decide('json', 'rx', [[('path', b)]])
        self.assertEqual((d.overall, d.statuses[0].limit, d.statuses[0].remaining), ('OK', (2, 'HOUR'), 1))
        if self.backend == 'redis':
            keys = servers['redis'].keys('rx_path_/api/v2/users/*')
            self.assertTrue(any(k.startswith('rx_path_%s_' % a) for k in keys), keys)
            self.assertTrue(any(k.startswith('rx_path_%s_' % b) for k in keys), keys)

    def test_nested_patterns_and_shadow_mode(self):
        harness.avoid_window_edge('HOUR')
        for _ in range(3):
            d = self.s.decide('grpc', 'rx', [[('tenant', 't-%03d' % len(self.backend)), ('op', 'list')]])
            self.assertEqual(d.overall, 'OK')  # over its limit of 1, in shadow mode
        self.assertEqual(self.s.limit_of('rx', [('tenant', 't-1'), ('op', 'read')]), None)  # no tenant rule

    def test_stats_and_rlconfig_name_the_pattern(self):
        self.s.decide('grpc', 'rx', [[('path', '/api/v9/things')]])
        status, _, text = harness.http_request(self.s.debug_port, '/stats')
        self.assertEqual(status, 200)
        # The pattern is one level of the stat name: its dots as U+2024 (issue 40); /rlconfig shows it as written.
        self.assertIn('ratelimit.service.rate_limit.rx.path_/api/\u2024*.total_hits:', text)
        status, _, text = harness.http_request(self.s.debug_port, '/rlconfig')
        self.assertIn('rx.path_/api/v[0-9]+/users/[0-9]+: unit=HOUR requests_per_unit=2, shadow_mode: false', text)
        self.assertIn('rx.tenant_t-[0-9]{3}.op_read|list: unit=HOUR requests_per_unit=1, shadow_mode: true', text)


class Memory(Case, unittest.TestCase):
    backend = 'memory'

    def test_a_bad_pattern_is_refused_by_a_reload(self):
        with Sluice(rules={'rx.yaml': RULES}) as s:
            since = len(s.log())
            s.write_rule('more.yaml', 'domain: more\ndescriptors:\n  - key: k\n    value_regex: "[z-a]"\n')
            s.wait_for_log(lambda t: "more.yaml: descriptor 'more.k': value_regex '[z-a]': invalid character class "
                           "range: z-a" in t, since=since, message='the refused reload')
            self.assertEqual(s.limit_of('rx', [('path', '/api/v3/orders')]), (50, 'HOUR'))
            self.assertIsNone(s.limit_of('more', [('k', 'z')]))


class Redis(Case, unittest.TestCase):
    backend = 'redis'


if __name__ == '__main__':
    unittest.main()
