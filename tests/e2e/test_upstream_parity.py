"""Upstream features added for parity (issue 13), on the memory and the Redis backend, over gRPC and /json:
quota_mode per rule and QUOTA_MODE, rule metadata in the response's dynamic metadata, negative hits (refunds),
LIMIT_REQUEST_HEADERS_ENABLED, and current_limit.name with duration_until_reset on every limited path."""

import os
import tempfile
import time
import unittest

from google.protobuf import json_format

import harness
from harness import RedisServer, Sluice

BACKENDS = ('memory', 'redis')
TRANSPORTS = ('grpc', 'json')

RULES = """
descriptors:
  - key: normal
    rate_limit: {name: normal-rule, unit: hour, requests_per_unit: 2}
    metadata: {team: a, nested: {p: 1, shared: normal}}
  - key: quota
    quota_mode: true
    rate_limit: {name: quota-rule, unit: hour, requests_per_unit: 1}
    metadata: {team: b, quota: true, nested: {q: 2, shared: quota}}
  - key: quota2
    quota_mode: true
    rate_limit: {unit: day, requests_per_unit: 3}
  - key: free
    rate_limit: {unlimited: true}
    metadata: {free: open}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 5}
    metadata: {tags: [detailed, 5]}
  - key: shadow
    shadow_mode: true
    rate_limit: {name: shadow-rule, unit: hour, requests_per_unit: 1}
  - key: refund
    rate_limit: {name: refund-rule, unit: hour, requests_per_unit: 5}
"""

RESPONSE_HEADERS = ('RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset')
REQUEST_HEADERS = ('X-Req-Limit', 'X-Req-Remaining', 'X-Req-Reset')

redis = None


def setUpModule():
    global redis
    redis = RedisServer()


def tearDownModule():
    if redis is not None:
        redis.close()


def backend_env(backend):
    if backend == 'memory':
        return {'BACKEND_TYPE': 'memory'}
    # no jitter: the TTL of a key is exactly its unit
    return dict(redis.sluice_env(), BACKEND_TYPE='redis', EXPIRATION_JITTER_MAX_SECONDS='0')


# ---------------------------------------------------------------------------------------------------------------
# What harness.Decision does not carry: request headers and dynamic metadata, from either transport


def is_grpc(d):
    return d.http_status is None


def request_headers(d):
    if is_grpc(d):
        return [(h.key, h.value) for h in d.raw.request_headers_to_add]
    return [(h['key'], h['value']) for h in d.raw.get('requestHeadersToAdd', [])]


def dynamic_metadata(d):
    """The dynamic metadata as plain JSON values (numbers compare equal as int or float), or None when absent."""
    if is_grpc(d):
        return json_format.MessageToDict(d.raw.dynamic_metadata) if d.raw.HasField('dynamic_metadata') else None
    return d.raw.get('dynamicMetadata')


class Client:
    """One backend's server over one transport, with that transport's own domain (so counters never mix)."""

    def __init__(self, server, backend, transport, domain):
        self.server = server
        self.backend = backend
        self.transport = transport
        self.domain = domain

    def decide(self, descriptors, hits_addend=None, negative_field='isNegativeHits'):
        """harness.decide, plus descriptors written as dicts with 'negative': True sent as negative hits (over
        /json under `negative_field`). The Decision gets `when`: the wall-clock (start, end) of the call."""
        negative = [isinstance(d, dict) and d.get('negative', False) for d in descriptors]
        start = time.time()
        if self.transport == 'grpc':
            req = harness.rls_request_proto(self.domain, descriptors, hits_addend)
            for pd, neg in zip(req.descriptors, negative):
                pd.is_negative_hits = neg
            d = harness.decision_from_proto(harness.rls_raw(self.server.grpc_port, req))
        else:
            body = harness.rls_request_json(self.domain, descriptors, hits_addend)
            for jd, neg in zip(body['descriptors'], negative):
                if neg:
                    jd[negative_field] = True
            status, _, answer = harness.post_json(self.server.http_port, body)
            d = harness.decision_from_json(status, answer)
        d.when = (start, time.time())
        return d

    def refund(self, entries, hits=None, hits_addend=None, negative_field='isNegativeHits'):
        """Gives `hits` back (the descriptor's wrapper; None: the request's hits_addend) -> its Status."""
        descriptor = {'entries': entries, 'hits_addend': hits, 'negative': True}
        return self.decide([descriptor], hits_addend, negative_field).statuses[0]

    def stat(self, rule_key, name):
        """A per-rule counter from the debug server's /stats (0 before it is first counted)."""
        _, _, text = harness.http_get(self.server.debug_port, '/stats')
        wanted = 'ratelimit.service.rate_limit.%s.%s.%s' % (self.domain, rule_key, name)
        values = dict(line.split(': ', 1) for line in text.splitlines() if ': ' in line)
        return int(values.get(wanted, 0))

    def redis_key(self, key, value, unit, t):
        """upstream's cache key: <domain>_<key>_<value>_<window start>."""
        divider = harness.UNIT_SECONDS[unit]
        return '%s_%s_%s_%d' % (self.domain, key, value, int(t) // divider * divider)


class ParityCase(unittest.TestCase):
    """One Sluice per backend with the class's settings `env`, sharing the module's redis-server; each class has
    its own domains, so they never share counters."""

    env = {}
    servers = None

    @classmethod
    def domain(cls, transport):
        return '%s-%s' % (cls.__name__.lower(), transport)

    @classmethod
    def setUpClass(cls):
        rules = {t + '.yaml': 'domain: %s\n%s' % (cls.domain(t), RULES) for t in TRANSPORTS}
        cls.servers = {}
        for b in BACKENDS:
            cls.servers[b] = Sluice(rules=rules, env=dict(backend_env(b), **cls.env))
            cls.addClassCleanup(cls.servers[b].close)

    def setUp(self):
        # every figure below assumes one window of each unit (the day's edge is an hour's edge too)
        harness.avoid_window_edge('HOUR', 5)

    def across(self, check):
        """Runs check(client) for every backend and transport, each as its own subtest."""
        for b in BACKENDS:
            for t in TRANSPORTS:
                with self.subTest(backend=b, transport=t):
                    check(Client(self.servers[b], b, t, self.domain(t)))

    # -- assertions ---------------------------------------------------------------------------------------------

    def assertLimited(self, d, i, code, limit, name, remaining):
        """Status i has that code, current limit (with its name) and remaining, and a reset within its window."""
        s = d.statuses[i]
        self.assertEqual((s.code, s.limit, s.name, s.remaining), (code, limit, name, remaining), d)
        self.assertIn(s.reset, harness.expected_resets(limit[1], *d.when), d)

    def assertNoLimit(self, d, i):
        s = d.statuses[i]
        self.assertEqual((s.code, s.limit, s.name, s.reset), ('OK', None, '', None), d)

    def assertHeaders(self, headers, names, d, limit, remaining, unit):
        """`headers` are exactly the three `names` with these figures (the reset within the window of `unit`)."""
        got = dict(headers)
        self.assertEqual(sorted(got), sorted(names), d)
        self.assertEqual((got[names[0]], got[names[1]]), (str(limit), str(remaining)), d)
        self.assertIn(int(got[names[2]]), harness.expected_resets(unit, *d.when), d)


class QuotaAndMetadata(ParityCase):
    """Per-rule quota_mode, both kinds of limit headers, dynamic metadata, refunds and the local cache."""

    env = {'RESPONSE_DYNAMIC_METADATA': 'true', 'LIMIT_RESPONSE_HEADERS_ENABLED': 'true',
           'LIMIT_REQUEST_HEADERS_ENABLED': 'true', 'LIMIT_REQUEST_LIMIT_HEADER': REQUEST_HEADERS[0],
           'LIMIT_REQUEST_REMAINING_HEADER': REQUEST_HEADERS[1], 'LIMIT_REQUEST_RESET_HEADER': REQUEST_HEADERS[2],
           'LOCAL_CACHE_SIZE_IN_BYTES': '1048576'}

    def assertBothHeaders(self, d, limit, remaining, unit):
        """Response and request headers carry the same figures."""
        self.assertHeaders(d.headers, RESPONSE_HEADERS, d, limit, remaining, unit)
        self.assertHeaders(request_headers(d), REQUEST_HEADERS, d, limit, remaining, unit)

    # -- quota_mode ---------------------------------------------------------------------------------------------

    def test_quota_descriptor_over_alone_is_over(self):
        def check(c):
            self.assertEqual(c.decide([[('quota', 'alone')]]).overall, 'OK')
            d = c.decide([[('quota', 'alone')]])
            self.assertLimited(d, 0, 'OVER_LIMIT', (1, 'HOUR'), 'quota-rule', 0)
            self.assertEqual(d.overall, 'OVER_LIMIT', d)

        self.across(check)

    def test_normal_descriptor_under_does_not_rescue_the_only_quota(self):
        def check(c):
            c.decide([[('quota', 'beside')]])
            d = c.decide([[('quota', 'beside')], [('normal', 'beside')]])
            self.assertEqual([s.code for s in d.statuses], ['OVER_LIMIT', 'OK'], d)
            self.assertEqual(d.overall, 'OVER_LIMIT', d)
            # the over-limit quota status has the least remaining, so the headers still describe it
            self.assertBothHeaders(d, 1, 0, 'HOUR')

        self.across(check)

    def test_all_quota_descriptors_over_is_over(self):
        def check(c):
            c.decide([[('quota', 'all')]])
            d = c.decide([[('quota', 'all')], [('quota2', 'all')]])
            self.assertEqual(([s.code for s in d.statuses], d.overall), (['OVER_LIMIT', 'OK'], 'OK'), d)
            c.decide([[('quota2', 'all')]], hits_addend=2)
            d = c.decide([[('quota', 'all')], [('quota2', 'all')]])
            self.assertEqual(([s.code for s in d.statuses], d.overall), (['OVER_LIMIT'] * 2, 'OVER_LIMIT'), d)

        self.across(check)

    def test_normal_descriptor_over_is_over_whatever_the_quotas(self):
        def check(c):
            c.decide([[('normal', 'n-over')]], hits_addend=3)
            d = c.decide([[('normal', 'n-over')], [('quota2', 'n-over')]])
            self.assertEqual(([s.code for s in d.statuses], d.overall), (['OVER_LIMIT', 'OK'], 'OVER_LIMIT'), d)

        self.across(check)

    def test_unlimited_descriptors_count_on_neither_side(self):
        def check(c):
            c.decide([[('quota', 'unl')]])
            # the unlimited descriptor is no quota under its limit: the one quota is over, so the request is too
            d = c.decide([[('quota', 'unl')], [('free', 'unl')]])
            self.assertEqual(d.overall, 'OVER_LIMIT', d)

        self.across(check)

    def test_normal_over_limit_takes_the_headers_quota_over_does_not(self):
        def check(c):
            c.decide([[('quota', 'hdr')], [('normal', 'hdr')]], hits_addend=2)
            # normal (limit 2) at 0 remaining comes first, the over-limit quota (limit 1) does not displace it
            d = c.decide([{'entries': [('normal', 'hdr')], 'hits_addend': 0},
                          {'entries': [('quota', 'hdr')], 'hits_addend': 0}])
            self.assertEqual([s.code for s in d.statuses], ['OK', 'OVER_LIMIT'], d)
            self.assertBothHeaders(d, 2, 0, 'HOUR')
            # the quota at 0 remaining comes first, but the over-limit normal descriptor wins
            d = c.decide([[('quota', 'hdr')], [('normal', 'hdr')]])
            self.assertEqual([s.code for s in d.statuses], ['OVER_LIMIT', 'OVER_LIMIT'], d)
            self.assertBothHeaders(d, 2, 0, 'HOUR')

        self.across(check)

    # -- dynamic metadata ---------------------------------------------------------------------------------------

    def test_dynamic_metadata_describes_the_request(self):
        def check(c):
            d = c.decide([{'entries': [('normal', 'layout')], 'limit': (10, 'DAY'), 'hits_addend': 0},
                          [('other', 'x'), ('sub', 'y')]], hits_addend=3)
            # no rule matched (the override replaces the rule): no "metadata"
            self.assertEqual(dynamic_metadata(d), {
                'domain': c.domain,
                'descriptors': [{'entries': ['normal=layout'], 'limit': 'requests_per_unit:10 unit:DAY',
                                 'hitsAddend': 0},
                                {'entries': ['other=x', 'sub=y']}],
                'hitsAddend': 3}, d)

        self.across(check)

    def test_metadata_of_passing_rules_merged_first_wins(self):
        def check(c):
            descriptors = [[('normal', 'md')], [('quota', 'md')], [('detailed', 'md')], [('free', 'md')]]
            d = c.decide(descriptors)
            self.assertEqual(dynamic_metadata(d), {
                'domain': c.domain,
                'descriptors': [{'entries': ['normal=md']}, {'entries': ['quota=md']},
                                {'entries': ['detailed=md']}, {'entries': ['free=md']}],
                # detailed_metric and unlimited rules keep theirs; nested maps merge, the first value wins
                'metadata': {'team': 'a', 'quota': True, 'nested': {'p': 1, 'q': 2, 'shared': 'normal'},
                             'tags': ['detailed', 5], 'free': 'open'}}, d)
            # now the quota is over: its rule's metadata is left out
            d = c.decide(descriptors[:2])
            self.assertEqual(d.statuses[1].code, 'OVER_LIMIT', d)
            self.assertEqual(dynamic_metadata(d)['metadata'], {'team': 'a', 'nested': {'p': 1, 'shared': 'normal'}},
                             d)

        self.across(check)

    def test_metadata_follows_descriptor_order(self):
        def check(c):
            d = c.decide([[('quota', 'order')], [('normal', 'order')]])
            self.assertEqual(dynamic_metadata(d)['metadata'],
                             {'team': 'b', 'quota': True, 'nested': {'p': 1, 'q': 2, 'shared': 'quota'}}, d)

        self.across(check)

    def test_no_metadata_when_every_matched_rule_is_over(self):
        def check(c):
            d = c.decide([[('normal', 'none-left')], [('other', 'x')]], hits_addend=3)
            self.assertEqual(d.statuses[0].code, 'OVER_LIMIT', d)
            self.assertNotIn('metadata', dynamic_metadata(d), d)

        self.across(check)

    # -- current_limit.name and duration_until_reset ------------------------------------------------------------

    def test_name_and_reset_on_every_limited_path(self):
        def check(c):
            normal = [('normal', 'paths')]
            self.assertLimited(c.decide([normal]), 0, 'OK', (2, 'HOUR'), 'normal-rule', 1)
            self.assertLimited(c.decide([normal], hits_addend=2), 0, 'OVER_LIMIT', (2, 'HOUR'), 'normal-rule', 0)
            before = c.stat('normal', 'over_limit_with_local_cache')
            self.assertLimited(c.decide([normal]), 0, 'OVER_LIMIT', (2, 'HOUR'), 'normal-rule', 0)
            self.assertEqual(c.stat('normal', 'over_limit_with_local_cache'), before + 1,
                             'the second over-limit answer did not come from the local cache')
            c.decide([[('shadow', 'paths')]])
            d = c.decide([[('shadow', 'paths')]])
            self.assertLimited(d, 0, 'OK', (1, 'HOUR'), 'shadow-rule', 0)
            # unlimited and rule-less descriptors have no current limit
            d = c.decide([[('free', 'paths')], [('nomatch', 'paths')]])
            self.assertNoLimit(d, 0)
            self.assertNoLimit(d, 1)

        self.across(check)

    # -- negative hits ------------------------------------------------------------------------------------------

    def test_refund_gives_hits_back_down_to_zero(self):
        def check(c):
            entries = [('refund', 'back')]
            before = c.stat('refund', 'total_negative_hits')
            self.assertLimited(c.decide([entries], hits_addend=3), 0, 'OK', (5, 'HOUR'), 'refund-rule', 2)
            d = c.decide([{'entries': entries, 'hits_addend': 2, 'negative': True}])
            self.assertLimited(d, 0, 'OK', (5, 'HOUR'), 'refund-rule', 4)
            # no wrapper: max(1, request hits_addend) hits; the counter stops at 0
            self.assertEqual(c.refund(entries, hits_addend=0).remaining, 5)
            self.assertEqual(c.refund(entries, hits_addend=10).remaining, 5)
            self.assertEqual(c.stat('refund', 'total_negative_hits'), before + 13)
            if c.backend == 'redis':
                key = c.redis_key('refund', 'back', 'HOUR', d.when[0])
                self.assertEqual(redis.get(key), '0', redis.keys())
                self.assertGreater(redis.pttl(key), 0, 'the refund dropped the TTL of ' + key)
            self.assertLimited(c.decide([entries]), 0, 'OK', (5, 'HOUR'), 'refund-rule', 4)

        self.across(check)

    def test_refund_of_an_absent_counter_creates_nothing(self):
        def check(c):
            entries = [('refund', 'absent')]
            d = c.decide([{'entries': entries, 'hits_addend': 3, 'negative': True}])
            self.assertLimited(d, 0, 'OK', (5, 'HOUR'), 'refund-rule', 5)
            if c.backend == 'redis':
                self.assertEqual(redis.keys('%s_refund_absent_*' % c.domain), [])
            # nothing was stored below zero: the next hit counts from 0
            self.assertEqual(c.decide([entries]).statuses[0].remaining, 4)

        self.across(check)

    def test_refund_brings_an_over_limit_key_back(self):
        def check(c):
            normal = [('normal', 'again')]
            c.decide([normal], hits_addend=3)
            self.assertEqual(c.decide([normal]).overall, 'OVER_LIMIT')  # from the local cache
            self.assertEqual(c.refund(normal, hits=2).code, 'OK')
            d = c.decide([normal])
            self.assertLimited(d, 0, 'OK', (2, 'HOUR'), 'normal-rule', 0)
            self.assertEqual(d.overall, 'OK', d)

        self.across(check)

    def test_json_accepts_the_proto_field_name(self):
        def check(c):
            entries = [('refund', 'snake')]
            c.decide([entries], hits_addend=4)
            self.assertEqual(c.refund(entries, hits=3, negative_field='is_negative_hits').remaining, 4)

        self.across(check)


class RequestHeadersOnly(ParityCase):
    """LIMIT_REQUEST_HEADERS_ENABLED alone, with the default names; no dynamic metadata."""

    env = {'LIMIT_REQUEST_HEADERS_ENABLED': 'true'}

    def test_request_headers_without_response_headers(self):
        def check(c):
            d = c.decide([[('normal', 'req')], [('refund', 'req')]])
            self.assertHeaders(request_headers(d), RESPONSE_HEADERS, d, 2, 1, 'HOUR')
            self.assertEqual(d.headers, [], d)

        self.across(check)

    def test_no_dynamic_metadata_without_the_setting(self):
        def check(c):
            d = c.decide([[('normal', 'nomd')], [('free', 'nomd')]], hits_addend=1)
            self.assertIsNone(dynamic_metadata(d), d)

        self.across(check)


class GlobalQuotaMode(ParityCase):
    """QUOTA_MODE=true: every descriptor is a quota descriptor."""

    env = {'QUOTA_MODE': 'true', 'LIMIT_RESPONSE_HEADERS_ENABLED': 'true'}

    def test_over_alone_is_over(self):
        def check(c):
            d = c.decide([[('normal', 'g-alone')]], hits_addend=3)
            self.assertEqual((d.statuses[0].code, d.overall), ('OVER_LIMIT', 'OVER_LIMIT'), d)

        self.across(check)

    def test_one_descriptor_under_keeps_the_request_ok(self):
        def check(c):
            d = c.decide([[('normal', 'g-under')], [('refund', 'g-under')]], hits_addend=3)
            self.assertEqual(([s.code for s in d.statuses], d.overall), (['OVER_LIMIT', 'OK'], 'OK'), d)

        self.across(check)

    def test_descriptor_without_a_rule_is_a_quota_never_over(self):
        def check(c):
            d = c.decide([[('normal', 'g-norule')], [('nomatch', 'g-norule')]], hits_addend=3)
            self.assertEqual(([s.code for s in d.statuses], d.overall), (['OVER_LIMIT', 'OK'], 'OK'), d)
            # an unlimited descriptor, by contrast, does not count
            d = c.decide([[('normal', 'g-norule')], [('free', 'g-norule')]])
            self.assertEqual(d.overall, 'OVER_LIMIT', d)

        self.across(check)

    def test_over_limit_does_not_take_the_headers(self):
        def check(c):
            c.decide([[('quota', 'g-hdr')]])
            # quota (limit 1) at 0 remaining comes first; the later over-limit descriptor does not displace it
            d = c.decide([{'entries': [('quota', 'g-hdr')], 'hits_addend': 0}, [('normal', 'g-hdr')]],
                         hits_addend=3)
            self.assertEqual([s.code for s in d.statuses], ['OK', 'OVER_LIMIT'], d)
            self.assertHeaders(d.headers, RESPONSE_HEADERS, d, 1, 0, 'HOUR')

        self.across(check)


class BadConfiguration(unittest.TestCase):
    """What stops rules from loading or the server from starting (no traffic: once, whatever the backend)."""

    def check_config(self, metadata):
        d = tempfile.mkdtemp(prefix='sluice-e2e-md-')
        self.addCleanup(harness.remove_tmp, d)
        with open(os.path.join(d, 'md.yaml'), 'w') as f:
            f.write('domain: md\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n'
                    '    metadata: %s\n' % metadata)
        return harness.run_sluice(['check-config', d])

    def test_bad_metadata_fails_to_load(self):
        self.assertEqual(self.check_config('{a: {b: [1, x, true]}}').returncode, 0)
        for bad in ('{a: .inf}', '[1]'):
            with self.subTest(metadata=bad):
                r = self.check_config(bad)
                self.assertEqual(r.returncode, 1, r)
                self.assertIn('error parsing metadata', r.stdout, r)

    def test_bad_request_header_name_stops_start_up(self):
        log = Sluice.failed_start(self, {'LIMIT_REQUEST_HEADERS_ENABLED': 'true',
                                         'LIMIT_REQUEST_REMAINING_HEADER': 'X Bad'})
        self.assertIn('LIMIT_REQUEST_REMAINING_HEADER', log)

    def test_pool_on_empty_behavior_is_checked_as_upstream(self):
        """CREATE and ERROR stop start-up naming the setting (pipelined connections never run out: only WAIT)."""
        log = Sluice.failed_start(self, {'BACKEND_TYPE': 'redis', 'REDIS_POOL_ON_EMPTY_BEHAVIOR': 'error'})
        self.assertIn("invalid value 'error' for REDIS_POOL_ON_EMPTY_BEHAVIOR: only WAIT is supported", log)


if __name__ == '__main__':
    harness.main()
