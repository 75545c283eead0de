"""The alerting rules (etc/prometheus/alerts.yaml) and the Grafana dashboard (etc/grafana/sluice.json) against a
real Prometheus (Debian's) scraping loaded Sluices every second with the rules loaded: every panel query and every
alert expression is valid, panels about traffic that was sent have data, and the alerts whose conditions were
driven return the series that caused them (and are pending, with their annotations rendered).

The targets, in one scrape job `sluice`:
  main       memory backend: some rules over their limit, some near, an unknown domain; gRPC and /json traffic;
             a refused reload
  norules    FORCE_START_WITHOUT_INITIAL_CONFIG=true with a rule file that does not load: no rules
  redis      Redis backend with batched counting (REDIS_SYNC_INTERVAL) and REDIS_PERSECOND on a real Redis
  failopen   Redis backend whose Redis is not there, BACKEND_FAIL_OPEN=true: errors and fail-open decisions
  down       a port that refuses connections
"""

import json
import math
import os
import re
import shutil
import socket
import tempfile
import time
import unittest
import urllib.parse

import harness
from harness import Sluice

PROMETHEUS = shutil.which('prometheus') or '/usr/bin/prometheus'
ALERTS = os.path.join(harness.REPO, 'etc', 'prometheus', 'alerts.yaml')
DASHBOARD = os.path.join(harness.REPO, 'etc', 'grafana', 'sluice.json')
JOB = 'sluice'

MAIN_RULES = """
domain: obs
descriptors:
  - key: over
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: near
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: user
    descriptors:
      - key: action
        value: upload
        rate_limit: {unit: hour, requests_per_unit: 1000}
"""

REDIS_RULES = """
domain: batched
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: burst
    rate_limit: {unit: second, requests_per_unit: 1000}
"""

FAILOPEN_RULES = """
domain: failing
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 1000}
"""

# Grafana's variables, as the test sets them: one domain, or every value (the variables' allValue).
GRAFANA_ONE = {'job': JOB, 'instance': '.*', 'domain': 'obs', '__rate_interval': '1m', '__interval': '15s',
               '__range': '5m'}
GRAFANA_ALL = dict(GRAFANA_ONE, domain='.*')


def substitute(expr, values):
    """Grafana's $var and ${var} in a query, from `values`; fails on a variable the test does not know."""
    def one(m):
        name = m.group(1) or m.group(2)
        assert name in values, 'unknown variable $%s in %r' % (name, expr)
        return values[name]
    return re.sub(r'\$\{(\w+)\}|\$(\w+)', one, expr)


def panel_targets(dashboard):
    """-> [(panel title, refId, expr)] of every panel, rows' nested panels included."""
    out = []

    def walk(panels):
        for p in panels:
            walk(p.get('panels', []))
            for t in p.get('targets', []):
                out.append((p['title'], t['refId'], t['expr']))
    walk(dashboard['panels'])
    return out


def metric_names(expr):
    """The metric names a PromQL expression reads (Sluice's, and `up`)."""
    return set(re.findall(r'\b(ratelimit_[a-z0-9_]+|up)\s*[{\[]', expr))


class Prometheus(harness.ServerProcess):
    """Debian's prometheus on a free loopback port, scraping `targets` ({name: port}) every second as job `sluice`
    with etc/prometheus/alerts.yaml loaded (evaluated every second). Killed when the tests end whatever happens."""

    log_name = 'prometheus.log'

    def __init__(self, targets):
        self.tmp = tempfile.mkdtemp(prefix='sluice-e2e-prometheus-')
        self.proc = None
        self._client = None
        config = os.path.join(self.tmp, 'prometheus.yml')
        with open(config, 'w') as f:
            f.write('global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n'
                    'rule_files: [%s]\n'
                    'scrape_configs:\n'
                    '  - job_name: %s\n'
                    '    static_configs:\n' % (json.dumps(ALERTS), JOB))
            for name, port in targets.items():
                f.write('      - {targets: ["127.0.0.1:%d"], labels: {target: %s}}\n' % (port, name))
        self._log = open(os.path.join(self.tmp, self.log_name), 'w+b')
        for attempt in range(3):
            self.port = harness.free_port()
            self.proc = harness.spawn([PROMETHEUS, '--config.file=' + config,
                                       '--storage.tsdb.path=' + os.path.join(self.tmp, 'data'),
                                       '--web.listen-address=127.0.0.1:%d' % self.port], harness.base_env(),
                                      self._log, self._log)
            try:
                harness.wait_until(self.ready, timeout=30, interval=0.1, message='prometheus ready',
                                   describe=self.describe)
                return
            except AssertionError:
                if self.proc.poll() is not None and 'address already in use' in self.log() and attempt < 2:
                    harness.reap(self.proc)
                    continue  # the port got taken between picking and binding
                raise

    def ready(self):
        if self.proc.poll() is not None:
            raise AssertionError('prometheus exited with %d' % self.proc.returncode)
        try:
            return harness.http_get(self.port, '/-/ready', timeout=1.0)[0] == 200
        except OSError:
            return False

    def describe(self):
        return 'prometheus log (end):\n' + self.log()[-3000:]

    def api(self, path, **params):
        """GET /api/v1/<path>?params -> the parsed body (any status: a bad query answers 400 with an error)."""
        query = urllib.parse.urlencode(params, doseq=True)
        status, _, body = harness.http_get(self.port, '/api/v1/%s%s' % (path, '?' + query if query else ''),
                                           timeout=10.0)
        assert isinstance(body, dict), (status, body)
        return body

    def query(self, expr):
        """An instant query -> the result (a list of {'metric': {...}, 'value': [t, 'v']}); fails on an error."""
        body = self.api('query', query=expr)
        assert body.get('status') == 'success', 'query %r: %r' % (expr, body)
        return body['data']['result']

    def stop(self):
        """SIGTERM: a clean stop (close() kills what is still running)."""
        if self.proc is None:
            return None
        self.proc.terminate()
        rc = harness.reap(self.proc, 20)
        self.proc = None
        return rc


def prom_env(port, extra):
    env = {'USE_STATSD': 'false', 'USE_PROMETHEUS': 'true', 'PROMETHEUS_ADDR': '127.0.0.1:%d' % port}
    env.update(extra)
    return env


class Observability(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert os.access(PROMETHEUS, os.X_OK), \
            'prometheus not found at %s: install Debian\'s prometheus package (scripts/setup does)' % PROMETHEUS
        with open(DASHBOARD) as f:
            cls.dashboard = json.load(f)
        with open(ALERTS) as f:
            cls.alert_names = re.findall(r'^\s*- alert:\s*(\w+)\s*$', f.read(), re.M)
        # The 'down' target and the Redis that failopen is given: ports bound and not listening, so connections are
        # refused and nothing else can take them meanwhile.
        held = []
        for _ in range(2):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            cls.addClassCleanup(sock.close)
            sock.bind(('127.0.0.1', 0))
            held.append(sock.getsockname()[1])
        down, nowhere = held
        names = ('main', 'norules', 'redis', 'failopen')
        cls.ports = dict(zip(names, harness.free_ports(len(names))), down=down)
        cls.main = Sluice(rules={'obs.yaml': MAIN_RULES}, env=prom_env(cls.ports['main'], {}))
        cls.addClassCleanup(cls.main.close)
        cls.norules = Sluice(rules={'bad.yaml': 'domain: [not, a, rule\n'},
                             env=prom_env(cls.ports['norules'], {'FORCE_START_WITHOUT_INITIAL_CONFIG': 'true'}))
        cls.addClassCleanup(cls.norules.close)
        cls.redis_server = harness.RedisServer()
        cls.addClassCleanup(cls.redis_server.close)
        redis_env = dict(cls.redis_server.sluice_env(), **cls.redis_server.sluice_env(prefix='REDIS_PERSECOND_'))
        redis_env.update({'BACKEND_TYPE': 'redis', 'REDIS_SYNC_INTERVAL': '200ms', 'REDIS_PERSECOND': 'true'})
        cls.redis = Sluice(rules={'batched.yaml': REDIS_RULES}, env=prom_env(cls.ports['redis'], redis_env))
        cls.addClassCleanup(cls.redis.close)
        cls.failopen = Sluice(rules={'failing.yaml': FAILOPEN_RULES}, env=prom_env(cls.ports['failopen'], {
            'BACKEND_TYPE': 'redis', 'REDIS_SOCKET_TYPE': 'tcp', 'REDIS_URL': '127.0.0.1:%d' % nowhere,
            'BACKEND_FAIL_OPEN': 'true'}), wait_ready='answer')  # Redis is nowhere: unhealthy by design
        cls.addClassCleanup(cls.failopen.close)
        cls.instance = {name: '127.0.0.1:%d' % port for name, port in cls.ports.items()}
        # Timers, and stats named after a request (an unknown domain), are served from their first use on: a gRPC
        # decision on main (the response time), an unknown domain, and a flush on redis before the first scrape,
        # so that the rates see the traffic sent after it.
        harness.avoid_window_edge('HOUR')
        cls.main.decide('grpc', 'obs', [[('user', 'warm-up'), ('action', 'upload')]])
        cls.main.json(harness.rls_request_json('nowhere', [[('k', 'v')]]))

        def flushed():
            # A key's first hit (and one after an interval without any) is read from Redis at once; the hits that
            # follow within the interval are flushed.
            for _ in range(5):
                cls.redis.decide('grpc', 'batched', [[('client', 'warm-up')]])
            return 'ratelimit_redis_sync_flush_time_seconds_count' in harness.http_get(cls.ports['redis'], '/metrics')[2]
        harness.wait_until(flushed, timeout=5, interval=0.1, message='a first flush to Redis')

        cls.prom = Prometheus(cls.ports)
        cls.addClassCleanup(cls.prom.close)
        # Every target scraped once before any traffic, so that rates see it happen.
        harness.wait_until(lambda: len(cls.prom.query('up{job="%s"}' % JOB)) == len(cls.ports), timeout=20,
                           interval=0.2, message='a first scrape of every target', describe=cls.prom.describe)
        harness.wait_until(lambda: len(cls.prom.query('ratelimit_service_config_load_success')) == 4, timeout=20,
                           interval=0.2, message='a first scrape of every Sluice', describe=cls.prom.describe)
        cls.drive()

    @classmethod
    def flushes(cls):
        """redis's ratelimit_redis_sync_flushes, from its /metrics."""
        text = harness.http_get(cls.ports['redis'], '/metrics')[2]
        return int(float(re.search(r'^ratelimit_redis_sync_flushes (\S+)$', text, re.M).group(1)))

    @classmethod
    def drive(cls):
        harness.avoid_window_edge('HOUR')
        flushes_before = cls.flushes()
        for i in range(5):
            for transport in ('grpc', 'json'):
                cls.main.decide(transport, 'obs', [[('over', 'x')]])  # 10 hits on a limit of 2: 8 over
                cls.main.decide(transport, 'obs', [[('user', 'u%d' % i), ('action', 'upload')]])
        for _ in range(9):
            cls.main.decide('grpc', 'obs', [[('near', 'x')]])  # 9 on 10: past the near-limit ratio (0.8)
        cls.main.json(harness.rls_request_json('nowhere', [[('k', 'v')]]))  # an unknown domain, again
        for i in range(10):
            cls.redis.decide('json', 'batched', [[('client', 'c%d' % (i % 3))], [('burst', 'b')]])
            cls.failopen.decide('json', 'failing', [[('client', 'c')]])
        harness.wait_until(lambda: cls.flushes() > flushes_before, timeout=5, message='redis to flush the hits')
        flushes_after = cls.flushes()
        # A refused reload on main: its rules stay.
        since = len(cls.main.log())
        cls.main.write_rule('broken.yaml', 'domain: obs\ndescriptors: [{key: over, rate_limit: {unit: fortnight}}]\n')
        cls.main.wait_for_log('Error loading new configuration', since=since, timeout=10)
        # Prometheus has scraped all of it.
        checks = [
            ('ratelimit_service_rate_limit_over_limit{target="main",key1="over"}', 8),
            ('ratelimit_service_rate_limit_near_limit{target="main",key1="near"}', 1),
            ('ratelimit_service_config_load_error{target="main"}', 1),
            ('ratelimit_service_fail_open{target="failopen"}', 10),
            ('ratelimit_service_total_requests{target="main",grpc_method="ShouldRateLimit"}', 20),
            ('ratelimit_service_rate_limit_domain_not_found{target="main",domain="nowhere"}', 2),
        ]

        def scraped():
            for expr, want in checks:
                result = cls.prom.query(expr)
                if len(result) != 1 or float(result[0]['value'][1]) < want:
                    return False
            return cls.prom.query('ratelimit_redis_sync_flushes{target="redis"} >= %d' % flushes_after)

        harness.wait_until(scraped, timeout=20, interval=0.2, message='the traffic scraped',
                           describe=cls.prom.describe)

    # -- the dashboard ------------------------------------------------------------------------------------------

    def test_dashboard_is_importable(self):
        d = self.dashboard
        self.assertEqual(d['uid'], 'sluice')
        self.assertGreaterEqual(d['schemaVersion'], 36)
        self.assertEqual([i['name'] for i in d['__inputs']], ['DS_PROMETHEUS'])
        variables = {v['name']: v for v in d['templating']['list']}
        self.assertEqual(set(variables), {'datasource', 'job', 'instance', 'domain'})
        self.assertEqual(variables['datasource']['type'], 'datasource')
        self.assertEqual(variables['datasource']['current']['value'], '${DS_PROMETHEUS}')
        ids = []

        def walk(panels):
            for p in panels:
                ids.append(p['id'])
                walk(p.get('panels', []))
                if p['type'] == 'row':
                    continue
                self.assertEqual(p['datasource'], {'type': 'prometheus', 'uid': '${datasource}'}, p['title'])
                self.assertTrue(p['targets'], p['title'])
                refs = [t['refId'] for t in p['targets']]
                self.assertEqual(len(refs), len(set(refs)), p['title'])
                for t in p['targets']:
                    self.assertEqual(t['datasource'], p['datasource'], p['title'])
        walk(d['panels'])
        self.assertEqual(len(ids), len(set(ids)), 'panel ids must be unique')

    def test_every_panel_query_is_valid_and_has_data(self):
        targets = panel_targets(self.dashboard)
        self.assertGreaterEqual(len(targets), 20)
        for values in (GRAFANA_ONE, GRAFANA_ALL):
            for title, ref, expr in targets:
                with self.subTest(panel=title, refId=ref, domain=values['domain']):
                    result = self.prom.query(substitute(expr, values))
                    self.assertTrue(result, 'no data for %s %s: %s' % (title, ref, substitute(expr, values)))

    def test_latency_panels_have_figures(self):
        # Not NaN: the histograms' rates saw decisions and flushes.
        for title in ('gRPC decision latency', 'Batched counting: mean flush time'):
            for _, ref, expr in [t for t in panel_targets(self.dashboard) if t[0] == title]:
                result = self.prom.query(substitute(expr, GRAFANA_ALL))
                values = [float(r['value'][1]) for r in result]
                self.assertTrue(values and all(math.isfinite(v) and v > 0 for v in values), (title, ref, result))

    def test_over_and_near_limit_panels_name_the_rules_that_were_driven(self):
        def rules(title):
            (_, _, expr), = [t for t in panel_targets(self.dashboard) if t[0] == title]
            return {(r['metric'].get('domain'), r['metric'].get('key1')) for r in self.prom.query(
                substitute(expr, GRAFANA_ALL))}
        self.assertEqual(rules('Over-limit/s by rule'), {('obs', 'over')})
        self.assertEqual(rules('Over-limit share by rule'), {('obs', 'over')})
        # 'over' passes its near-limit threshold on the way to its limit, too.
        self.assertIn(('obs', 'near'), rules('Near-limit/s by rule'))
        self.assertNotIn(('obs', 'user'), rules('Near-limit/s by rule'))

    def test_template_variables_list_the_targets(self):
        variables = {v['name']: v for v in self.dashboard['templating']['list']}
        want = {'job': {JOB}, 'instance': {self.instance[n] for n in ('main', 'norules', 'redis', 'failopen')},
                'domain': {'obs', 'batched', 'failing'}}
        for name, expected in want.items():
            m = re.fullmatch(r'label_values\((.+),\s*(\w+)\)', variables[name]['definition'])
            self.assertTrue(m, variables[name]['definition'])
            self.assertEqual(variables[name]['query']['query'], variables[name]['definition'])
            selector = substitute(m.group(1), GRAFANA_ALL)
            body = self.prom.api('series', **{'match[]': selector, 'start': time.time() - 300})
            self.assertEqual(body.get('status'), 'success', body)
            self.assertEqual({s[m.group(2)] for s in body['data'] if m.group(2) in s}, expected, name)

    def test_only_metric_names_sluice_serves(self):
        served = set(self.prom.api('label/__name__/values')['data'])
        used = set()
        for _, _, expr in panel_targets(self.dashboard):
            used |= metric_names(expr)
        for rule in self.rules():
            used |= metric_names(rule['query'])
        self.assertTrue(used)
        self.assertEqual(used - served, set())

    # -- the alerts ---------------------------------------------------------------------------------------------

    def rules(self):
        body = self.prom.api('rules')
        self.assertEqual(body.get('status'), 'success', body)
        return [r for g in body['data']['groups'] for r in g['rules']]

    def test_every_alert_is_loaded_and_evaluates(self):
        self.assertGreaterEqual(len(self.alert_names), 5)
        self.assertEqual(sorted(r['name'] for r in self.rules()), sorted(self.alert_names))

        def healthy():
            rules = self.rules()
            return all(r['health'] == 'ok' and r.get('lastError', '') == '' and r['type'] == 'alerting' for r in rules) \
                and rules
        harness.wait_until(healthy, timeout=10, interval=0.2, message='every rule evaluated without error',
                           describe=lambda: json.dumps(self.rules(), indent=1)[:4000])

    def test_alert_expressions_find_what_was_driven(self):
        want = {
            'SluiceRuleOverLimit': {('obs', 'over')},
            'SluiceBackendErrors': {('failopen', 'redis_error')},
            'SluiceFailOpen': {'failopen'},
            'SluiceConfigReloadFailed': {'main'},
            'SluiceNoConfigLoaded': {'norules'},
            'SluiceDown': {'down'},
            'SluiceRedisSyncFlushErrors': set(),
            'SluiceRedisSyncDroppedHits': set(),
        }
        rules = {r['name']: r for r in self.rules()}
        self.assertEqual(set(want) - set(rules), set())
        for name, rule in rules.items():
            with self.subTest(alert=name):
                result = self.prom.query(rule['query'])  # valid, whatever it returns
                if name not in want:
                    continue
                got = set()
                for r in result:
                    m = r['metric']
                    if name == 'SluiceRuleOverLimit':
                        got.add((m.get('domain'), m.get('key1')))
                    elif name == 'SluiceBackendErrors':
                        got.add((m.get('target'), m.get('err_type')))
                    else:
                        got.add(m.get('target'))
                self.assertEqual(got, want[name], result)

    def test_alerts_pending_with_rendered_annotations(self):
        expected = {'SluiceRuleOverLimit', 'SluiceBackendErrors', 'SluiceFailOpen', 'SluiceConfigReloadFailed',
                    'SluiceNoConfigLoaded', 'SluiceDown'}

        over_summary = 'Sluice rule obs: over is over its limit for 80% of its hits'  # 8 of 10 hits

        def active():
            alerts = self.prom.api('alerts')['data']['alerts']
            if not expected <= {a['labels']['alertname'] for a in alerts}:
                return None
            # An evaluation after the last scrape of the traffic (every hit of it counted).
            over = [a['annotations']['summary'] for a in alerts if a['labels']['alertname'] == 'SluiceRuleOverLimit']
            return alerts if over == [over_summary] else None

        alerts = harness.wait_until(active, timeout=15, interval=0.2, message='the driven alerts pending',
                                    describe=lambda: json.dumps(self.prom.api('alerts'), indent=1)[:4000])
        for a in alerts:
            with self.subTest(alert=a['labels']['alertname']):
                self.assertIn(a['state'], ('pending', 'firing'))
                self.assertIn(a['labels'].get('severity'), ('warning', 'critical'))
                for key in ('summary', 'description'):
                    text = a['annotations'].get(key, '')
                    self.assertTrue(text, a)
                    self.assertNotIn('<no value>', text)
                    self.assertNotIn('error executing template', text)
                    self.assertNotIn('{{', text)

    @classmethod
    def tearDownClass(cls):
        # Prometheus stops cleanly (exit 0) before the Sluices it scrapes; the class cleanups stop the rest.
        rc = cls.prom.stop()
        assert rc == 0, 'prometheus exited with %r\n%s' % (rc, cls.prom.describe())


if __name__ == '__main__':
    unittest.main()
