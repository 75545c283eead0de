"""hits_addend at request level and in the per-descriptor wrapper (reference §4.1, §4.5), over gRPC and /json."""

import unittest

import harness
from harness import Sluice

RULES = """
domain: {domain}
descriptors:
  - key: k
    rate_limit: {{unit: hour, requests_per_unit: 10}}
  - key: small
    rate_limit: {{unit: day, requests_per_unit: 2}}
"""

server = None


def setUpModule():
    global server
    server = Sluice(rules={'grpc.yaml': RULES.format(domain='hits-grpc'),
                           'json.yaml': RULES.format(domain='hits-json')})


def tearDownModule():
    if server is not None:
        server.close()


class HitsCases:
    transport = None

    def setUp(self):
        harness.avoid_window_edge('HOUR')

    def decide(self, descriptors, hits_addend=None):
        return server.decide(self.transport, 'hits-' + self.transport, descriptors, hits_addend)

    def check(self, descriptor, hits_addend, code, remaining, overall=None):
        d = self.decide([descriptor], hits_addend)
        s = d.statuses[0]
        self.assertEqual((s.code, s.remaining), (code, remaining), d)
        self.assertEqual(s.limit, (10, 'HOUR') if _key(descriptor) == 'k' else (2, 'DAY'), d)
        self.assertEqual(d.overall, overall or code, d)
        return d

    def test_request_level_hits_addend_consumes_that_many(self):
        self.check([('k', 'req3')], 3, 'OK', 7)
        self.check([('k', 'req3')], 3, 'OK', 4)
        self.check([('k', 'req3')], 4, 'OK', 0)
        self.check([('k', 'req3')], 1, 'OVER_LIMIT', 0)

    def test_request_level_zero_means_one(self):
        self.check([('k', 'req0')], 0, 'OK', 9)
        self.check([('k', 'req0')], 0, 'OK', 8)
        self.check([('k', 'req0')], None, 'OK', 7)

    def test_request_level_applies_to_every_descriptor(self):
        d = self.decide([[('k', 'all-a')], [('k', 'all-b')]], hits_addend=2)
        self.assertEqual([(s.code, s.remaining) for s in d.statuses], [('OK', 8), ('OK', 8)], d)

    def test_hits_over_the_limit_at_once(self):
        self.check([('k', 'burst')], 11, 'OVER_LIMIT', 0)
        # the rejected hits were still counted (increment first, then compare)
        self.check({'entries': [('k', 'burst')], 'hits_addend': 0}, None, 'OVER_LIMIT', 0)

    def test_descriptor_wrapper_overrides_request_level(self):
        d = self.decide([{'entries': [('k', 'wrap-a')], 'hits_addend': 2}, [('k', 'wrap-b')]], hits_addend=5)
        self.assertEqual([(s.code, s.remaining) for s in d.statuses], [('OK', 8), ('OK', 5)], d)
        self.assertEqual(d.overall, 'OK', d)
        d = self.decide([{'entries': [('k', 'wrap-a')], 'hits_addend': 1}, [('k', 'wrap-b')]], hits_addend=5)
        self.assertEqual([(s.code, s.remaining) for s in d.statuses], [('OK', 7), ('OK', 0)], d)
        d = self.decide([{'entries': [('k', 'wrap-a')], 'hits_addend': 7}, [('k', 'wrap-b')]], hits_addend=1)
        self.assertEqual([(s.code, s.remaining) for s in d.statuses], [('OK', 0), ('OVER_LIMIT', 0)], d)
        self.assertEqual(d.overall, 'OVER_LIMIT', d)

    def test_descriptor_wrapper_zero_checks_without_consuming(self):
        zero = {'entries': [('k', 'check')], 'hits_addend': 0}
        # a 0-hit check on a fresh counter: full allowance, nothing consumed
        self.check(zero, None, 'OK', 10)
        self.check(zero, 5, 'OK', 10)  # the wrapper's 0 wins over the request level
        self.check([('k', 'check')], 3, 'OK', 7)
        self.check(zero, None, 'OK', 7)
        self.check(zero, None, 'OK', 7)
        self.check([('k', 'check')], None, 'OK', 6)
        # count equal to the limit: a check is OK with remaining 0
        self.check([('k', 'check')], 6, 'OK', 0)
        self.check(zero, None, 'OK', 0)
        self.check(zero, None, 'OK', 0)
        # one more real hit: over limit, and then the check says so too
        self.check([('k', 'check')], None, 'OVER_LIMIT', 0)
        self.check(zero, None, 'OVER_LIMIT', 0)

    def test_zero_check_on_limit_zero_rule_is_ok(self):
        # not in the rules above: use an override of 0 requests, a 0-hit check is after(0) == L(0) -> OK
        d = self.decide([{'entries': [('k', 'lim0')], 'limit': (0, 'DAY'), 'hits_addend': 0}])
        self.assertEqual((d.statuses[0].code, d.statuses[0].remaining), ('OK', 0), d)
        self.assertEqual(d.statuses[0].limit, (0, 'DAY'), d)
        d = self.decide([{'entries': [('k', 'lim0')], 'limit': (0, 'DAY')}])
        self.assertEqual(d.statuses[0].code, 'OVER_LIMIT', d)

    def test_large_wrapper_value(self):
        self.check({'entries': [('small', 'huge')], 'hits_addend': 2 ** 40}, None, 'OVER_LIMIT', 0)
        self.check({'entries': [('small', 'huge2')], 'hits_addend': 2}, None, 'OK', 0)


def _key(descriptor):
    entries = descriptor['entries'] if isinstance(descriptor, dict) else descriptor
    return entries[0][0]


class HitsAddendOverGrpc(HitsCases, unittest.TestCase):
    transport = 'grpc'


class HitsAddendOverJson(HitsCases, unittest.TestCase):
    transport = 'json'

    def test_wrapper_as_json_string(self):
        # proto3 JSON writes uint64 (the UInt64Value wrapper) as a string; both forms must be accepted
        status, _, body = harness.post_json(server.http_port, {
            'domain': 'hits-json',
            'descriptors': [{'entries': [{'key': 'k', 'value': 'jsonstr'}], 'hitsAddend': '4'},
                            {'entries': [{'key': 'k', 'value': 'jsonstr0'}], 'hitsAddend': '0'}]})
        self.assertEqual(status, 200, body)
        self.assertEqual(body['statuses'][0]['limitRemaining'], 6, body)
        self.assertEqual(body['statuses'][1]['limitRemaining'], 10, body)


if __name__ == '__main__':
    unittest.main()
