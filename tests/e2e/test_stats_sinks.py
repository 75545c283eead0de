"""The statsd, DogStatsD and stdout stats sinks (reference §1.4, §10): a real Sluice flushes every 200ms to a
statsd server played by the test (UDP and TCP), or logs to stderr; counters arrive as deltas, only when not zero;
EXTRA_TAGS, DogStatsD tags and mogrifiers; DISABLE_STATS; the start-up errors of bad stats settings."""

import json
import re
import socket
import threading
import time
import unittest

import harness
from harness import Sluice

RULES = """
domain: stats
descriptors:
  - key: k
    value: v
    rate_limit: {unit: hour, requests_per_unit: 2}
"""

HITS = 'ratelimit.service.rate_limit.stats.k_v.'
REQUESTS = 'ratelimit_server.ShouldRateLimit.total_requests'
RESPONSE_TIME = 'ratelimit_server.ShouldRateLimit.response_time'
FLUSH = {'STATS_FLUSH_INTERVAL': '200ms'}
LINE_RE = re.compile(r'^(?P<name>[^:|]+):(?P<value>-?[0-9.]+)\|(?P<type>c|g|ms)(?P<rest>(\|[@#][^|]*)*)$')


class Collector:
    """A statsd server: keeps every line received, in order, from a background thread."""

    def __init__(self):
        self.port = None
        self._lines = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def close(self):
        self._stop.set()
        self._thread.join(5)

    def _add(self, text):
        with self._lock:
            self._lines.extend(line for line in text.split('\n') if line)

    def lines(self):
        with self._lock:
            return list(self._lines)

    def wait_for(self, predicate, message, timeout=5.0):
        """Polls predicate(lines) until truthy."""
        return harness.wait_until(lambda: predicate(self.lines()), timeout=timeout, message=message,
                                  describe=lambda: 'received:\n' + '\n'.join(self.lines()[-40:]))

    def wait_for_line(self, line, timeout=5.0):
        return self.wait_for(lambda lines: line in lines, 'the line %r' % line, timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class UdpCollector(Collector):
    def __init__(self):
        super().__init__()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(('127.0.0.1', 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.datagram_sizes = []
        self.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            self.datagram_sizes.append(len(data))
            self._add(data.decode('utf-8', 'replace'))
        self.sock.close()


class TcpCollector(Collector):
    """Accepts connections on `port` (a free one when None); counts them; drop() closes the current ones."""

    def __init__(self, port=None):
        super().__init__()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(('127.0.0.1', port or 0))
        self.listener.listen(8)
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self._open = []
        self.start()

    def _run(self):
        partial = {}
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
                conn.settimeout(0.05)
                self.connections += 1
                self._open.append(conn)
                partial[conn] = b''
            except socket.timeout:
                pass
            for conn in list(self._open):
                try:
                    data = conn.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    data = b''
                if not data:
                    self._open.remove(conn)
                    conn.close()
                    continue
                text = partial[conn] + data
                whole, _, partial[conn] = text.rpartition(b'\n')
                if whole:
                    self._add(whole.decode('utf-8', 'replace'))
        for conn in self._open:
            conn.close()
        self.listener.close()

    def drop(self):
        """Closes every accepted connection (the statsd server restarts)."""
        for conn in list(self._open):
            self._open.remove(conn)
            conn.shutdown(socket.SHUT_RDWR)
            conn.close()


def parse(line):
    m = LINE_RE.match(line)
    if not m:
        raise AssertionError('not a statsd line: %r' % line)
    return m


def total(lines, name, suffix='|c'):
    """Sum of the values of the counter lines of `name` (with tags: its exact text before ':')."""
    out = 0
    for line in lines:
        head, _, rest = line.partition(':')
        if head == name and rest.endswith(suffix):
            out += int(rest.split('|')[0])
    return out


def named(lines, name):
    return [line for line in lines if line.partition(':')[0] == name]


class SinkTest(unittest.TestCase):
    def setUp(self):
        harness.avoid_window_edge('HOUR')

    def start(self, env):
        s = Sluice(rules={'stats.yaml': RULES}, env=dict(FLUSH, **env))
        self.addCleanup(s.close)
        return s

    def decide(self, server, transport, n=1):
        for _ in range(n):
            server.decide(transport, 'stats', [[('k', 'v')]])


class StatsdUdp(SinkTest):
    def test_counters_timers_and_deltas(self):
        with UdpCollector() as statsd:
            s = self.start({'STATSD_HOST': '127.0.0.1', 'STATSD_PORT': str(statsd.port), 'STATSD_PROTOCOL': 'udp'})
            self.decide(s, 'grpc', 2)
            self.decide(s, 'json', 1)
            statsd.wait_for(lambda lines: total(lines, HITS + 'total_hits') == 3, 'total_hits adding up to 3')
            statsd.wait_for(lambda lines: total(lines, REQUESTS) == 2, 'total_requests adding up to 2')
            time.sleep(0.5)  # a few more flushes: nothing may be counted twice
            lines = statsd.lines()
            for line in lines:
                parse(line)
            self.assertEqual(total(lines, 'ratelimit.service.config_load_success'), 1, lines)
            self.assertEqual(total(lines, HITS + 'total_hits'), 3, lines)
            self.assertEqual(total(lines, HITS + 'within_limit'), 2, lines)
            self.assertEqual(total(lines, HITS + 'over_limit'), 1, lines)
            self.assertEqual(total(lines, REQUESTS), 2, lines)
            # Counters only when they moved: config_load_success once, though every flush sees it.
            self.assertEqual(len(named(lines, 'ratelimit.service.config_load_success')), 1, lines)
            # One timer line per gRPC call, in milliseconds: an integer, or six decimals as gostats writes them.
            times = named(lines, RESPONSE_TIME)
            self.assertEqual(len(times), 2, lines)
            for line in times:
                self.assertRegex(line, r'^%s:(\d+|\d+\.\d{6})\|ms$' % re.escape(RESPONSE_TIME))
            self.assertTrue(all(size <= 1432 for size in statsd.datagram_sizes), statsd.datagram_sizes)

            # The next hit is the next flush's delta.
            seen = len(lines)
            self.decide(s, 'grpc')
            statsd.wait_for(lambda lines: HITS + 'total_hits:1|c' in lines[seen:], 'a delta of 1')
            later = statsd.lines()[seen:]
            self.assertIn(HITS + 'over_limit:1|c', later)
            self.assertIn(REQUESTS + ':1|c', later)
            self.assertEqual(total(statsd.lines(), HITS + 'total_hits'), 4)

    def test_datagrams_are_packed_up_to_1432_bytes(self):
        # detailed_metric makes one series per value: enough lines for several datagrams in one flush.
        rules = RULES + """
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 100}
    detailed_metric: true
"""
        with UdpCollector() as statsd:
            s = Sluice(rules={'stats.yaml': rules}, env=dict(FLUSH, STATSD_HOST='127.0.0.1',
                                                              STATSD_PORT=str(statsd.port), STATSD_PROTOCOL='udp',
                                                              STATS_FLUSH_INTERVAL='2s'))
            self.addCleanup(s.close)
            for i in range(60):
                s.decide('json', 'stats', [[('user', 'user-with-a-long-name-%03d' % i)]])
            statsd.wait_for(lambda lines: sum(1 for l in lines if l.endswith('.within_limit:1|c')) == 60,
                            '60 within_limit lines', timeout=8)
            sizes = statsd.datagram_sizes
            self.assertTrue(all(size <= 1432 for size in sizes), sizes)
            self.assertGreater(max(sizes), 1300, sizes)  # packed, not one line each


class StatsdTcp(SinkTest):
    def test_default_protocol_extra_tags_and_reconnect(self):
        with TcpCollector() as statsd:
            s = self.start({'STATSD_HOST': '127.0.0.1', 'STATSD_PORT': str(statsd.port),
                            'EXTRA_TAGS': 'zone:eu.west|1,app:rl'})
            self.decide(s, 'grpc', 3)
            tags = '.__app=rl.__zone=eu_west_1'
            statsd.wait_for(lambda lines: total(lines, HITS + 'total_hits' + tags) == 3, 'tagged total_hits')
            lines = statsd.lines()
            self.assertEqual(total(lines, HITS + 'over_limit' + tags), 1, lines)
            self.assertEqual(total(lines, 'ratelimit.service.config_load_success' + tags), 1, lines)
            self.assertEqual(total(lines, REQUESTS + tags), 3, lines)
            self.assertEqual(len(named(lines, RESPONSE_TIME + tags)), 3, lines)
            self.assertEqual(statsd.connections, 1)

            # The statsd server restarts: the next flush comes on a new connection.
            statsd.drop()
            self.decide(s, 'grpc')
            statsd.wait_for(lambda lines: total(lines, HITS + 'total_hits' + tags) == 4, 'the hit after the drop')
            self.assertEqual(statsd.connections, 2)
            self.assertNotIn('cannot connect', s.log())

    def test_outage_is_logged_once_and_stats_resume(self):
        port = harness.free_port()
        s = self.start({'STATSD_HOST': '127.0.0.1', 'STATSD_PORT': str(port)})
        self.decide(s, 'grpc')
        s.wait_for_log('statsd: cannot connect to 127.0.0.1:%d' % port)
        self.decide(s, 'grpc')
        time.sleep(1.0)  # five flushes, each trying once
        self.assertEqual(s.log().count('statsd: cannot connect'), 1, s.log_tail())
        with TcpCollector(port) as statsd:
            self.decide(s, 'grpc')
            # Stats of the outage were dropped; what follows arrives.
            statsd.wait_for_line(HITS + 'total_hits:1|c')
            s.wait_for_log('statsd: sending stats to 127.0.0.1:%d again' % port)
        self.assertEqual(s.log().count('statsd: cannot connect'), 1, s.log_tail())


class DogStatsd(SinkTest):
    def test_tags_and_mogrifier(self):
        with UdpCollector() as statsd:
            s = self.start({
                'USE_STATSD': 'false', 'USE_DOG_STATSD': 'true',
                'STATSD_HOST': '127.0.0.1', 'STATSD_PORT': str(statsd.port),
                'STATSD_PROTOCOL': 'tcp',  # DogStatsD is UDP whatever this says, as datadog-go
                'EXTRA_TAGS': 'env:test.1',
                'USE_DOG_STATSD_MOGRIFIERS': 'RL',
                'DOG_STATSD_MOGRIFIER_RL_PATTERN': r'^ratelimit\.service\.rate_limit\.([^.]*)\.([^.]*)\.(.*)$',
                'DOG_STATSD_MOGRIFIER_RL_NAME': 'ratelimit.service.rate_limit.$3',
                'DOG_STATSD_MOGRIFIER_RL_TAGS': 'domain:$1,descriptor:$2',
            })
            self.decide(s, 'grpc', 3)
            tags = '|#env:test_1,descriptor:k_v,domain:stats'
            name = 'ratelimit.service.rate_limit.total_hits'
            statsd.wait_for(lambda lines: total(lines, name, tags) == 3, 'mogrified total_hits')
            lines = statsd.lines()
            self.assertEqual(total(lines, 'ratelimit.service.rate_limit.over_limit', tags), 1, lines)
            self.assertIn('ratelimit.service.config_load_success:1|c|#env:test_1', lines)
            self.assertEqual(total(lines, REQUESTS, '|#env:test_1'), 3, lines)
            times = named(lines, RESPONSE_TIME)
            self.assertEqual(len(times), 3, lines)
            for line in times:
                # whole milliseconds, as upstream truncates the timer to a Duration
                self.assertRegex(line, r'^%s:\d+\|ms\|#env:test_1$' % re.escape(RESPONSE_TIME))


class StdoutSink(SinkTest):
    def test_json_lines_on_stderr(self):
        s = self.start({'USE_STATSD': 'false', 'EXTRA_TAGS': 'app:rl', 'LOG_LEVEL': 'debug'})
        self.decide(s, 'json', 2)
        name = HITS + 'total_hits.__app=rl'

        def events():
            out = []
            for line in s.log().splitlines():
                if line.startswith('{"level":"debug"'):
                    out.append(json.loads(line))
            return out

        def hits(evs):
            return sum(float(e['json']['value']) for e in evs if e['json'].get('name') == name)

        harness.wait_until(lambda: hits(events()) == 2, message='total_hits adding up to 2', describe=s.log_tail)
        line = next(l for l in s.log().splitlines() if '"name":"%s"' % name in l)
        self.assertRegex(line, r'^\{"level":"debug","ts":\d+\.\d{6},"logger":"gostats.loggingsink",'
                               r'"msg":"flushing counter","json":\{"name":"%s","type":"counter",'
                               r'"value":"\d\.000000"\}\}$' % re.escape(name))
        evs = events()
        self.assertTrue(any(e['msg'] == 'flushing all stats' and e['json'] == {'type': 'all stats',
                                                                              'value': '0.000000'} for e in evs))
        self.assertIn('Stats initialized for stdout', s.log())

    def test_lines_only_at_debug_or_when_asked(self):
        # issue 40: upstream writes every stat at every flush whatever LOG_LEVEL (1,629 lines in 40 minutes
        # for one rule); Sluice writes them at LOG_LEVEL=debug, or with LOG_STATS=true.
        cases = [({'LOG_LEVEL': 'info'}, False), ({'LOG_LEVEL': 'warn', 'LOG_STATS': 'true'}, True),
                 ({'LOG_LEVEL': 'debug', 'GOSTATS_LOGGING_SINK_DISABLED': 'true'}, False),
                 ({'LOG_LEVEL': 'trace'}, True)]
        for env, written in cases:
            with self.subTest(**env):
                s = self.start(dict({'USE_STATSD': 'false'}, **env))
                self.decide(s, 'json', 1)
                if written:
                    harness.wait_until(lambda: '"flushing all stats"' in s.log(), message='a flush',
                                       describe=s.log_tail)
                else:
                    time.sleep(0.8)  # four flush intervals
                    self.assertNotIn('gostats.loggingsink', s.log())
                s.close()


class DisableStats(SinkTest):
    def test_nothing_is_sent(self):
        with TcpCollector() as tcp:
            s = self.start({'DISABLE_STATS': 'true', 'USE_DOG_STATSD': 'true', 'STATSD_HOST': '127.0.0.1',
                            'STATSD_PORT': str(tcp.port)})
            self.decide(s, 'grpc', 2)
            time.sleep(0.8)
            self.assertEqual(tcp.lines(), [])
            self.assertEqual(tcp.connections, 0)
            self.assertIn('Stats disabled', s.log())
            self.assertNotIn('"logger":"gostats.loggingsink"', s.log())


class StartupErrors(unittest.TestCase):
    """Bad stats settings stop start-up with exit code 1 and the message."""

    cases = [
        ({'USE_DOG_STATSD': 'true'}, 'unable to use more than one stats sink at the same time. Set one of '
                                     'USE_DOG_STATSD, USE_STATSD, USE_PROMETHEUS.'),
        ({'USE_PROMETHEUS': 'true'}, 'unable to use more than one stats sink at the same time.'),
        ({'STATSD_PROTOCOL': 'sctp'}, 'STATSD_PROTOCOL'),
        ({'STATSD_PORT': 'x'}, 'STATSD_PORT'),
        ({'STATS_FLUSH_INTERVAL': '10'}, 'STATS_FLUSH_INTERVAL'),
        ({'STATS_MAX_DYNAMIC_SERIES': '0'}, 'STATS_MAX_DYNAMIC_SERIES'),
        ({'EXTRA_TAGS': 'nocolon'}, 'EXTRA_TAGS'),
        ({'USE_STATSD': 'maybe'}, 'USE_STATSD'),
        ({'DISABLE_STATS': 'sure'}, 'DISABLE_STATS'),
        ({'USE_STATSD': 'false', 'USE_DOG_STATSD': 'true', 'USE_DOG_STATSD_MOGRIFIERS': 'X'},
         'no PATTERN specified for mogrifier X'),
        ({'USE_STATSD': 'false', 'USE_DOG_STATSD': 'true', 'USE_DOG_STATSD_MOGRIFIERS': 'X',
          'DOG_STATSD_MOGRIFIER_X_PATTERN': '(unclosed'}, 'failed to compile pattern for mogrifier X: (unclosed'),
        ({'USE_STATSD': 'false', 'USE_DOG_STATSD': 'true', 'USE_DOG_STATSD_MOGRIFIERS': 'X',
          'DOG_STATSD_MOGRIFIER_X_PATTERN': 'a'}, 'no NAME specified for mogrifier X'),
        ({'USE_STATSD': 'false', 'USE_DOG_STATSD': 'true', 'USE_DOG_STATSD_MOGRIFIERS': 'X',
          'DOG_STATSD_MOGRIFIER_X_PATTERN': 'a', 'DOG_STATSD_MOGRIFIER_X_NAME': 'b',
          'DOG_STATSD_MOGRIFIER_X_TAGS': 'k:'}, 'no value specified for tag k for mogrifier X'),
    ]

    def test_bad_values(self):
        for env, message in self.cases:
            with self.subTest(env=env):
                with Sluice(rules={'stats.yaml': RULES}, env=env, wait_ready=False) as s:
                    rc = s.wait_exit(10)
                    self.assertIsNotNone(rc, '%r: the server started anyway' % env)
                    self.assertEqual(rc, 1, s.log())
                    self.assertIn(message, s.log())


if __name__ == '__main__':
    unittest.main()
