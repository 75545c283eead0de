"""The top descriptors and the live dashboard on the debug listener (issue 31; docs/guides/observe/dashboard.md):
GET /top (exact counts while few descriptors, Space-Saving's error bound under a flood, what is not counted, the
cut of long values, n), TOP_DESCRIPTORS_CAPACITY, GET /dashboard/data, and the page itself in headless Chromium
(tests/e2e/browser.py) against a loaded server: live figures, keyboard, escaping, no external resources.

Set SLUICE_DASHBOARD_SCREENSHOT=<path.png> to save a 1366x900 screenshot of the loaded page (docs/dashboard.png, in
docs/guides/observe/dashboard.md).
"""

import json
import os
import re
import struct
import threading
import time
import unittest
import urllib.request

import browser
import harness
from harness import Sluice

SHOP = """
domain: shop
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: user
    descriptors:
      - key: action
        value: upload
        rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: free
    rate_limit: {unlimited: true}
  - key: shadow
    rate_limit: {unit: hour, requests_per_unit: 1}
    shadow_mode: true
"""

TOP_KEYS = {'window_seconds', 'over_limit', 'hits'}
ENTRY_KEYS = {'domain', 'entries', 'rule', 'count'}
ELLIPSIS = '\u2026'


def top(port, query=''):
    status, headers, body = harness.http_get(port, '/top' + query)
    if status != 200:
        raise AssertionError('/top%s answered %d: %r' % (query, status, body))
    assert headers['content-type'] == 'application/json', headers
    return body


def listed(lst, domain=None, marker=None):
    """(entries, rule, count) of the items of one list, in order; only `domain`'s and those with an entry
    containing `marker` when given."""
    return [(e['entries'], e['rule'], e['count']) for e in lst
            if (domain is None or e['domain'] == domain) and (marker is None or any(marker in x for x in e['entries']))]


def count_of(lst, domain, entries):
    return next((e['count'] for e in lst if e['domain'] == domain and e['entries'] == entries), None)


def over_answers(resp):
    return sum(1 for s in resp.statuses if s.code == harness.rls_pb2.RateLimitResponse.OVER_LIMIT)


class Top(unittest.TestCase):
    """Exact counts: each test sends its own descriptors (values tagged with the test's name) to one server on
    two workers (the harness' IO_THREADS=2), over gRPC (one connection) and /json (a connection per request): the
    lists are merged over the workers."""

    @classmethod
    def setUpClass(cls):
        cls.s = Sluice(rules={'shop.yaml': SHOP})

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def grpc(self, descriptors, hits_addend=None, domain='shop'):
        return self.s.grpc(domain, descriptors, hits_addend)

    def json(self, descriptors, hits_addend=None, domain='shop'):
        return self.s.decide('json', domain, descriptors, hits_addend)

    def test_counts_and_order(self):
        harness.avoid_window_edge('HOUR', 5.0)
        over = 0
        for _ in range(12):
            over += over_answers(self.grpc([[('client', 'hot-order')]]))
        for _ in range(6):
            over += sum(1 for st in self.json([[('client', 'hot-order')]]).statuses if st.code == 'OVER_LIMIT')
        self.assertEqual(over, 13)  # 18 against 5 an hour in one hourly window (avoid_window_edge)
        # hits_addend: the descriptor's own (7), and the request's (3) for a descriptor without one
        self.grpc([{'entries': [('user', 'warm-order'), ('action', 'upload')], 'hits_addend': 7}])
        self.json([[('user', 'warm-order'), ('action', 'upload')]], hits_addend=3)
        self.grpc([[('client', 'cold-order')]])
        self.json([[('client', 'cold-order')]])

        t = top(self.s.debug_port, '?n=1000')
        self.assertEqual(listed(t['hits'], 'shop', '-order'), [
            (['client=hot-order'], 'client', 18),
            (['user=warm-order', 'action=upload'], 'user.action_upload', 10),
            (['client=cold-order'], 'client', 2)])
        self.assertEqual(listed(t['over_limit'], 'shop', '-order'), [(['client=hot-order'], 'client', over)])
        for name in ('hits', 'over_limit'):
            counts = [e['count'] for e in t[name]]
            self.assertEqual(counts, sorted(counts, reverse=True), name)

    def test_rule_names_nested_and_override(self):
        harness.avoid_window_edge('HOUR', 5.0)
        self.grpc([[('user', 'names'), ('action', 'upload')]])
        over = 0
        for _ in range(3):  # a limit sent in the request, on a key the rules also know
            over += over_answers(self.grpc([{'entries': [('client', 'names-ov'), ('x', 'y')], 'limit': (1, 'HOUR')}]))
        self.assertEqual(over, 2)
        t = top(self.s.debug_port, '?n=1000')
        self.assertEqual(listed(t['hits'], 'shop', 'names'), [
            (['client=names-ov', 'x=y'], '(override)', 3),
            (['user=names', 'action=upload'], 'user.action_upload', 1)])
        self.assertEqual(listed(t['over_limit'], 'shop', 'names'), [(['client=names-ov', 'x=y'], '(override)', 2)])

    def test_shape_n_and_window(self):
        for i in range(12):  # 12 distinct descriptors in both lists: 6 hits against 5 is over at once
            self.grpc([{'entries': [('client', 'shape-%02d' % i)], 'hits_addend': 6}])
        t0 = time.time()
        full = top(self.s.debug_port, '?n=1000')
        t1 = time.time()
        self.assertEqual(set(full), TOP_KEYS)
        self.assertIs(type(full['window_seconds']), int)
        self.assertIn(full['window_seconds'], {51 + int(t) % 10 for t in (t0, t1)})  # 50 to 60 s back
        for name in ('hits', 'over_limit'):
            self.assertGreaterEqual(len(full[name]), 12)
            for e in full[name]:
                self.assertEqual(set(e), ENTRY_KEYS, e)
                self.assertIs(type(e['domain']), str)
                self.assertIs(type(e['rule']), str)
                self.assertIs(type(e['count']), int)
                self.assertGreater(e['count'], 0)
                self.assertIs(type(e['entries']), list)
                self.assertTrue(all(type(x) is str and '=' in x for x in e['entries']), e)
        for i in range(12):
            self.assertEqual(count_of(full['hits'], 'shop', ['client=shape-%02d' % i]), 6)
            self.assertEqual(count_of(full['over_limit'], 'shop', ['client=shape-%02d' % i]), 1)
        # n: 10 by default; 1 to 1000, the first n of the full lists
        for query, n in (('', 10), ('?n=1', 1), ('?n=3', 3), ('?n=10', 10), ('?n=1000', 1000)):
            with self.subTest(query=query):
                t = top(self.s.debug_port, query)
                for name in ('hits', 'over_limit'):
                    self.assertEqual(len(t[name]), min(n, len(full[name])))
                    self.assertEqual([e['count'] for e in t[name]], [e['count'] for e in full[name][:n]])
        for bad in ('0', '1001', 'abc', '', '-1', '1.5', '+1', '1e2', '99999999999999999999999'):
            with self.subTest(n=bad):
                status, headers, body = harness.http_get(self.s.debug_port, '/top?n=' + bad)
                self.assertEqual(status, 400)
                self.assertEqual(headers['content-type'], 'application/json')
                self.assertEqual(body, {'code': 400, 'message': "n: '%s' is not a whole number from 1 to 1000" % bad})

    def test_what_is_not_counted(self):
        self.grpc([[('free', 'nc-free')], [('client', 'nc-mixed')]])            # unlimited, next to a counted one
        self.grpc([[('client', 'nc-unknown')]], domain='nc-nowhere')            # unknown domain
        self.json([[('client', 'nc-unknown')]], domain='nc-nowhere')
        self.grpc([[('nolimit', 'nc-nolimit')]])                                 # no rule matches
        self.grpc([{'entries': [('client', 'nc-neg')], 'is_negative_hits': True, 'hits_addend': 4}])
        self.grpc([{'entries': [('client', 'nc-peek')], 'hits_addend': 0}])      # a peek: no hits
        for _ in range(3):                                                       # shadow mode: over, answered OK
            resp = self.grpc([[('shadow', 'nc-shadow')]])
            self.assertEqual(resp.overall_code, 1, resp)
        t = top(self.s.debug_port, '?n=1000')
        self.assertEqual(listed(t['hits'], marker='nc-'), [(['shadow=nc-shadow'], 'shadow', 3),
                                                           (['client=nc-mixed'], 'client', 1)])
        self.assertEqual(listed(t['over_limit'], marker='nc-'), [])
        self.assertNotIn('nc-nowhere', [e['domain'] for e in t['hits'] + t['over_limit']])

    def test_values_are_shown_as_sent(self):
        odd = ['as-sent \x1f=x', 'as-sent "quoted" \\ \n', 'as-sent \u00e9\u4e2d\U0001f600', 'as-sent=']
        for i, value in enumerate(odd):
            self.grpc([{'entries': [('client', value), ('k=\x1f', 'v')], 'limit': (100, 'HOUR'), 'hits_addend': i + 1}])
        # the same entries under a rule and as an override are two descriptors
        self.grpc([{'entries': [('client', 'as-sent-same')], 'hits_addend': 6}])
        self.json([{'entries': [('client', 'as-sent-same')], 'limit': (100, 'HOUR'), 'hits_addend': 5}])
        t = top(self.s.debug_port, '?n=1000')
        self.assertEqual(listed(t['hits'], 'shop', 'as-sent'),
                         [(['client=as-sent-same'], 'client', 6), (['client=as-sent-same'], '(override)', 5)]
                         + [(['client=' + v, 'k=\x1f=v'], '(override)', i + 1)
                            for i, v in reversed(list(enumerate(odd)))])

    def test_long_values_are_cut(self):
        long_a = 'cut-' + 'a' * 60 + 'first'      # 69 bytes: the first 64 shown
        long_b = 'cut-' + 'a' * 60 + 'second'     # the same first 64 bytes: the same descriptor
        euro = 'cutab' + '\u20ac' * 30            # 5 + 90 bytes: the 64th byte is inside a euro sign
        exact = 'cut-' + 'e' * 60                 # 64 bytes: shown whole
        self.grpc([[('client', long_a)]])
        self.json([[('client', long_b)]])
        self.grpc([{'entries': [('user', 'cut-u'), ('action', 'upload')], 'hits_addend': 4}, [('client', euro)]])
        self.grpc([{'entries': [('client', exact)], 'hits_addend': 3}])
        t = top(self.s.debug_port, '?n=1000')
        shown_euro = 'cutab' + '\u20ac' * 19 + ELLIPSIS   # 5 + 57 bytes: the 20th euro would end at byte 65
        self.assertEqual(listed(t['hits'], 'shop', 'cut'), [
            (['user=cut-u', 'action=upload'], 'user.action_upload', 4),
            (['client=' + exact], 'client', 3),
            (['client=' + long_a[:64] + ELLIPSIS], 'client', 2),
            (['client=' + shown_euro], 'client', 1)])


class TopFlood(unittest.TestCase):
    def test_heavy_descriptor_under_a_flood_of_distinct_ones(self):
        """TOP_DESCRIPTORS_CAPACITY=8, 2000 distinct descriptors and one heavy one interleaved: the heavy one is
        first in both lists, its counts within N / capacity of the truth (N: the list's total)."""
        capacity = 8
        rules = 'domain: flood\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 1}\n'
        with Sluice(rules={'flood.yaml': rules}, env={'TOP_DESCRIPTORS_CAPACITY': str(capacity)}) as s:
            heavy = {'entries': [('client', 'heavy')], 'hits_addend': 3}
            true_hits = {'heavy': 0}
            true_over = {'heavy': 0}
            n = 0
            for batch in range(40):
                descriptors = []
                for i in range(50):  # 2 hits against 1: each flood descriptor is over once
                    descriptors.append({'entries': [('client', 'f%04d' % n)], 'hits_addend': 2})
                    n += 1
                    if i % 5 == 4:
                        descriptors.append(heavy)
                transport = 'grpc' if batch % 2 else 'json'
                d = s.decide(transport, 'flood', descriptors)
                for desc, st in zip(descriptors, d.statuses):
                    name = desc['entries'][0][1]
                    true_hits[name] = true_hits.get(name, 0) + desc['hits_addend']
                    true_over[name] = true_over.get(name, 0) + (st.code == 'OVER_LIMIT')
            self.assertEqual(n, 2000)
            self.assertEqual((true_hits['heavy'], true_over['heavy']), (1200, 400))
            t = top(s.debug_port, '?n=1000')
            for name, truth in (('hits', true_hits), ('over_limit', true_over)):
                with self.subTest(list=name):
                    bound = sum(truth.values()) / capacity
                    self.assertGreater(truth['heavy'], bound)  # so it must be listed
                    lst = t[name]
                    self.assertEqual((lst[0]['entries'], lst[0]['rule']), (['client=heavy'], 'client'), lst[:3])
                    self.assertLessEqual(abs(lst[0]['count'] - truth['heavy']), bound)
                    for e in lst:
                        value = e['entries'][0].split('=', 1)[1]
                        self.assertLessEqual(abs(e['count'] - truth[value]), bound, e)
                    # bounded memory: at most capacity counters per worker (2) and slot (the window's 6)
                    self.assertLessEqual(len(lst), 2 * 6 * capacity)


class StopWhileReading(unittest.TestCase):
    def test_sigterm_during_reads(self):
        """SIGTERM while /top and /dashboard/data reads hop from worker to worker: the process still stops by
        itself (a read that meets the stop answers 503 instead of waiting on a worker that has ended)."""
        for attempt in range(3):
            with self.subTest(attempt=attempt), Sluice(rules={'shop.yaml': SHOP}) as s:
                s.grpc('shop', [[('client', 'stop')]])
                stop = threading.Event()
                answers = []

                def read(path):
                    while not stop.is_set():
                        try:
                            answers.append(harness.http_get(s.debug_port, path, timeout=2)[0])
                        except OSError:
                            pass  # refused or reset once the listener closes

                readers = [threading.Thread(target=read, args=(p,), daemon=True)
                           for p in ('/top', '/dashboard/data', '/top', '/dashboard/data')]
                for r in readers:
                    r.start()
                harness.wait_until(lambda: len(answers) >= 20, timeout=10, message='reads answered')
                s.terminate()
                code = s.wait_exit(timeout=15)
                stop.set()
                for r in readers:
                    r.join(5)
                self.assertEqual(code, 0, s.log_tail())
                self.assertLessEqual(set(answers), {200, 503})


class TopSettings(unittest.TestCase):
    def test_capacity_zero_turns_top_off(self):
        with Sluice(rules={'shop.yaml': SHOP}, env={'TOP_DESCRIPTORS_CAPACITY': '0'}) as s:
            self.assertEqual(s.grpc('shop', [[('client', 'x')]]).overall_code, 1)
            status, headers, body = harness.http_get(s.debug_port, '/top')
            self.assertEqual((status, headers['content-type']), (404, 'application/json'))
            self.assertEqual(body, {'code': 404, 'message': 'top descriptors are off (TOP_DESCRIPTORS_CAPACITY=0)'})
            status, _, data = harness.http_get(s.debug_port, '/dashboard/data')
            self.assertEqual(status, 200)
            self.assertEqual((data['top']['over_limit'], data['top']['hits']), ([], []))

    def test_hashed_values(self):
        """TOP_DESCRIPTORS_VALUES=hash: each value is shown as '#' and 12 hex digits, one per value; the values
        themselves are in neither /top nor /dashboard/data."""
        with Sluice(rules={'shop.yaml': SHOP}, env={'TOP_DESCRIPTORS_VALUES': 'hash'}) as s:
            for value, times in (('alice@example.com', 3), ('bob@example.com', 1)):
                for _ in range(times):
                    s.grpc('shop', [[('client', value)]])
            status, _, body = harness.http_get(s.debug_port, '/top')
            self.assertEqual(status, 200)
            self.assertNotIn('example.com', json.dumps(body))
            t = top(s.debug_port)
            self.assertEqual([(e['rule'], e['count']) for e in t['hits']], [('client', 3), ('client', 1)])
            shown = [e['entries'] for e in t['hits']]
            for entries in shown:
                self.assertRegex(entries[0], r'^client=#[0-9a-f]{12}$')
            self.assertNotEqual(shown[0], shown[1])
            s.grpc('shop', [[('client', 'alice@example.com')]])
            self.assertEqual(top(s.debug_port)['hits'][0], {'domain': 'shop', 'entries': shown[0], 'rule': 'client',
                                                            'count': 4})
            status, _, body = harness.http_get(s.debug_port, '/dashboard/data')
            self.assertEqual(status, 200)
            self.assertNotIn('example.com', json.dumps(body))
        log = Sluice.failed_start(self, {'TOP_DESCRIPTORS_VALUES': 'mask'})
        self.assertIn("invalid value 'mask' for TOP_DESCRIPTORS_VALUES: expected one of show, hash", log)

    def test_bad_capacity_stops_start_up(self):
        with open(os.path.join(harness.REPO, 'docs', 'reference', 'metrics.md')) as f:  # its table: "... up to N"
            most = int(re.search(r'^\| `TOP_DESCRIPTORS_CAPACITY` \|.* up to (\d+) \|$', f.read(), re.M).group(1))
        for value in ('abc', '70000', str(most + 1), '-1', '1.5'):
            with self.subTest(value=value):
                log = Sluice.failed_start(self, {'TOP_DESCRIPTORS_CAPACITY': value})
                self.assertIn("invalid value '%s' for TOP_DESCRIPTORS_CAPACITY: expected a whole number from 0 to %d"
                              % (value, most), log)


DASH = """
domain: dash
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: user
    descriptors:
      - key: action
        value: upload
        rate_limit: {unit: minute, requests_per_unit: 6000}
"""

XSS = '<script>alert(1)</script>'
XSS_IMG = '<img src=/x onerror=alert(2)>'

DATA_KEYS = {'now', 'interval_seconds', 'times', 'totals', 'rules', 'rules_untracked', 'top', 'backend', 'reloads'}
TOTALS = {'decisions', 'hits', 'over_limit', 'near_limit', 'backend_errors', 'fail_open', 'latency_ms'}
RULE_KEYS = {'domain', 'rule', 'key', 'limit', 'hits', 'over_limit', 'near_limit', 'utilisation'}
HOT_LIMIT = {'requests_per_unit': 3, 'unit': 'HOUR', 'window_seconds': 3600, 'algorithm': 'fixed_window',
             'shadow_mode': False, 'unlimited': False}


class DashboardFigures(unittest.TestCase):
    """What the dashboard counts (issue 40): /json decisions as well as gRPC's, a removed rule's row and limit
    gauges gone at the reload that removes it, numbers written plainly."""

    def test_json_only_traffic_and_a_removed_rule(self):
        rules = {'kept.yaml': 'domain: fig\ndescriptors:\n  - key: kept\n    rate_limit: {unit: hour, '
                              'requests_per_unit: 100}\n',
                 'gone.yaml': 'domain: fig2\ndescriptors:\n  - key: gone\n    rate_limit: {unit: hour, '
                              'requests_per_unit: 100}\n'}
        with Sluice(rules=rules) as s:
            def data():
                status, _, body = harness.http_get(s.debug_port, '/dashboard/data')
                assert status == 200, status
                return body

            data()  # the history starts here

            def busy():
                for _ in range(5):
                    s.decide('json', 'fig', [[('kept', 'x')]])
                    s.decide('json', 'fig2', [[('gone', 'x')]])
                d = data()
                return sum(d['totals']['decisions']) > 0 and any(v > 0 for v in d['totals']['latency_ms'])

            harness.wait_until(busy, timeout=10, message='/json decisions and their latency counted',
                               describe=s.log_tail)
            keys = [r['key'] for r in data()['rules']]
            self.assertIn('fig2.gone', keys)
            _, _, stats = harness.http_get(s.debug_port, '/stats')
            self.assertIn('ratelimit.service.rate_limit.fig2.gone.limit: 100', stats)
            self.assertIn('ratelimit.http.json.total_requests:', stats)
            raw = urllib.request.urlopen('http://127.0.0.1:%d/dashboard/data' % s.debug_port, timeout=5).read()
            self.assertIsNone(re.search(rb'\d[eE][-+]?\d', raw), raw[:300])

            s.remove_rule('gone.yaml')
            harness.wait_until(lambda: 'fig2.gone' not in [r['key'] for r in data()['rules']], timeout=5,
                               message="the removed rule's row gone", describe=s.log_tail)
            _, _, stats = harness.http_get(s.debug_port, '/stats')
            self.assertNotIn('ratelimit.service.rate_limit.fig2.gone.limit', stats)
            self.assertNotIn('ratelimit.service.rate_limit.fig2.gone.window_seconds', stats)
            self.assertRegex(stats, r'ratelimit\.service\.rate_limit\.fig2\.gone\.total_hits: [1-9]')  # counters stay
            self.assertIn('ratelimit.service.rate_limit.fig.kept.limit: 100', stats)


class Dashboard(unittest.TestCase):
    """One loaded server: sampling started, traffic kept flowing (a hot descriptor over its limit, an upload rule
    with hits_addend) on a thread, values with HTML in them, and a refused reload."""

    @classmethod
    def setUpClass(cls):
        cls.s = Sluice(rules={'dash.yaml': DASH})
        cls.stop = threading.Event()
        cls.traffic = None
        try:
            status, _, _ = harness.http_get(cls.s.debug_port, '/dashboard/data')  # the history starts here
            assert status == 200, status
            cls.s.grpc('dash', [[('client', XSS)], [('client', XSS_IMG)]])
            cls.traffic = threading.Thread(target=cls.send_traffic, daemon=True)
            cls.traffic.start()
            cls.s.write_rule('bad.yaml', 'domain: x\ndescriptors:\n  - key: [unclosed\n')
            harness.wait_until(lambda: cls.data()['reloads'][0]['ok'] is False, timeout=5.0,
                               message='the refused reload in /dashboard/data', describe=cls.s.log_tail)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.stop.set()
        if cls.traffic is not None:
            cls.traffic.join(10)
        cls.s.close()

    @classmethod
    def send_traffic(cls):
        """About 20 decisions a second, over gRPC and /json, until the tests end."""
        i = 0
        while not cls.stop.wait(0.05):
            try:
                if i % 4 == 3:
                    cls.s.decide('json', 'dash', [[('client', 'hot')]])
                else:
                    cls.s.grpc('dash', [[('client', 'hot')], {'entries': [('user', 'u1'), ('action', 'upload')],
                                                               'hits_addend': 2}])
            except Exception:
                if cls.stop.is_set():
                    return
            i += 1

    @classmethod
    def data(cls):
        status, headers, body = harness.http_get(cls.s.debug_port, '/dashboard/data')
        assert status == 200 and headers['content-type'] == 'application/json', (status, headers, body)
        return body

    def test_data(self):
        def loaded():
            d = self.data()
            hot = [r for r in d['rules'] if r['key'] == 'dash.client']
            return d if len(d['times']) >= 3 and hot and sum(hot[0]['over_limit'][-10:]) > 0 else None

        d = harness.wait_until(loaded, timeout=8.0, interval=0.2, message='3 samples, the hot rule over its limit')
        self.assertEqual(set(d), DATA_KEYS)
        self.assertEqual(d['interval_seconds'], 1)
        times = d['times']
        self.assertLessEqual(len(times), 120)
        self.assertTrue(all(0.5 < b - a < 3 for a, b in zip(times, times[1:])), times)  # once a second
        self.assertTrue(times[-1] <= d['now'] < times[-1] + 3, (times[-1], d['now']))
        self.assertLess(abs(d['now'] - time.time()), 5)
        self.assertEqual(set(d['totals']), TOTALS)
        for name, series in d['totals'].items():
            self.assertEqual(len(series), len(times), name)
            self.assertTrue(all(isinstance(v, (int, float)) and v >= 0 for v in series), (name, series))
        for name in ('decisions', 'hits', 'over_limit'):
            self.assertGreater(sum(d['totals'][name][-3:]), 0, name)
        self.assertEqual(sum(d['totals']['backend_errors']) + sum(d['totals']['fail_open']), 0)

        # rules: the most throttled first, with their limits and per-sample rates
        rules = d['rules']
        for r in rules:
            self.assertEqual(set(r), RULE_KEYS, r)
            for name in ('hits', 'over_limit', 'near_limit'):
                self.assertEqual(len(r[name]), len(times), (r['key'], name))
        self.assertEqual(d['rules_untracked'], 0)
        hot = rules[0]
        self.assertEqual((hot['domain'], hot['rule'], hot['key'], hot['limit']), ('dash', 'client', 'dash.client',
                                                                                  HOT_LIMIT))
        self.assertGreater(sum(hot['over_limit'][-10:]), 0)
        self.assertGreater(sum(hot['hits'][-10:]), 0)
        self.assertGreater(hot['utilisation'], 1)  # far over 3 an hour
        upload = next(r for r in rules if r['key'] == 'dash.user.action_upload')
        self.assertEqual((upload['domain'], upload['rule'], upload['limit']['requests_per_unit'],
                          upload['limit']['unit'], upload['limit']['window_seconds']),
                         ('dash', 'user.action_upload', 6000, 'MINUTE', 60))
        self.assertEqual(sum(upload['over_limit']), 0)
        self.assertGreater(sum(upload['hits'][-10:]), 0)

        # top: as /top?n=10
        top_ = d['top']
        self.assertEqual(set(top_), TOP_KEYS)
        self.assertTrue(51 <= top_['window_seconds'] <= 60, top_['window_seconds'])
        for name in ('hits', 'over_limit'):
            self.assertLessEqual(len(top_[name]), 10)
            for e in top_[name]:
                self.assertEqual(set(e), ENTRY_KEYS)
        self.assertEqual((top_['over_limit'][0]['entries'], top_['over_limit'][0]['rule']), (['client=hot'], 'client'))
        self.assertIn(['client=' + XSS], [e['entries'] for e in top_['hits']])

        # backend
        b = d['backend']
        self.assertEqual((b['type'], b['healthy']), ('memory', True))
        self.assertTrue(b['components'])
        for c in b['components']:
            self.assertEqual(set(c), {'name', 'healthy'})
            self.assertIs(c['healthy'], True, c)
        # Named for what they say: "running" (false once a stop began), not the signal's name (issue 40).
        self.assertIn('running', [c['name'] for c in b['components']])
        self.assertNotIn('sigterm', [c['name'] for c in b['components']])

        # reloads, newest first: the refused one, then the initial load
        reloads = d['reloads']
        self.assertLessEqual(len(reloads), 10)
        for r in reloads:
            self.assertEqual(set(r), {'time', 'ok', 'source', 'domains', 'error'})
            self.assertEqual(r['source'], 'files')
        self.assertEqual([r['time'] for r in reloads], sorted((r['time'] for r in reloads), reverse=True))
        refused, first = reloads[0], reloads[-1]
        self.assertIs(refused['ok'], False)
        self.assertTrue(refused['error'].startswith('bad.yaml: error loading config file: yaml: line 4: '),
                        refused['error'])
        self.assertIn('Error loading new configuration: ' + refused['error'], self.s.log())
        self.assertTrue(first['time'] <= refused['time'] <= d['now'])
        self.assertEqual((first['ok'], first['domains'], first['error']), (True, 1, ''))

    def test_counters_lookup_in_chromium(self):
        # Read-only: the page holds no token and sends none, so it can only GET.
        _, _, html = harness.http_get(self.s.debug_port, '/dashboard')
        self.assertNotIn('Authorization', html)
        self.assertNotIn("method: 'DELETE'", html)
        self.assertNotIn("method: 'PUT'", html)
        with browser.Browser() as b:
            page = b.open('http://127.0.0.1:%d/dashboard' % self.s.debug_port)
            lookup = """(() => {
                document.getElementById('lookup-domain').value = %s;
                document.getElementById('lookup-descriptor').value = %s;
                document.getElementById('lookup').requestSubmit();
            })()"""
            page.evaluate(lookup % (json.dumps('dash'), json.dumps('user=u1,action=upload')))
            page.wait_for("!document.getElementById('lookup-table').hidden", timeout=10)
            row = page.evaluate("[...document.querySelectorAll('#lookup-table tbody td')].map(t => t.textContent)")
            self.assertEqual(row[0:3], ['dash.user.action_upload', 'fixed_window', '6000 / MINUTE'], row)
            self.assertGreater(int(row[3]), 0)  # the traffic's uploads, counted
            self.assertEqual(page.evaluate("document.getElementById('lookup-status').textContent"), '1 limit(s) apply.')
            # A value with markup stays text; a descriptor no rule matches says so.
            page.evaluate(lookup % (json.dumps('dash'), json.dumps('client=' + XSS)))
            page.wait_for("document.querySelector('#lookup-table tbody td') &&"
                          " document.querySelector('#lookup-table tbody td:last-child').textContent.includes('script')",
                          timeout=10)
            self.assertEqual(page.evaluate("document.querySelectorAll('#lookup-table script').length"), 0)
            page.evaluate(lookup % (json.dumps('dash'), json.dumps('nobody=x')))
            page.wait_for("document.getElementById('lookup-status').textContent.startsWith('no rule')", timeout=10)
            self.assertTrue(page.evaluate("document.getElementById('lookup-table').hidden"))
            self.assertEqual(page.dialogs, [])

    def test_page_in_chromium(self):
        origin = 'http://127.0.0.1:%d' % self.s.debug_port
        status, headers, html = harness.http_get(self.s.debug_port, '/dashboard')
        self.assertEqual((status, headers['content-type']), (200, 'text/html; charset=utf-8'))
        # Self-contained: nothing to load from elsewhere (the SVG namespace is a name, not something fetched).
        self.assertNotIn('<link', html)
        self.assertNotIn('src=', html)
        self.assertEqual(set(re.findall(r'https?://[^\s\'"<>)]+', html)), {'http://www.w3.org/2000/svg'})

        with browser.Browser() as b:
            page = b.open(origin + '/dashboard')
            page.wait_for('Number(document.body.dataset.updates) >= 2', timeout=10)
            # The figures are live.
            page.wait_for("""(() => {
                const over = document.querySelector('#rules tr[data-key="dash.client"] td.over');
                const first = document.querySelector('#top-over tbody tr:first-child .entries');
                return over && Number(over.dataset.value) > 0 && first && first.textContent === 'client=hot'
                    && document.getElementById('backend-health').textContent === 'healthy'
                    && document.querySelector('#reloads .reload.error') !== null;
            })()""", timeout=10)
            for fig in ('total-decisions', 'total-hits', 'total-over'):
                page.wait_for("(t => /^[0-9.]+[kM]?$/.test(t) && parseFloat(t) > 0)"
                              "(document.getElementById('%s').textContent)" % fig, timeout=6)
            self.assertEqual(page.evaluate("document.getElementById('status').dataset.state"), 'ok')
            self.assertEqual(page.evaluate("document.querySelector('#rules tbody tr').dataset.key"), 'dash.client')
            # Far over its limit: a readable figure, never thousands of percent.
            util = page.evaluate("""document.querySelector('#rules tr[data-key="dash.client"] td.util .v')"""
                                 """.textContent""")
            self.assertRegex(util, r'^([0-9]{1,3}%|[0-9]{2,3}×|> 100×)$')
            formatted = page.evaluate("[0.005, 0.5, 2.13, 9.99, 10, 42.4, 100, 2130].map(fmtPct)")
            self.assertEqual(formatted, ['<1%', '50%', '213%', '999%', '10×', '42×', '100×', '> 100×'])
            self.assertIn('bad.yaml: error loading config file',
                          page.evaluate("document.querySelector('#reloads .reload.error .err').textContent"))
            self.assertEqual(page.evaluate("document.getElementById('backend-type').textContent"), 'memory')
            self.assertTrue(page.evaluate("document.getElementById('regions').hidden"))  # no REDIS_REGION

            # Client values are text, never markup.
            entries = page.evaluate("[...document.querySelectorAll('#top-hits td.entries')].map(e => e.textContent)")
            self.assertIn('client=' + XSS, entries)
            self.assertIn('client=' + XSS_IMG, entries)
            self.assertEqual(page.evaluate("document.querySelectorAll('td script, td img').length"), 0)
            self.assertEqual(page.evaluate("document.scripts.length"), 1)
            self.assertEqual(page.dialogs, [])

            shot = os.environ.get('SLUICE_DASHBOARD_SCREENSHOT')
            if shot:
                os.makedirs(os.path.dirname(os.path.abspath(shot)), exist_ok=True)
                page.screenshot(shot)
                with open(shot, 'rb') as f:
                    self.assertEqual(struct.unpack('>II', f.read(24)[16:24]), (1366, 900))

            # Tab from the start: the skip link, then the controls.
            focused = []
            for _ in range(6):
                page.press('Tab')
                focused.append(page.evaluate("(e => e.id || e.className || e.tagName)(document.activeElement)"))
            self.assertEqual(focused[0], 'skip', focused)
            self.assertEqual([f for f in focused if f in ('filter', 'domain', 'pause')], ['filter', 'domain', 'pause'],
                             focused)

            # "/" focuses the filter (and types nothing), a rule name filters the rules, Escape clears it.
            page.evaluate('document.activeElement.blur()')
            rows = "[...document.querySelectorAll('#rules tbody tr')].map(r => r.dataset.key)"
            all_rows = page.evaluate(rows)
            self.assertIn('dash.user.action_upload', all_rows)
            self.assertGreater(len(all_rows), 1)
            page.press('/')
            self.assertEqual(page.evaluate("[document.activeElement.id, document.activeElement.value]"), ['filter', ''])
            page.type_text('action_up')
            self.assertEqual(page.evaluate("document.getElementById('filter').value"), 'action_up')
            self.assertEqual(page.evaluate(rows), ['dash.user.action_upload'])
            self.assertEqual(page.evaluate("document.getElementById('rules-count').textContent"),
                             '1 of %d' % len(all_rows))
            page.press('Escape')
            self.assertEqual(page.evaluate("[document.getElementById('filter').value, document.activeElement.id]"),
                             ['', ''])
            self.assertEqual(sorted(page.evaluate(rows)), sorted(all_rows))

            # "p" pauses and resumes.
            pressed = "document.getElementById('pause').getAttribute('aria-pressed')"
            page.press('p')
            self.assertEqual(page.evaluate(pressed), 'true')
            self.assertEqual(page.evaluate("document.getElementById('status').dataset.state"), 'paused')
            page.press('p')
            self.assertEqual(page.evaluate(pressed), 'false')
            updates = page.evaluate('Number(document.body.dataset.updates)')
            page.wait_for('Number(document.body.dataset.updates) > %d' % updates, timeout=6)

            # Everything the page loaded came from the debug listener.
            self.assertTrue(page.requests)
            self.assertGreaterEqual(page.requests.count(origin + '/dashboard/data'), 2, page.requests)
            self.assertEqual([u for u in page.requests if not u.startswith(origin + '/')], [])


if __name__ == '__main__':
    unittest.main()
