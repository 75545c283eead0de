"""The Redis backend behind Redis Sentinel (REDIS_TYPE=sentinel; reference §1.7), against a real master, replica and
three sentinels (harness.SentinelSetup): REDIS_URL=<master name>,<sentinel>,...; decisions go to the master the
sentinels name (and are replicated); a sentinel that is down or does not know the master is skipped; sentinel
authentication (REDIS_SENTINEL_AUTH) and master authentication (REDIS_AUTH); failovers (SENTINEL FAILOVER, master
killed) while decisions flow: they fail fast meanwhile and Sluice follows the new master by itself."""

import time
import unittest

import harness
from harness import SentinelSetup, Sluice
from test_redis import TRANSPORTS, DecisionLoad, attempt, key_for, wait_healthy, wait_unhealthy

FAST = 1.0  # seconds: the most any decision may take, failover or not
LIMIT = 1000000

RULES = """
domain: s
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000}
  - key: two
    rate_limit: {unit: hour, requests_per_unit: 2}
"""
COUNTING = {'INCRBY', 'EXPIRE', 'GET'}


def sentinel_env(setup, **extra):
    """Settings for a sluice counting behind the sentinels of `setup`. REDIS_SOCKET_TYPE is left at its default,
    unix: it is ignored in sentinel mode."""
    env = {'BACKEND_TYPE': 'redis', 'EXPIRATION_JITTER_MAX_SECONDS': '0'}
    env.update(setup.sluice_env())
    env.update(extra)
    return env


class SentinelCase(unittest.TestCase):
    def start_sluice(self, env, healthy=True):
        s = Sluice(rules={'s.yaml': RULES}, env=env, wait_ready=True if healthy else 'answer')
        self.addCleanup(s.close)
        if healthy:
            wait_healthy(s)
        return s

    def assertOk(self, sluice, transport, descriptors):
        outcome, detail, elapsed = attempt(sluice, transport, 's', descriptors)
        self.assertEqual(outcome, 'ok', '%s: %r; %s' % (transport, detail, sluice.log_tail(10)))
        self.assertLess(elapsed, FAST, '%s: the decision took %.3fs' % (transport, elapsed))
        return detail

    def assertUnavailable(self, sluice, transport, descriptors, mentions=()):
        """gRPC UNAVAILABLE / HTTP 503 within FAST seconds, with a message about Redis or the sentinels that contains
        every string of `mentions`. -> the message."""
        outcome, detail, elapsed = attempt(sluice, transport, 's', descriptors)
        self.assertEqual(outcome, 'unavailable', '%s: %r; %s' % (transport, detail, sluice.log_tail(10)))
        self.assertTrue('Redis' in detail or 'sentinel' in detail.lower(), '%s: %r' % (transport, detail))
        for m in mentions:
            self.assertIn(m, detail, transport)
        self.assertLess(elapsed, FAST, '%s: the failing decision took %.3fs' % (transport, elapsed))
        return detail

    def assertCounter(self, redis, base, t0, t1, value, ttl=3600):
        """Exactly one key of `base` (an hour window between t0 and t1) in `redis`, holding `value`, TTL `ttl`."""
        candidates = {key_for(base, 'HOUR', t) for t in range(int(t0), int(t1) + 1)}
        found = [k for k in redis.keys(base + '_*') if k in candidates]
        self.assertEqual(len(found), 1, 'want one of %s in Redis :%d; it has %s' % (sorted(candidates), redis.port,
                                                                                   redis.keys()))
        self.assertEqual(redis.get(found[0]), str(value), found[0])
        pttl = redis.pttl(found[0])
        self.assertTrue(ttl * 1000 - 3000 < pttl <= ttl * 1000, 'PTTL %s = %d, want EXPIRE %d' % (found[0], pttl, ttl))
        return found[0]

    def wait_replicated(self, replica, key, value, timeout=5.0):
        harness.wait_until(lambda: replica.get(key) == str(value), timeout=timeout,
                           message='%s = %s on the replica :%d' % (key, value, replica.port),
                           describe=lambda: repr(replica.get(key)))


# ---------------------------------------------------------------------------------------------------------------
# Settings


class Settings(SentinelCase):
    def test_url_needs_a_master_name_and_sentinels(self):
        cases = [
            ({'REDIS_URL': 'mymaster'}, 'REDIS_URL'),
            ({'REDIS_URL': '127.0.0.1:26379'}, 'REDIS_URL'),
            ({'REDIS_PERSECOND': 'true', 'REDIS_URL': 'mymaster,127.0.0.1:1', 'REDIS_PERSECOND_TYPE': 'sentinel',
              'REDIS_PERSECOND_URL': 'mymaster'}, 'REDIS_PERSECOND_URL'),
        ]
        for settings, name in cases:
            with self.subTest(**settings):
                env = {'BACKEND_TYPE': 'redis', 'REDIS_TYPE': 'sentinel'}
                env.update(settings)
                with Sluice(rules={'s.yaml': RULES}, wait_ready=False, env=env) as s:
                    rc = s.wait_exit(10)
                    self.assertIsNotNone(rc, 'the server started anyway')
                    self.assertEqual(rc, 1, s.log())
                    self.assertIn(name, s.log())
                    self.assertIn('Expected master name and a list of urls for the sentinels', s.log())


# ---------------------------------------------------------------------------------------------------------------
# Finding the master


class FindingTheMaster(SentinelCase):
    setup = None

    @classmethod
    def setUpClass(cls):
        cls.setup = SentinelSetup()

    @classmethod
    def tearDownClass(cls):
        cls.setup.close()

    def setUp(self):
        harness.avoid_window_edge('HOUR', 10)
        self.setup.master.reset()
        self.setup.replica.command('CONFIG', 'RESETSTAT')
        harness.wait_until(lambda: self.setup.replica.keys() == [], timeout=5,
                           message='the replica empty after FLUSHALL on the master')

    def test_decisions_go_to_the_master(self):
        master, replica = self.setup.master, self.setup.replica
        s = self.start_sluice(sentinel_env(self.setup))
        with master.monitor() as mon:
            t0 = time.time()
            for t, remaining in zip(TRANSPORTS, (1, 0)):
                d = self.assertOk(s, t, [[('two', 'm')]])
                self.assertEqual((d.overall, d.statuses[0].remaining, d.statuses[0].limit),
                                 ('OK', remaining, (2, 'HOUR')), d)
            d = self.assertOk(s, 'grpc', [[('two', 'm')]])
            self.assertEqual((d.overall, d.statuses[0].code), ('OVER_LIMIT', 'OVER_LIMIT'), d)
            t1 = time.time()
            key = self.assertCounter(master, 's_two_m', t0, t1, 3)
            self.assertEqual(mon.wait_for(6, COUNTING), [['INCRBY', key, '1'], ['EXPIRE', key, '3600']] * 3)
        self.assertEqual(master.keys(), [key])
        # replicated: the replica holds the same counter
        self.wait_replicated(replica, key, 3)
        self.assertEqual(replica.keys(), [key])
        # Sluice is connected to the master only (the sentinels' and the replication links left out)
        self.assertGreaterEqual(len(self.sluice_clients(master)), 1, master.clients())
        self.assertEqual(self.sluice_clients(replica), [])

    def sluice_clients(self, redis):
        return [c for c in redis.clients()
                if not c.get('name', '').startswith('sentinel-') and not set(c.get('flags', '')) & set('MS')]

    def test_first_sentinel_down(self):
        down = '127.0.0.1:%d' % harness.dead_port()
        urls = [down] + [x.address() for x in self.setup.sentinels]
        s = self.start_sluice(sentinel_env(self.setup, **self.setup.sluice_env(sentinels=urls)))
        t0 = time.time()
        for t in TRANSPORTS:
            d = self.assertOk(s, t, [[('k', 'via-next')]])
            self.assertEqual(d.overall, 'OK', d)
        self.assertCounter(self.setup.master, 's_k_via-next', t0, time.time(), 2)
        self.assertTrue(s.running())

    def test_only_the_last_sentinel_up(self):
        urls = ['127.0.0.1:%d' % p for p in harness.free_ports(2)] + [self.setup.sentinels[2].address()]
        s = self.start_sluice(sentinel_env(self.setup, **self.setup.sluice_env(sentinels=urls)))
        t0 = time.time()
        d = self.assertOk(s, 'json', [[('k', 'last')]])
        self.assertEqual(d.statuses[0].remaining, LIMIT - 1, d)
        self.assertCounter(self.setup.master, 's_k_last', t0, time.time(), 1)

    def test_no_sentinel_reachable(self):
        urls = ['127.0.0.1:%d' % p for p in harness.free_ports(2)]
        s = self.start_sluice(sentinel_env(self.setup, **self.setup.sluice_env(sentinels=urls)), healthy=False)
        self.assertEqual(s.healthcheck()[0], 500)
        self.assertEqual(s.health(), 'NOT_SERVING')
        for t in TRANSPORTS:
            self.assertUnavailable(s, t, [[('k', 'x')]])
        self.assertTrue(s.running())
        self.assertEqual(self.setup.master.keys(), [])

    def test_unknown_master_name(self):
        s = self.start_sluice(sentinel_env(self.setup, **self.setup.sluice_env(name='nosuchmaster')), healthy=False)
        wait_unhealthy(s)
        # Unhealthy from the start. Until the sentinels have answered a worker's connection, its decisions say the
        # master is not connected yet; after, they give the sentinels' answer. Each worker asks on its own.
        answered = "no sentinel gave the address of master 'nosuchmaster'"
        for t in TRANSPORTS:
            harness.wait_until(
                lambda: answered in self.assertUnavailable(s, t, [[('k', 'x')]], mentions=['nosuchmaster']),
                message='a %s decision gives the sentinels\' answer' % t, describe=s.log_tail)
        self.assertTrue(s.running())
        self.assertEqual(self.setup.master.keys(), [])


# ---------------------------------------------------------------------------------------------------------------
# Authentication: sentinels with requirepass (REDIS_SENTINEL_AUTH), Redis with requirepass (REDIS_AUTH)


class Auth(SentinelCase):
    setup = None

    @classmethod
    def setUpClass(cls):
        cls.setup = SentinelSetup(sentinel_password='sentinel-secret', master_password='master-secret')

    @classmethod
    def tearDownClass(cls):
        cls.setup.close()

    def setUp(self):
        harness.avoid_window_edge('HOUR', 10)

    def test_sentinel_and_master_auth(self):
        for sentinel_auth in ('sentinel-secret', 'default:sentinel-secret'):
            with self.subTest(REDIS_SENTINEL_AUTH=sentinel_auth):
                s = self.start_sluice(sentinel_env(self.setup, REDIS_SENTINEL_AUTH=sentinel_auth))
                value = 'auth-%d' % len(sentinel_auth)
                t0 = time.time()
                for t in TRANSPORTS:
                    self.assertOk(s, t, [[('k', value)]])
                self.assertCounter(self.setup.master, 's_k_' + value, t0, time.time(), 2)
                s.close()

    def test_wrong_sentinel_password(self):
        for sentinel_auth in ('wrong', 'default:wrong', None):
            with self.subTest(REDIS_SENTINEL_AUTH=sentinel_auth):
                s = self.start_sluice(sentinel_env(self.setup, REDIS_SENTINEL_AUTH=sentinel_auth), healthy=False)
                wait_unhealthy(s)
                for t in TRANSPORTS:
                    self.assertUnavailable(s, t, [[('k', 'denied')]])
                self.assertTrue(s.running())
                s.close()
        self.assertEqual(self.setup.master.keys('s_k_denied*'), [])

    def test_wrong_master_password(self):
        s = self.start_sluice(sentinel_env(self.setup, REDIS_AUTH='wrong'), healthy=False)
        wait_unhealthy(s)
        for t in TRANSPORTS:
            self.assertUnavailable(s, t, [[('k', 'denied')]])
        self.assertTrue(s.running())
        self.assertEqual(self.setup.master.keys('s_k_denied*'), [])


# ---------------------------------------------------------------------------------------------------------------
# Failover while decisions flow


class Failover(SentinelCase):
    def setUp(self):
        harness.avoid_window_edge('HOUR', 30)
        self.setup = SentinelSetup()
        self.addCleanup(self.setup.close)

    def run_failover(self, trigger, failover_timeout):
        setup = self.setup
        old, replica = setup.master, setup.replica
        s = self.start_sluice(sentinel_env(setup, REDIS_POOL_SIZE='4'))
        pid = s.proc.pid
        # a counter at rest before the failover, replicated
        t0 = time.time()
        for i in range(5):
            d = self.assertOk(s, TRANSPORTS[i % 2], [[('k', 'steady')]])
            self.assertEqual(d.statuses[0].remaining, LIMIT - 1 - i, d)
        steady = self.assertCounter(old, 's_k_steady', t0, time.time(), 5)
        self.wait_replicated(replica, steady, 5)

        load = DecisionLoad(s, 's')
        begin = time.monotonic()
        try:
            harness.wait_until(lambda: load.count('ok', 0) >= 40 and time.monotonic() - begin > 0.5, timeout=10,
                               message='40 decisions before the failover', describe=s.log_tail)
            triggered = time.monotonic()
            trigger()
            new = setup.wait_failover(old, timeout=failover_timeout)
            switched = time.monotonic()
            harness.wait_until(lambda: load.count('ok', switched) >= 40 and time.monotonic() - switched > 0.6,
                               timeout=8, message='40 decisions served by the new master',
                               describe=lambda: '%r\n%s' % (load.results[-5:], s.log_tail()))
        finally:
            self.assertTrue(load.stop())
        results = load.results
        self.assertIs(new, replica, 'the sentinels promoted %s' % new.address())

        others = [r for r in results if r[2] == 'other']
        self.assertEqual(others, [], 'unexpected outcomes')
        slowest = max(results, key=lambda r: r[4])
        self.assertLess(slowest[4], FAST, 'slowest decision: %r' % (slowest,))
        for r in results:
            if r[2] == 'unavailable':
                self.assertTrue('Redis' in r[3] or 'sentinel' in r[3].lower(), r)
        self.assertEqual([r for r in results if r[2] != 'ok' and r[0] + r[4] < triggered], [],
                         'failed before the failover')
        self.assertEqual(load.tail(), ['ok'] * 10)
        self.failover_summary = '%d decisions, %d unavailable, sentinels switched after %.2fs' % (
            len(results), len([r for r in results if r[2] != 'ok']), switched - triggered)

        # the load counted on the new master
        self.assertGreater(int(new.get(key_for('s_k_shared', 'HOUR', time.time())) or 0), 0, new.keys())
        # within a moment of the switch (the load above ran for 0.6 s past it), decisions go to the new master and
        # not to the old one (which may still think it is a master until the sentinels demote it: its counts would
        # be lost when it resyncs)
        for i in range(8):
            t0 = time.time()
            self.assertOk(s, TRANSPORTS[i % 2], [[('k', 'probe%d' % i)]])
            key = key_for('s_k_probe%d' % i, 'HOUR', t0)
            self.assertEqual(new.get(key), '1', 'decision %d, %.1fs after the sentinels switched to %s: not counted '
                             'there; the old master %s (ROLE %s) has %r' % (
                                 i, time.monotonic() - switched, new.address(), old.address(), setup.role(old),
                                 old.get(key) if old.running() else 'n/a (killed)'))
        # counting continues from the replicated value
        d = self.assertOk(s, 'grpc', [[('k', 'steady')]])
        self.assertEqual(d.statuses[0].remaining, LIMIT - 6, d)
        self.assertEqual(new.get(steady), '6')
        # a new key lands on the new master
        t0 = time.time()
        for t, remaining in zip(TRANSPORTS, (1, 0)):
            d = self.assertOk(s, t, [[('two', 'after')]])
            self.assertEqual((d.overall, d.statuses[0].remaining), ('OK', remaining), d)
        self.assertCounter(new, 's_two_after', t0, time.time(), 2)
        self.assertTrue(s.running(), s.log_tail())
        self.assertEqual(s.proc.pid, pid)
        self.assertEqual(s.healthcheck()[0], 200)
        self.assertEqual(s.health(), 'SERVING')
        return new

    def test_failover_command_under_load(self):
        setup = self.setup
        old = setup.master
        new = self.run_failover(lambda: setup.sentinels[0].command('SENTINEL', 'FAILOVER', setup.name),
                                failover_timeout=10)
        # the old master, demoted to a replica of the new one, gets the new counters by replication
        harness.wait_until(lambda: setup.role(old) == 'slave', timeout=10, message='the old master demoted',
                           describe=setup.describe)
        key = key_for('s_two_after', 'HOUR', time.time())
        self.wait_replicated(old, key, 2, timeout=10)
        self.assertEqual(new.get(key), '2')

    def test_master_killed_under_load(self):
        self.run_failover(self.setup.master.kill, failover_timeout=20)


if __name__ == '__main__':
    harness.main()
