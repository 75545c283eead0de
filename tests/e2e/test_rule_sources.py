"""Rules from a rule directory and an xDS server at once (CONFIG_TYPE=FILE,GRPC_XDS_SOTW; issue 32;
docs/concepts/rule-sources.md#rules-from-files-and-xds-at-once): the union served over gRPC and /json, each source
reloading on its own, a domain both give (the xDS update NACKed naming it, the file change refused, the rules in
force kept; the refused side coming in once the other gives the domain up; merged with MERGE_DOMAIN_CONFIG=true),
/rlconfig's sources, health over the union, and each source failing on its own (a bad file, a bad xDS response, the
xDS server gone, start-up without one of them or with a conflict, SIGTERM while waiting)."""

import time
import unittest

import harness
from harness import Sluice
from xds_server import XdsServer, config

FAST_BACKOFF = {'XDS_CLIENT_BACKOFF_INITIAL_INTERVAL': '100ms', 'XDS_CLIENT_BACKOFF_MAX_INTERVAL': '400ms',
                'XDS_CLIENT_BACKOFF_JITTER': 'false'}


def rule(domain, key, requests, unit='hour'):
    return 'domain: %s\ndescriptors:\n  - key: %s\n    rate_limit: {unit: %s, requests_per_unit: %d}\n' % (
        domain, key, unit, requests)


def mesh(requests=2, domain='mesh', name='mesh'):
    return config(name, domain, [{'key': 'user', 'unit': 'HOUR', 'requests': requests}])


def env_for(server_port, **extra):
    env = {'CONFIG_TYPE': 'FILE,GRPC_XDS_SOTW', 'CONFIG_GRPC_XDS_SERVER_URL': '127.0.0.1:%d' % server_port}
    env.update(FAST_BACKOFF)
    env.update(extra)
    return env


def stat(sluice, name):
    for line in harness.http_get(sluice.debug_port, '/stats')[2].splitlines():
        if line.startswith(name + ': '):
            return int(line.split(': ', 1)[1])
    return 0


class Case(unittest.TestCase):
    def server(self, **kwargs):
        s = XdsServer(**kwargs)
        self.addCleanup(s.stop)
        return s

    def sluice(self, rules, env, **kwargs):
        s = Sluice(rules=rules, env=env, **kwargs)
        self.addCleanup(s.close)
        return s

    def codes(self, sluice, domain, key, value, n, transport='grpc'):
        harness.avoid_window_edge('HOUR', 2)
        return [sluice.decide(transport, domain, [[(key, value)]]).overall for _ in range(n)]

    def limit_is(self, sluice, domain, key, requests):
        """Waits until /rlconfig shows the rule with that limit."""
        line = '%s.%s: unit=HOUR requests_per_unit=%d,' % (domain, key, requests)
        harness.wait_until(lambda: line in harness.http_get(sluice.debug_port, '/rlconfig')[2], timeout=10,
                           message=line, describe=lambda: harness.http_get(sluice.debug_port, '/rlconfig')[2])


class Together(Case):
    def test_both_served_each_reloading_on_its_own(self):
        server = self.server(snapshot=('v1', [mesh(2)]))
        s = self.sluice({'web.yaml': rule('web', 'ip', 3)}, env_for(server.port))
        server.wait_for_ack('v1')
        self.assertIn('Successfully loaded the initial ratelimit configs', s.log())
        self.assertEqual(self.codes(s, 'web', 'ip', 'a', 4), ['OK', 'OK', 'OK', 'OVER_LIMIT'])
        self.assertEqual(self.codes(s, 'mesh', 'user', 'u', 3, 'json'), ['OK', 'OK', 'OVER_LIMIT'])
        body = harness.http_get(s.debug_port, '/rlconfig')[2]
        self.assertTrue(body.startswith('domain=mesh source=GRPC_XDS_SOTW\ndomain=web source=FILE\n'), body)
        self.assertIn('web.ip: unit=HOUR requests_per_unit=3, shadow_mode: false, quota_mode: false', body)

        # A file change: the xDS rules stay.
        s.write_rule('web.yaml', rule('web', 'ip', 5))
        self.limit_is(s, 'web', 'ip', 5)
        self.assertEqual(self.codes(s, 'web', 'ip', 'b', 6, 'json'), ['OK'] * 5 + ['OVER_LIMIT'])
        self.assertEqual(self.codes(s, 'mesh', 'user', 'u', 1), ['OVER_LIMIT'])
        # An xDS update: the files' rules stay.
        server.push('v2', [mesh(4), mesh(1, domain='second', name='second')])
        server.wait_for_ack('v2')
        self.assertEqual(self.codes(s, 'mesh', 'user', 'w', 5), ['OK'] * 4 + ['OVER_LIMIT'])
        self.assertEqual(self.codes(s, 'second', 'user', 'v', 2), ['OK', 'OVER_LIMIT'])
        self.assertEqual(self.codes(s, 'web', 'ip', 'b', 1), ['OVER_LIMIT'])
        self.assertIn('domain=second source=GRPC_XDS_SOTW', harness.http_get(s.debug_port, '/rlconfig')[2])
        self.assertEqual(stat(s, 'ratelimit.service.config_load_error'), 0)

    def test_a_domain_both_give_is_refused_from_either_side_and_the_rules_stay(self):
        server = self.server(snapshot=('v1', [mesh(2)]))
        s = self.sluice({'web.yaml': rule('web', 'ip', 2)}, env_for(server.port))
        server.wait_for_ack('v1')

        nonce = server.push('v2', [mesh(2), config('takeover', 'web', [{'key': 'ip', 'unit': 'HOUR',
                                                                         'requests': 100}])])
        version, nacked, message = server.wait_for_nack()
        self.assertEqual((version, nacked), ('v1', nonce))
        self.assertEqual(message, "domain 'web' is given by both FILE ('web.yaml') and GRPC_XDS_SOTW "
                                  "('takeover'): a domain comes from one source unless MERGE_DOMAIN_CONFIG=true")
        self.assertIn('Error loading new configuration: ' + message, s.log())
        self.assertEqual(self.codes(s, 'web', 'ip', 'a', 3), ['OK', 'OK', 'OVER_LIMIT'])  # the file's limit

        since = len(s.log())
        s.write_rule('also-mesh.yaml', rule('mesh', 'path', 100))
        s.wait_for_log("Error loading new configuration: domain 'mesh' is given by both FILE ('also-mesh.yaml') "
                       "and GRPC_XDS_SOTW ('mesh')", since=since, message='the file change refused')
        self.assertEqual(self.codes(s, 'mesh', 'user', 'u', 3), ['OK', 'OK', 'OVER_LIMIT'])
        self.assertNotIn('mesh.path', harness.http_get(s.debug_port, '/rlconfig')[2])
        self.assertEqual(stat(s, 'ratelimit.service.config_load_error'), 2)
        reloads = harness.http_get(s.debug_port, '/dashboard/data')[2]['reloads']
        self.assertEqual([(r['source'], r['ok']) for r in reloads[:2]], [('files', False), ('xDS resources', False)])

    def test_a_refused_side_comes_in_once_the_other_gives_the_domain_up(self):
        takeover = config('takeover', 'web', [{'key': 'ip', 'unit': 'HOUR', 'requests': 100}])
        server = self.server(snapshot=('v1', [mesh(2)]))
        s = self.sluice({'web.yaml': rule('web', 'ip', 2)}, env_for(server.port))
        server.wait_for_ack('v1')
        server.push('v2', [mesh(2), takeover])
        self.assertIn("domain 'web' is given by both", server.wait_for_nack()[2])
        # The files give web up: the NACKed rules cannot be taken back, so Sluice asks for them again on a new
        # stream, and the server's v2 comes in.
        s.remove_rule('web.yaml')
        server.wait_for_ack('v2')
        self.assertEqual(len(server.opened), 2)
        self.assertIn('Asking the xDS Management Server at 127.0.0.1:%d for its rules again' % server.port, s.log())
        self.assertEqual(self.codes(s, 'web', 'ip', 'a', 3), ['OK'] * 3)  # 100 an hour now
        self.assertIn('domain=web source=GRPC_XDS_SOTW', harness.http_get(s.debug_port, '/rlconfig')[2])

        # A file refused for xDS's mesh is loaded again, from the disk, once an xDS update gives mesh up.
        since = len(s.log())
        s.write_rule('mesh.yaml', rule('mesh', 'path', 1))
        s.wait_for_log("Error loading new configuration: domain 'mesh' is given by both", since=since,
                       message='the file refused')
        server.push('v3', [takeover])
        server.wait_for_ack('v3')
        self.limit_is(s, 'mesh', 'path', 1)
        self.assertIn('domain=mesh source=FILE', harness.http_get(s.debug_port, '/rlconfig')[2])
        self.assertEqual(self.codes(s, 'mesh', 'path', 'p', 2), ['OK', 'OVER_LIMIT'])

    def test_merge_domain_config_merges_a_domain_both_give(self):
        server = self.server(snapshot=('v1', [mesh(2, domain='shared')]))
        s = self.sluice({'shared.yaml': rule('shared', 'ip', 3)}, env_for(server.port, MERGE_DOMAIN_CONFIG='true'))
        server.wait_for_ack('v1')
        self.assertEqual(self.codes(s, 'shared', 'ip', 'a', 4), ['OK', 'OK', 'OK', 'OVER_LIMIT'])
        self.assertEqual(self.codes(s, 'shared', 'user', 'u', 3, 'json'), ['OK', 'OK', 'OVER_LIMIT'])
        body = harness.http_get(s.debug_port, '/rlconfig')[2]
        self.assertTrue(body.startswith('domain=shared source=FILE,GRPC_XDS_SOTW\n'), body)
        # The same rule from both sides is refused as between two files, naming it.
        server.push('v2', [config('mesh', 'shared', [{'key': 'ip', 'unit': 'HOUR', 'requests': 9}])])
        self.assertEqual(server.wait_for_nack()[2], "mesh: duplicate descriptor composite key 'shared.ip'")

    def test_health_over_the_union(self):
        server = self.server(snapshot=('v1', []))
        s = self.sluice({}, env_for(server.port, HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED='true'), wait_ready='answer')
        server.wait_for_ack('v1')
        self.assertEqual(s.healthcheck()[0], 500)  # both loaded, no domain yet
        server.push('v2', [mesh(2)])
        server.wait_for_ack('v2')
        harness.wait_until(lambda: s.healthcheck()[0] == 200, message='healthy with the xDS domain')
        s.write_rule('web.yaml', rule('web', 'ip', 2))
        self.limit_is(s, 'web', 'ip', 2)
        server.push('v3', [])
        server.wait_for_ack('v3')
        self.assertEqual(s.healthcheck()[0], 200)  # the file's domain
        s.remove_rule('web.yaml')
        harness.wait_until(lambda: s.healthcheck()[0] == 500, message='unhealthy with no domain at all')


class EachFailingAlone(Case):
    def test_a_bad_file_or_a_bad_response_stops_only_its_own_source(self):
        server = self.server(snapshot=('v1', [mesh(2)]))
        s = self.sluice({'web.yaml': rule('web', 'ip', 2)}, env_for(server.port))
        server.wait_for_ack('v1')
        since = len(s.log())
        s.write_rule('web.yaml', 'domain: [broken')
        s.wait_for_log('Error loading new configuration: web.yaml: error loading config file', since=since,
                       message='the bad file refused')
        server.push('v2', [mesh(3)])
        server.wait_for_ack('v2')  # xDS goes on, with the files in force
        self.assertEqual(self.codes(s, 'mesh', 'user', 'u', 4), ['OK', 'OK', 'OK', 'OVER_LIMIT'])
        self.assertEqual(self.codes(s, 'web', 'ip', 'a', 3), ['OK', 'OK', 'OVER_LIMIT'])

        server.push('v3', [config('broken', '', [])])
        server.wait_for_nack()
        s.write_rule('web.yaml', rule('web', 'ip', 4))  # the files go on, with the xDS rules in force
        self.limit_is(s, 'web', 'ip', 4)
        self.assertEqual(self.codes(s, 'web', 'ip', 'c', 5), ['OK'] * 4 + ['OVER_LIMIT'])
        self.assertEqual(self.codes(s, 'mesh', 'user', 'u', 1), ['OVER_LIMIT'])

    def test_the_xds_server_gone_leaves_its_rules_and_the_files_reloading(self):
        server = XdsServer(snapshot=('v1', [mesh(2)]))
        port = server.port
        s = self.sluice({'web.yaml': rule('web', 'ip', 2)}, env_for(port))
        server.wait_for_ack('v1')
        server.stop()
        s.wait_for_log('Failed to receive configuration from xDS Management Server', message='the stream failure')
        s.write_rule('web.yaml', rule('web', 'ip', 3))
        self.limit_is(s, 'web', 'ip', 3)
        self.assertEqual(self.codes(s, 'mesh', 'user', 'u', 3), ['OK', 'OK', 'OVER_LIMIT'])
        restarted = self.server(port=port, snapshot=('v2', [mesh(1, domain='back', name='back')]))
        restarted.wait_for_ack('v2')
        self.assertEqual(self.codes(s, 'back', 'user', 'u', 2), ['OK', 'OVER_LIMIT'])
        self.assertEqual(self.codes(s, 'web', 'ip', 'b', 4), ['OK', 'OK', 'OK', 'OVER_LIMIT'])

    def test_start_up_waits_for_xds_after_loading_the_files(self):
        port = harness.free_port()
        s = self.sluice({'web.yaml': rule('web', 'ip', 2)}, env_for(port), wait_ready=False)
        s.wait_for_log("Successfully loaded new configuration (1 files, 1 domains)", message='the files loaded')
        time.sleep(0.3)
        with self.assertRaises(OSError):  # the ports open once both sources have loaded
            harness.http_get(s.http_port, '/healthcheck', timeout=0.5)
        self.server(port=port, snapshot=('v1', [mesh(2)]))
        s.wait_ready(timeout=10)
        self.assertIn('Successfully loaded the initial ratelimit configs', s.log())
        self.assertEqual(self.codes(s, 'web', 'ip', 'a', 3), ['OK', 'OK', 'OVER_LIMIT'])

    def test_start_up_with_a_first_response_that_conflicts_waits_until_a_side_gives_way(self):
        server = self.server(snapshot=('v1', [mesh(2, domain='web', name='takeover')]))
        s = self.sluice({'web.yaml': rule('web', 'ip', 2)}, env_for(server.port), wait_ready=False)
        server.wait_for_nack()
        s.wait_for_log("domain 'web' is given by both FILE ('web.yaml') and GRPC_XDS_SOTW ('takeover')",
                       message='the conflict logged')
        with self.assertRaises(OSError):  # still waiting: ports closed
            harness.http_get(s.http_port, '/healthcheck', timeout=0.5)
        s.remove_rule('web.yaml')  # the files are watched while start-up waits
        server.wait_for_ack('v1')
        s.wait_ready(timeout=10)
        self.assertEqual(self.codes(s, 'web', 'user', 'u', 3), ['OK', 'OK', 'OVER_LIMIT'])

    def test_sigterm_while_waiting_for_xds_after_the_files(self):
        s = self.sluice({'web.yaml': rule('web', 'ip', 2)}, env_for(harness.dead_port()), wait_ready=False)
        s.wait_for_log('Successfully loaded new configuration (1 files, 1 domains)', message='the files loaded')
        s.terminate()
        self.assertEqual(s.wait_exit(10), 0, s.log())

    def test_force_start_with_bad_files_serves_xds_until_the_files_are_fixed(self):
        server = self.server(snapshot=('v1', [mesh(2)]))
        s = self.sluice({'web.yaml': 'domain: [broken'},
                        env_for(server.port, FORCE_START_WITHOUT_INITIAL_CONFIG='true'))
        server.wait_for_ack('v1')
        self.assertEqual(self.codes(s, 'mesh', 'user', 'u', 3), ['OK', 'OK', 'OVER_LIMIT'])
        s.write_rule('web.yaml', rule('web', 'ip', 1))
        self.limit_is(s, 'web', 'ip', 1)
        self.assertEqual(self.codes(s, 'web', 'ip', 'a', 2), ['OK', 'OVER_LIMIT'])

    def test_force_start_serves_the_files_until_xds_comes(self):
        port = harness.free_port()
        s = self.sluice({'web.yaml': rule('web', 'ip', 2)},
                        env_for(port, FORCE_START_WITHOUT_INITIAL_CONFIG='true'))
        self.assertEqual(self.codes(s, 'web', 'ip', 'a', 3), ['OK', 'OK', 'OVER_LIMIT'])
        self.assertEqual(self.codes(s, 'mesh', 'user', 'u', 1), ['OK'])  # no rule yet
        server = self.server(port=port, snapshot=('v1', [mesh(2)]))
        server.wait_for_ack('v1')
        self.assertEqual(self.codes(s, 'mesh', 'user', 'u', 3), ['OK', 'OK', 'OVER_LIMIT'])

    def test_bad_files_at_start_up_stop_it_whatever_xds_gives(self):
        server = self.server(snapshot=('v1', [mesh(2)]))
        s = self.sluice({'web.yaml': 'domain: [broken'}, env_for(server.port), start=False)
        s.start(wait_ready=False)
        self.assertEqual(s.wait_exit(10), 1, s.log())
        self.assertIn('cannot start without rate limit rules (set FORCE_START_WITHOUT_INITIAL_CONFIG=true to start '
                      'anyway): web.yaml: error loading config file', s.log())

    def test_bad_values(self):
        for value, message in (('FILE,XDS', "invalid value 'FILE,XDS' for CONFIG_TYPE: expected FILE, "
                                            "GRPC_XDS_SOTW, or both comma-separated"),
                               ('FILE,FILE', "invalid value 'FILE,FILE' for CONFIG_TYPE: FILE is listed twice")):
            s = self.sluice({}, {'CONFIG_TYPE': value}, start=False)
            s.start(wait_ready=False)
            self.assertEqual(s.wait_exit(10), 1, s.log())
            self.assertIn(message, s.log())


if __name__ == '__main__':
    unittest.main()
