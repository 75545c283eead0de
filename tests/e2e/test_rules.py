"""Every rule feature (reference §2, §3, §4.2, §6.1), over gRPC and over POST /json.

One server serves two identical domains, rules-grpc and rules-json, so the two transports never share a counter.
Counting tests use hour/day units so they cannot straddle a window boundary.
"""

import time
import unittest

import harness
from harness import UINT32_MAX, Sluice

RULES = """
domain: {domain}
descriptors:
  - key: exact
    value: one
    rate_limit: {{unit: hour, requests_per_unit: 3}}
  - key: exact
    value: two
    rate_limit: {{unit: day, requests_per_unit: 1}}

  # wildcards: trailing, with an exact sibling and a key-only default
  - key: w1
    value: foo*
    rate_limit: {{unit: hour, requests_per_unit: 11}}
  - key: w1
    value: foo-exact
    rate_limit: {{unit: hour, requests_per_unit: 13}}
  - key: w1
    rate_limit: {{unit: hour, requests_per_unit: 14}}
  # wildcard in the middle
  - key: w2
    value: bar*b
    rate_limit: {{unit: hour, requests_per_unit: 12}}
  # several wildcards
  - key: w3
    value: foo*bar*baz
    rate_limit: {{unit: hour, requests_per_unit: 15}}
  # a lone star matches any value, the empty one included
  - key: star
    value: "*"
    rate_limit: {{unit: hour, requests_per_unit: 16}}

  # key-only default: one counter per value
  - key: perval
    rate_limit: {{unit: hour, requests_per_unit: 2}}

  # depth
  - key: parent
    value: p
    rate_limit: {{unit: hour, requests_per_unit: 5}}
    descriptors:
      - key: child
        value: c
        rate_limit: {{unit: hour, requests_per_unit: 6}}
        descriptors:
          - key: grandchild
            rate_limit: {{unit: hour, requests_per_unit: 7}}
  - key: nolimitparent
    descriptors:
      - key: child
        rate_limit: {{unit: hour, requests_per_unit: 8}}

  # allow-listed
  - key: allowed
    value: ok1

  - key: zero
    rate_limit: {{unit: hour, requests_per_unit: 0}}

  - key: unl
    rate_limit: {{unlimited: true}}

  - key: rep_a
    rate_limit: {{unit: hour, requests_per_unit: 1, name: limit_a}}
  - key: rep_b
    rate_limit:
      unit: hour
      requests_per_unit: 10
      replaces:
        - name: limit_a

  - key: shadow
    shadow_mode: true
    rate_limit: {{unit: hour, requests_per_unit: 1}}

  - key: detailed
    detailed_metric: true
    rate_limit: {{unit: hour, requests_per_unit: 4}}

  - key: ovr
    rate_limit: {{unit: day, requests_per_unit: 100}}

  - key: unit
    value: second
    rate_limit: {{unit: second, requests_per_unit: 100}}
  - key: unit
    value: minute
    rate_limit: {{unit: minute, requests_per_unit: 100}}
  - key: unit
    value: hour
    rate_limit: {{unit: Hour, requests_per_unit: 100}}
  - key: unit
    value: day
    rate_limit: {{unit: DAY, requests_per_unit: 100}}
  - key: unit
    value: week
    rate_limit: {{unit: week, requests_per_unit: 100}}
  - key: unit
    value: month
    rate_limit: {{unit: month, requests_per_unit: 100}}
  - key: unit
    value: year
    rate_limit: {{unit: year, requests_per_unit: 100}}

  - key: multi
    rate_limit: {{unit: hour, requests_per_unit: 1}}
"""

server = None


def setUpModule():
    global server
    server = Sluice(rules={'grpc.yaml': RULES.format(domain='rules-grpc'),
                           'json.yaml': RULES.format(domain='rules-json')})


def tearDownModule():
    if server is not None:
        server.close()


class RuleCases:
    transport = None

    @property
    def domain(self):
        return 'rules-' + self.transport

    def decide(self, descriptors, hits_addend=None, domain=None):
        return server.decide(self.transport, domain or self.domain, descriptors, hits_addend)

    def one(self, entries, **kw):
        d = self.decide([entries], **kw)
        self.assertEqual(len(d.statuses), 1, d)
        return d, d.statuses[0]

    def assertLimited(self, entries, rpu, unit, remaining, code='OK'):
        d, s = self.one(entries)
        self.assertEqual(s.code, code, d)
        self.assertEqual(d.overall, code, d)
        self.assertEqual(s.limit, (rpu, unit), d)
        self.assertEqual(s.remaining, remaining, d)
        self.assertIsNotNone(s.reset, d)
        self.assertGreaterEqual(s.reset, 1, d)
        self.assertLessEqual(s.reset, harness.UNIT_SECONDS[unit], d)
        return s

    def assertNoLimit(self, entries):
        d, s = self.one(entries)
        self.assertEqual(d.overall, 'OK', d)
        self.assertEqual(s.code, 'OK', d)
        self.assertIsNone(s.limit, d)
        self.assertEqual(s.remaining, 0, d)
        self.assertIsNone(s.reset, d)

    def setUp(self):
        harness.avoid_window_edge('HOUR')

    # -- exact values -------------------------------------------------------------------------------------------

    def test_exact_value_counts_down_then_over_limit(self):
        self.assertLimited([('exact', 'one')], 3, 'HOUR', 2)
        self.assertLimited([('exact', 'one')], 3, 'HOUR', 1)
        self.assertLimited([('exact', 'one')], 3, 'HOUR', 0)
        self.assertLimited([('exact', 'one')], 3, 'HOUR', 0, code='OVER_LIMIT')
        self.assertLimited([('exact', 'one')], 3, 'HOUR', 0, code='OVER_LIMIT')
        # matching is case-sensitive and exact: other values have no rule and no key-only default
        self.assertNoLimit([('exact', 'One')])
        self.assertNoLimit([('exact', 'three')])
        self.assertNoLimit([('Exact', 'one')])

    # -- wildcards ----------------------------------------------------------------------------------------------

    def test_trailing_wildcard(self):
        self.assertLimited([('w1', 'foo1')], 11, 'HOUR', 10)
        self.assertLimited([('w1', 'foo2')], 11, 'HOUR', 10)  # one counter per actual value
        self.assertLimited([('w1', 'foo1')], 11, 'HOUR', 9)
        self.assertLimited([('w1', 'foo')], 11, 'HOUR', 10)  # '*' matches zero characters

    def test_exact_wins_over_wildcard_and_wildcard_over_key_only_default(self):
        self.assertLimited([('w1', 'foo-exact')], 13, 'HOUR', 12)
        self.assertLimited([('w1', 'foo-exactly')], 11, 'HOUR', 10)
        self.assertLimited([('w1', 'bar')], 14, 'HOUR', 13)
        self.assertLimited([('w1', 'xfoo')], 14, 'HOUR', 13)

    def test_middle_wildcard(self):
        self.assertLimited([('w2', 'barab')], 12, 'HOUR', 11)
        self.assertLimited([('w2', 'barab')], 12, 'HOUR', 10)
        self.assertLimited([('w2', 'bar123b')], 12, 'HOUR', 11)
        self.assertLimited([('w2', 'barb')], 12, 'HOUR', 11)
        self.assertNoLimit([('w2', 'bara')])
        self.assertNoLimit([('w2', 'xbarb')])
        self.assertNoLimit([('w2', 'bar')])

    def test_several_wildcards(self):
        self.assertLimited([('w3', 'foo123bar456baz')], 15, 'HOUR', 14)
        self.assertLimited([('w3', 'foobarbaz')], 15, 'HOUR', 14)
        self.assertLimited([('w3', 'foobarbaz')], 15, 'HOUR', 13)
        self.assertNoLimit([('w3', 'foo123baz')])
        self.assertNoLimit([('w3', 'bar456baz')])
        self.assertNoLimit([('w3', 'foobazbar')])

    def test_lone_star_matches_any_value_including_empty(self):
        self.assertLimited([('star', 'anything')], 16, 'HOUR', 15)
        self.assertLimited([('star', '')], 16, 'HOUR', 15)

    # -- key-only default ---------------------------------------------------------------------------------------

    def test_key_only_default_keeps_one_counter_per_value(self):
        self.assertLimited([('perval', 'a')], 2, 'HOUR', 1)
        self.assertLimited([('perval', 'a')], 2, 'HOUR', 0)
        self.assertLimited([('perval', 'a')], 2, 'HOUR', 0, code='OVER_LIMIT')
        self.assertLimited([('perval', 'b')], 2, 'HOUR', 1)
        self.assertLimited([('perval', 'c')], 2, 'HOUR', 1)
        self.assertLimited([('perval', 'b')], 2, 'HOUR', 0)

    # -- depth --------------------------------------------------------------------------------------------------

    def test_depth_rule(self):
        # a shallower request uses the limit of the node at its last entry
        self.assertLimited([('parent', 'p')], 5, 'HOUR', 4)
        self.assertLimited([('parent', 'p'), ('child', 'c')], 6, 'HOUR', 5)
        self.assertLimited([('parent', 'p'), ('child', 'c'), ('grandchild', 'x')], 7, 'HOUR', 6)
        self.assertLimited([('parent', 'p'), ('child', 'c'), ('grandchild', 'y')], 7, 'HOUR', 6)
        # deeper than the config: no limit
        self.assertNoLimit([('parent', 'p'), ('child', 'c'), ('grandchild', 'x'), ('extra', 'e')])
        # a level that does not match: no limit
        self.assertNoLimit([('parent', 'p'), ('other', 'c')])
        self.assertNoLimit([('parent', 'q'), ('child', 'c')])
        # a nested key is not a top-level rule
        self.assertNoLimit([('child', 'c')])
        # a node without rate_limit gives no limit; its child does
        self.assertNoLimit([('nolimitparent', 'z')])
        self.assertLimited([('nolimitparent', 'z'), ('child', 'q')], 8, 'HOUR', 7)
        self.assertNoLimit([('nolimitparent', 'z'), ('child', 'q'), ('more', '1')])
        # counters did not move for the requests that got no limit
        self.assertLimited([('parent', 'p'), ('child', 'c'), ('grandchild', 'x')], 7, 'HOUR', 5)

    def test_empty_entry_list_has_no_limit(self):
        d = self.decide([[]])
        self.assertEqual(d.overall, 'OK', d)
        self.assertEqual(len(d.statuses), 1, d)
        self.assertEqual(d.statuses[0].code, 'OK', d)
        self.assertIsNone(d.statuses[0].limit, d)

    # -- special rules ------------------------------------------------------------------------------------------

    def test_allow_listed_descriptor(self):
        for _ in range(3):
            self.assertNoLimit([('allowed', 'ok1')])
        self.assertNoLimit([('allowed', 'other')])

    def test_requests_per_unit_zero_is_over_limit_at_once(self):
        d, s = self.one([('zero', 'a')])
        self.assertEqual(d.overall, 'OVER_LIMIT', d)
        self.assertEqual(s.code, 'OVER_LIMIT', d)
        self.assertEqual(s.limit, (0, 'HOUR'), d)
        self.assertEqual(s.remaining, 0, d)
        self.assertIsNotNone(s.reset, d)

    def test_unlimited(self):
        for _ in range(3):
            d, s = self.one([('unl', 'x')])
            self.assertEqual(d.overall, 'OK', d)
            self.assertEqual(s.code, 'OK', d)
            self.assertEqual(s.remaining, UINT32_MAX, d)
            self.assertIsNone(s.limit, d)
            self.assertIsNone(s.reset, d)

    def test_replaces(self):
        for i in range(1, 4):
            d = self.decide([[('rep_a', 'x')], [('rep_b', 'y')]])
            self.assertEqual(d.overall, 'OK', d)
            a, b = d.statuses
            self.assertEqual(a.code, 'OK', d)
            self.assertIsNone(a.limit, d)          # the replaced limit is not enforced...
            self.assertEqual(a.remaining, 0, d)
            self.assertIsNone(a.reset, d)
            self.assertEqual(b.code, 'OK', d)
            self.assertEqual(b.limit, (10, 'HOUR'), d)
            self.assertEqual(b.remaining, 10 - i, d)
        # ...and was not counted: alone, its first hit is the first one in the window
        self.assertLimited([('rep_a', 'x')], 1, 'HOUR', 0)
        self.assertLimited([('rep_a', 'x')], 1, 'HOUR', 0, code='OVER_LIMIT')
        # in a request without the replacing rule it is enforced normally (replacement is per request)
        d = self.decide([[('rep_a', 'x')], [('exact', 'nothing')]])
        self.assertEqual(d.overall, 'OVER_LIMIT', d)

    def test_shadow_mode_rule(self):
        self.assertLimited([('shadow', 's')], 1, 'HOUR', 0)
        for _ in range(2):
            d, s = self.one([('shadow', 's')])
            self.assertEqual(d.overall, 'OK', d)
            self.assertEqual(s.code, 'OK', d)
            self.assertEqual(s.limit, (1, 'HOUR'), d)
            self.assertEqual(s.remaining, 0, d)
            self.assertIsNotNone(s.reset, d)

    def test_detailed_metric_accepted(self):
        self.assertLimited([('detailed', 'v1')], 4, 'HOUR', 3)
        self.assertLimited([('detailed', 'v1')], 4, 'HOUR', 2)
        self.assertLimited([('detailed', 'v2')], 4, 'HOUR', 3)

    # -- limit override sent in the request ---------------------------------------------------------------------

    def test_limit_override_replaces_the_rule(self):
        desc = {'entries': [('ovr', 'o1')], 'limit': (2, 'HOUR')}
        for remaining, code in ((1, 'OK'), (0, 'OK'), (0, 'OVER_LIMIT')):
            d, s = self.one(desc)
            self.assertEqual(s.code, code, d)
            self.assertEqual(s.limit, (2, 'HOUR'), d)
            self.assertEqual(s.remaining, remaining, d)
            self.assertLessEqual(s.reset, 3600, d)
        # the rule itself still applies without the override (another value: own counter)
        self.assertLimited([('ovr', 'o2')], 100, 'DAY', 99)

    def test_limit_override_without_matching_rule(self):
        d, s = self.one({'entries': [('no-such-rule', 'z')], 'limit': (7, 'DAY')})
        self.assertEqual(s.code, 'OK', d)
        self.assertEqual(s.limit, (7, 'DAY'), d)
        self.assertEqual(s.remaining, 6, d)
        self.assertLessEqual(s.reset, 86400, d)

    def test_limit_override_in_unknown_domain_has_no_limit(self):
        d, s = self.one({'entries': [('ovr', 'o3')], 'limit': (1, 'HOUR')}, domain='no-such-domain-ovr')
        self.assertEqual(d.overall, 'OK', d)
        self.assertIsNone(s.limit, d)

    # -- units --------------------------------------------------------------------------------------------------

    def test_units(self):
        for unit in ('second', 'minute', 'hour', 'day', 'week', 'month', 'year'):
            with self.subTest(unit=unit):
                t0 = time.time()
                d, s = self.one([('unit', unit)])
                t1 = time.time()
                self.assertEqual(s.code, 'OK', d)
                self.assertEqual(s.limit, (100, unit.upper()), d)
                self.assertIn(s.reset, harness.expected_resets(unit, t0, t1), d)
                self.assertLessEqual(s.reset, harness.UNIT_SECONDS[unit.upper()], d)
                if unit != 'second':
                    self.assertEqual(s.remaining, 99, d)

    # -- several descriptors, unknown domain ---------------------------------------------------------------------

    def test_several_descriptors_overall_over_limit_if_any_is(self):
        d = self.decide([[('multi', 'a')], [('multi', 'b')], [('allowed', 'ok1')]])
        self.assertEqual(d.overall, 'OK', d)
        self.assertEqual([s.code for s in d.statuses], ['OK', 'OK', 'OK'], d)
        self.assertEqual([s.remaining for s in d.statuses], [0, 0, 0], d)
        d = self.decide([[('multi', 'c')], [('multi', 'a')], [('allowed', 'ok1')]])
        self.assertEqual(d.overall, 'OVER_LIMIT', d)
        self.assertEqual([s.code for s in d.statuses], ['OK', 'OVER_LIMIT', 'OK'], d)
        self.assertEqual([s.limit for s in d.statuses], [(1, 'HOUR'), (1, 'HOUR'), None], d)

    def test_unknown_domain_is_ok_without_limits(self):
        d = self.decide([[('exact', 'one')], [('perval', 'x')]], domain='no-such-domain')
        self.assertEqual(d.overall, 'OK', d)
        self.assertEqual(len(d.statuses), 2, d)
        for s in d.statuses:
            self.assertEqual(s.code, 'OK', d)
            self.assertIsNone(s.limit, d)
            self.assertEqual(s.remaining, 0, d)
            self.assertIsNone(s.reset, d)
        self.assertEqual(d.headers, [], d)


class RulesOverGrpc(RuleCases, unittest.TestCase):
    transport = 'grpc'


class RulesOverJson(RuleCases, unittest.TestCase):
    transport = 'json'


class JsonShape(unittest.TestCase):
    """The proto3 JSON mapping of /json, byte-for-byte where it is deterministic."""

    domain = 'rules-json'

    def post(self, body):
        return harness.post_json(server.http_port, body)

    def test_ok_response_shape(self):
        harness.avoid_window_edge('HOUR')
        status, headers, body = self.post({'domain': self.domain,
                                           'descriptors': [{'entries': [{'key': 'perval', 'value': 'shape1'}]}]})
        self.assertEqual(status, 200, body)
        self.assertTrue(headers.get('content-type', '').startswith('application/json'), headers)
        self.assertIsInstance(body, dict, body)
        reset = body['statuses'][0].pop('durationUntilReset')
        self.assertRegex(reset, r'^\d+s$')
        self.assertEqual(body, {'overallCode': 'OK',
                                'statuses': [{'code': 'OK', 'currentLimit': {'requestsPerUnit': 2, 'unit': 'HOUR'},
                                              'limitRemaining': 1}]})

    def test_zero_values_are_omitted(self):
        harness.avoid_window_edge('HOUR')
        status, _, body = self.post({'domain': self.domain,
                                     'descriptors': [{'entries': [{'key': 'perval', 'value': 'shape2'}]},
                                                     {'entries': [{'key': 'allowed', 'value': 'ok1'}]}]})
        self.assertEqual(status, 200, body)
        self.assertEqual(body['statuses'][1], {'code': 'OK'}, body)
        status, _, body = self.post({'domain': self.domain,
                                     'descriptors': [{'entries': [{'key': 'perval', 'value': 'shape2'}]}]})
        self.assertEqual(status, 200, body)
        s = body['statuses'][0]
        self.assertNotIn('limitRemaining', s, body)  # remaining 0 is omitted
        self.assertEqual(s['currentLimit'], {'requestsPerUnit': 2, 'unit': 'HOUR'}, body)
        self.assertNotIn('responseHeadersToAdd', body)

    def test_over_limit_is_429_with_body(self):
        harness.avoid_window_edge('HOUR')
        req = {'domain': self.domain, 'descriptors': [{'entries': [{'key': 'zero', 'value': 'shape3'}]}]}
        status, headers, body = self.post(req)
        self.assertEqual(status, 429, body)
        self.assertTrue(headers.get('content-type', '').startswith('application/json'), headers)
        reset = body['statuses'][0].pop('durationUntilReset')
        self.assertRegex(reset, r'^\d+s$')
        self.assertEqual(body, {'overallCode': 'OVER_LIMIT',
                                'statuses': [{'code': 'OVER_LIMIT', 'currentLimit': {'unit': 'HOUR'}}]})

    def test_unknown_domain_body(self):
        status, _, body = self.post({'domain': 'nowhere', 'descriptors': [{'entries': [{'key': 'a', 'value': 'b'}]},
                                                                          {'entries': [{'key': 'c', 'value': 'd'}]}]})
        self.assertEqual(status, 200, body)
        self.assertEqual(body, {'overallCode': 'OK', 'statuses': [{'code': 'OK'}, {'code': 'OK'}]})

    def test_unlimited_body(self):
        status, _, body = self.post({'domain': self.domain,
                                     'descriptors': [{'entries': [{'key': 'unl', 'value': 'shape'}]}]})
        self.assertEqual(status, 200, body)
        self.assertEqual(body, {'overallCode': 'OK', 'statuses': [{'code': 'OK', 'limitRemaining': UINT32_MAX}]})

    def test_original_field_names_and_enum_numbers_accepted(self):
        harness.avoid_window_edge('DAY')
        # proto field names instead of lowerCamelCase, the unit as an enum number (4 = DAY)
        status, _, body = self.post({'domain': self.domain, 'hits_addend': 2,
                                     'descriptors': [{'entries': [{'key': 'no-rule', 'value': 'snake'}],
                                                      'limit': {'requests_per_unit': 5, 'unit': 4}}]})
        self.assertEqual(status, 200, body)
        s = body['statuses'][0]
        self.assertEqual(s['currentLimit'], {'requestsPerUnit': 5, 'unit': 'DAY'}, body)
        self.assertEqual(s['limitRemaining'], 3, body)


if __name__ == '__main__':
    unittest.main()
