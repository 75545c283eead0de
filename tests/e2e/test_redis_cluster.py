"""The Redis backend on Redis Cluster (REDIS_TYPE=cluster; reference §1.7, §4.4 item 6), against three real
redis-server masters joined with redis-cli --cluster create (harness.ClusterSetup): REDIS_URL=<seed>,<seed>,...;
Sluice learns the slot map from a seed and sends each key's INCRBY + EXPIRE straight to the master owning its slot
(same keys, values and TTLs as single mode); a dead first seed is skipped; slots that move are followed (-MOVED:
the map is updated; -ASK during a migration: ASKING on the importing node, the map is not); a killed master fails
the decisions that need it fast while the other masters keep serving, and once its replica is promoted its keys
are served again, their counts continuing from the replica's copy; bad REDIS_URLs are refused at start-up."""

import time
import unittest

import harness
from harness import ClusterSetup, Sluice
from test_redis import FAST, TRANSPORTS, DecisionLoad, attempt, key_for, wait_healthy

LIMIT = 1000000

RULES = """
domain: c
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000}
  - key: two
    rate_limit: {unit: hour, requests_per_unit: 2}
"""


def cluster_env(setup, seeds=None, **extra):
    """Settings for a sluice counting in the cluster of `setup` (seeded with the first node unless `seeds`): exact
    TTLs (no jitter)."""
    env = {'BACKEND_TYPE': 'redis', 'EXPIRATION_JITTER_MAX_SECONDS': '0'}
    env.update(setup.sluice_env(seeds))
    env.update(extra)
    return env


def dead_address():
    return '127.0.0.1:%d' % harness.dead_port()


class ClusterCase(unittest.TestCase):
    setup = None

    def start_sluice(self, env, healthy=True):
        s = Sluice(rules={'c.yaml': RULES}, env=env, wait_ready=True if healthy else 'answer')
        self.addCleanup(s.close)
        if healthy:
            wait_healthy(s)
        return s

    def key(self, descriptor_key, value, t=None):
        """The cache key of ('<descriptor_key>', value) in domain c for the hour window holding t (default now)."""
        return key_for('c_%s_%s' % (descriptor_key, value), 'HOUR', time.time() if t is None else t)

    def pick_values(self, tag, per_node=1, descriptor_key='k', nodes=None):
        """Descriptor values '<tag><i>' whose keys (this hour's window) hash to slots of each node: -> {RedisServer:
        [value, ...]} with `per_node` values for every node of `nodes` (default: all)."""
        nodes = nodes if nodes is not None else self.setup.nodes
        slot_map = self.setup.slot_map()
        got = {n.port: [] for n in nodes}
        for i in range(2000):
            if all(len(v) >= per_node for v in got.values()):
                return {n: got[n.port] for n in nodes}
            value = '%s%d' % (tag, i)
            slot = self.setup.slot(self.key(descriptor_key, value))
            owner = next(a for first, last, a in slot_map if first <= slot <= last)
            port = int(owner.rpartition(':')[2])
            if port in got and len(got[port]) < per_node:
                got[port].append(value)
        raise AssertionError('no values found for every node: %r' % got)

    def assertOk(self, sluice, transport, descriptors, within=FAST):
        outcome, detail, elapsed = attempt(sluice, transport, 'c', descriptors)
        self.assertEqual(outcome, 'ok', '%s %r: %r; %s' % (transport, descriptors, detail, sluice.log_tail(10)))
        self.assertLess(elapsed, within, '%s: the decision took %.3fs' % (transport, elapsed))
        return detail

    def assertUnavailable(self, sluice, transport, descriptors, within=FAST):
        """gRPC UNAVAILABLE / HTTP 503 with a message about Redis, within `within` seconds. -> the message."""
        outcome, detail, elapsed = attempt(sluice, transport, 'c', descriptors)
        self.assertEqual(outcome, 'unavailable', '%s %r: %r; %s' % (transport, descriptors, detail,
                                                                   sluice.log_tail(10)))
        self.assertIn('Redis', detail, transport)
        self.assertLess(elapsed, within, '%s: the failing decision took %.3fs' % (transport, elapsed))
        return detail

    def assertCounter(self, node, key, value, ttl=3600):
        """`key` holds `value` with TTL `ttl` on `node` and exists on no other node."""
        got = self.setup.get(node, key)
        self.assertEqual(got, str(value), '%s on the node :%d (which owns slot %d)' % (key, node.port,
                                                                                      self.setup.slot(key)))
        pttl = self.setup.pttl(node, key)
        self.assertTrue(ttl * 1000 - 3000 < pttl <= ttl * 1000, 'PTTL %s = %d on :%d, want EXPIRE %d'
                        % (key, pttl, node.port, ttl))
        for other in self.setup.running():
            if other is not node:
                self.assertEqual(other.keys(key), [], '%s also exists on :%d (owner :%d)' % (key, other.port,
                                                                                           node.port))

    def calls(self, node, command):
        return self.setup.command_stats(node).get(command, (0, 0))[0]

    def rejected(self, node, command):
        return self.setup.command_stats(node).get(command, (0, 0))[1]


# ---------------------------------------------------------------------------------------------------------------
# Settings


class Settings(unittest.TestCase):
    def test_url_must_list_seed_nodes(self):
        cases = [
            ({'REDIS_URL': ''}, 'REDIS_URL'),
            ({'REDIS_URL': 'garbage'}, 'REDIS_URL'),
            ({'REDIS_URL': ',,'}, 'REDIS_URL'),
            ({'REDIS_URL': 'nocolon,127.0.0.1:7000'}, 'REDIS_URL'),
            ({'REDIS_URL': '127.0.0.1:7000', 'REDIS_PERSECOND': 'true', 'REDIS_PERSECOND_TYPE': 'cluster',
              'REDIS_PERSECOND_URL': 'garbage'}, 'REDIS_PERSECOND_URL'),
        ]
        for settings, name in cases:
            with self.subTest(**settings):
                env = {'BACKEND_TYPE': 'redis', 'REDIS_TYPE': 'cluster', 'REDIS_SOCKET_TYPE': 'tcp'}
                env.update(settings)
                with Sluice(rules={'c.yaml': RULES}, wait_ready=False, env=env) as s:
                    rc = s.wait_exit(10)
                    self.assertIsNotNone(rc, 'the server started anyway')
                    self.assertEqual(rc, 1, s.log())
                    self.assertIn(name, s.log())
                    self.assertNotIn('not supported', s.log())


class SharedCluster(ClusterCase):
    """A cluster of three masters, started once for all the tests of a class."""

    @classmethod
    def setUpClass(cls):
        cls.setup = ClusterSetup()

    @classmethod
    def tearDownClass(cls):
        cls.setup.close()


# ---------------------------------------------------------------------------------------------------------------
# Every key on the master owning its slot


class Routing(ClusterCase):
    sluice = None

    @classmethod
    def setUpClass(cls):
        cls.setup = ClusterSetup()
        try:
            cls.sluice = Sluice(rules={'c.yaml': RULES}, env=cluster_env(cls.setup, REDIS_POOL_SIZE='2'))
            wait_healthy(cls.sluice)
        except BaseException:
            cls.setup.close()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.sluice is not None:
            cls.sluice.close()
        cls.setup.close()

    def setUp(self):
        harness.avoid_window_edge('HOUR', 10)
        for n in self.setup.nodes:
            n.reset()

    def test_each_key_counts_on_the_node_owning_its_slot(self):
        values = self.pick_values('own', per_node=2)
        a, b, c = self.setup.nodes
        order = [values[a][0], values[b][0], values[c][0], values[a][1], values[b][1], values[c][1]]
        descriptors = [[('k', v)] for v in order]
        for i, t in enumerate(TRANSPORTS):
            d = self.assertOk(self.sluice, t, descriptors)
            self.assertEqual(d.overall, 'OK', d)
            self.assertEqual([s.remaining for s in d.statuses], [LIMIT - 1 - i] * 6, d)
        for node in self.setup.nodes:
            for v in values[node]:
                self.assertCounter(node, self.key('k', v), 2)
        # the map is known: every command went straight to its owner, two keys x two decisions per node
        for node in self.setup.nodes:
            stats = self.setup.command_stats(node)
            self.assertEqual(stats.get('incrby', (0, 0)), (4, 0), 'INCRBY (calls, rejected) on :%d: %r'
                             % (node.port, stats))
            self.assertEqual(stats.get('expire', (0, 0)), (4, 0), 'EXPIRE (calls, rejected) on :%d: %r'
                             % (node.port, stats))

    def test_counters_map_back_to_their_descriptors(self):
        # different counts on different nodes, descriptors interleaved: each status must be its own key's
        values = self.pick_values('map', per_node=2)
        twos = self.pick_values('two', per_node=1, descriptor_key='two')
        a, b, c = self.setup.nodes
        descriptors, want = [], []
        for i, (node, v) in enumerate([(c, values[c][0]), (a, values[a][0]), (b, values[b][0]),
                                       (b, values[b][1]), (c, values[c][1]), (a, values[a][1])]):
            node.command('SET', self.key('k', v), (i + 1) * 100)
            descriptors.append([('k', v)])
            want.append(('OK', LIMIT - (i + 1) * 100 - 1))
        b.command('SET', self.key('two', twos[b][0]), 1)
        descriptors.insert(2, [('two', twos[b][0])])
        want.insert(2, ('OK', 0))
        d = self.assertOk(self.sluice, 'grpc', descriptors)
        self.assertEqual([(s.code, s.remaining) for s in d.statuses], want, d)
        self.assertEqual(d.overall, 'OK', d)
        d = self.assertOk(self.sluice, 'json', descriptors)
        want = [(code, r - 1) if code == 'OK' and r else ('OVER_LIMIT', 0) for code, r in want]
        self.assertEqual([(s.code, s.remaining) for s in d.statuses], want, d)
        self.assertEqual(d.overall, 'OVER_LIMIT', d)
        self.assertCounter(b, self.key('two', twos[b][0]), 3)
        self.assertCounter(c, self.key('k', values[c][0]), 102)

    def test_refunds_run_on_the_node_owning_each_key(self):
        """Negative hits are one EVAL per key, sent to the key's owner: each counter goes down (never below 0) on
        its own node, and a refund for a key that does not exist creates nothing."""
        values = self.pick_values('refund', per_node=2)
        nodes = self.setup.nodes
        for i, node in enumerate(nodes):
            node.command('SET', self.key('k', values[node][0]), 5 * (i + 1))
            node.command('EXPIRE', self.key('k', values[node][0]), 3600)
        request = harness.rls_request_proto('c', [[('k', values[n][j])] for n in nodes for j in (0, 1)], 7)
        for d in request.descriptors:
            d.is_negative_hits = True
        response = harness.rls_raw(self.sluice.grpc_port, request)
        self.assertEqual([s.code for s in response.statuses], [harness.rls_pb2.RateLimitResponse.OK] * 6)
        # per node, the key holding 5, 10, 15 is left with 0, 3, 8; the absent one with 0
        self.assertEqual([s.limit_remaining for s in response.statuses],
                         [LIMIT, LIMIT, LIMIT - 3, LIMIT, LIMIT - 8, LIMIT])
        for i, node in enumerate(nodes):
            self.assertCounter(node, self.key('k', values[node][0]), max(0, 5 * (i + 1) - 7))
            self.assertEqual(node.keys(self.key('k', values[node][1])), [])
            self.assertEqual(self.calls(node, 'eval'), 2, self.setup.command_stats(node))

    def test_keys_of_one_node_only(self):
        values = self.pick_values('one', per_node=3)
        for node in self.setup.nodes:
            with self.subTest(node=node.port):
                d = self.assertOk(self.sluice, 'json', [[('k', v)] for v in values[node]])
                self.assertEqual([s.remaining for s in d.statuses], [LIMIT - 1] * 3, d)
                for v in values[node]:
                    self.assertCounter(node, self.key('k', v), 1)


# ---------------------------------------------------------------------------------------------------------------
# Seed nodes


class Seeds(SharedCluster):

    def setUp(self):
        harness.avoid_window_edge('HOUR', 10)

    def check_every_node(self, sluice, tag):
        values = self.pick_values(tag)
        descriptors = [[('k', values[n][0])] for n in self.setup.nodes]
        # Healthy means the slot map is in; a node's first connection may still be on its way (seen under ASan):
        # peek (0 hits, nothing counted) until every node answers.
        peeks = [{'entries': d, 'hits_addend': 0} for d in descriptors]
        harness.wait_until(lambda: attempt(sluice, 'json', 'c', peeks)[0] == 'ok', timeout=10,
                           message='every node connected', describe=lambda: sluice.log_tail(10))
        for i, t in enumerate(TRANSPORTS):
            d = self.assertOk(sluice, t, descriptors)
            self.assertEqual([s.remaining for s in d.statuses], [LIMIT - 1 - i] * 3, d)
        for n in self.setup.nodes:
            self.assertCounter(n, self.key('k', values[n][0]), 2)

    def test_any_one_seed_reaches_every_node(self):
        for i, seed in enumerate(self.setup.nodes):
            with self.subTest(seed=seed.port):
                s = self.start_sluice(cluster_env(self.setup, [seed.address()]))
                self.check_every_node(s, 'seed%d_' % i)
                s.close()

    def test_dead_first_seed_is_skipped(self):
        s = self.start_sluice(cluster_env(self.setup, [dead_address(), self.setup.nodes[1].address()]))
        self.check_every_node(s, 'deadfirst')

    def test_no_seed_reachable(self):
        dead = [dead_address(), dead_address()]
        s = self.start_sluice(cluster_env(self.setup, dead), healthy=False)
        # listening, unhealthy (no slot map), failing fast
        self.assertEqual(s.healthcheck()[0], 500)
        self.assertEqual(s.health(), 'NOT_SERVING')
        for t in TRANSPORTS:
            self.assertUnavailable(s, t, [[('k', 'noseed')]])
        self.assertTrue(s.running())


# ---------------------------------------------------------------------------------------------------------------
# Slots moving between masters


class Resharding(SharedCluster):

    def setUp(self):
        harness.avoid_window_edge('HOUR', 10)
        self.sluice = self.start_sluice(cluster_env(self.setup))

    def reset_stats(self):
        for n in self.setup.nodes:
            n.command('CONFIG', 'RESETSTAT')

    def finish_on_failure(self, slot, target):
        """Cleanup: a test that fails half-way does not leave its slot migrating."""
        def finish():
            if self.setup.owner_of_slot(slot) is not target:
                self.setup.finish_migration(slot, target)
        self.addCleanup(finish)

    def test_moved_slot_is_followed(self):
        a, b, c = self.setup.nodes
        moving = self.pick_values('mv', nodes=[a])[a][0]
        staying = self.pick_values('st', nodes=[c])[c][0]
        key = self.key('k', moving)
        slot = self.setup.slot(key)
        descriptors = [[('k', moving)], [('k', staying)]]
        for t in TRANSPORTS:
            self.assertOk(self.sluice, t, descriptors)
        self.assertCounter(a, key, 2)
        self.finish_on_failure(slot, b)
        self.setup.move_slot(slot, b)
        self.assertCounter(b, key, 2)  # MIGRATE took the counter along
        self.reset_stats()
        for i, t in enumerate(TRANSPORTS):
            d = self.assertOk(self.sluice, t, descriptors)
            self.assertEqual([s.remaining for s in d.statuses], [LIMIT - 3 - i] * 2, d)
            self.assertCounter(b, key, 3 + i)
        self.assertCounter(c, self.key('k', staying), 4)
        self.assertEqual(self.calls(b, 'incrby'), 2)
        self.assertEqual(self.calls(b, 'expire'), 2)
        self.assertEqual(self.calls(a, 'incrby'), 0)
        # one -MOVED at most per worker (each keeps its own slot map; the harness runs two): after it the map
        # names the new owner
        self.assertLessEqual(self.rejected(a, 'incrby'), 2, self.setup.command_stats(a))
        d = self.assertOk(self.sluice, 'grpc', [[('k', moving)]])
        self.assertEqual(d.statuses[0].remaining, LIMIT - 5, d)
        self.assertLessEqual(self.rejected(a, 'incrby'), 2, self.setup.command_stats(a))
        self.assertCounter(b, key, 5)

    def value_in_slot(self, tag, slot):
        """A descriptor value '<tag><i>' whose key (this hour's window) hashes to `slot`."""
        for i in range(200000):
            value = '%s%d' % (tag, i)
            if harness.key_slot(self.key('k', value)) == slot:
                self.assertEqual(self.setup.slot(self.key('k', value)), slot)  # the local CRC16 agrees with Redis
                return value
        raise AssertionError('no value found for slot %d' % slot)

    def test_ask_during_migration(self):
        a, b, c = self.setup.nodes
        moving = self.pick_values('ask', nodes=[b])[b][0]
        key = self.key('k', moving)
        slot = self.setup.slot(key)
        fresh = self.value_in_slot('fresh', slot)  # a key of the same slot that does not exist yet
        fresh_key = self.key('k', fresh)
        for t in TRANSPORTS:
            self.assertOk(self.sluice, t, [[('k', moving)]])
        self.assertCounter(b, key, 2)
        b.command('PERSIST', key)  # so the TTL shows whether the EXPIRE of the next decisions reached the key
        self.finish_on_failure(slot, c)
        self.setup.begin_migration(slot, c)  # b still owns the slot but no longer has the key: it answers -ASK
        self.reset_stats()
        for i, t in enumerate(TRANSPORTS):
            d = self.assertOk(self.sluice, t, [[('k', moving)], [('k', fresh)]])
            self.assertEqual([s.remaining for s in d.statuses], [LIMIT - 3 - i, LIMIT - 1 - i], d)
            # INCRBY and EXPIRE both reached the importing node
            self.assertCounter(c, key, 3 + i)
            self.assertCounter(c, fresh_key, 1 + i)
        stats = {n.port: self.setup.command_stats(n) for n in self.setup.nodes}
        self.assertEqual(self.calls(c, 'incrby'), 4, stats)
        self.assertEqual(self.calls(c, 'expire'), 4, stats)
        self.assertEqual(self.calls(b, 'incrby'), 0, stats)
        # -ASK does not change the map (cluster spec): every key of every decision asked b first
        self.assertEqual(self.rejected(b, 'incrby'), 4, stats)
        # the migration ends: c owns the slot, b answers -MOVED
        self.setup.finish_migration(slot, c)
        d = self.assertOk(self.sluice, 'json', [[('k', moving)]])
        self.assertEqual(d.statuses[0].remaining, LIMIT - 5, d)
        self.assertCounter(c, key, 5)

    def test_slot_moved_under_load(self):
        # DecisionLoad counts ('k', 'shared') in every decision: no decision may fail or count twice while its slot
        # migrates (-ASK) and changes owner (-MOVED)
        a, b, c = self.setup.nodes
        key = self.key('k', 'shared')
        slot = self.setup.slot(key)
        source = self.setup.owner_of_slot(slot)
        target = a if source is not a else b
        self.finish_on_failure(slot, target)
        load = DecisionLoad(self.sluice, 'c', threads=4)
        try:
            begin = time.monotonic()
            harness.wait_until(lambda: load.count('ok', begin) >= 20, timeout=5, message='decisions before')
            self.setup.begin_migration(slot, target)
            mid = time.monotonic()
            harness.wait_until(lambda: load.count('ok', mid) >= 20, timeout=5, message='decisions while migrating',
                               describe=lambda: repr(load.tail()))
            self.setup.finish_migration(slot, target)
            end = time.monotonic()
            harness.wait_until(lambda: load.count('ok', end) >= 20, timeout=5, message='decisions after',
                               describe=lambda: repr(load.tail()))
        finally:
            self.assertTrue(load.stop(), 'load threads still running')
        with load.lock:
            results = list(load.results)
        bad = [r for r in results if r[2] != 'ok']
        self.assertEqual(bad[:5], [], '%d of %d decisions failed' % (len(bad), len(results)))
        slow = [r for r in results if r[4] >= FAST]
        self.assertEqual(slow[:5], [], '%d decisions took %.1fs or more' % (len(slow), FAST))
        self.assertCounter(target, key, len(results))


# ---------------------------------------------------------------------------------------------------------------
# A master down


class NodeDown(ClusterCase):
    def setUp(self):
        harness.avoid_window_edge('HOUR', 15)
        self.setup = ClusterSetup()
        self.addCleanup(self.setup.close)

    def test_killed_node_fails_fast_for_its_keys_only(self):
        a, b, c = self.setup.nodes
        s = self.start_sluice(cluster_env(self.setup, [a.address(), b.address()]))
        values = self.pick_values('down', per_node=2)
        live = [[('k', values[a][0])], [('k', values[b][0])]]
        dead = [[('k', values[c][0])]]
        mixed = [[('k', values[a][1])], [('k', values[b][1])]] + dead  # may count on a and b, and fail
        for t in TRANSPORTS:
            self.assertOk(s, t, live + dead)
        c.kill()
        killed = time.monotonic()
        # past the cluster node timeout (2 s): the other masters mark c as failed and keep serving their slots
        i = 0
        counted = 2
        while time.monotonic() - killed < 3.0:
            t = TRANSPORTS[i % 2]
            self.assertUnavailable(s, t, dead)
            self.assertUnavailable(s, t, mixed)
            d = self.assertOk(s, t, live)
            counted += 1
            self.assertEqual([st.remaining for st in d.statuses], [LIMIT - counted] * 2, d)
            i += 1
            time.sleep(0.05)
        self.assertTrue(s.running())
        self.assertCounter(a, self.key('k', values[a][0]), counted)
        self.assertCounter(b, self.key('k', values[b][0]), counted)
        # c comes back (empty: no persistence) with its nodes.conf: its slots are served again
        c.restart()
        self.setup.wait_ready(timeout=20)
        seen = []

        def served():
            outcome, detail, elapsed = attempt(s, 'grpc', 'c', dead)
            seen.append((outcome, detail, elapsed))
            self.assertLess(elapsed, FAST, 'a decision took %.3fs while c restarted: %r' % (elapsed, detail))
            return outcome == 'ok'

        harness.wait_until(served, timeout=10, interval=0.1, message='decisions for the restarted node',
                           describe=lambda: '%r\n%s' % (seen[-3:], s.log_tail()))
        d = self.assertOk(s, 'json', live + dead)
        self.assertEqual([st.remaining for st in d.statuses], [LIMIT - counted - 1] * 2 + [LIMIT - 2], d)
        self.assertCounter(c, self.key('k', values[c][0]), 2)
        self.assertCounter(a, self.key('k', values[a][0]), counted + 1)



# ---------------------------------------------------------------------------------------------------------------
# A master down, its replica promoted


class ClusterFailover(ClusterCase):
    NODE_TIMEOUT = 1000  # ms: the replica takes over about a second or two after its master dies

    def setUp(self):
        harness.avoid_window_edge('HOUR', 30)
        self.setup = ClusterSetup(node_timeout=self.NODE_TIMEOUT)
        self.addCleanup(self.setup.close)

    def replica_get(self, replica, key):
        """GET key on a replica (READONLY first: it would answer -MOVED to its master otherwise)."""
        replica.command('READONLY')
        return replica.command('GET', key)

    def promoted(self, replica, survivors, slot):
        """The replica says role:master, and every surviving master says cluster_state:ok and names it as the owner
        of `slot`."""
        if self.setup.role(replica) != 'master':
            return False
        return all(self.setup.cluster_info(m).get('cluster_state') == 'ok'
                   and self.setup.owner_of_slot(slot, m) is replica for m in survivors)

    def test_replica_promoted_after_master_dies(self):
        a, b, c = self.setup.nodes
        replica = self.setup.add_replica(c)
        s = self.start_sluice(cluster_env(self.setup, [a.address(), b.address()]))
        values = self.pick_values('fo', per_node=2)
        twos = self.pick_values('fotwo', per_node=2, descriptor_key='two', nodes=[c])[c]
        two = dict(zip(TRANSPORTS, twos))  # one `two` key (2 an hour) per transport, on c
        live = [[('k', values[a][0])], [('k', values[b][0])]]
        kept = [[('k', values[c][0])]]  # counted twice on c before the failover, counted on after it
        probe = [[('k', values[c][1])]]  # only after c is killed
        c_keys = {self.key('k', values[c][0]): '2', self.key('two', two['grpc']): '1',
                  self.key('two', two['json']): '1'}
        for i, t in enumerate(TRANSPORTS):
            d = self.assertOk(s, t, live + kept + [[('two', two[t])]])
            self.assertEqual([(st.code, st.remaining) for st in d.statuses],
                             [('OK', LIMIT - 1 - i)] * 3 + [('OK', 1)], d)
        for key, value in c_keys.items():
            self.assertCounter(c, key, value)
        # the counters reached the replica
        harness.wait_until(lambda: all(self.replica_get(replica, k) == v for k, v in c_keys.items()), timeout=10,
                           message='the counters of c replicated to :%d' % replica.port,
                           describe=lambda: repr({k: self.replica_get(replica, k) for k in c_keys}))
        slot = self.setup.slot(self.key('k', values[c][1]))
        counted = 2
        c.kill()
        killed = time.monotonic()
        # until the replica takes over: c's keys fail fast, the keys of a and b are served
        outage = []  # (seconds since the kill, transport, outcome, detail, elapsed, replica's role after it)
        i = 0
        while True:
            t = TRANSPORTS[i % 2]
            outcome, detail, elapsed = attempt(s, t, 'c', probe)
            role = self.setup.role(replica)
            outage.append((round(time.monotonic() - killed, 2), t, outcome, detail, round(elapsed, 3), role))
            self.assertLess(elapsed, FAST, 'a decision for a key of the dead master took %.3fs: %r' % (elapsed,
                                                                                                  outage[-1]))
            if role != 'master':
                # still a replica after the decision: nothing could have counted that key
                self.assertEqual(outcome, 'unavailable', '%r\n%s' % (outage[-1], s.log_tail(10)))
                self.assertIn('Redis', detail)
            else:
                self.assertIn(outcome, ('ok', 'unavailable'), '%r\n%s' % (outage[-1], s.log_tail(10)))
            d = self.assertOk(s, t, live)
            counted += 1
            self.assertEqual([st.remaining for st in d.statuses], [LIMIT - counted] * 2, d)
            if self.promoted(replica, [a, b], slot):
                break
            self.assertLess(time.monotonic() - killed, 20, 'the replica was not promoted within 20 s:\n%s\n%s'
                            % (self.setup.describe(), replica.log()[-3000:]))
            i += 1
            time.sleep(0.05)
        promoted = time.monotonic()
        self.assertIn('unavailable', [o[2] for o in outage], 'no decision failed while c was down: %r' % outage)
        self.assertTrue(s.running())
        # once promoted, sluice finds the new master (its periodic CLUSTER SLOTS) and serves c's slots again
        for t in TRANSPORTS:
            seen = []

            def served():
                outcome, detail, elapsed = attempt(s, t, 'c', probe)
                seen.append((round(time.monotonic() - promoted, 2), outcome, detail, round(elapsed, 3)))
                return outcome == 'ok'

            harness.wait_until(served, timeout=10, interval=0.1,
                               message='%s decisions for the keys of the promoted replica' % t,
                               describe=lambda: '%r\n%s' % (seen[-3:], s.log_tail()))
            outage.extend((round(time.monotonic() - killed, 2), t) + o[1:] for o in seen)
            bad = [o for o in seen if o[1] not in ('ok', 'unavailable') or o[3] >= FAST]
            self.assertEqual(bad, [], 'slow or unexpected outcomes while sluice caught up: %r' % seen)
            d = self.assertOk(s, t, live)
            counted += 1
            self.assertEqual([st.remaining for st in d.statuses], [LIMIT - counted] * 2, d)
        probes_ok = sum(1 for o in outage if o[2] == 'ok')
        # the counts continue from what the replica had: one more hit for each `two` key, then over the limit
        for i, t in enumerate(TRANSPORTS):
            d = self.assertOk(s, t, [[('two', two[t])]] + kept)
            self.assertEqual([(st.code, st.remaining) for st in d.statuses],
                             [('OK', 0), ('OK', LIMIT - 3 - i)], d)
            d = self.assertOk(s, t, [[('two', two[t])]])
            self.assertEqual([(st.code, st.remaining) for st in d.statuses], [('OVER_LIMIT', 0)], d)
            self.assertEqual(d.overall, 'OVER_LIMIT', d)
        d = self.assertOk(s, 'grpc', live + kept)
        counted += 1
        self.assertEqual([st.remaining for st in d.statuses], [LIMIT - counted] * 2 + [LIMIT - 5], d)
        # every counter of c's slots is on the promoted replica, none on a or b; the failed decisions counted nothing
        self.assertCounter(replica, self.key('k', values[c][0]), 5)
        self.assertCounter(replica, self.key('two', two['grpc']), 3)
        self.assertCounter(replica, self.key('two', two['json']), 3)
        self.assertCounter(replica, self.key('k', values[c][1]), probes_ok)
        self.assertCounter(a, self.key('k', values[a][0]), counted)
        self.assertCounter(b, self.key('k', values[b][0]), counted)
        # the dead master left the map: sluice stops trying to reach it
        harness.wait_until(lambda: '%s owns no slots and cannot be reached' % c.address() in s.log(), timeout=5,
                           message='the dead master retired', describe=s.log_tail)
        self.assertTrue(s.running())


if __name__ == '__main__':
    harness.main()
