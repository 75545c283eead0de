"""The Prometheus sink (USE_PROMETHEUS, reference §1.4, §7.5): the built-in mapping, a custom statsd_exporter
mapping file, the exposition checked by Debian's promtool, and a real Prometheus server scraping Sluice."""

import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse

import harness
from harness import Sluice

PROMTOOL = shutil.which('promtool') or '/usr/bin/promtool'
PROMETHEUS = shutil.which('prometheus') or '/usr/bin/prometheus'
CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

RULES = """
domain: prom
descriptors:
  - key: one
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: a
    value: x
    descriptors:
      - key: b
        descriptors:
          - key: c
            value: z
            rate_limit: {unit: hour, requests_per_unit: 100}
  - key: multi
    rate_limits:
      - {unit: second, requests_per_unit: 10}
      - {unit: day, requests_per_unit: 1000}
"""

# A custom mapping: globs with labels (tried before any regex, whatever the order, as in statsd_exporter), a regex
# with two groups, a catch-all drop, and counters named as Prometheus' naming rules want (so promtool is content).
CUSTOM_MAPPING = r"""
mappings:
  - match: 'total_hits$'
    match_type: regex
    name: 'other_hits_total'
    help: 'Hits of rules the glob below does not match.'
  - match: 'ratelimit.service.rate_limit.*.*.total_hits'
    name: 'rl_hits_total'
    help: 'Hits per rule.'
    labels: {domain: '$1', rule: '$2'}
  - match: 'ratelimit_server.*.response_time'
    name: 'rl_response_seconds'
    help: 'Response time.'
    scale: 0.001
    histogram_options: {buckets: [0.5, 1]}
    labels: {method: '$1'}
  - match: 'ratelimit\.service\.rate_limit\.([^.]+)\.(.+)\.within_limit$'
    match_type: regex
    name: 'rl_within_total'
    help: 'Hits within the limit.'
    labels: {domain: '$1', path: '$2'}
  - match: '.'
    match_type: regex
    action: drop
"""

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text):
    """-> ({(name, ((label, value), ...)): float}, {family: type}) from text format 0.0.4."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith('# TYPE '):
            _, _, name, kind = line.split(' ', 3)
            types[name] = kind
            continue
        if not line or line.startswith('#'):
            continue
        m = _SAMPLE.match(line)
        assert m, 'not a sample line: %r' % line
        labels = tuple(sorted((k, bytes(v, 'utf-8').decode('unicode_escape'))
                              for k, v in _LABEL.findall(m.group(2) or '')))
        key = (m.group(1), labels)
        assert key not in samples, 'duplicate series %r' % (key,)
        samples[key] = float(m.group(3))
    return samples, types


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def promtool_check(text):
    """-> (exit code, problems reported by `promtool check metrics`)."""
    p = subprocess.run([PROMTOOL, 'check', 'metrics'], input=text.encode('utf-8'), capture_output=True, timeout=30)
    out = (p.stdout + p.stderr).decode('utf-8', 'replace')
    return p.returncode, [line for line in out.splitlines() if line.strip()]


class PrometheusSluice(Sluice):
    """Sluice with the Prometheus sink on its own free port."""

    def __init__(self, env=None, **kw):
        self.prom_port = harness.free_port()
        full = {'USE_STATSD': 'false', 'USE_PROMETHEUS': 'true', 'PROMETHEUS_ADDR': '127.0.0.1:%d' % self.prom_port}
        full.update(env or {})
        super().__init__(rules={'prom.yaml': RULES}, env=full, **kw)

    def scrape(self, path='/metrics'):
        status, headers, body = harness.http_get(self.prom_port, path)
        assert status == 200, (status, body)
        assert headers.get('content-type') == CONTENT_TYPE, headers
        return body


def decide_both(s, descriptors, n):
    for _ in range(n):
        s.grpc('prom', descriptors)
        s.json(harness.rls_request_json('prom', descriptors))


class BuiltInMapping(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = PrometheusSluice()
        harness.avoid_window_edge('HOUR')
        decide_both(cls.s, [[('one', 'v')]], 2)  # 4 hits on a limit of 2
        decide_both(cls.s, [[('a', 'x'), ('b', 'y'), ('c', 'z')]], 1)
        cls.s.json(harness.rls_request_json('nowhere', [[('k', 'v')]]))
        cls.s.json(harness.rls_request_json('prom', [[('multi', 'v')]]))  # /json: not in the gRPC counts below
        cls.text = cls.s.scrape()
        cls.samples, cls.types = parse_exposition(cls.text)

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def test_listening_is_logged(self):
        self.assertIn("Listening for Prometheus on '127.0.0.1:%d'" % self.s.prom_port, self.s.log())
        self.assertIn('Stats initialized for Prometheus', self.s.log())

    def test_per_rule_counters_keep_upstream_names_and_labels(self):
        one = {'domain': 'prom', 'key1': 'one'}
        self.assertEqual(self.types.get('ratelimit_service_rate_limit_total_hits'), 'counter')
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_total_hits', **one), 4, self.text)
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_within_limit', **one), 2, self.text)
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_over_limit', **one), 2, self.text)
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_near_limit', **one), 1, self.text)

    def test_deep_rules_keep_every_level(self):
        deep = {'domain': 'prom', 'key1': 'a_x', 'key2': 'b', 'key3': 'c_z'}
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_total_hits', **deep), 2, self.text)
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_within_limit', **deep), 2, self.text)

    def test_limit_gauges_and_per_limit_stats_carry_the_rule_labels(self):
        # Sluice's own gauges are mapped as the counters are, so `total_hits / limit` joins on the labels; with
        # rate_limits, the limit's suffix is one more level.
        self.assertEqual(self.types.get('ratelimit_service_rate_limit_limit'), 'gauge', self.text)
        self.assertEqual(self.types.get('ratelimit_service_rate_limit_window_seconds'), 'gauge', self.text)
        one = {'domain': 'prom', 'key1': 'one'}
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_limit', **one), 2, self.text)
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_window_seconds', **one), 3600, self.text)
        deep = {'domain': 'prom', 'key1': 'a_x', 'key2': 'b', 'key3': 'c_z'}
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_limit', **deep), 100, self.text)
        day, second = ({'domain': 'prom', 'key1': 'multi', 'key2': k} for k in ('day', 'second'))
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_limit', **day), 1000, self.text)
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_window_seconds', **day), 86400, self.text)
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_limit', **second), 10, self.text)
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_total_hits', **second), 1, self.text)
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_within_limit', **day), 1, self.text)
        self.assertFalse([n for n in self.types if n.startswith('ratelimit_service_rate_limit_prom')], self.text)

    def test_service_stats(self):
        self.assertEqual(value(self.samples, 'ratelimit_service_config_load_success'), 1, self.text)
        self.assertEqual(value(self.samples, 'ratelimit_service_config_load_error'), 0, self.text)
        self.assertEqual(value(self.samples, 'ratelimit_service_rate_limit_domain_not_found', domain='nowhere'), 1)
        self.assertEqual(value(self.samples, 'ratelimit_service_should_rate_limit_error', err_type='service_error'), 0)

    def test_grpc_requests_and_response_time_histogram(self):
        # /json does not pass through the gRPC stats, as upstream.
        self.assertEqual(value(self.samples, 'ratelimit_service_total_requests', grpc_method='ShouldRateLimit'), 3)
        name = 'ratelimit_service_response_time_seconds'
        self.assertEqual(self.types.get(name), 'histogram')
        self.assertEqual(value(self.samples, name + '_count', grpc_method='ShouldRateLimit'), 3)
        self.assertEqual(value(self.samples, name + '_bucket', grpc_method='ShouldRateLimit', le='+Inf'), 3)
        # Seconds, not milliseconds: three in-process decisions take far less than a second in all.
        self.assertLess(value(self.samples, name + '_sum', grpc_method='ShouldRateLimit'), 1.0)
        bounds = sorted(float(dict(k[1])['le']) for k in self.samples if k[0] == name + '_bucket')
        self.assertEqual(bounds, [.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, float('inf')])

    def test_json_response_time_is_in_seconds_as_the_grpc_one(self):
        name = 'ratelimit_http_json_response_time_seconds'
        self.assertEqual(self.types.get(name), 'histogram', self.text)
        self.assertNotIn('ratelimit_http_json_response_time_bucket', self.text)
        self.assertEqual(value(self.samples, name + '_count'), 5, self.text)
        self.assertLess(value(self.samples, name + '_sum'), 1.0)
        bounds = sorted(float(dict(k[1])['le']) for k in self.samples if k[0] == name + '_bucket')
        self.assertEqual(bounds, [.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, float('inf')])

    def test_promtool_only_asks_for_total_suffixes_on_upstream_names(self):
        # upstream (statsd_exporter) names counters exactly as its mapping says, without "_total"; Sluice keeps
        # those names so dashboards keep working, and promtool's naming lint is the only thing it reports.
        rc, problems = promtool_check(self.text)
        counters = sorted(n for n, t in self.types.items() if t == 'counter' and not n.endswith('_total'))
        self.assertEqual(sorted(problems), ['%s counter metrics should have "_total" suffix' % n for n in counters])
        self.assertEqual(rc, 3 if counters else 0, problems)

    def test_other_paths_are_not_found(self):
        status, _, _ = harness.http_get(self.s.prom_port, '/')
        self.assertEqual(status, 404)

    def test_sorted_and_stable(self):
        again = self.s.scrape()
        families = [line.split(' ')[2] for line in again.splitlines() if line.startswith('# TYPE ')]
        self.assertEqual(families, sorted(families))


class CustomMapping(unittest.TestCase):
    def test_glob_regex_drop_and_histogram_options(self):
        with tempfile.NamedTemporaryFile('w', suffix='.yaml', delete=False) as f:
            f.write(CUSTOM_MAPPING)
        self.addCleanup(os.remove, f.name)
        with PrometheusSluice(env={'PROMETHEUS_MAPPER_YAML': f.name, 'PROMETHEUS_PATH': '/custom/path'}) as s:
            harness.avoid_window_edge('HOUR')
            decide_both(s, [[('one', 'v')]], 1)
            decide_both(s, [[('a', 'x'), ('b', 'y'), ('c', 'z')]], 1)
            text = s.scrape('/custom/path')
            self.assertEqual(harness.http_get(s.prom_port, '/metrics')[0], 404)
            self.assertEqual(s.stop(), 0, s.log())
        samples, types = parse_exposition(text)
        self.assertEqual(value(samples, 'rl_hits_total', domain='prom', rule='one'), 2, text)
        self.assertEqual(value(samples, 'rl_within_total', domain='prom', path='one'), 2, text)
        self.assertEqual(value(samples, 'rl_within_total', domain='prom', path='a_x.b.c_z'), 2, text)
        self.assertEqual(value(samples, 'rl_response_seconds_bucket', method='ShouldRateLimit', le='+Inf'), 2, text)
        self.assertIsNotNone(value(samples, 'rl_response_seconds_bucket', method='ShouldRateLimit', le='0.5'), text)
        # The glob wins over the regex listed before it; the regex gets what the glob does not match.
        self.assertEqual(value(samples, 'other_hits_total'), 2, text)
        self.assertEqual(sorted(types), ['other_hits_total', 'rl_hits_total', 'rl_response_seconds', 'rl_within_total'],
                         text)
        self.assertEqual(promtool_check(text), (0, []))


class MapperErrors(unittest.TestCase):
    def start_fails(self, env, message):
        s = PrometheusSluice(env=env, start=False)
        try:
            s.start(wait_ready=False)
            self.assertEqual(s.wait_exit(15), 1, s.log())
            self.assertIn(message, s.log())
        finally:
            s.close()

    def test_bad_mapping_file_exits_1_naming_the_setting(self):
        with tempfile.NamedTemporaryFile('w', suffix='.yaml', delete=False) as f:
            f.write("mappings:\n  - match: 'a.b*'\n    name: x\n")
        self.addCleanup(os.remove, f.name)
        self.start_fails({'PROMETHEUS_MAPPER_YAML': f.name},
                         "sluice: PROMETHEUS_MAPPER_YAML: invalid mapping file '%s': mapping #1 (match 'a.b*'): "
                         "in a glob match '*' stands for one whole dot-separated part" % f.name)

    def test_missing_mapping_file(self):
        self.start_fails({'PROMETHEUS_MAPPER_YAML': '/nonexistent/mapper.yaml'},
                         "sluice: PROMETHEUS_MAPPER_YAML: cannot read '/nonexistent/mapper.yaml'")

    def test_bad_address(self):
        self.start_fails({'PROMETHEUS_ADDR': '9090'}, "sluice: invalid value '9090' for PROMETHEUS_ADDR")


class RealPrometheus(unittest.TestCase):
    """Debian's Prometheus scrapes Sluice every second; its query API must see the counter."""

    def test_prometheus_scrapes_and_queries(self):
        self.assertTrue(os.access(PROMETHEUS, os.X_OK), 'prometheus is not installed (scripts/setup installs it)')
        with PrometheusSluice() as s:
            harness.avoid_window_edge('HOUR')
            decide_both(s, [[('one', 'v')]], 3)  # 6 hits
            tmp = tempfile.mkdtemp(prefix='sluice-prometheus-')
            self.addCleanup(harness.remove_tmp, tmp)
            config = os.path.join(tmp, 'prometheus.yml')
            with open(config, 'w') as f:
                f.write('global: {scrape_interval: 1s, evaluation_interval: 1s}\n'
                        'scrape_configs:\n'
                        '  - job_name: sluice\n'
                        '    static_configs: [{targets: ["127.0.0.1:%d"]}]\n' % s.prom_port)
            port = harness.free_port()
            with open(os.path.join(tmp, 'prometheus.log'), 'w+b') as log:
                p = harness.spawn([PROMETHEUS, '--config.file=' + config, '--storage.tsdb.path=' + os.path.join(tmp, 'data'),
                                   '--web.listen-address=127.0.0.1:%d' % port], harness.base_env(), log, log)
                def describe():
                    log.seek(0)
                    return 'prometheus log:\n' + log.read().decode('utf-8', 'replace')[-3000:]

                try:
                    query = 'ratelimit_service_rate_limit_total_hits{domain="prom",key1="one",job="sluice"}'

                    def answer():
                        status, _, body = harness.http_get(
                            port, '/api/v1/query?query=' + urllib.parse.quote(query), timeout=2.0)
                        result = body.get('data', {}).get('result', []) if status == 200 else []
                        return result and result[0]['value'][1] == '6'

                    harness.wait_until(answer, timeout=60, interval=0.5, message=query + ' == 6', describe=describe)
                    # The scrape target is healthy, with nothing left to complain about.
                    status, _, body = harness.http_get(port, '/api/v1/targets')
                    target = body['data']['activeTargets'][0]
                    self.assertEqual((target['health'], target['lastError']), ('up', ''), target)
                finally:
                    p.terminate()
                    self.assertEqual(harness.reap(p, 20), 0, describe())


if __name__ == '__main__':
    unittest.main()
