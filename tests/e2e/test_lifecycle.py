"""Command line, start-up, health and graceful shutdown (reference §7.2, §7.6, §7.7, §12.2; issue 2)."""

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import grpc

import harness
from harness import Sluice, rls_pb2, rls_request_proto

RULES = """
domain: life
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000}
"""

BAD_RULES = """
domain: life
descriptors:
  - key: k
    colour: blue
    rate_limit: {unit: hour, requests_per_unit: 5}
"""


def project_version():
    with open(os.path.join(harness.REPO, 'meson.build')) as f:
        m = re.search(r"project\([^)]*?version\s*:\s*'([^']+)'", f.read(), re.S)
    return m.group(1)


class CommandLine(unittest.TestCase):
    def test_version(self):
        r = harness.run_sluice(['--version'])
        self.assertEqual(r.returncode, 0, r)
        # The commit from meson's vcs_tag: 40 hex digits (-dirty from a changed work tree), or 'unknown' outside
        # a checkout; the clone the tests run in is one.
        self.assertRegex(r.stdout, r'\Asluice %s \(commit [0-9a-f]{40}(-dirty)?\)\n\Z' % re.escape(project_version()))
        head = subprocess.run(['git', '-C', harness.REPO, 'rev-parse', 'HEAD'], stdout=subprocess.PIPE, text=True)
        self.assertIn(head.stdout.strip(), r.stdout)

    def test_help(self):
        r = harness.run_sluice(['--help'])
        self.assertEqual(r.returncode, 0, r)
        self.assertIn('check-config', r.stdout)

    def test_unknown_command_fails(self):
        r = harness.run_sluice(['frobnicate'])
        self.assertNotEqual(r.returncode, 0, r)

    def test_check_config_ok(self):
        d = tempfile.mkdtemp(prefix='sluice-e2e-cc-')
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, 'a.yaml'), 'w') as f:
            f.write(RULES)
        with open(os.path.join(d, 'b.yaml'), 'w') as f:
            f.write(RULES.replace('domain: life', 'domain: other'))
        r = harness.run_sluice(['check-config', d])
        self.assertEqual(r.returncode, 0, r)
        self.assertIn('all rate limit configs ok', r.stdout)
        self.assertNotIn('error', r.stdout)

    def test_check_config_prints_the_servers_warnings_and_strict_fails_on_them(self):
        # issue 40: check-config said "all rate limit configs ok" of a file the server warns about.
        d = tempfile.mkdtemp(prefix='sluice-e2e-cc-')
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, 'w.yaml'), 'w') as f:
            f.write('domain: w\ndescriptors:\n  - key: k\n    unit: minute\n'
                    '    rate_limit: {unit: hour, requests_per_unit: 5}\n')
        warning = "warning: w.yaml: key 'unit' (line 4) has no meaning in a descriptor and is ignored"
        r = harness.run_sluice(['check-config', d])
        self.assertEqual(r.returncode, 0, r)
        self.assertIn(warning, r.stdout.splitlines())
        self.assertIn('all rate limit configs ok (with warnings)', r.stdout)
        r = harness.run_sluice(['check-config', d, '--strict'])
        self.assertEqual(r.returncode, 1, r)
        self.assertIn(warning, r.stdout.splitlines())
        self.assertIn('error loading rate limit configs: 1 warning with --strict', r.stdout)
        self.assertNotIn('configs ok', r.stdout)
        # The server says the same of it, at level warning.
        with Sluice(rules={'w.yaml': open(os.path.join(d, 'w.yaml')).read()}) as s:
            self.assertIn(warning[len('warning: '):], s.log())
        # A clean file passes --strict; usage errors exit 2.
        with open(os.path.join(d, 'w.yaml'), 'w') as f:
            f.write(RULES)
        r = harness.run_sluice(['check-config', d, '--strict'])
        self.assertEqual((r.returncode, 'all rate limit configs ok\n' in r.stdout), (0, True), r)
        for args in (['check-config'], ['check-config', d, '--sloppy']):
            with self.subTest(args=args):
                r = harness.run_sluice(args)
                self.assertEqual(r.returncode, 2, r)
                self.assertIn('Usage: sluice check-config DIR', r.stderr)

    def test_check_config_fixtures(self):
        fixtures = sorted(f for f in os.listdir(harness.SLUICE_FIXTURES)
                          if os.path.isfile(os.path.join(harness.SLUICE_FIXTURES, f)) and not f.startswith('.')
                          and not f.lower().startswith('readme'))
        self.assertTrue(fixtures, 'no fixtures in %s' % harness.SLUICE_FIXTURES)
        for name in fixtures:
            with self.subTest(fixture=name):
                with open(os.path.join(harness.SLUICE_FIXTURES, name)) as f:
                    first = f.readline()
                m = re.match(r'^#\s*expect:\s*(.+?)\s*$', first)
                self.assertTrue(m, '%s does not start with "# expect: <error>"' % name)
                expect = m.group(1)
                d = tempfile.mkdtemp(prefix='sluice-e2e-fx-')
                try:
                    shutil.copy(os.path.join(harness.SLUICE_FIXTURES, name), os.path.join(d, name))
                    r = harness.run_sluice(['check-config', d])
                finally:
                    shutil.rmtree(d, ignore_errors=True)
                self.assertEqual(r.returncode, 1, r)
                lines = [ln for ln in r.stdout.splitlines() if ln.startswith('error loading rate limit configs: ')]
                self.assertEqual(len(lines), 1, r)
                self.assertIn(name, lines[0], r)
                self.assertIn(expect, lines[0], r)
                self.assertNotIn('all rate limit configs ok', r.stdout)


class SettingsRegistry(unittest.TestCase):
    """Every setting declared once (issue 51): `sluice settings`, the reference page made from it, and the
    start-up warning about a variable that is one or two edits from a setting's name."""

    def test_settings_prints_every_setting_a_line_with_its_default_and_meaning(self):
        r = harness.run_sluice(['settings'])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        names = [ln.split()[0] for ln in lines]
        self.assertEqual(len(names), len(set(names)), 'a setting listed twice')
        for name, default in [('BACKEND_TYPE', 'redis'), ('REDIS_URL', '/var/run/nutcracker/ratelimit.sock'),
                              ('REDIS_PERSECOND_URL', '/var/run/nutcracker/ratelimitpersecond.sock'),
                              ('MEMCACHE_TLS_CACERT', '(empty)'), ('SHUTDOWN_GRACE_PERIOD', '10s'),
                              ('IO_THREADS', '(the CPUs this process may use)'), ('RLQS_ASSIGNMENT_TTL', '15s'),
                              ('OTEL_EXPORTER_OTLP_TIMEOUT', '10000'),
                              ('OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', "(the general one's)")]:
            line = lines[names.index(name)]
            self.assertTrue(line.split(None, 1)[1].startswith(default), line)
            self.assertGreater(len(line.split(default, 1)[1].strip()), 5, line)  # and a meaning

    def test_the_reference_page_is_what_settings_prints(self):
        r = harness.run_sluice(['settings', '--format', 'markdown'])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(harness.REPO, 'docs', 'reference', 'settings.md')) as f:
            self.assertEqual(f.read(), r.stdout, 'docs/reference/settings.md is out of date: run '
                             'build/sluice settings --format markdown > docs/reference/settings.md')

    def test_the_reference_page_quotes_the_messages_sluice_gives(self):
        with open(os.path.join(harness.REPO, 'docs', 'reference', 'settings.md'), encoding='utf-8') as f:
            page = f.read()
        log = Sluice.failed_start(self, {'PORT': 'abc'})
        quoted = "invalid value 'abc' for PORT: expected a whole number from 0 to 65535"
        self.assertIn('`sluice: ' + quoted + '`', page)
        self.assertIn(quoted, log)

    def test_an_unknown_format_fails(self):
        r = harness.run_sluice(['settings', '--format', 'xml'])
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown format 'xml' (text or markdown)", r.stderr)

    def test_a_typo_is_warned_about_naming_the_setting_and_kubernetes_variables_are_not(self):
        s = Sluice(rules={'life.yaml': RULES},
                   env={'BACKEND_TYP': 'redis', 'REDIS_SOKET_TYPE': 'tcp', 'GLOBAL_SHADOW_MODE': 'true',
                        'REDIS_PORT': 'tcp://10.0.0.7:6379', 'RATELIMIT_SERVICE_HOST': '10.0.0.8',
                        'REDIS_PORT_6379_TCP': 'tcp://10.0.0.7:6379', 'HOSTNAME': 'pod-1', 'MY_OWN_THING': 'x',
                        # a shell's own: HOME is two edits from HOST, TERM three from PORT
                        'HOME': '/home/someone', 'TERM': 'xterm', 'LANG': 'C.UTF-8', 'USER': 'someone'})
        self.addCleanup(s.close)
        log = s.log()
        self.assertIn('BACKEND_TYP is not a setting: did you mean BACKEND_TYPE? (it is ignored)', log)
        self.assertIn('REDIS_SOKET_TYPE is not a setting: did you mean REDIS_SOCKET_TYPE?', log)
        self.assertIn('GLOBAL_SHADOW_MODE (SHADOW_MODE', log)
        for quiet in ('REDIS_PORT', 'RATELIMIT_SERVICE_HOST', 'REDIS_PORT_6379_TCP', 'HOSTNAME', 'MY_OWN_THING',
                      'HOME', 'TERM', 'LANG', 'USER'):
            self.assertNotIn(quiet + ' is not a setting', log)
            self.assertNotIn(quiet + ' (', log)  # the upstream-only list's form


class Running(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Sluice(rules={'life.yaml': RULES})

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def test_start_up_log(self):
        log = self.server.log()
        self.assertIn('Listening for HTTP on', log)
        self.assertIn('Listening for gRPC on', log)
        http_line = [ln for ln in log.splitlines() if 'Listening for HTTP on' in ln][0]
        grpc_line = [ln for ln in log.splitlines() if 'Listening for gRPC on' in ln][0]
        self.assertIn(str(self.server.http_port), http_line)
        self.assertIn(str(self.server.grpc_port), grpc_line)

    def test_healthcheck(self):
        status, headers, body = self.server.healthcheck()
        self.assertEqual(status, 200)
        self.assertEqual(body, 'OK')

    def test_grpc_health(self):
        self.assertEqual(self.server.health('ratelimit'), 'SERVING')
        self.assertEqual(self.server.health(''), 'SERVING')

    def test_http_keep_alive(self):
        conn = http.client.HTTPConnection('127.0.0.1', self.server.http_port, timeout=5)
        try:
            for _ in range(3):
                conn.request('GET', '/healthcheck')
                r = conn.getresponse()
                self.assertEqual((r.status, r.read()), (200, b'OK'))
        finally:
            conn.close()


class CleanStop(unittest.TestCase):
    """The harness fails a test whose server needed SIGKILL (issue 48: a kill hid a shutdown that hung)."""

    def test_a_server_that_ignores_sigterm_fails_the_test(self):
        s = Sluice(rules={'life.yaml': RULES})
        self.addCleanup(s.close)
        self.assertGreater(s.stop_deadline(), 10)  # SHUTDOWN_GRACE_PERIOD's 10 s, and more
        s.proc.send_signal(signal.SIGSTOP)  # as a process whose shutdown hangs: SIGTERM stays pending
        with self.assertRaisesRegex(AssertionError, 'did not stop within 1s of SIGTERM and was killed with SIGKILL') as e:
            s.stop(timeout=1)
        # with every thread's stack, the only witness of where a hang was (where ptrace is allowed)
        self.assertIn('its threads before the kill:', str(e.exception))
        if 'ptrace: Operation not permitted' not in str(e.exception):
            self.assertRegex(str(e.exception), r'its threads before the kill:\n(.|\n)*Thread 1 .*\n#0 ')
        self.assertIsNone(s.proc)
        self.assertEqual(s.returncode, -signal.SIGKILL)

    def test_a_clean_stop_passes(self):
        s = Sluice(rules={'life.yaml': RULES}, env={'SHUTDOWN_GRACE_PERIOD': '2s'})
        self.addCleanup(s.close)
        self.assertEqual(s.stop_deadline(), 2 + 2 + (15 if harness.SANITIZED else 5))
        self.assertEqual(s.stop(), 0, s.log_tail())


class LogFormats(unittest.TestCase):
    def test_text_lines_have_time_level_msg(self):
        with Sluice(rules={'life.yaml': RULES}) as server:
            log = server.log()
        line = [ln for ln in log.splitlines() if 'Listening for HTTP on' in ln][0]
        self.assertRegex(line, r'^time="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z" level=info '
                               r'msg="Listening for HTTP on \'127\.0\.0\.1:\d+\'"$')

    def test_json_lines_have_message_timestamp_level(self):
        with Sluice(rules={'life.yaml': RULES}, env={'LOG_FORMAT': 'JSON'}) as server:
            log = server.log()
        records = [json.loads(ln) for ln in log.splitlines() if ln.strip()]
        self.assertTrue(records)
        for r in records:
            self.assertEqual(set(r), {'@message', '@timestamp', 'level'})
            self.assertRegex(r['@timestamp'], r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$')
        listening = [r for r in records if r['@message'].startswith('Listening for gRPC on')]
        self.assertEqual(len(listening), 1)
        self.assertEqual(listening[0]['level'], 'info')  # what is normal is info (issue 40; upstream: warning)

    def test_start_up_lines(self):
        # reference §7.6: the lines operators grep for, in this order (the stats lines anywhere before serving)
        with Sluice(rules={'life.yaml': RULES}, env={'LOG_LEVEL': 'info'}) as server:
            messages = [m.group(1) for m in re.finditer(r'msg="([^"]*)"', server.log())]
        wanted = ['Waiting for initial ratelimit config update event',
                  'Successfully loaded the initial ratelimit configs',
                  "Listening for debug on '127.0.0.1:%d'" % server.debug_port,
                  "Listening for HTTP on '127.0.0.1:%d'" % server.http_port,
                  "Listening for gRPC on '127.0.0.1:%d'" % server.grpc_port]
        positions = [messages.index(w) for w in wanted]
        self.assertEqual(positions, sorted(positions), messages)
        self.assertIn('Stats initialized for statsd', messages)
        self.assertIn('Stats flush interval: 10s', messages)

    def test_log_level_filters(self):
        with Sluice(rules={'life.yaml': RULES}, env={'LOG_LEVEL': 'error'}) as server:
            log = server.log()
        self.assertNotIn('Listening for HTTP on', log)
        self.assertNotIn('level=info', log)


class UnixSocket(unittest.TestCase):
    def test_grpc_on_a_unix_socket(self):
        sock_dir = tempfile.mkdtemp(prefix='sluice-uds-')
        path = os.path.join(sock_dir, 'rls.sock')
        try:
            with Sluice(rules={'life.yaml': RULES}, env={'GRPC_UDS': path}) as server:
                self.assertIn("Listening for gRPC on 'unix:%s'" % path, server.log())
                with grpc.insecure_channel('unix:' + path) as ch:
                    call = ch.unary_unary('/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
                                          request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
                                          response_deserializer=rls_pb2.RateLimitResponse.FromString)
                    req = rls_request_proto('life', [[('k', 'v')]])
                    first = call(req, timeout=5)
                    second = call(req, timeout=5)
                self.assertEqual(first.overall_code, rls_pb2.RateLimitResponse.OK)
                self.assertEqual(second.statuses[0].limit_remaining + 1, first.statuses[0].limit_remaining)
        finally:
            shutil.rmtree(sock_dir, ignore_errors=True)


class PortsHeld(unittest.TestCase):
    """A second Sluice on a port the first holds exits 1 in upstream's words, for every listener, whatever
    SO_REUSEPORT would allow; the first goes on serving alone (issue 40)."""

    def test_a_second_instance_exits_and_the_first_keeps_every_decision(self):
        with Sluice(rules={'life.yaml': RULES}) as first:
            address = '127.0.0.1:%d'
            cases = [
                ('PORT', first.http_port,
                 'Failed to open HTTP listener: listen tcp %s: bind: address already in use' % address),
                ('GRPC_PORT', first.grpc_port,
                 "Failed to listen for gRPC on '%s': listen tcp %s: bind: address already in use" % (address, address)),
                ('DEBUG_PORT', first.debug_port,
                 'Failed to open debug listener: listen tcp %s: bind: address already in use' % address),
            ]
            for setting, port, message in cases:
                with self.subTest(setting):
                    second = Sluice(rules={'life.yaml': RULES}, env={setting: str(port)}, wait_ready=False)
                    self.addCleanup(second.close)
                    self.assertEqual(second.wait_exit(10), 1, second.log())
                    self.assertIn(message.replace('%d', str(port)), second.log())
            # Every decision reached the first: one counter, taken down one at a time over new connections.
            remaining = []
            for _ in range(20):
                remaining.append(harness.decide('grpc', first.grpc_port, 'life', [[('k', 'one')]])
                                 .statuses[0].remaining)
                harness.close_channel(first.grpc_port)
            self.assertEqual(remaining, list(range(remaining[0], remaining[0] - 20, -1)))

    def test_a_unix_socket_another_process_serves_is_not_taken(self):
        sock_dir = tempfile.mkdtemp(prefix='sluice-uds-')
        path = os.path.join(sock_dir, 'rls.sock')
        try:
            with Sluice(rules={'life.yaml': RULES}, env={'GRPC_UDS': path}):
                log = Sluice.failed_start(self, {'GRPC_UDS': path})
                self.assertIn("Failed to listen for gRPC on 'unix:%s': listen unix %s: bind: address already in use"
                              % (path, path), log)
                self.assertTrue(os.path.exists(path))
        finally:
            shutil.rmtree(sock_dir, ignore_errors=True)


class HealthWithConfig(unittest.TestCase):
    env = {'HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED': 'true'}

    def test_empty_rules_directory_is_unhealthy_until_a_domain_loads(self):
        with Sluice(rules={}, env=self.env, wait_ready='answer') as s:
            status, _, body = s.healthcheck()
            self.assertEqual(status, 500, body)
            self.assertEqual(s.health('ratelimit'), 'NOT_SERVING')
            # adding a rule file (hot reload) makes it healthy
            s.write_rule('life.yaml', RULES)
            harness.wait_until(lambda: s.healthcheck()[0] == 200, timeout=5, message='healthy after a reload',
                               describe=s.log_tail)
            self.assertEqual(s.health('ratelimit'), 'SERVING')
            # removing the last domain makes it unhealthy again
            s.remove_rule('life.yaml')
            harness.wait_until(lambda: s.healthcheck()[0] == 500, timeout=5, message='unhealthy without domains',
                               describe=s.log_tail)
            self.assertEqual(s.health('ratelimit'), 'NOT_SERVING')

    def test_with_a_rule_file_is_healthy(self):
        with Sluice(rules={'life.yaml': RULES}, env=self.env) as s:
            status, _, body = s.healthcheck()
            self.assertEqual((status, body), (200, 'OK'))
            self.assertEqual(s.health('ratelimit'), 'SERVING')

    def test_without_the_setting_an_empty_directory_is_healthy(self):
        with Sluice(rules={}) as s:
            self.assertEqual(s.healthcheck()[0], 200)
            self.assertEqual(s.health('ratelimit'), 'SERVING')


class StartWithBadRules(unittest.TestCase):
    def test_bad_rule_file_stops_start_up(self):
        with Sluice(rules={'broken.yaml': BAD_RULES}, wait_ready=False) as s:
            rc = s.wait_exit(10)
            self.assertEqual(rc, 1, s.log())
            self.assertIn('broken.yaml', s.log())
            self.assertIn("unknown key 'colour'", s.log())

    def test_force_start_without_initial_config(self):
        with Sluice(rules={'broken.yaml': BAD_RULES}, env={'FORCE_START_WITHOUT_INITIAL_CONFIG': 'true'}) as s:
            with self.assertRaises(grpc.RpcError) as ctx:
                s.grpc('life', [[('k', 'v')]])
            self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNAVAILABLE)
            self.assertEqual(ctx.exception.details(), 'no rate limit configuration loaded')
            status, _, body = s.json(harness.rls_request_json('life', [[('k', 'v')]]))
            self.assertEqual(status, 503, body)
            self.assertEqual(body, {'code': 503, 'message': 'no rate limit configuration loaded'})
            # fixing the file brings the service up
            s.write_rule('broken.yaml', RULES)
            harness.wait_until(lambda: s.limit_of('life', [('k', 'v')]) == (1000000, 'HOUR'), timeout=5,
                               message='rules after the fix', describe=s.log_tail)


class Shutdown(unittest.TestCase):
    def test_sigterm_drains_and_exits_zero(self):
        s = Sluice(rules={'life.yaml': RULES})
        self.addCleanup(s.close)
        stop = threading.Event()
        results = []  # (transport, t_start, t_end, kind, detail)
        lock = threading.Lock()
        grpc_port, http_port = s.grpc_port, s.http_port

        def json_worker(n):
            body = harness.rls_request_json('life', [[('k', 'json%d' % n)]])
            while not stop.is_set():
                t0 = time.monotonic()
                try:
                    status, _, _ = harness.post_json(http_port, body, timeout=5)
                    res = ('http', status)
                except Exception as e:  # noqa: BLE001 - any failure is classified below
                    res = ('conn', repr(e))
                with lock:
                    results.append(('json', t0, time.monotonic()) + res)
                if res[0] == 'conn':
                    time.sleep(0.01)

        def grpc_worker(n):
            while not stop.is_set():
                t0 = time.monotonic()
                try:
                    resp = harness.rls(grpc_port, 'life', [[('k', 'grpc%d' % n)]], timeout=5)
                    res = ('grpc', 'OK' if resp.overall_code == 1 else 'code%d' % resp.overall_code)
                except grpc.RpcError as e:
                    res = ('grpc', e.code().name)
                with lock:
                    results.append(('grpc', t0, time.monotonic()) + res)
                if res[1] != 'OK':
                    time.sleep(0.01)

        threads = [threading.Thread(target=json_worker, args=(i,), daemon=True) for i in range(2)]
        threads += [threading.Thread(target=grpc_worker, args=(i,), daemon=True) for i in range(2)]
        try:
            for t in threads:
                t.start()
            harness.wait_until(lambda: sum(1 for r in results if r[0] == 'json') >= 20 and
                               sum(1 for r in results if r[0] == 'grpc') >= 20, timeout=10,
                               message='traffic before SIGTERM')
            t_sig = time.monotonic()
            s.terminate()

            def http_unhealthy():
                try:
                    return harness.http_get(http_port, '/healthcheck', timeout=1)[0] == 500
                except OSError:
                    return True  # listener closed

            def grpc_unhealthy():
                try:
                    return harness.grpc_health(grpc_port, 'ratelimit', timeout=1) == 'NOT_SERVING'
                except grpc.RpcError as e:
                    return e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)

            harness.wait_until(http_unhealthy, timeout=3, interval=0.01, message='/healthcheck 500 or refused')
            harness.wait_until(grpc_unhealthy, timeout=3, interval=0.01, message='gRPC health NOT_SERVING')
            rc = s.wait_exit(8)
            t_exit = time.monotonic()
        finally:
            stop.set()
            for t in threads:
                t.join(10)
        self.assertEqual(rc, 0, 'exit code %r; %s' % (rc, s.log_tail()))
        self.assertLess(t_exit - t_sig, 8.5)

        before = [r for r in results if r[2] < t_sig]
        self.assertGreater(sum(1 for r in before if r[0] == 'json'), 0)
        self.assertGreater(sum(1 for r in before if r[0] == 'grpc'), 0)
        problems = []
        for r in results:
            transport, t0, t1, kind, detail = r
            after = t1 >= t_sig
            if kind == 'http':
                if detail in (200, 429):
                    continue
                if detail >= 500 and after:
                    continue
            elif kind == 'grpc':
                if detail == 'OK':
                    continue
                if after and detail in ('UNAVAILABLE', 'CANCELLED'):
                    continue
            elif kind == 'conn' and after:
                continue
            problems.append('%s %s %r at %+.3fs..%+.3fs from SIGTERM' % (transport, kind, detail, t0 - t_sig,
                                                                         t1 - t_sig))
        self.assertEqual(problems, [], '%d bad outcomes\n%s' % (len(problems), s.log_tail()))
        self.assertIn('Listening for HTTP on', s.log())
        self.assertIn('Listening for gRPC on', s.log())

    def test_idle_connections_do_not_delay_exit(self):
        s = Sluice(rules={'life.yaml': RULES})
        self.addCleanup(s.close)
        conn = http.client.HTTPConnection('127.0.0.1', s.http_port, timeout=5)
        self.addCleanup(conn.close)
        conn.request('GET', '/healthcheck')
        self.assertEqual(conn.getresponse().read(), b'OK')  # kept alive, now idle
        self.assertEqual(s.health(), 'SERVING')             # an idle gRPC channel too
        t0 = time.monotonic()
        s.terminate()
        rc = s.wait_exit(8)
        took = time.monotonic() - t0
        self.assertEqual(rc, 0, s.log_tail())
        # Envoy keeps its gRPC connections open: an idle connection must not hold up the exit
        self.assertLess(took, 3.0, 'exit took %.2fs after SIGTERM with idle connections open' % took)

    def test_sigint_also_stops(self):
        s = Sluice(rules={'life.yaml': RULES})
        self.addCleanup(s.close)
        import signal
        s.proc.send_signal(signal.SIGINT)
        self.assertEqual(s.wait_exit(5), 0, s.log_tail())


if __name__ == '__main__':
    unittest.main()
