"""The debug server on DEBUG_HOST:DEBUG_PORT (reference §7.4, §2.6; issue 4): the path listing, /rlconfig,
/stats, and CPU and heap profiles that Debian's google-pprof reads."""

import os
import re
import socket
import subprocess
import threading
import time
import unittest
import urllib.error
import urllib.request

import harness
from harness import Sluice

RULES = """
domain: dbg
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: user
    descriptors:
      - key: action
        value: upload
        rate_limit: {unit: hour, requests_per_unit: 20}
        shadow_mode: true
  - key: free
    rate_limit: {unlimited: true}
"""

LISTING = ("/counters: a descriptor's counters (JSON; GET ?domain=D&descriptor=k=v,k2=v2 or &entry=k=v&entry=k2=v2; "
           "DELETE resets and PUT &used=N sets, with a bearer token of ADMIN_TOKEN_FILE)\n"
           '/dashboard: the live dashboard (HTML)\n'
           '/dashboard/data: what the dashboard shows (JSON)\n'
           '/debug/pprof/: root of various pprof endpoints. hit for help.\n'
           '/debug/pprof/heap: heap profiling endpoint\n'
           '/debug/pprof/profile: CPU profiling endpoint\n'
           "/explain: why a request is limited: POST a /json request; each descriptor's rule, the walk, the nearest "
           "rules that did not match, the counters (JSON; nothing is counted)\n"
           '/rlconfig: print out the currently loaded configuration for debugging\n'
           '/stats: print out stats\n'
           '/top: the descriptors with the most over-limit answers and hits, last minute (JSON; ?n=10)\n')


def fetch(port, path, timeout=30.0):
    """-> (status, content type, body bytes)."""
    try:
        with urllib.request.urlopen('http://127.0.0.1:%d%s' % (port, path), timeout=timeout) as r:
            return r.status, r.headers.get('content-type', ''), r.read()
    except urllib.error.HTTPError as e:
        body = e.read()
        e.close()
        return e.code, e.headers.get('content-type', ''), body


def stats_of(port):
    _, _, body = fetch(port, '/stats')
    values = {}
    for line in body.decode().splitlines():
        name, _, value = line.partition(': ')
        values[name] = value
    return values


class DebugServer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Sluice(rules={'dbg.yaml': RULES})

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def test_root_and_unknown_paths_list_the_pages(self):
        for path in ('/', '/nope', '/debug/vars'):
            with self.subTest(path=path):
                status, ctype, body = fetch(self.s.debug_port, path)
                self.assertEqual((status, body.decode()), (200, LISTING))
                self.assertTrue(ctype.startswith('text/plain'), ctype)
        self.assertIn("Listening for debug on '127.0.0.1:%d'" % self.s.debug_port, self.s.log())

    def test_rlconfig_in_upstream_format(self):
        status, _, body = fetch(self.s.debug_port, '/rlconfig')
        self.assertEqual(status, 200)
        self.assertEqual(body.decode().splitlines(), [
            'dbg.free: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false',
            'dbg.k: unit=MINUTE requests_per_unit=2, shadow_mode: false, quota_mode: false',
            'dbg.user.action_upload: unit=HOUR requests_per_unit=20, shadow_mode: true, quota_mode: false',
        ])

    def test_stats_show_current_values(self):
        harness.avoid_window_edge('MINUTE', 3)
        before = stats_of(self.s.debug_port)
        for transport in ('grpc', 'json', 'grpc'):
            self.s.decide(transport, 'dbg', [[('k', 'stats')]])
        after = stats_of(self.s.debug_port)

        def delta(name):
            return int(after[name]) - int(before.get(name, '0'))

        self.assertEqual(delta('ratelimit.service.rate_limit.dbg.k.total_hits'), 3)
        self.assertEqual(delta('ratelimit.service.rate_limit.dbg.k.over_limit'), 1)
        self.assertEqual(delta('ratelimit.service.rate_limit.dbg.k.within_limit'), 2)
        self.assertEqual(after['ratelimit.service.config_load_success'], '1')
        # upstream's gRPC interceptor stats: the two gRPC calls (not /json)
        self.assertEqual(delta('ratelimit_server.ShouldRateLimit.total_requests'), 2)
        count = after['ratelimit_server.ShouldRateLimit.response_time'].split()[0]
        self.assertGreaterEqual(int(count.split('=')[1]), 2, after)

    def test_cpu_profile_is_read_by_google_pprof(self):
        stop = threading.Event()

        def load():
            while not stop.is_set():
                self.s.decide('json', 'dbg', [[('free', 'x')]])

        worker = threading.Thread(target=load)
        worker.start()
        try:
            status, ctype, body = fetch(self.s.debug_port, '/debug/pprof/profile?seconds=2')
        finally:
            stop.set()
            worker.join()
        self.assertEqual((status, ctype), (200, 'application/octet-stream'), body[:200])
        text = self.pprof(body)
        self.assertRegex(text, r'Total: \d+ samples')

    def test_heap_profile_is_read_by_google_pprof(self):
        status, _, body = fetch(self.s.debug_port, '/debug/pprof/heap?seconds=1')
        if status == 409 and b'need tcmalloc' in body:
            self.skipTest('a sanitizer build (-Dtcmalloc=false) has no heap profiler')
        self.assertEqual(status, 200, body[:200])
        self.assertTrue(body.startswith(b'heap profile:'), body[:100])
        self.assertRegex(self.pprof(body), r'Total: [\d.]+ [KM]?B')

    def test_one_cpu_profile_at_a_time(self):
        # Two at once, whichever the server takes first: one profile, and the other refused (no sleep standing
        # for "until the first has started").
        results = []
        threads = [threading.Thread(target=lambda: results.append(fetch(self.s.debug_port,
                                                                        '/debug/pprof/profile?seconds=2')))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(r[0] for r in results), [200, 409], [r[2][:100] for r in results])
        self.assertIn(b'already being taken', [r[2] for r in results if r[0] == 409][0])

    def test_bad_seconds(self):
        for value in ('x', '0', '301', '-1', '2s'):
            with self.subTest(seconds=value):
                status, ctype, body = fetch(self.s.debug_port, '/debug/pprof/profile?seconds=' + value)
                self.assertEqual(status, 400, body)
                self.assertIn(b"invalid seconds '" + value.encode() + b"'", body)
                self.assertIn('json', ctype)

    def pprof(self, profile):
        """Reads the profile with the command /debug/pprof/ gives, so that its help is known to work."""
        path = os.path.join(self.s.tmp, 'profile.%d' % time.monotonic_ns())
        with open(path, 'wb') as f:
            f.write(profile)
        _, _, help_text = fetch(self.s.debug_port, '/debug/pprof/')
        command = re.search(r'(google-pprof(?: -\S+)*) /path/to/sluice profile$', help_text.decode(), re.M)
        self.assertIsNotNone(command, help_text)
        r = subprocess.run(command.group(1).split() + [harness.SLUICE_BIN, path], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout


DETAILED = """
domain: many
descriptors:
  - key: user
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 100}
"""


class BoundedStats(unittest.TestCase):
    def test_request_built_names_stop_at_the_bound(self):
        # each detailed_metric value makes 6 series; a bound of 12 holds two values, the rest overflow
        with Sluice(rules={'many.yaml': DETAILED}, env={'STATS_MAX_DYNAMIC_SERIES': '12'}) as s:
            for i in range(5):
                s.decide('grpc', 'many', [[('user', 'u%d' % i)]])
            s.decide('grpc', 'many', [[('user', 'u0')]])
            s.decide('json', 'unknown-domain', [[('user', 'x')]])
            stats = stats_of(s.debug_port)
            hits = {k: v for k, v in stats.items() if k.endswith('.total_hits')}
            self.assertEqual(hits, {'ratelimit.service.rate_limit.many.user.total_hits': '0',  # the rule's own
                                    'ratelimit.service.rate_limit.many.user_u0.total_hits': '2',
                                    'ratelimit.service.rate_limit.many.user_u1.total_hits': '1',
                                    'ratelimit.service.rate_limit.many.overflow.total_hits': '3'})
            self.assertEqual(stats['ratelimit.service.rate_limit.overflow.domain_not_found'], '1')


class DebugListener(unittest.TestCase):
    def test_port_in_use_stops_start_up(self):
        # Upstream only logs it and runs without its pages; Sluice exits 1, as for its other listeners.
        taken = socket.socket()
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        try:
            port = taken.getsockname()[1]
            log = Sluice.failed_start(self, {'DEBUG_PORT': str(port)})
            self.assertIn('Failed to open debug listener: listen tcp 127.0.0.1:%d: bind: address already in use'
                          % port, log)
        finally:
            taken.close()

    def test_bad_debug_port(self):
        with Sluice(rules={'dbg.yaml': RULES}, env={'DEBUG_PORT': '70000'}, wait_ready=False) as s:
            self.assertEqual(s.wait_exit(10), 1, s.log())
            self.assertIn('DEBUG_PORT', s.log())


if __name__ == '__main__':
    unittest.main()
