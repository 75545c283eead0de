"""Hot reload of the rule files (issue: write, create, chmod, remove, move of rule files; root symlink swap),
in directory mode (RUNTIME_WATCH_ROOT=false) and in the default watch-root mode, plus a Kubernetes ConfigMap volume.

Every change is polled for up to 5 s (reload is debounced ~100 ms). Limits are read with 0-hit checks so polling
consumes nothing.
"""

import os
import tempfile
import time
import unittest

import grpc

import harness
from harness import Sluice

POLL = 5.0


def rule(domain, key, rpu, unit='hour'):
    return 'domain: %s\ndescriptors:\n  - key: %s\n    rate_limit: {unit: %s, requests_per_unit: %d}\n' % (
        domain, key, unit, rpu)


class ReloadCases:
    """Shared by both modes; self.server is a fresh server per test, self.dir the directory to edit."""

    layout = None

    def setUp(self):
        self.server = Sluice(rules={'a.yaml': rule('da', 'k', 1)}, layout=self.layout)
        self.addCleanup(self.server.close)
        self.assertEqual(self.limit('da'), (1, 'HOUR'))

    def limit(self, domain, key='k', value='v', transport='grpc'):
        return self.server.limit_of(domain, [(key, value)], transport)

    def wait_limit(self, domain, want, key='k', message=None):
        return harness.wait_until(lambda: self.limit(domain, key) == want, timeout=POLL,
                                  message=message or '%s limit %r' % (domain, want),
                                  describe=lambda: 'current: %r\n%s' % (self.limit(domain, key),
                                                                         self.server.log_tail()))

    def write(self, name, text):
        return self.server.write_rule(name, text)

    def test_edit_changes_the_limit(self):
        self.write('a.yaml', rule('da', 'k', 2))
        self.wait_limit('da', (2, 'HOUR'))
        self.write('a.yaml', rule('da', 'k', 3, unit='day'))
        self.wait_limit('da', (3, 'DAY'))
        # both transports see the new rules
        self.assertEqual(self.limit('da', transport='json'), (3, 'DAY'))

    def test_add_and_remove_a_file(self):
        self.assertIsNone(self.limit('db'))
        self.write('b.yaml', rule('db', 'k', 7))
        self.wait_limit('db', (7, 'HOUR'))
        self.assertEqual(self.limit('da'), (1, 'HOUR'))
        self.server.remove_rule('b.yaml')
        self.wait_limit('db', None)
        self.assertEqual(self.limit('da'), (1, 'HOUR'))

    def test_rename_into_the_directory(self):
        # the usual atomic update of one file: write elsewhere, rename over
        staging = os.path.join(self.server.tmp, 'staging.yaml')
        with open(staging, 'w') as f:
            f.write(rule('da', 'k', 9))
        os.replace(staging, os.path.join(self.server.rules_dir, 'a.yaml'))
        self.wait_limit('da', (9, 'HOUR'))

    def test_chmod_alone_reloads(self):
        # Change the content through a hard link outside the watched directory (inotify reports the write only
        # there), then chmod the rule file itself: the chmod is the only event the watcher can see.
        path = os.path.join(self.server.rules_dir, 'a.yaml')
        outside = os.path.join(self.server.tmp, 'hardlink.yaml')
        os.link(path, outside)
        with open(outside, 'r+') as f:
            f.truncate(0)
            f.write(rule('da', 'k', 4))
        time.sleep(0.4)  # longer than the debounce: had anything been reported, the reload would be done
        os.chmod(path, 0o600)
        self.wait_limit('da', (4, 'HOUR'))

    def test_bad_yaml_keeps_the_old_rules(self):
        self.check_bad_file('bad.yaml', "domain: x\ndescriptors:\n  - key: [unclosed\n", 'error loading config file')

    def test_unknown_key_keeps_the_old_rules(self):
        self.check_bad_file('bad.yaml', 'domain: db\nfoo: 1\ndescriptors:\n  - key: k\n', "unknown key 'foo'")

    def test_bad_edit_of_a_good_file_keeps_the_old_rules(self):
        since = len(self.server.log())
        self.write('a.yaml', 'domain: da\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, '
                             'requests_per_unit: 5}\n')
        self.server.wait_for_log(lambda t: 'a.yaml' in t and "invalid rate limit unit 'fortnight'" in t,
                                 since=since, timeout=POLL, message='the reload error in the log')
        self.assertEqual(self.limit('da'), (1, 'HOUR'))
        self.write('a.yaml', rule('da', 'k', 5))
        self.wait_limit('da', (5, 'HOUR'))

    def check_bad_file(self, name, text, error):
        since = len(self.server.log())
        self.write(name, text)
        self.server.wait_for_log(lambda t: name in t and error in t, since=since, timeout=POLL,
                                 message='the reload error naming %s and %r' % (name, error))
        line = [ln for ln in self.server.log()[since:].splitlines() if name in ln and error in ln]
        self.assertTrue(line)
        # the old rules still apply, over both transports
        self.assertEqual(self.limit('da'), (1, 'HOUR'))
        self.assertEqual(self.limit('da', transport='json'), (1, 'HOUR'))
        d = self.server.decide('grpc', 'da', [[('k', 'count')]])
        self.assertEqual((d.overall, d.statuses[0].remaining), ('OK', 0), d)
        # a later good change is picked up (the bad file fixed)
        self.write(name, rule('db', 'k', 6))
        self.wait_limit('db', (6, 'HOUR'))
        self.assertEqual(self.limit('da'), (1, 'HOUR'))

    def test_burst_of_writes_ends_with_the_last_rules(self):
        for i in range(2, 12):
            self.write('a.yaml', rule('da', 'k', i))
            self.write('b.yaml', rule('db', 'k', 100 + i))
        self.wait_limit('da', (11, 'HOUR'))
        self.wait_limit('db', (111, 'HOUR'))
        # and it stays there
        time.sleep(0.3)
        self.assertEqual(self.limit('da'), (11, 'HOUR'))
        self.assertEqual(self.limit('db'), (111, 'HOUR'))

    def test_counters_survive_a_reload(self):
        harness.avoid_window_edge('HOUR')
        self.write('a.yaml', rule('da', 'k', 3))
        self.wait_limit('da', (3, 'HOUR'))
        d = self.server.decide('grpc', 'da', [[('k', 'keep')]])
        self.assertEqual(d.statuses[0].remaining, 2, d)
        self.write('b.yaml', rule('db', 'k', 1))
        self.wait_limit('db', (1, 'HOUR'))
        d = self.server.decide('grpc', 'da', [[('k', 'keep')]])
        self.assertEqual(d.statuses[0].remaining, 1, d)


class DirectoryMode(ReloadCases, unittest.TestCase):
    layout = 'directory'

    def test_settings(self):
        env = self.server.env()
        self.assertEqual(env['RUNTIME_WATCH_ROOT'], 'false')
        self.assertTrue(os.path.isdir(os.path.join(env['RUNTIME_ROOT'], env['RUNTIME_SUBDIRECTORY'],
                                                   env['RUNTIME_APPDIRECTORY'])))

    def test_nested_directory_is_loaded(self):
        # files below the app directory are loaded too (goruntime walks recursively)
        self.server.write_rule(os.path.join('sub', 'n.yaml'), rule('dn', 'k', 8))
        self.write('a.yaml', rule('da', 'k', 2))  # an event in the watched directory itself
        self.wait_limit('da', (2, 'HOUR'))
        self.assertEqual(self.limit('dn'), (8, 'HOUR'))

    def stats(self):
        _, _, body = harness.http_get(self.server.debug_port, '/stats')
        return dict(line.split(': ', 1) for line in body.splitlines() if ': ' in line)

    def test_a_refused_reload_leaves_no_stats_behind(self):
        # The broken file sorts last: the new domain and the changed limit are compiled before the error.
        errors = lambda: int(self.stats().get('ratelimit.service.config_load_error', 0))  # noqa: E731
        self.write('z.yaml', 'domain: dz\nfoo: 1\ndescriptors:\n  - key: k\n')
        harness.wait_until(lambda: errors() >= 1, timeout=POLL, message='the first refused reload')
        refused = errors()
        self.write('a.yaml', rule('da', 'k', 50))
        self.write('b.yaml', rule('dnew', 'k', 7))
        harness.wait_until(lambda: errors() > refused, timeout=POLL, message='the reload with b.yaml refused')
        time.sleep(0.3)  # a second event of the same writes may still be reloading
        stats = self.stats()
        self.assertEqual([name for name in stats if '.dnew.' in name], [])
        self.assertEqual(stats['ratelimit.service.rate_limit.da.k.limit'], '1')
        self.assertEqual(self.limit('dnew'), None)
        # Once the broken file is gone, the new rules and their stats are in.
        self.server.remove_rule('z.yaml')
        self.wait_limit('dnew', (7, 'HOUR'))
        stats = self.stats()
        self.assertEqual(stats['ratelimit.service.rate_limit.dnew.k.limit'], '7')
        self.assertEqual(stats['ratelimit.service.rate_limit.dnew.k.total_hits'], '0')
        self.assertEqual(stats['ratelimit.service.rate_limit.da.k.limit'], '50')


class WatchRootMode(ReloadCases, unittest.TestCase):
    layout = 'watch_root'

    def test_settings(self):
        env = self.server.env()
        self.assertNotIn('RUNTIME_WATCH_ROOT', env)
        self.assertTrue(os.path.islink(env['RUNTIME_ROOT']))

    def test_symlink_swap_loads_the_new_tree(self):
        self.server.swap_root('v2', {'a.yaml': rule('da', 'k', 20), 'c.yaml': rule('dc', 'k', 30)})
        self.wait_limit('da', (20, 'HOUR'))
        self.assertEqual(self.limit('dc'), (30, 'HOUR'))
        self.server.swap_root('v3', {'c.yaml': rule('dc', 'k', 31, unit='day')})
        self.wait_limit('dc', (31, 'DAY'))
        self.assertIsNone(self.limit('da'))

    def test_swap_to_a_bad_tree_keeps_the_old_rules(self):
        since = len(self.server.log())
        self.server.swap_root('v2', {'a.yaml': 'domain: da\ndescriptors:\n  - key: k\n    bogus: 1\n'})
        self.server.wait_for_log(lambda t: 'a.yaml' in t and "unknown key 'bogus'" in t, since=since,
                                 timeout=POLL, message='the reload error')
        self.assertEqual(self.limit('da'), (1, 'HOUR'))

    def test_edits_after_a_swap_are_watched(self):
        v2 = self.server.swap_root('v2', {'a.yaml': rule('da', 'k', 20)})
        self.wait_limit('da', (20, 'HOUR'))
        # the rule files are now those of v2: editing them reloads
        with open(os.path.join(v2, 'a.yaml'), 'w') as f:
            f.write(rule('da', 'k', 21))
        self.wait_limit('da', (21, 'HOUR'))
        # and the old tree is no longer what counts
        with open(os.path.join(self.server.tmp, 'v1', 'ratelimit', 'config', 'a.yaml'), 'w') as f:
            f.write(rule('da', 'k', 99))
        time.sleep(0.5)
        self.assertEqual(self.limit('da'), (21, 'HOUR'))

    def test_files_outside_the_app_directory_are_ignored(self):
        # watch-root mode uses only <root>/<subdirectory>/<appdirectory>
        other = os.path.join(self.server.root, 'ratelimit', 'other')
        os.makedirs(other)
        with open(os.path.join(other, 'o.yaml'), 'w') as f:
            f.write(rule('dother', 'k', 5))
        self.write('a.yaml', rule('da', 'k', 2))
        self.wait_limit('da', (2, 'HOUR'))
        self.assertIsNone(self.limit('dother'))


class ConfigMapVolume(unittest.TestCase):
    """A Kubernetes ConfigMap volume mounted at the app directory:
    config/..2024_01_01/x.yaml, config/..data -> ..2024_01_01, config/x.yaml -> ..data/x.yaml."""

    def make(self, config_dir, stamp, files):
        d = os.path.join(config_dir, stamp)
        os.makedirs(d)
        for name, text in files.items():
            with open(os.path.join(d, name), 'w') as f:
                f.write(text)

    def test_configmap_layout_and_update(self):
        s = Sluice(layout='directory', start=False)
        self.addCleanup(s.close)
        cfg = s.rules_dir
        files = {'x.yaml': rule('dx', 'k', 1), 'y.yaml': rule('dy', 'k', 2)}
        self.make(cfg, '..2024_01_01', files)
        os.symlink('..2024_01_01', os.path.join(cfg, '..data'))
        for name in files:
            os.symlink(os.path.join('..data', name), os.path.join(cfg, name))
        s.start()
        self.assertNotIn('duplicate domain', s.log())
        self.assertEqual(s.limit_of('dx', [('k', 'v')]), (1, 'HOUR'))
        self.assertEqual(s.limit_of('dy', [('k', 'v')]), (2, 'HOUR'))

        # the kubelet's update: new timestamped dir, ..data_tmp -> it, rename over ..data, remove the old dir
        self.make(cfg, '..2024_01_02', {'x.yaml': rule('dx', 'k', 10), 'y.yaml': rule('dy', 'k', 20)})
        os.symlink('..2024_01_02', os.path.join(cfg, '..data_tmp'))
        os.replace(os.path.join(cfg, '..data_tmp'), os.path.join(cfg, '..data'))
        for name in files:
            os.remove(os.path.join(cfg, '..2024_01_01', name))
        os.rmdir(os.path.join(cfg, '..2024_01_01'))
        harness.wait_until(lambda: s.limit_of('dx', [('k', 'v')]) == (10, 'HOUR'), timeout=POLL,
                           message='the updated ConfigMap', describe=s.log_tail)
        self.assertEqual(s.limit_of('dy', [('k', 'v')]), (20, 'HOUR'))
        self.assertNotIn('duplicate domain', s.log())
        # One load for the swap, however its events fall (issue 40: "Successfully loaded" twice): the files left
        # as they were are not loaded again.
        time.sleep(0.5)
        self.assertEqual(s.log().count('Successfully loaded new configuration'), 2, s.log_tail())


class FolderMadeLater(unittest.TestCase):
    """FORCE_START_WITHOUT_INITIAL_CONFIG with a rule folder that does not exist yet: its nearest existing parent
    is watched until it appears, then it is loaded and watched (issue 40: it was never loaded)."""

    def check(self, watch_root):
        base = tempfile.mkdtemp(prefix='sluice-e2e-later-')
        self.addCleanup(harness.remove_tmp, base)
        root = os.path.join(base, 'later', 'root')
        s = Sluice(start=False)
        self.addCleanup(s.close)
        s.extra_env.update({'RUNTIME_ROOT': root, 'RUNTIME_SUBDIRECTORY': 'ratelimit',
                            'RUNTIME_APPDIRECTORY': 'config', 'RUNTIME_WATCH_ROOT': watch_root,
                            'FORCE_START_WITHOUT_INITIAL_CONFIG': 'true'})
        s.start()
        s.wait_for_log(lambda log: 'appears' in log, message='the stand-in watch')

        def limit():
            try:
                return s.limit_of('late', [('k', 'v')])
            except grpc.RpcError as e:
                return e.details()  # no rules loaded yet

        self.assertEqual(limit(), 'no rate limit configuration loaded')
        rules_dir = os.path.join(root, 'ratelimit', 'config')
        os.makedirs(rules_dir)
        with open(os.path.join(rules_dir, 'late.yaml'), 'w') as f:
            f.write(rule('late', 'k', 3))
        harness.wait_until(lambda: limit() == (3, 'HOUR'), timeout=POLL,
                           message='the rules of the folder made after start-up', describe=s.log_tail)
        # And watched from then on.
        with open(os.path.join(rules_dir, 'late.yaml'), 'w') as f:
            f.write(rule('late', 'k', 4))
        harness.wait_until(lambda: limit() == (4, 'HOUR'), timeout=POLL,
                           message='an edit in it', describe=s.log_tail)

    def test_directory_mode(self):
        self.check('false')

    def test_watch_root_mode(self):
        self.check('true')


if __name__ == '__main__':
    unittest.main()
