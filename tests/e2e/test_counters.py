"""Operator control (issue 43, parts 1 and 2): the counters API and /explain on the debug listener. GET reads what a descriptor's limits
counted, DELETE resets them and PUT sets them, on the memory store, Redis (exact and batched) and memcached, for
every algorithm; changes need a token of ADMIN_TOKEN_FILE (re-read when it changes), are logged without the token
and counted; /explain tells which rule each descriptor matched and why others did not, counting nothing; the debug
listener refuses Host names it does not know (DNS rebinding); `sluice counters` and `sluice explain` drive them from
a shell."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse

import harness
from harness import RedisServer, Sluice
from memcached import MemcachedServer
from test_redis import wait_healthy

RULES = """
domain: ops
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: plan
    rate_limits:
      - {unit: hour, requests_per_unit: 10, name: hourly}
      - {unit: day, requests_per_unit: 100, name: daily}
  - key: slide
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: sliding_window}
  - key: bucket
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: gcra}
  - key: slots
    rate_limit: {requests_per_unit: 3, algorithm: concurrency, lease: 60s}
  - key: tenant
    descriptors:
      - key: request_id
        rate_limit: {requests_per_unit: 3, algorithm: concurrency, lease: 60s, holder_key: request_id}
  - key: local
    rate_limit: {unit: day, requests_per_unit: 4, time_zone: Europe/Berlin}
  - key: free
    rate_limit: {unlimited: true}
"""
TOKEN = 'operator-token-0123456789abcdef'
OTHER = 'rotated-token-fedcba9876543210'
SERVERS = {}


def setUpModule():
    SERVERS['redis'] = RedisServer()
    SERVERS['memcache'] = MemcachedServer()


def tearDownModule():
    SERVERS['redis'].stop()
    SERVERS['memcache'].close()


def unique(tag):
    return '%s%d%d' % (tag, os.getpid(), time.monotonic_ns())


def stats(sluice):
    _, _, body = harness.http_get(sluice.debug_port, '/stats')
    text = body if isinstance(body, str) else body.decode()
    return {k: int(v) for k, v in re.findall(r'^(\S+): (-?\d+)$', text, re.M)}


def target(domain, entries, used=None):
    q = 'domain=%s&descriptor=%s' % (urllib.parse.quote(domain, safe=''),
                                     ','.join('%s=%s' % (urllib.parse.quote(k, safe=''), urllib.parse.quote(v, safe=''))
                                              for k, v in entries))
    if used is not None:
        q += '&used=%d' % used
    return '/counters?' + q


class CountersCase(unittest.TestCase):
    backend = 'memory'
    env = {}

    def setUp(self):
        harness.avoid_window_edge('HOUR', margin=60 if harness.SANITIZED else 20)
        self.dir = tempfile.mkdtemp(prefix='sluice-e2e-counters-')
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.token_file = os.path.join(self.dir, 'tokens')
        self.write_tokens('# operators\n\n%s\n' % TOKEN)

    def write_tokens(self, text):
        tmp = self.token_file + '.tmp'
        with open(tmp, 'w') as f:
            f.write(text)
        os.replace(tmp, self.token_file)

    def sluice(self, env=None, tokens=True):
        full = harness.backend_env(self.backend, SERVERS)
        if tokens:
            full['ADMIN_TOKEN_FILE'] = self.token_file
        full.update(self.env)
        full.update(env or {})
        s = Sluice(rules={'ops.yaml': RULES}, env=full)
        self.addCleanup(s.close)
        wait_healthy(s)
        return s

    def counters(self, s, entries, method='GET', used=None, token=TOKEN, headers=None, domain='ops'):
        h = dict(headers or {})
        if token is not None and method != 'GET':
            h.setdefault('Authorization', 'Bearer ' + token)
        return harness.http_request(s.debug_port, target(domain, entries, used), method=method, headers=h)

    def hit(self, s, key, value, n=1, negative=False):
        codes = []
        for _ in range(n):
            d = {'entries': [(key, value)]}
            if negative:
                d['is_negative_hits'] = True
            codes.append(s.decide('grpc', 'ops', [d]).overall)
        return codes

    def only_limit(self, body):
        self.assertEqual(len(body['limits']), 1, body)
        return body['limits'][0]


class CommonCounters:
    """What every backend does: fixed windows, several limits, time zones, sliding windows."""

    def test_get_reset_and_set_a_fixed_window(self):
        s = self.sluice()
        u = unique('u')
        self.assertEqual(self.hit(s, 'user', u, 3), ['OK'] * 3)
        status, _, body = self.counters(s, [('user', u)])
        self.assertEqual(status, 200, body)
        self.assertEqual((body['domain'], body['entries']), ('ops', ['user=' + u]))
        limit = self.only_limit(body)
        self.assertEqual((limit['rule'], limit['algorithm'], limit['requests_per_unit'], limit['unit']),
                         ('ops.user', 'fixed_window', 5, 'HOUR'))
        self.assertEqual((limit['used'], limit['remaining']), (3, 2), body)
        self.assertTrue(0 < limit['reset_seconds'] <= 3600, limit)
        window = int(time.time()) // 3600 * 3600
        self.assertEqual(limit['key'], 'ops_user_%s_%d' % (u, window))
        # Reading counts nothing.
        self.assertEqual(self.only_limit(self.counters(s, [('user', u)])[2])['used'], 3)

        self.assertEqual(self.hit(s, 'user', u, 3), ['OK', 'OK', 'OVER_LIMIT'])
        status, _, body = self.counters(s, [('user', u)], method='DELETE')
        self.assertEqual(status, 200, body)
        self.assertEqual((self.only_limit(body)['used'], self.only_limit(body)['remaining']), (0, 5))
        self.assertEqual(self.hit(s, 'user', u), ['OK'])

        status, _, body = self.counters(s, [('user', u)], method='PUT', used=5)
        self.assertEqual(status, 200, body)
        self.assertEqual((self.only_limit(body)['used'], self.only_limit(body)['remaining']), (5, 0))
        self.assertEqual(self.hit(s, 'user', u), ['OVER_LIMIT'])

        # Audited: the descriptor, old and new values, the token's line, never the token.
        s.wait_for_log(lambda text: 'counters set' in text and u in text)
        line = next(l for l in s.log().splitlines() if 'counters set' in l and u in l)
        self.assertIn('line 3 of ADMIN_TOKEN_FILE', line)
        self.assertIn('ops.user 1/5 -> ops.user 5/5', line)
        self.assertNotIn(TOKEN, s.log())
        self.assertEqual(stats(s)['ratelimit.admin.changes'], 2)

    def test_every_limit_of_a_descriptor(self):
        s = self.sluice()
        p = unique('p')
        self.hit(s, 'plan', p, 4)
        body = self.counters(s, [('plan', p)])[2]
        got = {(l['name'], l['unit'], l['used'], l['remaining']) for l in body['limits']}
        self.assertEqual(got, {('hourly', 'HOUR', 4, 6), ('daily', 'DAY', 4, 96)})
        body = self.counters(s, [('plan', p)], method='DELETE')[2]
        self.assertEqual({l['used'] for l in body['limits']}, {0})

    def test_a_calendar_window(self):
        s = self.sluice()
        v = unique('z')
        self.hit(s, 'local', v, 2)
        limit = self.only_limit(self.counters(s, [('local', v)])[2])
        self.assertEqual((limit['time_zone'], limit['used'], limit['remaining']), ('Europe/Berlin', 2, 2))
        self.assertTrue(0 < limit['reset_seconds'] <= 25 * 3600, limit)
        self.counters(s, [('local', v)], method='PUT', used=4)
        self.assertEqual(self.hit(s, 'local', v), ['OVER_LIMIT'])

    def test_a_sliding_window(self):
        s = self.sluice()
        v = unique('s')
        self.assertEqual(self.hit(s, 'slide', v, 6), ['OK'] * 5 + ['OVER_LIMIT'])
        limit = self.only_limit(self.counters(s, [('slide', v)])[2])
        self.assertEqual((limit['algorithm'], limit['used'], limit['remaining']), ('sliding_window', 5, 0))
        limit = self.only_limit(self.counters(s, [('slide', v)], method='DELETE')[2])
        self.assertEqual(limit['used'], 0)
        self.assertEqual(self.hit(s, 'slide', v, 5), ['OK'] * 5)
        limit = self.only_limit(self.counters(s, [('slide', v)], method='PUT', used=2)[2])
        self.assertEqual(limit['used'], 2)
        self.assertEqual(self.hit(s, 'slide', v, 4), ['OK'] * 3 + ['OVER_LIMIT'])

    def test_no_rule_unlimited_and_bad_queries(self):
        s = self.sluice()
        status, _, body = self.counters(s, [('nobody', 'x')])
        self.assertEqual(status, 404, body)
        self.assertIn("no rule of domain 'ops' matches descriptor nobody=x", body['message'])
        self.assertEqual(self.counters(s, [('user', 'x')], domain='elsewhere')[0], 404)
        status, _, body = self.counters(s, [('free', 'x')])
        self.assertEqual((status, body['unlimited'], body['limits']), (200, True, []))
        for query, why in [('', 'needs domain'), ('?domain=ops', 'needs descriptor'),
                           ('?descriptor=user=x', 'needs domain'), ('?domain=ops&descriptor=user', "has no '='"),
                           ('?domain=ops&descriptor=%3Dx', 'empty key'), ('?domain=ops&descriptor==x', 'empty key'),
                           ('?domain=ops&descriptor=user%3Dx&entry=user%3Dy', 'descriptor and entry cannot be combined'),
                           ('?domain=ops&entry=user', "entry 1 'user' has no '='"),
                           ('?domain=ops&descriptor=user=x&descriptor=user=y', 'twice'),
                           ('?domain=ops&descriptor=user=x&limit=3', "unknown parameter 'limit'"),
                           ('?domain=ops&descriptor=user=x&used=3', 'only for PUT'),
                           ('?domain=&descriptor=user=x', 'domain must not be empty')]:
            status, _, body = harness.http_get(s.debug_port, '/counters' + query)
            self.assertEqual(status, 400, (query, body))
            self.assertIn(why, body['message'], query)
        status, _, body = self.counters(s, [('user', 'x')], method='PUT')
        self.assertEqual(status, 400)
        self.assertIn('PUT needs used=N', body['message'])
        status, headers, body = harness.http_request(s.debug_port, target('ops', [('user', 'x')]), method='POST',
                                                     body=b'')
        self.assertEqual((status, headers.get('allow')), (405, 'GET, HEAD, DELETE, PUT'))
        # An escaped ',' and '=' stay in the value.
        v = unique('a,b=c')
        self.hit(s, 'user', v, 2)
        body = self.counters(s, [('user', v)])[2]
        self.assertEqual((body['entries'], self.only_limit(body)['used']), (['user=' + v], 2))


    def test_explain(self):
        s = self.sluice()
        u = unique('e')
        self.hit(s, 'user', u, 2)
        request = {'domain': 'ops', 'descriptors': [
            {'entries': [{'key': 'user', 'value': u}]},
            {'entries': [{'key': 'usr', 'value': u}]},
            {'entries': [{'key': 'plan', 'value': 'p'}]},
            {'entries': [{'key': 'user', 'value': u}], 'limit': {'requests_per_unit': 9, 'unit': 'MINUTE'}},
        ]}
        before = stats(s)
        status, _, body = harness.post_json(s.debug_port, request, path='/explain')
        self.assertEqual(status, 200, body)
        self.assertEqual(stats(s), before)  # nothing counted, no stat changed
        first, typo, plan, override = body['descriptors']
        self.assertEqual((first['rule'], first['path']),
                         ('ops.user', [{'level': 1, 'entry': 'user=' + u, 'rule': 'ops.user', 'matched_by': 'key_only'}]))
        self.assertEqual((first['limits'][0]['used'], first['limits'][0]['remaining']), (2, 3))
        self.assertIsNone(typo['rule'])
        self.assertEqual(typo['outcome'], 'no rule at level 1 takes usr=%s in this domain' % u)
        self.assertEqual(typo['candidates'][0], {'rule': 'ops.user', 'level': 1,
                                                 'why': "key differs: the rule wants key 'user', the request has 'usr'"})
        self.assertEqual(typo['limits'], [])
        self.assertEqual([l['name'] for l in plan['limits']], ['hourly', 'daily'])
        self.assertTrue(override['override'])
        self.assertEqual((override['limits'][0]['requests_per_unit'], override['limits'][0]['unit']), (9, 'MINUTE'))
        # A second look: still nothing counted.
        body = harness.post_json(s.debug_port, request, path='/explain')[2]
        self.assertEqual(body['descriptors'][0]['limits'][0]['used'], 2)
        for bad, why in [({'domain': '', 'descriptors': [{'entries': [{'key': 'a', 'value': 'b'}]}]}, 'domain'),
                         ({'domain': 'ops', 'descriptors': []}, 'descriptor list must not be empty'),
                         ({'domain': 'ops', 'descriptors': [{'entries': [{'kye': 'a'}]}]}, "unknown field 'kye'"),
                         ('{"domain": ', '')]:
            status, _, body = harness.post_json(s.debug_port, bad, path='/explain')
            self.assertEqual(status, 400, (bad, body))
            self.assertIn(why, body['message'])
        status, headers, _ = harness.http_get(s.debug_port, '/explain')
        self.assertEqual((status, headers.get('allow')), (405, 'POST'))


class AllAlgorithms:
    """GCRA buckets and concurrency leases: the stores that hold them."""

    def test_a_gcra_bucket(self):
        s = self.sluice()
        v = unique('g')
        self.assertEqual(self.hit(s, 'bucket', v, 6), ['OK'] * 5 + ['OVER_LIMIT'])
        limit = self.only_limit(self.counters(s, [('bucket', v)])[2])
        self.assertEqual((limit['algorithm'], limit['burst'], limit['used'], limit['remaining']), ('gcra', 5, 5, 0))
        limit = self.only_limit(self.counters(s, [('bucket', v)], method='DELETE')[2])
        self.assertEqual((limit['used'], limit['remaining']), (0, 5))
        self.assertEqual(self.hit(s, 'bucket', v, 5), ['OK'] * 5)
        limit = self.only_limit(self.counters(s, [('bucket', v)], method='PUT', used=3)[2])
        self.assertEqual((limit['used'], limit['remaining']), (3, 2))
        self.assertEqual(self.hit(s, 'bucket', v, 3), ['OK', 'OK', 'OVER_LIMIT'])

    def test_concurrency_leases(self):
        s = self.sluice()
        v = unique('c')
        self.assertEqual(self.hit(s, 'slots', v, 4), ['OK'] * 3 + ['OVER_LIMIT'])
        limit = self.only_limit(self.counters(s, [('slots', v)])[2])
        self.assertEqual((limit['algorithm'], limit['used'], limit['remaining']), ('concurrency', 3, 0))
        # Leases lost by a crashed client: the operator frees them.
        limit = self.only_limit(self.counters(s, [('slots', v)], method='DELETE')[2])
        self.assertEqual((limit['used'], limit['remaining']), (0, 3))
        self.assertEqual(self.hit(s, 'slots', v, 3), ['OK'] * 3)
        limit = self.only_limit(self.counters(s, [('slots', v)], method='PUT', used=1)[2])
        self.assertEqual(limit['used'], 1)
        self.assertEqual(self.hit(s, 'slots', v, 3), ['OK', 'OK', 'OVER_LIMIT'])

    def test_concurrency_holders(self):
        s = self.sluice()
        t = unique('t')
        for holder, hits in (('a', 1), ('b', 2)):
            d = {'entries': [('tenant', t), ('request_id', holder)], 'hits_addend': hits}
            self.assertEqual(s.decide('grpc', 'ops', [d]).overall, 'OK')
        # The counter: the descriptor up to the holder, with how many hold.
        limit = self.only_limit(self.counters(s, [('tenant', t)])[2])
        self.assertEqual((limit['used'], limit['remaining'], limit['holders'], limit['holder_key']),
                         (3, 0, 2, 'request_id'))
        self.assertTrue(limit['key'].endswith('_concurrency_holders'), limit)
        # With a holder's entry: whether that holder holds.
        limit = self.only_limit(self.counters(s, [('tenant', t), ('request_id', 'b')])[2])
        self.assertEqual((limit['holder'], limit['holder_slots'], limit['used']), ('b', 2, 3))
        limit = self.only_limit(self.counters(s, [('tenant', t), ('request_id', 'zz')])[2])
        self.assertEqual(limit['holder_slots'], 0)
        # DELETE with it frees that holder alone.
        limit = self.only_limit(self.counters(s, [('tenant', t), ('request_id', 'b')], method='DELETE')[2])
        self.assertEqual((limit['used'], limit['holders'], limit['holder_slots']), (1, 1, 0))
        # PUT sets what one holder holds; without a holder it is refused, naming the way.
        limit = self.only_limit(self.counters(s, [('tenant', t), ('request_id', 'c')], method='PUT', used=2)[2])
        self.assertEqual((limit['used'], limit['holders'], limit['holder_slots']), (3, 2, 2))
        status, _, body = self.counters(s, [('tenant', t)], method='PUT', used=2)
        self.assertEqual(status, 400, body)
        self.assertIn('request_id=<id>', body['message'])
        # DELETE without it frees every holder.
        limit = self.only_limit(self.counters(s, [('tenant', t)], method='DELETE')[2])
        self.assertEqual((limit['used'], limit['holders']), (0, 0))


class LibraryQueries(CountersCase):
    """Issue 48, part 3: the query as client libraries write it (Python's urlencode here; Go's url.Values and
    JavaScript's URLSearchParams escape alike: the whole value, spaces as '+')."""

    def get(self, s, query, method='GET'):
        headers = {'Authorization': 'Bearer ' + TOKEN} if method != 'GET' else {}
        return harness.http_request(s.debug_port, '/counters?' + query, method=method, headers=headers)

    def test_urlencoded_descriptor_and_entries(self):
        s = self.sluice()
        u = unique('alice smith ')  # a space: '+' on the wire
        self.hit(s, 'user', u, 2)
        query = urllib.parse.urlencode({'domain': 'ops', 'descriptor': 'user=' + u})
        self.assertIn('descriptor=user%3Dalice+smith+', query)  # what answered 400 before
        status, _, body = self.get(s, query)
        self.assertEqual(status, 200, body)
        self.assertEqual((body['entries'], self.only_limit(body)['used']), (['user=' + u], 2))
        status, _, body = self.get(s, urllib.parse.urlencode([('domain', 'ops'), ('entry', 'user=' + u)]))
        self.assertEqual(status, 200, body)
        self.assertEqual((body['entries'], self.only_limit(body)['used']), (['user=' + u], 2))

        # Values the documented form and a whole-escaped descriptor cannot carry: ',' and '=' (only entry= can).
        for value in (unique('a,b'), unique('k') + '==', unique('x, y=z+w')):
            with self.subTest(value=value):
                self.hit(s, 'user', value, 3)
                query = urllib.parse.urlencode([('domain', 'ops'), ('entry', 'user=' + value)])
                status, _, body = self.get(s, query)
                self.assertEqual(status, 200, body)
                self.assertEqual((body['entries'], self.only_limit(body)['used']), (['user=' + value], 3))
                # A change takes the same query.
                status, _, body = self.get(s, query + '&used=1', method='PUT')
                self.assertEqual((status, self.only_limit(body)['used']), (200, 1), body)
        # Escaped whole, ',' separates entries: "user=a,b..." is user=a and an entry 'b...' without '='.
        status, _, body = self.get(s, urllib.parse.urlencode({'domain': 'ops', 'descriptor': 'user=a,b'}))
        self.assertEqual(status, 400, body)
        self.assertIn("descriptor entry 2 'b' has no '='", body['message'])
        self.assertIn('entry=key=value', body['message'])
        # Both forms in one query: 400 naming both.
        query = urllib.parse.urlencode([('domain', 'ops'), ('descriptor', 'user=x'), ('entry', 'user=x')])
        status, _, body = self.get(s, query)
        self.assertEqual(status, 400, body)
        self.assertIn('descriptor and entry cannot be combined', body['message'])
        # The documented form (docs/guides/operate.md#counters-look-at-reset-set) is unchanged: split at the raw ','
        # and '=', then each part decoded ('+' stays '+').
        plus = unique('p+q')
        self.hit(s, 'user', plus, 1)
        status, _, body = self.get(s, 'domain=ops&descriptor=user=' + plus)
        self.assertEqual((status, body['entries']), (200, ['user=' + plus]), body)

    def test_several_entries_in_order(self):
        pair = ('domain: pair\ndescriptors:\n  - key: tenant\n    descriptors:\n'
                '      - key: model\n        rate_limit: {unit: hour, requests_per_unit: 9}\n')
        s = Sluice(rules={'ops.yaml': RULES, 'pair.yaml': pair}, env=harness.backend_env(self.backend, SERVERS))
        self.addCleanup(s.close)
        t = unique('acme ')
        query = urllib.parse.urlencode([('domain', 'pair'), ('entry', 'tenant=' + t), ('entry', 'model=gpt-4o')])
        status, _, body = self.get(s, query)
        self.assertEqual(status, 200, body)
        self.assertEqual((body['entries'], self.only_limit(body)['rule']),
                         (['tenant=' + t, 'model=gpt-4o'], 'pair.tenant.model'))
        query = urllib.parse.urlencode({'domain': 'pair', 'descriptor': 'tenant=%s,model=gpt-4o' % t})
        status, _, body = self.get(s, query)
        self.assertEqual((status, body['entries']), (200, ['tenant=' + t, 'model=gpt-4o']), body)


class Memory(CountersCase, CommonCounters, AllAlgorithms):
    backend = 'memory'

    def test_the_local_over_limit_cache_forgets_a_reset_key(self):
        s = self.sluice({'LOCAL_CACHE_SIZE_IN_BYTES': '1048576'})
        u = unique('l')
        self.hit(s, 'user', u, 7)
        before = stats(s).get('ratelimit.service.rate_limit.ops.user.over_limit_with_local_cache', 0)
        self.assertGreater(before, 0)
        self.counters(s, [('user', u)], method='DELETE')
        self.assertEqual(self.hit(s, 'user', u), ['OK'])


class Redis(CountersCase, CommonCounters, AllAlgorithms):
    backend = 'redis'

    def test_the_keys_are_upstreams(self):
        s = self.sluice()
        u = unique('r')
        self.hit(s, 'user', u, 2)
        key = self.only_limit(self.counters(s, [('user', u)])[2])['key']
        redis = SERVERS['redis']
        self.assertEqual(redis.command('GET', key), '2')
        self.counters(s, [('user', u)], method='PUT', used=4)
        self.assertEqual(redis.command('GET', key), '4')
        self.assertGreater(redis.command('TTL', key), 0)
        self.counters(s, [('user', u)], method='DELETE')
        self.assertEqual(redis.command('EXISTS', key), 0)


class RedisBatched(CountersCase, CommonCounters):
    """REDIS_SYNC_INTERVAL: `used` is Redis's view plus the hits the workers have not sent; a change drops those."""
    backend = 'redis'
    env = {'REDIS_SYNC_INTERVAL': '10s', 'IO_THREADS': '2'}

    def test_unsent_hits_are_counted_and_a_reset_drops_them(self):
        s = self.sluice()
        u = unique('b')
        self.hit(s, 'user', u)  # the first op is read through Redis
        self.hit(s, 'user', u, 2)  # these stay unsent for 10 s
        key = self.only_limit(self.counters(s, [('user', u)])[2])['key']
        self.assertEqual(SERVERS['redis'].command('GET', key), '1')
        limit = self.only_limit(self.counters(s, [('user', u)])[2])
        self.assertEqual((limit['used'], limit.get('unsent')), (3, 2), limit)
        limit = self.only_limit(self.counters(s, [('user', u)], method='DELETE')[2])
        self.assertEqual(limit['used'], 0)
        self.assertEqual(SERVERS['redis'].command('EXISTS', key), 0)
        self.assertEqual(self.hit(s, 'user', u, 5), ['OK'] * 5)


class Memcache(CountersCase, CommonCounters):
    backend = 'memcache'

    def test_gcra_is_refused_with_a_reason(self):
        s = self.sluice()
        status, _, body = self.counters(s, [('bucket', 'x')])
        self.assertEqual(status, 503, body)
        self.assertIn('memcached holds no GCRA or concurrency keys', body['message'])


class Auth(CountersCase):
    def test_without_admin_token_file_changes_are_refused(self):
        s = self.sluice(tokens=False)
        self.assertEqual(self.counters(s, [('user', 'x')])[0], 200)
        status, _, body = self.counters(s, [('user', 'x')], method='DELETE')
        self.assertEqual(status, 403, body)
        self.assertIn('ADMIN_TOKEN_FILE', body['message'])

    def test_attacks(self):
        s = self.sluice()
        u = unique('a')
        self.hit(s, 'user', u, 2)
        attacks = [
            ({}, 'needs Authorization: Bearer'),
            ({'Authorization': 'Basic ' + TOKEN}, 'scheme must be Bearer'),
            ({'Authorization': 'Bearer'}, 'scheme must be Bearer'),
            ({'Authorization': 'Bearer wrong-token-0123456789'}, 'not one of'),
            ({'Authorization': 'Bearer ' + TOKEN[:-1]}, 'not one of'),
            ({'Authorization': 'Bearer ' + TOKEN + 'x'}, 'not one of'),
            ({'Authorization': 'Bearer ' + 'x' * 6000}, 'not one of'),
        ]
        for headers, why in attacks:
            status, hdrs, body = self.counters(s, [('user', u)], method='DELETE', token=None, headers=headers)
            self.assertEqual(status, 401, (headers.keys(), body))
            self.assertIn(why, body['message'])
            self.assertIn('Bearer', hdrs.get('www-authenticate', ''))
        # A token in the URL is refused, with or without a header.
        for name in ('token', 'access_token', 'Authorization'):
            path = target('ops', [('user', u)]) + '&%s=%s' % (name, TOKEN)
            status, _, body = harness.http_request(s.debug_port, path, method='DELETE')
            self.assertEqual(status, 400, body)
            self.assertIn('never accepted in the URL', body['message'])
        # A header too long for the server is refused by it, and it goes on serving.
        try:
            status, _, _ = self.counters(s, [('user', u)], method='DELETE', token='y' * 200000)
            self.assertIn(status, (400, 401, 413, 431))
        except (OSError, ConnectionError):
            pass
        self.assertEqual(self.only_limit(self.counters(s, [('user', u)])[2])['used'], 2)
        self.assertEqual(stats(s).get('ratelimit.admin.changes', 0), 0)

    def test_the_token_file_is_reread_when_it_changes(self):
        s = self.sluice()
        u = unique('t')
        # Rotation: both valid for a while, then the old one removed.
        self.write_tokens('%s\n%s\n' % (TOKEN, OTHER))
        harness.wait_until(lambda: self.counters(s, [('user', u)], method='DELETE', token=OTHER)[0] == 200,
                           message='the new token accepted')
        self.assertEqual(self.counters(s, [('user', u)], method='DELETE')[0], 200)
        s.wait_for_log('line 2 of ADMIN_TOKEN_FILE')
        self.write_tokens('%s\n' % OTHER)
        harness.wait_until(lambda: self.counters(s, [('user', u)], method='DELETE')[0] == 401,
                           message='the old token refused')
        # A file that holds no token is refused; the tokens loaded before stay.
        self.write_tokens('# nothing yet\n')
        s.wait_for_log('holds no token')
        self.assertEqual(self.counters(s, [('user', u)], method='DELETE', token=OTHER)[0], 200)
        self.assertNotIn(OTHER, s.log())

    def test_a_deleted_token_file_revokes_every_token(self):
        s = self.sluice({'LOG_LEVEL': 'info'})
        u = unique('d')
        s.wait_for_log('ADMIN_TOKEN_FILE %s: 1 token in force' % self.token_file)
        self.assertEqual(self.counters(s, [('user', u)], method='DELETE')[0], 200)
        # Fail closed: the file gone, no token of it is valid any more.
        os.remove(self.token_file)
        s.wait_for_log('%s was deleted: every ADMIN_TOKEN_FILE token is revoked' % self.token_file)
        status, _, body = self.counters(s, [('user', u)], method='DELETE')
        self.assertEqual(status, 401, body)
        self.assertIn('ADMIN_TOKEN_FILE was deleted', body['message'])
        self.assertEqual(self.counters(s, [('user', u)])[0], 200)  # reads need no token
        # The same file back: its tokens are valid again, and the reload is logged with their number.
        since = len(s.log())
        self.write_tokens('%s\n%s\n' % (TOKEN, OTHER))
        s.wait_for_log('ADMIN_TOKEN_FILE %s: 2 tokens in force' % self.token_file, since=since)
        harness.wait_until(lambda: self.counters(s, [('user', u)], method='DELETE')[0] == 200,
                           message='the token valid again')
        self.assertEqual(s.log().count('was deleted'), 1)

    def test_a_directory_as_the_token_file_says_so(self):
        env = harness.backend_env('memory', SERVERS)
        env['ADMIN_TOKEN_FILE'] = self.dir
        log = Sluice.failed_start(self, env)
        self.assertIn('ADMIN_TOKEN_FILE: %s: cannot read the file: Is a directory' % self.dir, log)
        self.assertNotIn('holds no token', log)

    def test_the_file_changing_while_changes_arrive(self):
        # Requests with either token while the file flips between them: each is judged against one whole file
        # (200 or 401), never a half-read one, and the server goes on.
        s = self.sluice()
        u = unique('m')
        statuses, stop = [], threading.Event()

        def hammer(token):
            while not stop.is_set():
                statuses.append(self.counters(s, [('user', u)], method='DELETE', token=token)[0])

        threads = [threading.Thread(target=hammer, args=(t,)) for t in (TOKEN, OTHER, TOKEN, OTHER)]
        for t in threads:
            t.start()
        try:
            for i in range(20):
                self.write_tokens('%s\n' % (OTHER if i % 2 == 0 else TOKEN))
                time.sleep(0.03)
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertEqual(set(statuses) - {200, 401}, set(), statuses)
        self.assertIn(200, statuses)
        self.assertIn(401, statuses)
        self.write_tokens('%s\n' % TOKEN)
        harness.wait_until(lambda: self.counters(s, [('user', u)], method='DELETE')[0] == 200,
                           message='the last file read')
        self.assertEqual(self.counters(s, [('user', u)], method='DELETE', token=OTHER)[0], 401)

    def test_bad_token_files_stop_the_start(self):
        for text, why in [(None, 'ADMIN_TOKEN_FILE: '), ('short\n', 'at least 16 characters'),
                          ('\n# none\n', 'holds no token'), ('has a space inside it\n', 'without spaces')]:
            path = os.path.join(self.dir, 'bad')
            if text is None:
                path = os.path.join(self.dir, 'missing')
            else:
                with open(path, 'w') as f:
                    f.write(text)
            env = harness.backend_env('memory', SERVERS)
            env['ADMIN_TOKEN_FILE'] = path
            log = Sluice.failed_start(self, env)
            self.assertIn('ADMIN_TOKEN_FILE', log)
            self.assertIn(why, log)

    def test_host_rebinding(self):
        s = self.sluice({'DEBUG_ALLOWED_HOSTS': 'sluice.internal, ops.example'})
        for host, ok in [('evil.example', False), ('evil.example:6070', False), ('127.0.0.1', True),
                         ('127.0.0.1:%d' % s.debug_port, True), ('[::1]:6070', True), ('localhost', True),
                         ('LOCALHOST:1', True), ('sluice.internal', True), ('OPS.example:80', True),
                         ('localhost.evil.example', False), ('127.0.0.1.nip.io', False)]:
            for path in ('/counters?domain=ops&descriptor=user=x', '/stats', '/rlconfig', '/'):
                status, _, body = harness.http_request(s.debug_port, path, headers={'Host': host})
                if ok:
                    self.assertNotEqual(status, 403, (host, path, body))
                else:
                    self.assertEqual(status, 403, (host, path))
                    self.assertIn('DEBUG_ALLOWED_HOSTS', body['message'])
        log = Sluice.failed_start(self, dict(harness.backend_env('memory', SERVERS),
                                             DEBUG_ALLOWED_HOSTS='host:6070'))
        self.assertIn('DEBUG_ALLOWED_HOSTS', log)


class Cli(CountersCase):
    def run_cli(self, s, *args):
        r = subprocess.run([harness.SLUICE_BIN, 'counters'] + list(args) +
                           (['--debug_addr', '127.0.0.1:%d' % s.debug_port] if s else []),
                           capture_output=True, text=True, timeout=20)
        return r.returncode, r.stdout, r.stderr

    def run_cli_command(self, s, command, *args):
        r = subprocess.run([harness.SLUICE_BIN, command] + list(args) + ['-debug_addr', '127.0.0.1:%d' % s.debug_port],
                           capture_output=True, text=True, timeout=20)
        return r.returncode, r.stdout, r.stderr

    def test_get_reset_set(self):
        s = self.sluice()
        u = unique('cli')
        self.hit(s, 'user', u, 2)
        code, out, err = self.run_cli(s, 'get', '--domain', 'ops', '--descriptor', 'user=' + u)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)['limits'][0]['used'], 2)
        code, out, err = self.run_cli(s, 'set', '--domain', 'ops', '--descriptor', 'user=' + u, '--used', '4',
                                      '--token_file', self.token_file)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)['limits'][0]['used'], 4)
        code, out, err = self.run_cli(s, 'reset', '-domain=ops', '-descriptor=user=' + u,
                                      '-token_file=' + self.token_file)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)['limits'][0]['used'], 0)
        # Errors: exit 2 with the server's message, or the flag's.
        code, out, err = self.run_cli(s, 'get', '--domain', 'ops', '--descriptor', 'nobody=x')
        self.assertEqual((code, out), (2, ''))
        self.assertIn('404', err)
        self.assertIn('no rule', err)
        wrong = os.path.join(self.dir, 'wrong')
        with open(wrong, 'w') as f:
            f.write('not-the-token-at-all-000\n')
        code, _, err = self.run_cli(s, 'reset', '--domain', 'ops', '--descriptor', 'user=' + u, '--token_file', wrong)
        self.assertEqual(code, 2)
        self.assertIn('401', err)
        for args, why in [(['reset', '--domain', 'ops', '--descriptor', 'user=x'], 'needs -token_file'),
                          (['set', '--domain', 'ops', '--descriptor', 'user=x', '--token_file', wrong], '-used'),
                          (['get', '--descriptor', 'user=x'], '-domain is required'),
                          (['explode'], "unknown action 'explode'"), ([], 'give an action')]:
            code, _, err = self.run_cli(None, *args)
            self.assertEqual(code, 2, args)
            self.assertIn(why, err)
        # sluice explain: sluice client's flags, and the debug listener's address.
        code, out, err = self.run_cli_command(s, 'explain', '-domain', 'ops', '-descriptors', 'user=' + u,
                                              '-descriptors', 'nobody=x')
        self.assertEqual(code, 0, err)
        explained = json.loads(out)['descriptors']
        self.assertEqual((explained[0]['rule'], explained[1]['rule']), ('ops.user', None))
        code, _, err = self.run_cli_command(s, 'explain', '-domain', 'ops')
        self.assertEqual(code, 2)
        self.assertIn('-descriptors are required', err)
        addr = '127.0.0.1:%d' % harness.dead_port()
        code, _, err = self.run_cli(None, 'get', '--domain', 'ops', '--descriptor', 'user=x', '--debug_addr', addr)
        self.assertEqual(code, 2)
        self.assertEqual(err, 'sluice counters: cannot connect to %s: connection refused\n' % addr)

    def test_entry_names_any_value(self):
        """-entry key=value (repeatable, the value verbatim): the values -descriptor cannot name, "a,b" and "k==";
        sent as entry= parameters."""
        s = self.sluice()
        for value in (unique('a,b'), unique('k') + '==', unique('sp ace+plus%2C')):
            with self.subTest(value=value):
                self.hit(s, 'user', value, 2)
                code, out, err = self.run_cli(s, 'get', '--domain', 'ops', '--entry', 'user=' + value)
                self.assertEqual(code, 0, err)
                body = json.loads(out)
                self.assertEqual((body['entries'], body['limits'][0]['used']), (['user=' + value], 2))
                code, out, err = self.run_cli(s, 'set', '-domain=ops', '-entry=user=' + value, '-used=1',
                                              '-token_file=' + self.token_file)
                self.assertEqual((code, json.loads(out)['limits'][0]['used'] if out else None), (0, 1), err)
        code, _, err = self.run_cli(s, 'get', '--domain', 'ops', '--descriptor', 'user=a,b')
        self.assertEqual(code, 2)
        self.assertIn("invalid descriptor list 'user=a,b'", err)
        for args, why in [(['--descriptor', 'user=x', '--entry', 'user=y'], 'cannot be combined'),
                          (['--entry', 'user=y', '--descriptor', 'user=x'], 'cannot be combined'),
                          (['--entry', 'user'], "invalid value 'user' for -entry"),
                          (['--entry', '=v'], "invalid value '=v' for -entry")]:
            with self.subTest(args=args):
                code, out, err = self.run_cli(s, 'get', '--domain', 'ops', *args)
                self.assertEqual((code, out), (2, ''), err)
                self.assertIn(why, err.splitlines()[0])
        # sluice explain takes -entry too: one more entry of the last descriptor, verbatim.
        value = unique('a,b')
        code, out, err = self.run_cli_command(s, 'explain', '-domain', 'ops', '-entry', 'user=' + value)
        self.assertEqual(code, 0, err)
        explained = json.loads(out)['descriptors']
        self.assertEqual((explained[0]['entries'], explained[0]['rule']), (['user=' + value], 'ops.user'))


if __name__ == '__main__':
    unittest.main()
