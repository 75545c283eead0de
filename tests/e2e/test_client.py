"""`sluice client` (issue 13) end to end: upstream's client_cmd flags and output, the exit status (0 OK, 1 OVER_LIMIT,
2 error), -json, -hits_addend and -negative_hits, a unix socket, TLS and mutual TLS against a running Sluice, and a
gRPC rate limit server the client did not come with (grpcio, in this process); and what every subcommand shares
(issue 48): one flag parser, one wording for a refused connection, exit 2 for a usage error."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
from concurrent import futures

os.environ.setdefault('GRPC_VERBOSITY', 'NONE')

import grpc  # noqa: E402

import harness  # noqa: E402
from harness import SLUICE_BIN, Sluice, TlsCerts, rls_pb2  # noqa: E402

RULES = """
domain: c
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 3, name: three}
  - key: free
    rate_limit: {unlimited: true}
"""

OK, OVER_LIMIT, ERROR = 0, 1, 2
CLI_PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'docs', 'reference', 'cli.md')


def documented_flags():
    """{flag name: default} from docs/reference/cli.md's `sluice client` table; a default not in backquotes counts as ''."""
    with open(CLI_PAGE, encoding='utf-8') as f:
        text = f.read()
    table = text.split('## `sluice client`', 1)[1].split('```', 1)[0]
    flags = {}
    for row in re.findall(r'^\| (`-.*?) \| (.*?) \|', table, re.M):
        default = re.fullmatch(r'`([^`]*)`', row[1])
        for name in re.findall(r'`-([^`]+)`', row[0]):
            flags[name] = default.group(1) if default else ''
    return flags


def run_client(*flags):
    """(exit status, stdout, stderr) of `sluice client FLAGS...`."""
    r = subprocess.run([SLUICE_BIN, 'client'] + list(flags), stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=30, env=harness.base_env())
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def json_client(test, expected_status, *flags):
    """The -json answer of a call that must exit with `expected_status`, parsed."""
    status, out, err = run_client('-json', *flags)
    test.assertEqual(status, expected_status, out + err)
    return json.loads(out)


class Plain(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sluice = Sluice(rules={'c.yaml': RULES}, env={'BACKEND_TYPE': 'memory'})
        cls.target = '127.0.0.1:%d' % cls.sluice.grpc_port

    @classmethod
    def tearDownClass(cls):
        cls.sluice.close()

    def call(self, expected_status, *flags):
        return json_client(self, expected_status, '-dial_string', self.target, '-domain', 'c', *flags)

    def test_upstream_output_and_exit_status(self):
        """Upstream's output (every flag, then the response in proto text); 0 while under the limit, 1 over it."""
        harness.avoid_window_edge('HOUR', 5)
        status, out, err = run_client('-dial_string', self.target, '-domain', 'c', '-descriptors', 'k=text')
        self.assertEqual(status, OK, err)
        # every flag, in name order, its value quoted (Go's flag.VisitAll and %q)
        flags = [line for line in out.splitlines() if line.startswith('Flag: ')]
        self.assertEqual(flags, [
            'Flag: --descriptors="[ <key=k, value=text> ] "', 'Flag: --dial_string="%s"' % self.target,
            'Flag: --domain="c"', 'Flag: --grpc-cert-file=""', 'Flag: --grpc-key-file=""',
            'Flag: --grpc-server-ca-file=""', 'Flag: --grpc-server-name=""', 'Flag: --grpc-use-tls="false"',
            'Flag: --hits_addend="1"', 'Flag: --json="false"', 'Flag: --negative_hits="false"',
            'Flag: --oltp-protocol=""', 'Flag: --timeout="5s"', 'Flag: --unix=""'])
        self.assertRegex(out, r'response: overall_code: OK statuses \{ code: OK current_limit \{ requests_per_unit: 3 '
                              r'unit: HOUR name: "three" \} limit_remaining: 2 duration_until_reset \{ seconds: \d+ \}')
        self.call(OK, '-descriptors', 'k=text', '-hits_addend', '2')
        status, out, err = run_client('--dial_string=' + self.target, '--domain=c', '--descriptors=k=text')
        self.assertEqual(status, OVER_LIMIT, out + err)
        self.assertIn('response: overall_code: OVER_LIMIT', out)

    def test_json_hits_and_refunds(self):
        """-json prints only the response; -hits_addend counts; -negative_hits gives hits back."""
        harness.avoid_window_edge('HOUR', 5)
        r = self.call(OK, '-descriptors', 'k=json', '-descriptors', 'free=x,extra=y', '-hits_addend', '3')
        self.assertEqual(r['overallCode'], 'OK')
        self.assertEqual(r['statuses'][0]['currentLimit'], {'name': 'three', 'requestsPerUnit': 3, 'unit': 'HOUR'})
        self.assertNotIn('limitRemaining', r['statuses'][0])  # 0: omitted, as protojson does
        self.assertEqual(r['statuses'][1], {'code': 'OK'})  # free=x,extra=y matches no rule
        self.assertEqual(self.call(OVER_LIMIT, '-descriptors', 'k=json')['overallCode'], 'OVER_LIMIT')
        # -hits_addend 0 checks without consuming (sent in the descriptor: the request's 0 would mean 1)
        check = self.call(OVER_LIMIT, '-descriptors', 'k=json', '-hits_addend', '0')
        self.assertNotIn('limitRemaining', check['statuses'][0])
        refund = self.call(OK, '-descriptors', 'k=json', '-hits_addend', '2', '-negative_hits')
        self.assertEqual(refund['statuses'][0]['limitRemaining'], 1)  # 4 - 2 = 2 used
        self.assertEqual(self.call(OK, '-descriptors', 'k=json')['statuses'][0].get('limitRemaining', 0), 0)

    def test_errors_exit_2_with_the_reason(self):
        for flags, message in [
                (['-descriptors', 'k'], "invalid descriptor list 'k': expected key=value pairs"),
                (['-nope'], 'flag provided but not defined: -nope'),
                (['-grpc-server-ca-file', '/x'], 'TLS flags given without -grpc-use-tls'),
                (['-dial_string', self.target, '-domain', '', '-descriptors', 'k=v'],
                 'request error: INVALID_ARGUMENT: rate limit domain must not be empty'),
                (['-dial_string', '127.0.0.1:%d' % harness.dead_port(), '-domain', 'c', '-descriptors', 'k=v',
                  '-timeout', '2s'], 'sluice client: cannot connect to 127.0.0.1:'),
                (['-grpc-use-tls', '-grpc-server-ca-file', '/nonexistent/ca.pem', '-descriptors', 'k=v'],
                 '-grpc-server-ca-file: cannot read /nonexistent/ca.pem: No such file or directory')]:
            with self.subTest(flags=flags):
                status, out, err = run_client(*flags)
                self.assertEqual(status, ERROR, out + err)
                self.assertIn(message, err)

    def test_help(self):
        status, out, _ = run_client('-help')
        self.assertEqual(status, OK)
        self.assertIn('Exit status: 0 OK, 1 OVER_LIMIT, 2 error.', out)

    def test_help_dump_and_docs_agree(self):
        """-help, the flag dump and the CLI page's table list the same flags; the dump's defaults are the table's."""
        documented = documented_flags()
        _, help_text, _ = run_client('-help')
        self.assertEqual(sorted(re.findall(r'^  -(\S+)', help_text, re.M)), sorted(documented))
        _, out, _ = run_client()  # every flag at its default; the dump comes before the call (which fails)
        dump = dict(re.findall(r'^Flag: --(\S+?)="(.*)"$', out, re.M))
        self.assertEqual(dump, documented)


class Subcommands(unittest.TestCase):
    """Issue 48, part 4 (the CLI): every subcommand parses its flags with one parser, says a refused connection in
    one wording without a library's internals, prints an error once, and exits 2 on a usage error."""

    def sluice(self, *args, env=None):
        r = harness.run_sluice(list(args), env=env, timeout=30)
        return r.returncode, r.stdout, r.stderr

    def assert_one_clean_line(self, err, expected):
        """`expected` said once, on the first line, without Boost's or gRPC's internals."""
        self.assertEqual(err.count(expected), 1, err)
        self.assertTrue(err.splitlines()[0].endswith(expected), err)
        for internal in ('.hpp', '[system:', 'boost', 'UNKNOWN:', 'ipv4:', 'grpc_status', 'failed to connect to all'):
            self.assertNotIn(internal, err)

    def test_a_refused_connection_is_said_alike_by_every_subcommand(self):
        addr = '127.0.0.1:%d' % harness.dead_port()
        refused = 'cannot connect to %s: connection refused' % addr
        for args in (['client', '-dial_string', addr, '-domain', 'c', '-descriptors', 'k=v'],
                     ['rlqs-client', '-dial_string', addr, '-domain', 'q', '-bucket', 'k=v', '-duration', '2s'],
                     ['counters', 'get', '-debug_addr', addr, '-domain', 'c', '-descriptor', 'k=v'],
                     ['counters', 'get', '--debug_addr', addr, '--domain', 'c', '--entry', 'k=v'],
                     ['explain', '-debug_addr', addr, '-domain', 'c', '-descriptors', 'k=v']):
            with self.subTest(args=args):
                code, _, err = self.sluice(*args)
                self.assertEqual(code, ERROR, err)
                self.assert_one_clean_line(err, refused)
                self.assertTrue(err.startswith('sluice %s: ' % args[0]), err)

    def test_explain_refuses_sluice_clients_connection_flags(self):
        # -dial_string was silently ignored: explain asks the debug listener (-debug_addr), never the gRPC port.
        for flag in (['-dial_string', '127.0.0.1:8081'], ['--dial_string=127.0.0.1:8081'], ['-unix', '/tmp/s'],
                     ['-grpc-use-tls'], ['-json']):
            with self.subTest(flag=flag):
                code, out, err = self.sluice('explain', '-domain', 'c', '-descriptors', 'k=v', *flag)
                self.assertEqual((code, out), (ERROR, ''), err)
                self.assertIn("%s is sluice client's" % flag[0].split('=')[0], err.splitlines()[0])
        code, out, _ = self.sluice('explain', '-help')
        self.assertEqual(code, OK)
        self.assertIn('-debug_addr host:port', out)
        self.assertNotIn('-dial_string host:port', out)

    def test_check_config_parses_its_flags_as_every_subcommand(self):
        d = tempfile.mkdtemp(prefix='sluice-e2e-cc-')
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, 'c.yaml'), 'w') as f:
            f.write(RULES)
        tables = tempfile.mkdtemp(prefix='sluice-e2e-tables-')
        self.addCleanup(shutil.rmtree, tables, True)
        # --help is the usage, not a folder; every flag is in it.
        for help_flag in ('--help', '-h', '-help'):
            code, out, err = self.sluice('check-config', help_flag)
            self.assertEqual((code, err), (OK, ''), help_flag)
            for flag in ('--merge-domain-config', '--strict', '--limit-tables-dir', '--limit-tables-redis'):
                self.assertIn(flag, out)
            self.assertNotIn('loading config directory', out)
        # Flags before or after DIR; --flag=value and --flag value.
        for args in ([d, '--strict'], ['--strict', d], ['--limit-tables-dir=' + tables, d],
                     ['--limit-tables-dir', tables, '--strict=true', d], [d, '--limit-tables-redis', '--strict']):
            with self.subTest(args=args):
                code, out, err = self.sluice('check-config', *args)
                self.assertEqual(code, OK, out + err)
                self.assertIn('all rate limit configs ok', out)
        # Usage errors: exit 2, the error said once, then the usage.
        for args, error in [([d, '--limit-tables-dir'], 'flag needs an argument: --limit-tables-dir'),
                            ([d, '--sloppy'], 'flag provided but not defined: --sloppy'),
                            ([], 'give the folder of rule files (DIR)'),
                            ([d, d], "unexpected argument '%s': check-config takes one DIR" % d),
                            ([d, '--strict=maybe'], "invalid boolean value 'maybe' for --strict")]:
            with self.subTest(args=args):
                code, out, err = self.sluice('check-config', *args)
                self.assertEqual((code, out), (ERROR, ''), err)
                self.assertEqual(err.splitlines()[0], 'sluice check-config: ' + error)
                self.assertEqual(err.count(error), 1, err)
                self.assertIn('Usage: sluice check-config DIR', err)

    def test_check_config_says_a_table_error_once(self):
        d = tempfile.mkdtemp(prefix='sluice-e2e-cc-')
        self.addCleanup(shutil.rmtree, d, True)
        os.makedirs(os.path.join(d, 'rules'))
        os.makedirs(os.path.join(d, 'tables'))
        with open(os.path.join(d, 'rules', 'a.yaml'), 'w') as f:
            f.write('domain: a\ndescriptors:\n  - key: k\n    limits_from: t\n'
                    '    rate_limit: {unit: hour, requests_per_unit: 5}\n')
        with open(os.path.join(d, 'tables', 't.csv'), 'w') as f:
            f.write('value,requests_per_unit,unit\nx\n')
        code, out, err = self.sluice('check-config', os.path.join(d, 'rules'), '--limit-tables-dir',
                                     os.path.join(d, 'tables'))
        self.assertEqual(code, 1, out + err)
        self.assertEqual(err, '')  # the server's log line said it again
        self.assertEqual(len([line for line in out.splitlines() if 't.csv:' in line]), 1, out)

    def test_help_lists_every_check_config_flag(self):
        code, out, _ = self.sluice('--help')
        self.assertEqual(code, OK)
        _, flags, _ = self.sluice('check-config', '--help')
        for flag in sorted(set(re.findall(r'^  (--[a-z-]+)', flags, re.M))):
            self.assertIn(flag, out)
        self.assertIn('--limit-tables-dir', out)
        self.assertIn('--limit-tables-redis', out)

    def test_usage_errors_exit_2_with_the_error_once(self):
        for args, error in [(['client', '-nope'], 'flag provided but not defined: -nope'),
                            (['client', '-domain'], 'flag needs an argument: -domain'),
                            (['rlqs-client', '--nope'], 'flag provided but not defined: --nope'),
                            (['counters', 'get', '-domain'], 'flag needs an argument: -domain'),
                            (['counters', 'get', '--nope=1'], 'flag provided but not defined: --nope'),
                            (['explain', '-debug_addr'], 'flag needs an argument: -debug_addr'),
                            (['explain', 'stray'], "unexpected argument 'stray'"),
                            (['check-config', '--nope'], 'flag provided but not defined: --nope'),
                            (['frobnicate'], "unknown command 'frobnicate'")]:
            with self.subTest(args=args):
                code, out, err = self.sluice(*args)
                self.assertEqual(code, ERROR, out + err)
                self.assertEqual(err.count(error), 1, err)
                self.assertIn(error, err.splitlines()[0])


class UnixSocket(unittest.TestCase):
    def test_unix(self):
        d = tempfile.mkdtemp(prefix='sluice-client-uds-')
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, 'rls.sock')
        s = Sluice(rules={'c.yaml': RULES}, env={'GRPC_UDS': path})
        self.addCleanup(s.close)
        r = json_client(self, OK, '-unix', path, '-domain', 'c', '-descriptors', 'k=unix')
        self.assertEqual(r['statuses'][0]['limitRemaining'], 2)


class Tls(unittest.TestCase):
    def setUp(self):
        self.certs = TlsCerts()
        self.addCleanup(self.certs.close)

    def start(self, **env):
        env.update({'GRPC_SERVER_USE_TLS': 'true', 'GRPC_SERVER_TLS_CERT': self.certs.server,
                    'GRPC_SERVER_TLS_KEY': self.certs.server_key})
        s = Sluice(rules={'c.yaml': RULES}, env=env)
        self.addCleanup(s.close)
        return s

    def outcome(self, s, *flags, host='localhost'):
        status, out, err = run_client('-json', '-dial_string', '%s:%d' % (host, s.grpc_port), '-domain', 'c',
                                      '-descriptors', 'k=tls', '-timeout', '3s', *flags)
        return status, out + err

    def assertOutcome(self, s, expected, *flags, host='localhost'):
        status, output = self.outcome(s, *flags, host=host)
        self.assertEqual(status, expected, output)

    def test_tls(self):
        """The server is verified with the given CA (by name or IP address, or by -grpc-server-name); a plaintext
        client or one that trusts another CA gets exit status 2."""
        s = self.start()
        self.assertOutcome(s, OK, '-grpc-use-tls', '-grpc-server-ca-file', self.certs.ca)
        self.assertOutcome(s, OK, '-grpc-use-tls', '-grpc-server-ca-file', self.certs.ca, host='127.0.0.1')
        status, err = self.outcome(s, '-grpc-use-tls', '-grpc-server-ca-file', self.certs.ca,
                                   '-grpc-server-name', 'wrong.example')
        self.assertEqual(status, ERROR, err)
        # The handshake's reason, in the wording of every subcommand, without gRPC's framing of it.
        self.assertIn('sluice client: cannot connect to localhost:%d: peer name wrong.example is not in peer '
                      'certificate' % s.grpc_port, err)
        self.assertNotIn('failed to connect to all addresses', err)
        status, err = self.outcome(s, '-grpc-use-tls', '-grpc-server-ca-file', self.certs.other_ca)
        self.assertEqual(status, ERROR, err)
        self.assertIn('sluice client: cannot connect to localhost:%d: ' % s.grpc_port, err)
        self.assertOutcome(s, ERROR)  # plaintext to a TLS listener

    def test_mutual_tls(self):
        """GRPC_CLIENT_TLS_CACERT: only a client certificate from that CA gets through."""
        s = self.start(GRPC_CLIENT_TLS_CACERT=self.certs.ca)
        ca = ['-grpc-use-tls', '-grpc-server-ca-file', self.certs.ca]
        self.assertOutcome(s, OK, *ca, '-grpc-cert-file', self.certs.client, '-grpc-key-file', self.certs.client_key)
        self.assertOutcome(s, ERROR, *ca)
        self.assertOutcome(s, ERROR, *ca, '-grpc-cert-file', self.certs.other_client,
                           '-grpc-key-file', self.certs.other_client_key)


class OtherServer(unittest.TestCase):
    """A rate limit service that is not Sluice: grpcio serving ShouldRateLimit from this process."""

    def setUp(self):
        self.received = []

        def should_rate_limit(request, context):
            self.received.append(request)
            code = rls_pb2.RateLimitResponse.OVER_LIMIT if request.domain == 'deny' else rls_pb2.RateLimitResponse.OK
            return rls_pb2.RateLimitResponse(overall_code=code, statuses=[
                rls_pb2.RateLimitResponse.DescriptorStatus(code=code, limit_remaining=7)])

        handler = grpc.method_handlers_generic_handler('envoy.service.ratelimit.v3.RateLimitService', {
            'ShouldRateLimit': grpc.unary_unary_rpc_method_handler(
                should_rate_limit, request_deserializer=rls_pb2.RateLimitRequest.FromString,
                response_serializer=rls_pb2.RateLimitResponse.SerializeToString)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port('127.0.0.1:0')
        self.server.start()
        self.addCleanup(self.server.stop, None)

    def test_any_rls_server(self):
        target = '127.0.0.1:%d' % self.port
        r = json_client(self, OK, '-dial_string', target, '-domain', 'allow', '-descriptors', 'a=1,b=2',
                        '-descriptors', 'c=', '-hits_addend', '5', '-negative_hits')
        self.assertEqual(r['statuses'][0]['limitRemaining'], 7)
        json_client(self, OVER_LIMIT, '-dial_string', target, '-domain', 'deny', '-descriptors', 'a=1')
        first = self.received[0]
        self.assertEqual(first.domain, 'allow')
        self.assertEqual(first.hits_addend, 5)
        self.assertEqual([[(e.key, e.value) for e in d.entries] for d in first.descriptors],
                         [[('a', '1'), ('b', '2')], [('c', '')]])
        self.assertTrue(all(d.is_negative_hits for d in first.descriptors))
        self.assertFalse(self.received[1].descriptors[0].is_negative_hits)


if __name__ == '__main__':
    unittest.main(verbosity=2)
