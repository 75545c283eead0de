"""Several regions under one limit (issue 52, docs/guides/regions.md). Three regions on loopback, each with its own
Redis primary, a replica of each other region's primary (`--replicaof`, through a proxy that delays the
replication link as a wide-area network would), and a Sluice instance that writes to its own primary and reads the
other regions' totals from its replicas (through a proxy with a small delay too). Checks: uneven traffic over
several windows stays within the stated bound and close to the limit; a stopped replica under each fallback, and
recovery; a primary failover in one region; the gauges; concurrency summed; cold keys read less often; GCRA
refused, by check-config too; no regions, no change."""

import json
import os
import shutil
import tempfile
import threading
import time
import unittest
import uuid

import browser
import harness
from delay_proxy import DelayProxy
from harness import RedisServer, SentinelSetup, Sluice
from test_redis import attempt, wait_healthy

INTERVAL = 0.1  # REDIS_REMOTE_SYNC_INTERVAL
WAN = 0.05  # one-way delay of a replication link
READ_DELAY = 0.005  # one-way delay to a local replica
WINDOW = 5  # seconds: the windows of the uneven-traffic rule

RULES = """
domain: regions
descriptors:
  - key: uneven
    rate_limit: {requests_per_unit: 100, unit: second, unit_multiplier: 5}
  - key: sliding
    rate_limit: {requests_per_unit: 200, unit: second, unit_multiplier: 5, algorithm: sliding_window}
  - key: tenth
    rate_limit: {requests_per_unit: 100, unit: second, unit_multiplier: 10}
  - key: hourly
    rate_limit: {requests_per_unit: 100, unit: hour}
  - key: inflight
    rate_limit: {requests_per_unit: 6, algorithm: concurrency, lease: 30s}
  - key: tenant
    descriptors:
      - key: request_id
        rate_limit: {requests_per_unit: 3, algorithm: concurrency, lease: 30s, holder_key: request_id}
  - key: monthly
    rate_limit: {requests_per_unit: 1000, unit: month, time_zone: Europe/Berlin, accounting: usage}
"""


def unique(tag):
    return '%s-%s' % (tag, uuid.uuid4().hex[:8])


def stats_of(s, prefix='ratelimit.redis_region.', *more):
    """The stats under `prefix`, without it: {name: value}. With `more` prefixes, a tuple of such maps, all from one
    /stats page: the control thread writes the gauges and serves the page, so one page is one round's values."""
    text = harness.http_get(s.debug_port, '/stats')[2]
    text = text if isinstance(text, str) else text.decode()
    outs = tuple({} for _ in (prefix,) + more)
    for line in text.splitlines():
        name, _, value = line.partition(': ')
        for p, out in zip((prefix,) + more, outs):
            if name.startswith(p):
                out[name[len(p):]] = int(value)
    return outs if more else outs[0]


def decide(s, key, value, hits=None):
    """One decision of `hits` (the descriptor's hits_addend: 0 is a check that takes nothing)."""
    d = {'entries': [(key, value)]}
    if hits is not None:
        d['hits_addend'] = hits
    outcome, detail, _ = attempt(s, 'grpc', 'regions', [d])
    assert outcome == 'ok', detail
    return detail


def remaining(s, key, value):
    """What `s` says is left of key=value's limit (a check: 0 hits)."""
    return decide(s, key, value, hits=0).statuses[0].remaining


def wait_window_start(window, margin=0.3):
    """Sleeps until `margin` seconds into the next window of `window` seconds."""
    now = time.time()
    time.sleep(window - now % window + margin)


class Regions:
    """Regions `names` (the first `sentinel` one, if named, behind sentinels with a local replica). For each pair
    (here, there): a replica in `here` of there's primary, replicating through a DelayProxy of `wan` seconds, and
    read by here's Sluice through a DelayProxy of READ_DELAY."""

    def __init__(self, test, names=('a', 'b', 'c'), env=None, sentinel=None, wan=WAN):
        self.names = names
        self.primaries, self.setups, self.links, self.replicas, self.reads, self.sluices = {}, {}, {}, {}, {}, {}
        args = ['--repl-diskless-sync-delay', '0']
        for n in names:
            if n == sentinel:
                setup = SentinelSetup()
                test.addCleanup(setup.close)
                self.setups[n] = setup
                self.primaries[n] = setup.master
            else:
                self.primaries[n] = RedisServer(extra_args=args)
                test.addCleanup(self.primaries[n].close)
        for here in names:
            for there in names:
                if here == there:
                    continue
                link = DelayProxy(self.primaries[there].port, wan)
                test.addCleanup(link.close)
                # As the guide advises: a region's sentinels never promote its replica in another region.
                replica = RedisServer(extra_args=args + ['--replicaof', '127.0.0.1', str(link.port),
                                                         '--replica-priority', '0'])
                test.addCleanup(replica.close)
                read = DelayProxy(replica.port, READ_DELAY)
                test.addCleanup(read.close)
                self.links[here, there], self.replicas[here, there], self.reads[here, there] = link, replica, read
        for replica in self.replicas.values():
            self.wait_in_sync(replica)
        for here in names:
            store = self.setups[here].sluice_env() if here in self.setups else self.primaries[here].sluice_env()
            e = dict(store, BACKEND_TYPE='redis', REDIS_REGION=here,
                     REDIS_REMOTE_REGIONS=','.join('%s=127.0.0.1:%d' % (there, self.reads[here, there].port)
                                                   for there in names if there != here),
                     REDIS_REMOTE_SYNC_INTERVAL='%dms' % (INTERVAL * 1000), REDIS_REMOTE_MAX_LAG='1s')
            e.update(env or {})
            s = Sluice(rules={'regions.yaml': RULES}, env=e)
            test.addCleanup(s.close)
            wait_healthy(s)
            self.sluices[here] = s
        # Every instance has read every other region once.
        for here in names:
            harness.wait_until(lambda: all(stats_of(self.sluices[here]).get('%s.reachable' % there) == 1
                                           for there in names if there != here),
                               timeout=10, message='%s reads every other region' % here)

    def wait_rounds(self, name, rounds=3):
        """Until `name`'s instance has begun `rounds` more rounds of remote reads (its heartbeat, written at each
        round's start, is that much newer than now), so the views of the rounds before the last have reached its
        workers."""
        since = time.time() * 1000
        key = 'sluice_region:%s' % name

        def newest():
            fields = self.primaries[name].command('HGETALL', key)
            return max(int(v.partition('|')[0]) for v in fields[1::2])

        harness.wait_until(lambda: newest() >= since + rounds * INTERVAL * 1000, timeout=10,
                           message='%d rounds of %s' % (rounds, name))

    @staticmethod
    def wait_in_sync(replica, timeout=15):
        harness.wait_until(lambda: replica.info('replication').get('master_link_status') == 'up', timeout=timeout,
                           message='replica %d in sync' % replica.port, describe=replica.log)

    def __getitem__(self, name):
        return self.sluices[name]


class UnevenTraffic(unittest.TestCase):
    def test_uneven_traffic_stays_within_the_bound_over_several_windows(self):
        """Regions a, b, c send 36, 18 and 6 requests a second for three 5 s windows of a limit of 100 (three times
        the limit): each window admits at most L + the sum over regions of rate × (interval + lag + round trip),
        and at least 90 % of L. Each region counting alone would admit about 220."""
        regions = Regions(self)
        value = unique('u')
        limit, rates = 100, {'a': 36, 'b': 18, 'c': 6}
        wait_window_start(WINDOW, margin=0.05)
        start = time.time()
        end = start + 3 * WINDOW - 0.1
        lock = threading.Lock()
        admitted, offered, errors = {}, {n: 0 for n in regions.names}, []

        def client(name):
            s, period = regions[name], 1.0 / rates[name]
            due = start
            while due < end:
                time.sleep(max(0.0, due - time.time()))
                due += period
                sent = time.time()
                outcome, detail, _ = attempt(s, 'grpc', 'regions', [{'entries': [('uneven', value)]}])
                got = time.time()
                if outcome != 'ok':
                    errors.append(detail)
                    continue
                with lock:
                    offered[name] += 1
                    if detail.overall == 'OK':
                        # A decision near a window's edge may be the other window's: it counts in both for the
                        # upper check, in neither for the lower one.
                        first, last = int(sent // WINDOW), int(got // WINDOW)
                        for w in {first, last}:
                            admitted.setdefault(w, [0, 0])[0 if first == last else 1] += 1

        threads = [threading.Thread(target=client, args=(n,)) for n in regions.names]
        for t in threads:
            t.start()
        # Halfway through the second window, each region's overshoot gauge for the rule: the other regions'
        # rates (every hit counts in a fixed window) × (interval + their replication lag + the round trip).
        time.sleep(start + 1.5 * WINDOW - time.time())
        # One page each: the overall and the per-rule gauge of the same round.
        gauges = {n: stats_of(regions[n], 'ratelimit.redis_region.', 'ratelimit.service.rate_limit.regions.uneven.')
                  for n in regions.names}
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        for name, (g, rule) in gauges.items():
            expected = sum(rates[r] * (INTERVAL + (g['%s.replication_lag_ms' % r] + g['%s.round_trip_ms' % r]) / 1000)
                           for r in regions.names if r != name)
            print('%s: region_overshoot %d, expected about %.1f' % (name, rule['region_overshoot'], expected))
            self.assertLessEqual(abs(rule['region_overshoot'] - expected), 0.5 * expected + 2, (rule, g))
            self.assertEqual(g['worst_overshoot'], rule['region_overshoot'])
        seen = {n: offered[n] / (end - start) for n in regions.names}
        # The staleness of a remote total: a read interval, the replication link's delay (and up to an interval
        # of heartbeat), a round trip, and a margin for this machine.
        staleness = INTERVAL + WAN + 2 * READ_DELAY + 0.15
        bound = limit + sum(seen.values()) * staleness
        # The three windows; a client late on a slow machine may still send into the next, which is not checked.
        first = int(start // WINDOW)
        windows = [first, first + 1, first + 2]
        print('\noffered per second %s; admitted per window (inside, at an edge) %s; bound %.0f' %
              ({n: round(r) for n, r in seen.items()}, [admitted.get(w) for w in windows], bound))
        self.assertLessEqual(set(admitted), set(windows + [first + 3]), admitted)
        for w in windows:
            inside, edge = admitted.get(w, (0, 0))
            self.assertLessEqual(inside + edge, bound, 'window %d admitted %d + %d at its edges' % (w, inside, edge))
            self.assertGreaterEqual(inside + edge, 0.9 * limit, 'window %d admitted only %d' % (w, inside + edge))
        # The gauges: every region reachable, round trips and lags as the proxies make them, no sharing. The lag
        # is measured from the round's start: a read that reaches the replica late (a slow machine) finds a
        # younger heartbeat, so the lower bounds are waited for, not read once.
        for name in regions.names:
            others = [r for r in regions.names if r != name]

            def as_the_proxies_make_them(g, others=others):
                # (A round trip of 2 × INTERVAL is a round that ended without the reply: not the proxies'.)
                return all(int(2 * READ_DELAY * 1000) - 1 <= g['%s.round_trip_ms' % r] < int(2 * INTERVAL * 1000) and
                           g['%s.replication_lag_ms' % r] >= int(WAN * 1000) - 5 for r in others)
            g = harness.wait_for_value(lambda name=name: stats_of(regions[name]), as_the_proxies_make_them, timeout=3,
                                       message='%s: lags and round trips' % name)
            for there in others:
                self.assertEqual(g['%s.reachable' % there], 1, g)
                self.assertLess(g['%s.round_trip_ms' % there], 1000, g)
                self.assertLess(g['%s.replication_lag_ms' % there], 1000, g)
                self.assertIn(g['%s.replica_last_io_seconds' % there], (0, 1), g)  # a replica that hears its primary
            self.assertEqual(g['sharing'], 0, g)
            self.assertGreaterEqual(g['keys'], 1, g)


class Fallbacks(unittest.TestCase):
    def stop_replica(self, regions, here, there):
        regions.replicas[here, there].kill()
        s = regions[here]
        s.wait_for_log(lambda text: 'region %s is unreachable' % there in text, timeout=10,
                       message='%s logs %s unreachable' % (here, there))
        self.assertEqual(stats_of(s)['%s.reachable' % there], 0)

    def restart_replica(self, regions, here, there):
        replica = regions.replicas[here, there]
        replica.start()
        Regions.wait_in_sync(replica)
        regions[here].wait_for_log(lambda text: 'region %s is reachable again' % there in text, timeout=10,
                                   message='%s logs %s reachable again' % (here, there))

    def test_last_keeps_the_last_totals_until_their_window_ends(self):
        regions = Regions(self)
        a, b = regions['a'], regions['b']
        value = unique('t')
        wait_window_start(10)
        decide(b, 'tenth', value, hits=30)
        harness.wait_until(lambda: remaining(a, 'tenth', value) == 70, timeout=3, message="a sees b's 30")
        self.stop_replica(regions, 'a', 'b')
        self.assertIn('its last totals count until their windows end', a.log())
        decide(b, 'tenth', value, hits=20)  # not seen by a: its replica of b is down
        regions.wait_rounds('a')
        self.assertEqual(remaining(a, 'tenth', value), 70)
        # The next window: b's last totals were of the last one, so nothing of b counts.
        wait_window_start(10)
        c = regions['c']
        self.assertEqual([remaining(a, 'tenth', value), remaining(c, 'tenth', value)], [100, 100])
        decide(b, 'tenth', value, hits=40)
        harness.wait_until(lambda: remaining(c, 'tenth', value) == 60, timeout=3, message="c still reads b")
        self.assertEqual(remaining(a, 'tenth', value), 100)
        # Recovery is automatic, and the log pairs it with the outage.
        self.restart_replica(regions, 'a', 'b')
        harness.wait_until(lambda: remaining(a, 'tenth', value) == 60, timeout=3, message="a sees b's 40 again")
        self.assertEqual(stats_of(a)['b.reachable'], 1)

    def test_a_stalled_replica_does_not_hold_the_others_back(self):
        """a's replica of b stops answering (SIGSTOP: the connection stays, nothing comes back). a's rounds end
        without it, so c's hits still reach a at once; b's last totals count until REDIS_REMOTE_MAX_LAG (1 s here),
        then b is unreachable. Resumed, b is read again."""
        regions = Regions(self)
        a, b, c = regions['a'], regions['b'], regions['c']
        value = unique('p')
        decide(b, 'hourly', value, hits=10)
        harness.wait_until(lambda: remaining(a, 'hourly', value) == 90, timeout=3, message="a sees b's 10")
        replica = regions.replicas['a', 'b']
        replica.pause()
        try:
            decide(c, 'hourly', value, hits=20)
            decide(b, 'hourly', value, hits=5)  # not seen by a while its replica of b is stopped
            harness.wait_until(lambda: remaining(a, 'hourly', value) == 70, timeout=1.5,
                               message="c's 20 reach a while a's replica of b is stopped")
            # A round that ends without b's reply shows at least the time it waited as b's round trip.
            self.assertGreaterEqual(stats_of(a)['b.round_trip_ms'], 200)
            a.wait_for_log(lambda text: 'region b is unreachable: no reply within 200ms' in text, timeout=5,
                           message='b unreachable once its totals are older than REDIS_REMOTE_MAX_LAG')
            self.assertEqual(remaining(a, 'hourly', value), 70)  # (last: b's last 10 still count)
        finally:
            replica.resume()
        a.wait_for_log(lambda text: 'region b is reachable again' in text, timeout=10, message='b back')
        harness.wait_until(lambda: remaining(a, 'hourly', value) == 65, timeout=3, message="b's 5 seen")

    def test_share_splits_what_is_left_among_the_regions_that_know(self):
        regions = Regions(self, env={'REDIS_REMOTE_FALLBACK': 'share'})
        a, b, c = regions['a'], regions['b'], regions['c']
        self.stop_replica(regions, 'a', 'b')
        # a cannot see b: it says so in its heartbeat, which b and c read from their replicas of a.
        for s in (a, b, c):
            harness.wait_until(lambda: stats_of(s)['sharing'] == 1, timeout=5, message='sharing')
        # A key first seen during the partition: each region may take a third of its limit.
        value = unique('h')
        for s in (a, b, c):
            got = sum(decide(s, 'hourly', value).overall == 'OK' for _ in range(50))
            self.assertEqual(got, 33)
        self.restart_replica(regions, 'a', 'b')
        for s in (a, b, c):
            harness.wait_until(lambda: stats_of(s)['sharing'] == 0, timeout=5, message='sharing ended')
        # Then the totals are summed again (a fixed window counts refused hits too: 150 of 100 for that key).
        harness.wait_until(lambda: [remaining(s, 'hourly', value) for s in (a, b, c)] == [0, 0, 0], timeout=3,
                           message='summed again')
        fresh = unique('h')
        self.assertEqual(remaining(c, 'hourly', fresh), 100)
        decide(b, 'hourly', fresh, hits=10)
        harness.wait_until(lambda: remaining(c, 'hourly', fresh) == 90, timeout=3, message='b read by c')


class Credentials(unittest.TestCase):
    def test_remote_auth_file_rotates(self):
        """REDIS_REMOTE_AUTH_FILE: a's replica of b wants a password, from the file's `b=` line. The replica's password
        changes and its connections are dropped: a cannot read b (WRONGPASS) until the file has the new line, then
        reads b again without a restart."""
        primary_a, primary_b = RedisServer(), RedisServer()
        self.addCleanup(primary_a.close)
        self.addCleanup(primary_b.close)
        replica = RedisServer(requirepass='pw1', extra_args=['--replicaof', '127.0.0.1', str(primary_b.port)])
        self.addCleanup(replica.close)
        Regions.wait_in_sync(replica)
        folder = tempfile.mkdtemp(prefix='sluice-e2e-regions-')
        self.addCleanup(harness.remove_tmp, folder)
        path = os.path.join(folder, 'remote-auth')
        with open(path, 'w') as f:
            f.write('# the other regions\nb = pw1\n')
        b = Sluice(rules={'regions.yaml': RULES}, env=dict(primary_b.sluice_env(), BACKEND_TYPE='redis',
                                                           REDIS_REGION='b'))
        self.addCleanup(b.close)
        a = Sluice(rules={'regions.yaml': RULES}, env=dict(
            primary_a.sluice_env(), BACKEND_TYPE='redis', REDIS_REGION='a',
            REDIS_REMOTE_REGIONS='b=127.0.0.1:%d' % replica.port, REDIS_REMOTE_AUTH_FILE=path,
            REDIS_REMOTE_SYNC_INTERVAL='100ms', REDIS_REMOTE_MAX_LAG='1s'))
        self.addCleanup(a.close)
        for s in (a, b):
            wait_healthy(s)
        value = unique('r')
        decide(b, 'hourly', value, hits=10)
        harness.wait_until(lambda: remaining(a, 'hourly', value) == 90, timeout=5, message="a reads b's 10")
        replica.command('CONFIG', 'SET', 'requirepass', 'pw2')
        replica.requirepass = 'pw2'
        replica.command('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
        a.wait_for_log(lambda text: 'region b is unreachable' in text, timeout=10, message='b unreachable')
        self.assertNotIn('pw1', a.log())
        with open(path + '.new', 'w') as f:
            f.write('b=pw2\n')
        os.replace(path + '.new', path)
        a.wait_for_log(lambda text: 'region b is reachable again' in text, timeout=10, message='b read again')
        decide(b, 'hourly', value, hits=5)
        harness.wait_until(lambda: remaining(a, 'hourly', value) == 85, timeout=5, message="a reads b's 5")
        self.assertNotIn('pw2', a.log())


class Dashboard(unittest.TestCase):
    def test_the_dashboard_shows_the_regions(self):
        """/dashboard/data's backend.regions, and the page's Regions table in headless Chromium, as a remote region
        becomes unreachable."""
        regions = Regions(self, names=('a', 'b'))
        a = regions['a']
        data = harness.http_get(a.debug_port, '/dashboard/data')[2]
        r = data['backend']['regions']
        self.assertEqual(r['region'], 'a')
        self.assertEqual([x['name'] for x in r['remotes']], ['b'])
        self.assertEqual(r['remotes'][0]['reachable'], 1)
        self.assertEqual(r['sharing'], 0)
        regions.replicas['a', 'b'].kill()
        with browser.Browser() as b:
            page = b.open('http://127.0.0.1:%d/dashboard' % a.debug_port)
            page.wait_for("""(() => {
                const row = document.querySelector('#regions-table tbody tr');
                return !document.getElementById('regions').hidden && row
                    && row.cells[0].textContent === 'b' && row.cells[1].textContent === 'unreachable';
            })()""", timeout=10)
            self.assertEqual(page.evaluate("document.getElementById('region-name').textContent"), 'a')
            self.assertIn('Worst overshoot', page.evaluate("document.getElementById('regions-note').textContent"))


class Failover(unittest.TestCase):
    def test_a_primary_failover_in_one_region(self):
        """b's primary fails over to its local replica (sentinels): b's Sluice follows, the sentinels point the
        other regions' replicas of b at the new primary, and a and c read b's new counts again by themselves."""
        regions = Regions(self, sentinel='b')
        a, b = regions['a'], regions['b']
        setup = regions.setups['b']
        value = unique('f')
        decide(b, 'hourly', value, hits=20)
        harness.wait_until(lambda: remaining(a, 'hourly', value) == 80, timeout=3, message="a sees b's 20")
        old = setup.master
        harness.wait_until(lambda: setup.replica.info('replication').get('master_repl_offset') ==
                           old.info('replication').get('master_repl_offset'), timeout=5, message='b in sync')
        old.kill()
        setup.wait_failover(old)
        # The new primary is b's own replica: the others' replicas of b have replica-priority 0.
        self.assertEqual(setup.replica.info('replication').get('role'), 'master')
        for here in ('a', 'c'):
            self.assertEqual(regions.replicas[here, 'b'].info('replication').get('role'), 'slave')
        for here in ('a', 'c'):
            regions.links[here, 'b'].retarget(setup.replica.port)
        harness.wait_until(lambda: decide(b, 'hourly', value, hits=10).overall == 'OK', timeout=15,
                           message="b's Sluice on its new primary")
        harness.wait_until(lambda: remaining(a, 'hourly', value) <= 70, timeout=20,
                           message="a reads b's new primary", describe=a.log_tail)
        self.assertEqual(stats_of(a)['b.reachable'], 1)


class Algorithms(unittest.TestCase):
    def test_concurrency_holders_are_summed(self):
        regions = Regions(self, names=('a', 'b'))
        a, b = regions['a'], regions['b']
        value = unique('c')
        for _ in range(4):
            self.assertEqual(decide(a, 'inflight', value).overall, 'OK')
        harness.wait_until(lambda: remaining(b, 'inflight', value) == 2, timeout=3, message="b sees a's 4 slots")
        self.assertEqual([decide(b, 'inflight', value).overall for _ in range(3)], ['OK', 'OK', 'OVER_LIMIT'])
        # a gives two back: b may take two more once it has read a again.
        for _ in range(2):
            outcome, detail, _ = attempt(a, 'grpc', 'regions',
                                         [{'entries': [('inflight', value)], 'is_negative_hits': True}])
        harness.wait_until(lambda: remaining(b, 'inflight', value) == 2, timeout=3, message="a's release seen")

    def test_holders_are_summed(self):
        """holder_key: the live holders' slots of the other region count; a release there frees them here."""
        regions = Regions(self, names=('a', 'b'))
        a, b = regions['a'], regions['b']
        value = unique('t')

        def take(s, rid, release=False):
            d = {'entries': [('tenant', value), ('request_id', rid)]}
            if release:
                d['is_negative_hits'] = True
            outcome, detail, _ = attempt(s, 'grpc', 'regions', [d])
            self.assertEqual(outcome, 'ok', detail)
            return detail.overall

        self.assertEqual([take(a, 'r1'), take(a, 'r2')], ['OK', 'OK'])
        probe = {'entries': [('tenant', value), ('request_id', 'probe')], 'hits_addend': 0}
        left = lambda: attempt(b, 'grpc', 'regions', [probe])[1].statuses[0].remaining
        harness.wait_until(lambda: left() == 1, timeout=3, message="b sees a's two holders")
        self.assertEqual([take(b, 'r3'), take(b, 'r4')], ['OK', 'OVER_LIMIT'])
        take(a, 'r1', release=True)
        harness.wait_until(lambda: take(b, 'r4') == 'OK', timeout=3, message="a's release seen by b")

    def test_calendar_usage_windows_are_summed(self):
        """time_zone (a calendar month) with accounting: usage: the reported hits of both regions count."""
        regions = Regions(self, names=('a', 'b'))
        a, b = regions['a'], regions['b']
        value = unique('m')
        decide(a, 'monthly', value, hits=600)
        harness.wait_until(lambda: remaining(b, 'monthly', value) == 400, timeout=3, message="b sees a's 600")
        decide(b, 'monthly', value, hits=500)  # usage: counted, past the limit too
        self.assertEqual(decide(b, 'monthly', value, hits=0).overall, 'OVER_LIMIT')
        harness.wait_until(lambda: decide(a, 'monthly', value, hits=0).overall == 'OVER_LIMIT', timeout=3,
                           message="a sees b's 500: 1100 of 1000")

    def test_count_only_admitted_judges_against_the_global_count(self):
        """COUNT_ONLY_ADMITTED=true: a request over the limit with the other region's hits is not counted."""
        regions = Regions(self, names=('a', 'b'), env={'COUNT_ONLY_ADMITTED': 'true'})
        a, b = regions['a'], regions['b']
        value = unique('o')
        decide(a, 'hourly', value, hits=90)
        harness.wait_until(lambda: remaining(b, 'hourly', value) == 10, timeout=3, message="b sees a's 90")
        self.assertEqual(decide(b, 'hourly', value, hits=20).overall, 'OVER_LIMIT')
        primary = regions.primaries['b']
        counted = [primary.get(k) for k in primary.keys('regions_hourly_%s_*' % value)]
        self.assertIn(counted, ([], ['0']), 'the refused request was counted in b')
        self.assertEqual(decide(b, 'hourly', value, hits=10).overall, 'OK')
        self.assertEqual(remaining(b, 'hourly', value), 0)

    def test_sliding_windows_are_summed(self):
        regions = Regions(self, names=('a', 'b'))
        a, b = regions['a'], regions['b']
        value = unique('s')
        wait_window_start(WINDOW)
        decide(a, 'sliding', value, hits=150)
        harness.wait_until(lambda: remaining(b, 'sliding', value) == 50, timeout=3, message="b sees a's 150")
        self.assertEqual(decide(b, 'sliding', value, hits=60).overall, 'OVER_LIMIT')
        self.assertEqual(decide(b, 'sliding', value, hits=50).overall, 'OK')

    def test_heartbeat_and_explain(self):
        """Each instance's heartbeat field in its region's Redis says when it was written and which regions it reads;
        a field of an instance gone for long is deleted. /explain shows the count with the other regions' hits."""
        regions = Regions(self, names=('a', 'b'))
        a, b = regions['a'], regions['b']
        primary = regions.primaries['a']
        fields = primary.command('HGETALL', 'sluice_region:a')
        self.assertEqual(len(fields), 2, fields)
        written, _, sees = fields[1].partition('|')
        self.assertLess(abs(int(written) - time.time() * 1000), 2000)
        self.assertEqual(sees, 'b=1')
        # A field ten times REDIS_REMOTE_MAX_LAG old: another instance's, long stopped.
        primary.command('HSET', 'sluice_region:a', 'gone-1-1', '%d|b=0' % (time.time() * 1000 - 11000))
        harness.wait_until(lambda: primary.command('HEXISTS', 'sluice_region:a', 'gone-1-1') == 0, timeout=3,
                           message='the stale field deleted')
        self.assertEqual(stats_of(b)['sharing'], 0)  # (last: a stale field tells nothing anyway)
        value = unique('e')
        decide(a, 'hourly', value, hits=25)
        harness.wait_until(lambda: remaining(b, 'hourly', value) == 75, timeout=3, message="b sees a's 25")
        decide(b, 'hourly', value, hits=5)
        status, _, body = harness.http_request(b.debug_port, '/explain', body=json.dumps(
            {'domain': 'regions', 'descriptors': [{'entries': [{'key': 'hourly', 'value': value}]}]}).encode(),
            method='POST')
        self.assertEqual(status, 200, body)
        limit = body['descriptors'][0]['limits'][0]
        self.assertEqual((limit['used'], limit['remaining']), (30, 70), body)
        self.assertNotIn('unsent', limit)  # what a batching worker holds back: none here

    def test_cold_keys_are_read_less_often(self):
        """REDIS_REMOTE_COLD_INTERVAL=1s: a key far from its limit, with no traffic, is read about once a second;
        a key at its limit every round; and the other region's hits on the cold key still arrive within the cold
        interval and a round."""
        regions = Regions(self, names=('a', 'b'), env={'REDIS_REMOTE_COLD_INTERVAL': '1s'})
        a, b = regions['a'], regions['b']
        cold, full = unique('cold'), unique('full')
        decide(a, 'hourly', cold)
        decide(a, 'hourly', full, hits=100)  # its limit: every round must read it
        regions.wait_rounds('a', 5)
        with regions.replicas['a', 'b'].monitor() as m:
            time.sleep(3)
            reads = [c for c in m.commands() if c[0].upper() == 'MGET']
        rounds = len(reads)
        cold_reads = sum(1 for c in reads if any(cold in k for k in c[1:]))
        full_reads = sum(1 for c in reads if any(full in k for k in c[1:]))
        print('\nin 3 s: %d rounds, the cold key read %d times, the full one %d' % (rounds, cold_reads, full_reads))
        self.assertGreaterEqual(rounds, 10)  # 30 at 100ms; fewer on a busy machine, never none
        self.assertEqual(full_reads, rounds)
        self.assertGreaterEqual(cold_reads, 2)  # at least once a second (3 s: 2 or 3, or 4 at the edges)
        self.assertLessEqual(cold_reads, 4)
        # The gauge is the last round's: the round that reads the cold key reads both (more of them on a slow
        # machine, where rounds are longer), so this waits for a round that left it out.
        harness.wait_for_value(lambda: stats_of(a), lambda g: g['keys_read'] < g['keys'], timeout=3,
                               message='a round that left the cold key out')
        # b's hits on the cold key: a's view has them within the cold interval, a round and its delays.
        decide(b, 'hourly', cold, hits=50)
        started = time.time()
        harness.wait_until(lambda: remaining(a, 'hourly', cold) == 49, timeout=5, message="a sees b's 50")
        print('a saw them after %.2f s' % (time.time() - started))

    def test_gcra_is_refused_at_load(self):
        r = RedisServer()
        self.addCleanup(r.close)
        rules = 'domain: g\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 5, unit: second, algorithm: gcra}\n'
        s = Sluice(rules={'g.yaml': rules}, env=dict(r.sluice_env(), BACKEND_TYPE='redis', REDIS_REGION='a'),
                   wait_ready=False)
        self.addCleanup(s.close)
        self.assertEqual(s.wait_exit(10), 1, s.log())
        refused = "domain 'g', rule 'k': algorithm gcra cannot be shared across regions (REDIS_REGION is set)"
        self.assertIn(refused, s.log())
        # `sluice check-config` reads the backend's settings as the server does: the same error, and without
        # REDIS_REGION the same rules pass.
        folder = tempfile.mkdtemp(prefix='sluice-e2e-regions-check-')
        self.addCleanup(shutil.rmtree, folder, True)
        with open(os.path.join(folder, 'g.yaml'), 'w') as f:
            f.write(rules)
        checked = harness.run_sluice(['check-config', folder], env={'BACKEND_TYPE': 'redis', 'REDIS_REGION': 'a'})
        self.assertEqual(checked.returncode, 1, checked)
        self.assertIn('error loading rate limit configs: ' + refused, checked.stdout)
        checked = harness.run_sluice(['check-config', folder], env={'BACKEND_TYPE': 'redis'})
        self.assertEqual((checked.returncode, checked.stdout.splitlines()[-1]), (0, 'all rate limit configs ok'),
                         checked)

    def test_without_regions_nothing_changes(self):
        """No REDIS_REGION: no heartbeat, no remote read, the same commands for a decision."""
        r = RedisServer()
        self.addCleanup(r.close)
        s = Sluice(rules={'regions.yaml': RULES}, env=dict(r.sluice_env(), BACKEND_TYPE='redis'))
        self.addCleanup(s.close)
        wait_healthy(s)
        with r.monitor() as m:
            decide(s, 'hourly', unique('n'))
            time.sleep(0.5)
            names = {c[0].upper() for c in m.commands()}
        self.assertNotIn('HSET', names)
        self.assertNotIn('INFO', names)
        self.assertFalse(r.keys('sluice_region:*'))
        self.assertEqual(stats_of(s), {})

    def test_a_region_without_remote_regions_only_writes_its_heartbeat(self):
        r = RedisServer()
        self.addCleanup(r.close)
        s = Sluice(rules={'regions.yaml': RULES}, env=dict(r.sluice_env(), BACKEND_TYPE='redis', REDIS_REGION='solo'))
        self.addCleanup(s.close)
        wait_healthy(s)
        harness.wait_until(lambda: r.command('HLEN', 'sluice_region:solo') == 1, timeout=3, message='its heartbeat')
        self.assertEqual(r.command('HGETALL', 'sluice_region:solo')[1].partition('|')[2], '')  # no remote region
        self.assertEqual(stats_of(s), {'keys': 0, 'keys_read': 0, 'sharing': 0, 'this_region.solo': 1,
                                       'worst_overshoot': 0})
        value = unique('s')
        decide(s, 'hourly', value, hits=3)
        self.assertEqual(remaining(s, 'hourly', value), 97)


if __name__ == '__main__':
    unittest.main()
