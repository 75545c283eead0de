"""scripts/run's banner follows the settings as the server reads them (issue 40): booleans in every form Go's
strconv.ParseBool takes (src/core/env.cpp), and the stats sink as src/stats/sink_settings.cpp chooses it, with
statsd or DogStatsD turning scripts/run's Prometheus default off. SLUICE_RUN_PRINT_ONLY=1 makes scripts/run print
the banner and exit, without building or starting anything."""

import os
import subprocess
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(REPO, 'scripts', 'run')

# Settings scripts/run reads, cleared so that the caller's environment does not leak into the banner.
SETTINGS = ('BACKEND_TYPE', 'HOST', 'PORT', 'GRPC_HOST', 'GRPC_PORT', 'DEBUG_HOST', 'DEBUG_PORT', 'DISABLE_STATS',
            'USE_STATSD', 'USE_DOG_STATSD', 'USE_PROMETHEUS', 'PROMETHEUS_ADDR', 'PROMETHEUS_PATH', 'STATSD_HOST',
            'STATSD_PORT', 'HOLIDAYS_ENABLED', 'HOLIDAYS_CSV', 'ECHO_OPENAPI_FILE', 'API_KEYS_FILE')

METRICS_URL = 'Prometheus metrics:        http://127.0.0.1:9090/metrics'
HOLIDAYS = 'Holidays API on'


def banner(**settings):
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    env.update(settings, SLUICE_RUN_PRINT_ONLY='1')
    p = subprocess.run([RUN], env=env, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError('scripts/run exited %d: %s' % (p.returncode, p.stderr))
    return p.stdout


class Banner(unittest.TestCase):
    def test_default_advertises_prometheus_and_holidays(self):
        out = banner()
        self.assertIn(METRICS_URL, out)
        self.assertNotIn('statsd', out)
        self.assertIn(HOLIDAYS, out)
        self.assertIn('http://127.0.0.1:8080/json', out)

    def test_holidays_off_in_every_false_form(self):
        for value in ('0', 'f', 'F', 'false', 'False', 'FALSE'):
            with self.subTest(HOLIDAYS_ENABLED=value):
                self.assertNotIn(HOLIDAYS, banner(HOLIDAYS_ENABLED=value))
        for value in ('1', 'true', 'T', ''):
            with self.subTest(HOLIDAYS_ENABLED=value):
                self.assertIn(HOLIDAYS, banner(HOLIDAYS_ENABLED=value))

    def test_prometheus_in_every_true_form(self):
        for value in ('1', 't', 'TRUE', 'True', 'true'):
            with self.subTest(USE_PROMETHEUS=value):
                self.assertIn(METRICS_URL, banner(USE_PROMETHEUS=value))
        self.assertIn('Prometheus metrics:        http://127.0.0.1:19001/stats',
                      banner(PROMETHEUS_ADDR=':19001', PROMETHEUS_PATH='/stats'))

    def test_disable_stats_prints_no_url(self):
        for value in ('true', '1'):
            with self.subTest(DISABLE_STATS=value):
                out = banner(DISABLE_STATS=value)
                self.assertNotIn('Prometheus metrics', out)
                self.assertIn('off (DISABLE_STATS)', out)

    def test_statsd_turns_the_prometheus_default_off(self):
        for name, sink in (('USE_STATSD', 'statsd'), ('USE_DOG_STATSD', 'DogStatsD')):
            for value in ('true', '1', 'True'):
                with self.subTest(name=name, value=value):
                    out = banner(**{name: value, 'STATSD_HOST': 'stats.local', 'STATSD_PORT': '9125'})
                    self.assertIn('stats go to %s at stats.local:9125' % sink, out)
                    self.assertNotIn('Prometheus metrics', out)
                    self.assertNotIn('more than one sink', out)

    def test_two_sinks_named_as_the_server_refuses_them(self):
        out = banner(USE_STATSD='true', USE_PROMETHEUS='true')
        self.assertIn('more than one sink chosen', out)
        self.assertNotIn('Prometheus metrics', out)

    def test_no_sink(self):
        out = banner(USE_PROMETHEUS='false')
        self.assertNotIn('Prometheus metrics', out)
        self.assertNotIn('stats go to', out)


if __name__ == '__main__':
    unittest.main()
