"""Redis credentials from files (issue 43, part 3): REDIS_AUTH_FILE holds `user:password` for an ACL user. Its
password is rotated under load — the new one added, the file rewritten, the old one removed and every connection
killed — and no decision fails past a short reconnect. A file changed where the watch cannot see it is read again
when Redis answers WRONGPASS. The secret never appears in the log; bad files and settings stop the start naming the
setting."""

import os
import shutil
import tempfile
import threading
import time
import unittest

import harness
from harness import RedisServer, SentinelSetup, Sluice
from test_redis import attempt, wait_healthy

RULES = """
domain: creds
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000000}
"""
ADMIN = 'admin-secret-0'
# How long decisions may fail after the connections are killed: a reconnect (backoff from 50 ms) and its AUTH.
RECONNECT_SECONDS = 3.0 if harness.SANITIZED else 1.5


def write(path, text):
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write(text)
    os.replace(tmp, path)


class Load:
    """Decisions from 4 threads until stopped; each failure is kept with its time."""

    def __init__(self, sluice):
        self.sluice = sluice
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.failures = []
        self.threads = [threading.Thread(target=self.run, args=(n,)) for n in range(4)]
        for t in self.threads:
            t.start()

    def run(self, n):
        while not self.stopping.is_set():
            outcome, detail, _ = attempt(self.sluice, 'grpc' if n % 2 else 'json', 'creds',
                                         [{'entries': [('user', 'u%d' % n)]}], timeout=2.0)
            with self.lock:
                if outcome == 'ok' and detail.overall == 'OK':
                    self.ok += 1
                else:
                    self.failures.append((time.monotonic(), outcome, str(detail)[:200]))
            time.sleep(0.002)

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join()


class RotatingPassword(unittest.TestCase):
    def setUp(self):
        self.redis = RedisServer(requirepass=ADMIN)
        self.addCleanup(self.redis.stop)
        self.redis.command('ACL', 'SETUSER', 'sluice', 'on', '>pw-one-1111', '~*', '&*', '+@all')
        self.dir = tempfile.mkdtemp(prefix='sluice-e2e-creds-')
        self.addCleanup(shutil.rmtree, self.dir, True)

    def sluice(self, auth_path, extra=None):
        env = {'BACKEND_TYPE': 'redis', 'REDIS_SOCKET_TYPE': 'tcp', 'REDIS_URL': '127.0.0.1:%d' % self.redis.port,
               'REDIS_AUTH_FILE': auth_path,
               'REDIS_POOL_SIZE': '2', 'IO_THREADS': '2'}
        env.update(extra or {})
        s = Sluice(rules={'creds.yaml': RULES}, env=env)
        self.addCleanup(s.close)
        wait_healthy(s)
        return s

    def kill_connections(self):
        return self.redis.command('CLIENT', 'KILL', 'USER', 'sluice')

    def test_rotation_under_load(self):
        path = os.path.join(self.dir, 'redis-auth')
        write(path, 'sluice:pw-one-1111\n')
        s = self.sluice(path)
        load = Load(s)
        try:
            time.sleep(0.5)
            # The new password next to the old one, the file rewritten, then the old one removed and the
            # connections killed: they must come back with the new one.
            self.redis.command('ACL', 'SETUSER', 'sluice', '>pw-two-2222')
            write(path, 'sluice:pw-two-2222\n')
            time.sleep(0.5)  # the watch reads it (100 ms debounce)
            self.redis.command('ACL', 'SETUSER', 'sluice', '<pw-one-1111')
            killed_at = time.monotonic()
            self.assertGreater(self.kill_connections(), 0)
            time.sleep(RECONNECT_SECONDS + 1.0)
            ok_before_end = load.ok
            time.sleep(0.5)
        finally:
            load.stop()
        late = [f for f in load.failures if f[0] > killed_at + RECONNECT_SECONDS]
        early = [f for f in load.failures if f[0] < killed_at]
        print('\nrotation: %d decisions OK, %d failed within %.1fs of the kill'
              % (load.ok, len(load.failures) - len(late) - len(early), RECONNECT_SECONDS))
        self.assertEqual(early, [])
        self.assertEqual(late, [])
        self.assertGreater(load.ok, ok_before_end)  # still deciding at the end
        clients = self.redis.command('CLIENT', 'LIST')
        self.assertIn('user=sluice', clients)  # connected again, with the new password
        for secret in ('pw-one-1111', 'pw-two-2222'):
            self.assertNotIn(secret, s.log())

    def test_wrongpass_reads_the_file_again(self):
        # The file is a symlink into a directory the watch does not see: only Redis's refusal makes Sluice read it.
        hidden = tempfile.mkdtemp(prefix='sluice-e2e-creds-hidden-')
        self.addCleanup(shutil.rmtree, hidden, True)
        target = os.path.join(hidden, 'secret')
        write(target, 'sluice:pw-one-1111')
        path = os.path.join(self.dir, 'redis-auth')
        os.symlink(target, path)
        s = self.sluice(path)
        self.redis.command('ACL', 'SETUSER', 'sluice', 'resetpass', '>pw-three-3333')
        with open(target, 'w') as f:  # in place, in the other directory
            f.write('sluice:pw-three-3333\n')
        self.kill_connections()
        harness.wait_until(lambda: attempt(s, 'grpc', 'creds', [{'entries': [('user', 'w')]}])[0] == 'ok',
                           timeout=RECONNECT_SECONDS + 2, message='decisions again with the new password',
                           describe=s.log_tail)
        self.assertIn('user=sluice', self.redis.command('CLIENT', 'LIST'))
        self.assertNotIn('pw-three-3333', s.log())
        self.assertNotIn('pw-one-1111', s.log())

    def test_a_secret_refused_after_a_connection_loss_is_logged_once_naming_the_setting(self):
        path = os.path.join(self.dir, 'redis-auth')
        write(path, 'sluice:pw-one-1111\n')
        s = self.sluice(path)
        # The password changes in Redis and not in the file: every reconnect is refused.
        self.redis.command('ACL', 'SETUSER', 'sluice', 'resetpass', '>pw-four-4444')
        self.kill_connections()
        s.wait_for_log('refused the secret of REDIS_AUTH_FILE (%s): WRONGPASS' % path, timeout=10)
        time.sleep(1.5)  # reconnects go on failing the same way (backoff from 50 ms)
        logged = s.log().count('refused the secret of REDIS_AUTH_FILE')
        time.sleep(1.5)
        # Once per worker's pool (IO_THREADS=2), not once per attempt.
        self.assertEqual(s.log().count('refused the secret of REDIS_AUTH_FILE'), logged)
        self.assertLessEqual(logged, 2, s.log())
        self.assertNotIn('pw-one-1111', s.log())
        # The file fixed: connected again, and said so.
        write(path, 'sluice:pw-four-4444\n')
        s.wait_for_log('connected to Redis at', timeout=10)
        harness.wait_until(lambda: attempt(s, 'grpc', 'creds', [{'entries': [('user', 'r')]}])[0] == 'ok',
                           timeout=RECONNECT_SECONDS + 2, message='decisions again', describe=s.log_tail)

    def test_bad_files_and_settings(self):
        path = os.path.join(self.dir, 'redis-auth')
        base = {'BACKEND_TYPE': 'redis', 'REDIS_SOCKET_TYPE': 'tcp', 'REDIS_URL': '127.0.0.1:%d' % self.redis.port}
        for text, env, why in [
            (None, {'REDIS_AUTH_FILE': os.path.join(self.dir, 'missing')}, 'REDIS_AUTH_FILE: '),
            ('\n', {'REDIS_AUTH_FILE': path}, 'holds no password'),
            ('sluice:\n', {'REDIS_AUTH_FILE': path}, 'a user without a password'),
            ('a\nb\n', {'REDIS_AUTH_FILE': path}, 'more than one line'),
            ('x:y', {'REDIS_AUTH_FILE': path, 'REDIS_AUTH': 'x:y'}, 'REDIS_AUTH and REDIS_AUTH_FILE are exclusive'),
            ('x:y', {'REDIS_TYPE': 'sentinel', 'REDIS_URL': 'm,127.0.0.1:1', 'REDIS_SENTINEL_AUTH': 'p',
                     'REDIS_SENTINEL_AUTH_FILE': path}, 'REDIS_SENTINEL_AUTH and REDIS_SENTINEL_AUTH_FILE'),
            ('x:y', {'REDIS_PERSECOND': 'true', 'REDIS_PERSECOND_URL': '127.0.0.1:1',
                     'REDIS_PERSECOND_AUTH_FILE': os.path.join(self.dir, 'missing')}, 'REDIS_PERSECOND_AUTH_FILE: '),
        ]:
            if text is not None:
                write(path, text)
            log = Sluice.failed_start(self, dict(base, **env))
            self.assertIn(why, log)
            self.assertNotIn('x:y', log)

    def test_a_wrong_secret_is_an_auth_failure_not_a_leak(self):
        path = os.path.join(self.dir, 'redis-auth')
        write(path, 'sluice:not-the-password-9')
        s = Sluice(rules={'creds.yaml': RULES}, wait_ready=False,
                   env={'BACKEND_TYPE': 'redis', 'REDIS_SOCKET_TYPE': 'tcp', 'REDIS_URL': '127.0.0.1:%d' % self.redis.port,
                        'REDIS_AUTH_FILE': path})
        self.addCleanup(s.close)
        s.wait_for_log('WRONGPASS', timeout=10)
        self.assertNotIn('not-the-password-9', s.log())
        # The right secret written: the watch reads it, the next attempt connects.
        write(path, 'sluice:pw-one-1111')
        wait_healthy(s, timeout=15)


class SentinelSecret(unittest.TestCase):
    def test_sentinel_auth_file(self):
        setup = SentinelSetup(sentinel_password='sentinel-pw-4444')
        self.addCleanup(setup.close)
        d = tempfile.mkdtemp(prefix='sluice-e2e-creds-')
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, 'sentinel-auth')
        write(path, 'sentinel-pw-4444\n')
        env = setup.sluice_env()
        env.pop('REDIS_SENTINEL_AUTH', None)
        env.update(BACKEND_TYPE='redis', REDIS_SENTINEL_AUTH_FILE=path)
        s = Sluice(rules={'creds.yaml': RULES}, env=env)
        self.addCleanup(s.close)
        wait_healthy(s, timeout=15)
        self.assertEqual(attempt(s, 'grpc', 'creds', [{'entries': [('user', 's')]}])[0], 'ok')
        self.assertNotIn('sentinel-pw-4444', s.log())


if __name__ == '__main__':
    unittest.main()
