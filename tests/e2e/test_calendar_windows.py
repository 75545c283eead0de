"""Calendar windows (issue 41, part 3): `time_zone` on a limit. Two instances on one Redis count one monthly
budget under a key that carries the local month's start; memcached and the memory backend count a sliding local
day; duration_until_reset is the time to the next local month or day, computed here with Python's zoneinfo on
the same tzdata; a rule with an unknown zone is refused naming the file, the rule and the zone. Two workers
deciding at once on more zone × unit shapes than a worker's calendar cache holds count every hit (under TSan:
without a race, issue 48 part 2)."""

import datetime
import os
import shutil
import tempfile
import threading
import time
import unittest
import uuid
from zoneinfo import ZoneInfo

import harness
from harness import RedisServer, Sluice
from memcached import MemcachedServer
from test_redis import attempt, wait_healthy

RULES = """
domain: cal
descriptors:
  - key: plan
    rate_limit: {unit: month, requests_per_unit: 5, time_zone: America/New_York}
  - key: daily
    rate_limit: {unit: day, requests_per_unit: 4, algorithm: sliding_window, time_zone: Asia/Kathmandu}
  - key: quarter
    rate_limit: {unit: month, unit_multiplier: 3, requests_per_unit: 9, time_zone: Australia/Lord_Howe}
"""


def local_bounds(zone, unit, now=None, months=1):
    """(start, end) in Unix seconds of the local day or month (of `months` months from January) holding now."""
    tz = ZoneInfo(zone)
    t = datetime.datetime.fromtimestamp(time.time() if now is None else now, tz)
    if unit == 'day':
        start = datetime.datetime(t.year, t.month, t.day, tzinfo=tz)
        following = start.date() + datetime.timedelta(days=1)
        end = datetime.datetime(following.year, following.month, following.day, tzinfo=tz)
    else:
        first = (t.month - 1) // months * months
        start = datetime.datetime(t.year, first + 1, 1, tzinfo=tz)
        nxt = first + months
        end = datetime.datetime(t.year + nxt // 12, nxt % 12 + 1, 1, tzinfo=tz)
    return int(start.timestamp()), int(end.timestamp())


def unique(tag):
    return '%s%s' % (tag, uuid.uuid4().hex[:8])


class CalendarCase(unittest.TestCase):
    def decide(self, sluice, key, value, transport='grpc'):
        outcome, detail, _ = attempt(sluice, transport, 'cal', [{'entries': [(key, value)]}])
        self.assertEqual(outcome, 'ok', detail)
        return detail.statuses[0]

    def assertReset(self, status, zone, unit, months=1):
        before = time.time()
        start, end = local_bounds(zone, unit, before, months)
        # Seconds to the window's end from the decision's whole second, which was a moment ago: up to a second
        # more than from now, plus that moment (ASan on a busy machine: milliseconds; 0.5 s allowed).
        self.assertTrue(end - before - 2 <= status.reset <= end - before + 1.5, (status, end - before))


class RedisTest(CalendarCase):
    def test_two_instances_count_one_local_month_under_its_start(self):
        with RedisServer() as redis:
            env = dict(redis.sluice_env(), BACKEND_TYPE='redis', EXPIRATION_JITTER_MAX_SECONDS='0')
            with Sluice(rules={'cal.yaml': RULES}, env=env) as a, Sluice(rules={'cal.yaml': RULES}, env=env) as b:
                wait_healthy(a)
                wait_healthy(b)
                v = unique('p')
                statuses = [self.decide(s, 'plan', v, t) for s in (a, b) for t in ('grpc', 'json')]
                self.assertEqual([s.remaining for s in statuses], [4, 3, 2, 1])
                self.assertReset(statuses[-1], 'America/New_York', 'month')
                start, end = local_bounds('America/New_York', 'month')
                key = '{cal_plan_%s_}%d_month_America/New_York_fixed' % (v, start)
                self.assertEqual(redis.command('GET', key), '4', redis.command('KEYS', '*%s*' % v))
                ttl = redis.command('TTL', key)
                self.assertTrue(end - time.time() - 2 <= ttl <= end - time.time() + 1, ttl)
                # Quarters from January, April, July and October in Lord Howe's calendar.
                q = unique('q')
                status = self.decide(a, 'quarter', q)
                self.assertReset(status, 'Australia/Lord_Howe', 'month', months=3)
                start, _ = local_bounds('Australia/Lord_Howe', 'month', months=3)
                self.assertEqual(redis.command('GET', '{cal_quarter_%s_}%d_3month_Australia/Lord_Howe_fixed' % (q, start)),
                                 '1')


class MemcacheTest(CalendarCase):
    def test_a_sliding_local_day_on_memcached(self):
        with MemcachedServer() as mc:
            env = {'BACKEND_TYPE': 'memcache', 'MEMCACHE_HOST_PORT': '127.0.0.1:%d' % mc.port}
            with Sluice(rules={'cal.yaml': RULES}, env=env) as s:
                wait_healthy(s)
                v = unique('d')
                statuses = [self.decide(s, 'daily', v) for _ in range(5)]
                self.assertEqual([x.code for x in statuses], ['OK'] * 4 + ['OVER_LIMIT'])
                self.assertReset(statuses[0], 'Asia/Kathmandu', 'day')
                start, _ = local_bounds('Asia/Kathmandu', 'day')
                held = mc.counter('{cal_daily_%s_}%d_day_Asia/Kathmandu_sliding' % (v, start))
                self.assertIsNotNone(held)
                self.assertEqual(int(held[0]), 4)  # a sliding window counts what it admits


class MemoryTest(CalendarCase):
    def test_a_local_month_and_day_on_the_memory_backend(self):
        with Sluice(rules={'cal.yaml': RULES}) as s:
            v = unique('m')
            statuses = [self.decide(s, 'plan', v) for _ in range(6)]
            self.assertEqual([x.code for x in statuses], ['OK'] * 5 + ['OVER_LIMIT'])
            self.assertReset(statuses[-1], 'America/New_York', 'month')
            self.assertReset(self.decide(s, 'daily', v, 'json'), 'Asia/Kathmandu', 'day')
            code, _, body = harness.http_get(s.debug_port, '/rlconfig')
            self.assertEqual(code, 200)
            self.assertIn('time_zone: America/New_York', body if isinstance(body, str) else body.decode())


# 12 zones × 2 units: more shapes than a worker's calendar cache holds (16), so each worker's cache turns over
# on every request.
ZONES = ['America/New_York', 'Europe/Berlin', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'Asia/Tokyo',
         'Europe/London', 'America/Denver', 'Pacific/Auckland', 'Africa/Cairo', 'Asia/Kolkata', 'America/Sao_Paulo',
         'Pacific/Chatham']
SHAPES = [(zone, unit) for zone in ZONES for unit in ('day', 'week')]
SHAPE_RULES = 'domain: shapes\ndescriptors:\n' + ''.join(
    '  - key: s%d\n    rate_limit: {unit: %s, requests_per_unit: 100000, time_zone: %s}\n' % (i, unit, zone)
    for i, (zone, unit) in enumerate(SHAPES))


class WorkersTest(unittest.TestCase):
    def test_two_workers_on_more_shapes_than_a_cache_holds_count_every_hit(self):
        self.assertGreater(len(SHAPES), 16)
        with Sluice(rules={'shapes.yaml': SHAPE_RULES}, env={'IO_THREADS': '2'}) as s:
            v = unique('w')
            everything = [[('s%d' % i, v)] for i in range(len(SHAPES))]
            clients, each = 6, 25
            failures = []
            first = harness.decide('json', s.http_port, 'shapes', everything)

            def client():
                try:
                    for _ in range(each):
                        # A new connection each time (urllib): the kernel spreads them over both workers.
                        d = harness.decide('json', s.http_port, 'shapes', everything)
                        if d.overall != 'OK':
                            failures.append(d)
                except Exception as e:  # pylint: disable=broad-except
                    failures.append(e)

            threads = [threading.Thread(target=client) for _ in range(clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(failures, [])
            last = harness.decide('json', s.http_port, 'shapes', everything)
            # (a shape whose local day or week ended meanwhile started again: its reset grew)
            same_window = [i for i in range(len(SHAPES)) if last.statuses[i].reset <= first.statuses[i].reset]
            self.assertGreater(len(same_window), len(SHAPES) // 2)
            self.assertEqual([last.statuses[i].remaining for i in same_window],
                             [100000 - clients * each - 2] * len(same_window), last)


class LoadErrors(unittest.TestCase):
    def test_an_unknown_zone_names_the_file_the_rule_and_the_zone(self):
        d = tempfile.mkdtemp(prefix='sluice-e2e-cal-')
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, 'plans.yaml'), 'w') as f:
            f.write(RULES.replace('America/New_York', 'America/Springfield'))
        r = harness.run_sluice(['check-config', d])
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("plans.yaml: rule 'cal.plan': unknown time_zone 'America/Springfield'", r.stdout + r.stderr)
        s = Sluice(rules={'plans.yaml': RULES.replace('Asia/Kathmandu', 'Asia/Atlantis')}, start=False)
        self.addCleanup(s.close)
        s.start(wait_ready=False)
        s.wait_for_log("plans.yaml: rule 'cal.daily': unknown time_zone 'Asia/Atlantis'")


if __name__ == '__main__':
    unittest.main()
