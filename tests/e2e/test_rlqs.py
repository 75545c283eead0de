"""The Rate Limit Quota Service (issue 29): StreamRateLimitQuotas driven by test data planes that behave as Envoy's
rate_limit_quota filter and as gRPC's A77 client (rlqs_dataplane.py), against one Sluice on the memory backend and
two Sluice replicas sharing a real redis-server: buckets matched to the rules, fair shares of one budget under
skewed demand, a client leaving, a reload, idle buckets abandoned, bad domains, the bounds, TLS, shutdown, stats.

Most data planes here report every second instead of Envoy's fixed 5 s, to keep the suite short; the server
measures demand by its own clock either way, and SkewedDemand runs at Envoy's 5 s."""

import json
import os
import threading
import time
import unittest

import grpc

import harness
import rlqs_pb2
from harness import ClusterSetup, RedisServer, Sluice, TlsCerts
from otlp_collector import HttpCollector
from rlqs_dataplane import DataPlane, Load

RULES = """
domain: quota
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 6000}
  - key: free
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: watched
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: app
    descriptors:
      - key: path
        value: /api
        rate_limit: {unit: second, requests_per_unit: 50}
  - key: region
    value_regex: "eu-[a-z]+-[0-9]"
    rate_limit: {unit: minute, requests_per_unit: 0}
"""
BUDGET = 100.0  # tenant: 6000 per minute
TENANT = {'tenant': 'acme'}


def strategy_kind(action):
    return action[3].WhichOneof('strategy') if action and action[3] is not None else None


def token_rate(action):
    tb = action[3].token_bucket
    return tb.tokens_per_fill.value / tb.fill_interval.seconds


def wait_action(plane, bucket, predicate=lambda a: True, timeout=5.0, message='an action'):
    """Waits for the latest action for `bucket` to satisfy predicate. -> the action."""
    harness.wait_until(lambda: (a := plane.last_action(bucket)) is not None and predicate(a), timeout=timeout,
                       message=message, describe=lambda: repr(plane.last_action(bucket)))
    return plane.last_action(bucket)


def bursts_in(plane, t0, t1):
    """The most a data plane's token buckets may have started with during [t0, t1]: the bucket it held at t0
    (full, at worst), and each token bucket that replaced it during the run (a changed assignment starts full)."""
    held, at_start, total = None, 0, 0
    for at, _, kind, strategy, _ in list(plane.actions):
        if kind != 'assign' or strategy is None or strategy.WhichOneof('strategy') != 'token_bucket':
            continue
        tb = strategy.token_bucket
        numbers = (tb.max_tokens, tb.tokens_per_fill.value, tb.fill_interval.seconds)
        if at <= t0:
            held, at_start = numbers, tb.max_tokens
        elif at <= t1 and numbers != held:
            total += tb.max_tokens
            held = numbers
    return at_start + total


def stats_of(sluice):
    status, _, body = harness.http_get(sluice.debug_port, '/stats')
    out = {}
    for line in body.splitlines():
        name, _, value = line.partition(': ')
        if value.strip().lstrip('-').isdigit():
            out[name] = int(value)
    return out


class Memory(unittest.TestCase):
    """One Sluice on the memory backend."""

    @classmethod
    def setUpClass(cls):
        cls.sluice = Sluice(rules={'quota.yaml': RULES}, env={'RLQS_BUCKET_IDLE_TIMEOUT': '3s'})

    @classmethod
    def tearDownClass(cls):
        cls.sluice.close()

    def plane(self, **kw):
        p = DataPlane('127.0.0.1:%d' % self.sluice.grpc_port, kw.pop('domain', 'quota'), interval=kw.pop('interval', 1.0),
                      **kw)
        self.addCleanup(p.close)
        return p

    def test_buckets_follow_the_rules(self):
        p = self.plane()
        cases = [({'free': 'x'}, 'ALLOW_ALL'), ({'blocked': 'x'}, 'DENY_ALL'), ({'watched': 'x'}, 'ALLOW_ALL'),
                 ({'nobody': 'x'}, 'ALLOW_ALL'), ({'tenant': 'acme'}, 'token_bucket'),
                 # pairs sorted by key (app, then path): the nested rule, whatever the order the map is written in
                 ({'path': '/api', 'app': 'shop'}, 'token_bucket'), ({'app': 'shop', 'path': '/other'}, 'ALLOW_ALL'),
                 # a value_regex rule (issue 32): the whole value must match
                 ({'region': 'eu-west-1'}, 'DENY_ALL'), ({'region': 'eu-west-1x'}, 'ALLOW_ALL'),
                 ({'region': 'us-east-1'}, 'ALLOW_ALL')]
        for bucket, _ in cases:
            p.request(bucket)
        for bucket, want in cases:
            with self.subTest(bucket=bucket):
                a = wait_action(p, bucket, message='the first answer for %r' % bucket)
                self.assertEqual(a[1], bucket)  # bucket_id echoed
                self.assertEqual(a[4], 15)  # RLQS_ASSIGNMENT_TTL: whole seconds
                kind = strategy_kind(a)
                if want == 'token_bucket':
                    self.assertEqual(kind, 'token_bucket')
                    tb = a[3].token_bucket
                    self.assertTrue(tb.HasField('tokens_per_fill'))
                    self.assertGreaterEqual(tb.fill_interval.seconds, 1)
                    self.assertEqual(tb.fill_interval.nanos, 0)
                    self.assertGreaterEqual(tb.max_tokens, 1)
                else:
                    self.assertEqual(kind, 'blanket_rule')
                    self.assertEqual(a[3].blanket_rule, 0 if want == 'ALLOW_ALL' else 1)
        # One client alone may use the whole budget, burst included, and no more: within any minute
        # max_tokens + the refill over the minute stays within 6000. (An earlier test's client of the bucket may
        # still be leaving on a slow machine: its share comes back pushed, so the whole budget is waited for.)
        tb = wait_action(p, TENANT, lambda a: token_rate(a) > 0.9 * BUDGET, timeout=6.0,
                         message='the whole budget for the one client left')[3].token_bucket
        self.assertLessEqual(tb.max_tokens + tb.tokens_per_fill.value * 60 / tb.fill_interval.seconds, 6000)
        # 50 per second, one client: a share under 100 a window keeps its whole refill with a burst of one token
        # (the one request over, per window, of docs/guides/rlqs.md#the-protocol).
        nested = p.last_action({'app': 'shop', 'path': '/api'})[3].token_bucket
        self.assertEqual(nested.max_tokens, 1)
        self.assertEqual(nested.max_tokens + nested.tokens_per_fill.value / nested.fill_interval.seconds, 50 + 1)

    def test_two_clients_share_and_a_leaving_client_releases_its_share(self):
        a, b = self.plane(), self.plane()
        loads = [Load(a, TENANT, 300), Load(b, TENANT, 300)]
        self.addCleanup(lambda: [l.stop() for l in loads])
        # Both greedy: about half each, and never more than the budget together.
        wait_action(a, TENANT, lambda x: token_rate(x) < 0.6 * BUDGET, message='a half share for a')
        wait_action(b, TENANT, lambda x: token_rate(x) < 0.6 * BUDGET, message='a half share for b')
        time.sleep(2.5)
        ra, rb = token_rate(a.last_action(TENANT)), token_rate(b.last_action(TENANT))
        self.assertAlmostEqual(ra, BUDGET / 2, delta=0.1 * BUDGET)
        self.assertAlmostEqual(rb, BUDGET / 2, delta=0.1 * BUDGET)
        self.assertLessEqual(ra + rb, BUDGET)
        # b leaves: a gets the whole budget, pushed unasked.
        loads[1].stop()
        b.close()
        wait_action(a, TENANT, lambda x: token_rate(x) > 0.9 * BUDGET, timeout=6.0,
                    message='the whole budget for a once b left')

    def test_idle_bucket_is_abandoned_and_comes_back(self):
        p = self.plane()
        bucket = {'tenant': 'sleepy'}
        p.request(bucket)
        wait_action(p, bucket, message='the first assignment')
        # Reported 0/0 from now on: abandoned after RLQS_BUCKET_IDLE_TIMEOUT (3 s); the client forgets it.
        a = wait_action(p, bucket, lambda x: x[2] == 'abandon', timeout=6.0, message='abandon_action')
        self.assertEqual(a[1], bucket)
        with p.lock:
            self.assertNotIn(tuple(sorted(bucket.items())), p.buckets)
        # Its next request makes it again, with a new first report and a new assignment.
        p.request(bucket)
        wait_action(p, bucket, lambda x: x[2] == 'assign', message='a new assignment after the abandon')
        # A bucket with traffic is never abandoned.
        busy = {'tenant': 'busy'}
        load = Load(p, busy, 20)
        self.addCleanup(load.stop)
        time.sleep(4.5)
        self.assertFalse(any(x[2] == 'abandon' and x[1] == busy for x in p.actions))

    def test_bad_domains(self):
        p = self.plane()
        p.send_raw(rlqs_pb2.RateLimitQuotaUsageReports())  # no domain in the first message
        harness.wait_until(lambda: p.statuses, message='the stream to end')
        self.assertEqual(p.statuses[0][0], grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn('must name its domain', p.statuses[0][1])

        q = self.plane()
        q.request(TENANT)
        wait_action(q, TENANT)
        q.send_raw(rlqs_pb2.RateLimitQuotaUsageReports(domain='other'))
        harness.wait_until(lambda: q.statuses, message='the stream to end')
        self.assertEqual(q.statuses[0][0], grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn('"quota"', q.statuses[0][1])
        self.assertIn('"other"', q.statuses[0][1])

        # A77: the domain in the first message only, later ones empty: fine.
        r = self.plane(flavor='a77')
        r.request(TENANT)
        wait_action(r, TENANT)
        r.request({'tenant': 'second'})
        wait_action(r, {'tenant': 'second'})
        self.assertEqual(r.statuses, [])

        # A domain without rules: every bucket ALLOW_ALL, as ShouldRateLimit answers OK.
        s = self.plane(domain='unknown-domain')
        s.request(TENANT)
        self.assertEqual(wait_action(s, TENANT)[3].blanket_rule, 0)

    def test_a_malformed_message_ends_the_stream(self):
        p = self.plane()
        p.request(TENANT)
        wait_action(p, TENANT)
        channel = grpc.insecure_channel('127.0.0.1:%d' % self.sluice.grpc_port)
        self.addCleanup(channel.close)
        call = channel.stream_stream('/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas',
                                     request_serializer=lambda b: b, response_deserializer=lambda b: b)
        with self.assertRaises(grpc.RpcError) as e:
            list(call(iter([b'\xff\xff\xff'])))
        self.assertEqual(e.exception.code(), grpc.StatusCode.INTERNAL)
        self.assertIn('unmarshalling', e.exception.details())

    def test_stats(self):
        before = stats_of(self.sluice).get('ratelimit.service.rate_limit.quota.tenant.rlqs_allowed', 0)
        p = self.plane()
        load = Load(p, {'tenant': 'counted'}, 50)
        self.addCleanup(load.stop)
        # What this client reports at 50/s (its reports are every second): waited for, at least one report's worth.
        s = harness.wait_for_value(
            lambda: stats_of(self.sluice),
            lambda s: s.get('ratelimit.service.rate_limit.quota.tenant.rlqs_allowed', 0) - before > 40, timeout=10,
            message="a report's worth of allowed requests")
        self.assertGreaterEqual(s['ratelimit.rlqs.active_streams'], 1)
        self.assertGreaterEqual(s['ratelimit.rlqs.active_buckets'], 1)
        self.assertGreater(s['ratelimit.rlqs.reports'], 0)
        self.assertIn('ratelimit.service.rate_limit.quota.tenant.rlqs_denied', s)
        self.assertGreater(s['ratelimit.service.rate_limit.quota.tenant.rlqs_assigned'], 0)
        self.assertLessEqual(s['ratelimit.service.rate_limit.quota.tenant.rlqs_assigned'], 6000)


class SkewedDemand(unittest.TestCase):
    """Envoy's real 5 s reports: one heavy client and four light ones share 100 per second."""

    def test_light_clients_get_their_need_and_the_fleet_stays_within_the_budget(self):
        with Sluice(rules={'quota.yaml': RULES}) as sluice:
            target = '127.0.0.1:%d' % sluice.grpc_port
            planes = [DataPlane(target, 'quota', interval=5.0) for _ in range(5)]
            self.addCleanup(lambda: [p.close() for p in planes])
            loads = [Load(planes[0], TENANT, 400)] + [Load(p, TENANT, 8) for p in planes[1:]]
            self.addCleanup(lambda: [l.stop() for l in loads])
            time.sleep(12)  # two report intervals to measure, one to push
            t0 = time.monotonic()
            before = [l.snapshot() for l in loads]
            time.sleep(10)
            after = [l.snapshot() for l in loads]
            t1 = time.monotonic()
            admitted = [b[0] - a[0] for a, b in zip(before, after)]
            denied = [b[1] - a[1] for a, b in zip(before, after)]
            # The light clients (8/s) are below an equal share (20/s): they get their need, nearly nothing denied.
            for i in range(1, 5):
                self.assertLessEqual(denied[i], 0.05 * (admitted[i] + denied[i]), (admitted, denied))
            # The heavy one gets the rest; the fleet admits the budget over the 10 s and no more than the bound of
            # docs/guides/rlqs.md#the-protocol: each client's bucket full at the start, and each assignment that
            # changed its token bucket during the run starting full again (max_tokens more each).
            bursts = sum(bursts_in(p, t0, t1) for p in planes)
            self.assertLessEqual(sum(admitted), BUDGET * 10 + bursts, (admitted, denied, bursts))
            self.assertGreaterEqual(sum(admitted), 0.85 * BUDGET * 10, (admitted, denied))
            self.assertGreater(admitted[0], 0.5 * BUDGET * 10, (admitted, denied))


class Settings(unittest.TestCase):
    def test_bounds(self):
        with Sluice(rules={'quota.yaml': RULES},
                    env={'RLQS_MAX_BUCKETS_PER_STREAM': '3', 'RLQS_MAX_STREAMS_PER_CONNECTION': '2',
                         'GRPC_MAX_RECV_MESSAGE_BYTES': '2000'}) as sluice:
            target = '127.0.0.1:%d' % sluice.grpc_port
            p = DataPlane(target, 'quota', interval=1.0)
            self.addCleanup(p.close)
            for i in range(4):
                p.request({'tenant': 't%d' % i})
            harness.wait_until(lambda: p.statuses, message='the stream to end')
            self.assertEqual(p.statuses[0][0], grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertIn('RLQS_MAX_BUCKETS_PER_STREAM', p.statuses[0][1])

            # Streams per connection: three data planes on one channel.
            channel = grpc.insecure_channel(target)
            self.addCleanup(channel.close)
            method = channel.stream_stream(
                '/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas',
                request_serializer=rlqs_pb2.RateLimitQuotaUsageReports.SerializeToString,
                response_deserializer=rlqs_pb2.RateLimitQuotaResponse.FromString)
            stop = threading.Event()

            def forever():
                yield rlqs_pb2.RateLimitQuotaUsageReports(domain='quota')
                stop.wait(30)

            calls = [method(forever()) for _ in range(2)]
            harness.wait_until(lambda: stats_of(sluice).get('ratelimit.rlqs.active_streams') == 2,
                               timeout=10, message='the two streams open on the server')
            third = method(forever())
            with self.assertRaises(grpc.RpcError) as e:
                next(third)
            self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertIn('RLQS_MAX_STREAMS_PER_CONNECTION', e.exception.details())
            stop.set()
            for c in calls:
                c.cancel()

            # A message over GRPC_MAX_RECV_MESSAGE_BYTES.
            big = DataPlane(target, 'quota', interval=1.0)
            self.addCleanup(big.close)
            big.request({'tenant': 'x' * 3000})
            harness.wait_until(lambda: big.statuses, message='the stream to end')
            self.assertEqual(big.statuses[0][0], grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertIn('larger than max', big.statuses[0][1])

    def test_max_connection_age_ends_the_stream_and_the_client_comes_back(self):
        with Sluice(rules={'quota.yaml': RULES}, env={'GRPC_MAX_CONNECTION_AGE': '1s',
                                                     'GRPC_MAX_CONNECTION_AGE_GRACE': '10s'}) as sluice:
            p = DataPlane('127.0.0.1:%d' % sluice.grpc_port, 'quota', interval=1.0)
            self.addCleanup(p.close)
            p.request(TENANT)
            wait_action(p, TENANT)
            # The GOAWAY at ~1 s (±10%) ends the stream at once, long before the 10 s grace.
            harness.wait_until(lambda: p.statuses, timeout=6.0, message='the stream to end at max connection age')
            self.assertEqual(p.statuses[0][0], grpc.StatusCode.UNAVAILABLE)
            self.assertIn('GOAWAY', p.statuses[0][1])
            # Envoy's client reopens at its next report, on a new connection, and keeps its buckets.
            count = len(p.actions)
            harness.wait_until(lambda: p.streams_opened >= 2, timeout=6.0, message='a new stream')
            # Its first full report there is a first report of the bucket on that stream: answered at once.
            harness.wait_until(lambda: len(p.actions) > count, timeout=6.0, message='an answer on the new stream')

    def test_bad_settings_stop_the_start(self):
        for env, message in [({'RLQS_STRATEGY': 'leaky'}, 'RLQS_STRATEGY'),
                             ({'RLQS_ASSIGNMENT_TTL': '1500ms'}, 'RLQS_ASSIGNMENT_TTL'),
                             ({'RLQS_ASSIGNMENT_TTL': '1s'}, 'RLQS_ASSIGNMENT_TTL'),
                             ({'RLQS_BUCKET_IDLE_TIMEOUT': '0'}, 'RLQS_BUCKET_IDLE_TIMEOUT'),
                             ({'RLQS_MAX_BUCKETS_PER_STREAM': '0'}, 'RLQS_MAX_BUCKETS_PER_STREAM')]:
            with self.subTest(env=env):
                self.assertIn(message, Sluice.failed_start(self, dict(env, BACKEND_TYPE='memory')))

    def test_requests_per_time_unit_for_clients_that_apply_it(self):
        with Sluice(rules={'quota.yaml': RULES}, env={'RLQS_STRATEGY': 'requests_per_time_unit'}) as sluice:
            p = DataPlane('127.0.0.1:%d' % sluice.grpc_port, 'quota', flavor='a77', interval=1.0)
            self.addCleanup(p.close)
            p.request(TENANT)
            a = wait_action(p, TENANT)
            per = a[3].requests_per_time_unit
            self.assertEqual(a[3].WhichOneof('strategy'), 'requests_per_time_unit')
            self.assertEqual(per.time_unit, 2)  # MINUTE, the rule's unit
            self.assertGreater(per.requests_per_time_unit, 0.9 * 6000)
            self.assertLessEqual(per.requests_per_time_unit, 6000)


class Reload(unittest.TestCase):
    def test_a_new_budget_is_pushed_within_a_second_or_two(self):
        with Sluice(rules={'quota.yaml': RULES}) as sluice:
            p = DataPlane('127.0.0.1:%d' % sluice.grpc_port, 'quota', interval=1.0)
            self.addCleanup(p.close)
            load = Load(p, TENANT, 200)
            self.addCleanup(load.stop)
            wait_action(p, TENANT, lambda a: token_rate(a) > 0.9 * BUDGET, message='the whole budget')
            sluice.write_rule('quota.yaml', RULES.replace('requests_per_unit: 6000', 'requests_per_unit: 1200'))
            # Pushed with the next plan after the reload (500 ms), not at the next report or re-send (10 s).
            wait_action(p, TENANT, lambda a: strategy_kind(a) == 'token_bucket' and token_rate(a) <= 20,
                        timeout=4.0, message='the new budget (1200 per minute)')
            # The rule removed: ALLOW_ALL.
            sluice.write_rule('quota.yaml', RULES.replace('- key: tenant\n', '- key: renamed\n'))
            wait_action(p, TENANT, lambda a: strategy_kind(a) == 'blanket_rule' and a[3].blanket_rule == 0,
                        timeout=4.0, message='ALLOW_ALL once no rule matches')


class RlqsClient(unittest.TestCase):
    """`sluice rlqs-client`, the small data plane of docs/reference/cli.md#sluice-rlqs-client."""

    def test_reports_and_prints_every_action(self):
        with Sluice(rules={'quota.yaml': RULES}) as sluice:
            p = harness.run_sluice(['rlqs-client', '-dial_string', '127.0.0.1:%d' % sluice.grpc_port, '-domain',
                                    'quota', '-bucket', 'tenant=cli', '-bucket', 'blocked=1', '-rate', '400',
                                    '-duration', '4000ms', '-interval', '1s', '-json'])
            self.assertEqual(p.returncode, 0, p.stderr)
            printed = [line.split(' ', 2) for line in p.stdout.splitlines()]
            lines = [json.loads(x[2]) for x in printed]
            times = [float(x[0].rstrip('s')) for x in printed]
            actions = [x for x in lines if 'quotaAssignmentAction' in x]
            reports = [x for x in lines if 'bucketId' in x and 'quotaAssignmentAction' not in x]
            # (popitem empties the actions' bucket ids: after the checks below)
            self.assert_bucket_held(lines, times)
            strategies = {x['bucketId']['bucket'].popitem()[1]: x['quotaAssignmentAction']['rateLimitStrategy']
                          for x in actions}
            self.assertEqual(strategies['1'], {'blanketRule': 'DENY_ALL'})
            self.assertIn('tokenBucket', strategies['cli'])
            # The first report of each bucket at once (time_elapsed 0), then one a second for both.
            self.assertEqual(reports[0]['timeElapsed'], '0s')
            self.assertGreaterEqual(len(reports), 2 + 2 * 3)

    def assert_bucket_held(self, lines, times):
        # 400/s against 6000 a minute (100/s): once the token bucket is assigned, it denies the rest. Until the
        # first answer comes (within a plan, later on a loaded machine) the client allows, as Envoy does with
        # no assignment, so the report that spans the first answer is not bounded. Each later report holds at
        # most what the bucket filled in the time it really spans (the client's clock, printed on each line:
        # on a loaded machine a report comes late and the next one early), plus a full bucket for each
        # assignment that changed the bucket (the client starts a new bucket full, as Envoy does).
        cli = {'tenant': 'cli'}
        bucket, previous, checked = None, None, 0
        burst = 0.0
        for line, t in zip(lines, times):
            if line.get('bucketId', {}).get('bucket') != cli:
                continue
            if 'quotaAssignmentAction' in line:
                tb = line['quotaAssignmentAction']['rateLimitStrategy'].get('tokenBucket')
                if tb != bucket:
                    burst += float(tb['maxTokens']) if tb else 0.0
                    if bucket is None:
                        previous = None  # the report that spans the first answer is not bounded
                    bucket = tb
                continue
            if bucket is None:
                continue
            if previous is not None:
                allowed = int(line.get('numRequestsAllowed', 0))
                self.assertGreater(int(line.get('numRequestsDenied', 0)), 0, line)
                self.assertLessEqual(allowed, BUDGET * (t - previous) + burst + 10, (line, t, previous))
                checked += 1
                burst = 0.0
            # (the first bucket's burst may be spent across the unbounded report and the next one)
            previous = t
        self.assertGreaterEqual(checked, 1, lines)

    def test_bad_flags_and_an_unreachable_server(self):
        p = harness.run_sluice(['rlqs-client', '-bucket', 'a=1'])
        self.assertEqual(p.returncode, 2)
        self.assertIn('-domain is required', p.stderr)
        p = harness.run_sluice(['rlqs-client', '-domain', 'quota', '-bucket', 'a', '-duration', '1s'])
        self.assertEqual(p.returncode, 2)
        self.assertIn("invalid descriptor list 'a'", p.stderr)
        p = harness.run_sluice(['rlqs-client', '-domain', 'quota', '-bucket', 'a=1', '-rate', '-3'])
        self.assertEqual(p.returncode, 2)
        self.assertIn('-rate', p.stderr)
        port = harness.dead_port()
        p = harness.run_sluice(['rlqs-client', '-dial_string', '127.0.0.1:%d' % port, '-domain', 'quota', '-bucket',
                                'a=1', '-duration', '2s'])
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertEqual(p.stderr, 'sluice rlqs-client: cannot connect to 127.0.0.1:%d: connection refused\n' % port)


class TlsAndShutdown(unittest.TestCase):
    def test_tls_then_sigterm_ends_the_stream_with_unavailable(self):
        with TlsCerts() as certs:
            env = {'GRPC_SERVER_USE_TLS': 'true', 'GRPC_SERVER_TLS_CERT': certs.server,
                   'GRPC_SERVER_TLS_KEY': certs.server_key}
            with Sluice(rules={'quota.yaml': RULES}, env=env) as sluice:
                with open(certs.ca, 'rb') as f:
                    creds = grpc.ssl_channel_credentials(root_certificates=f.read())
                p = DataPlane('localhost:%d' % sluice.grpc_port, 'quota', interval=1.0, credentials=creds)
                self.addCleanup(p.close)
                p.request(TENANT)
                self.assertEqual(strategy_kind(wait_action(p, TENANT)), 'token_bucket')
                start = time.monotonic()
                sluice.terminate()
                harness.wait_until(lambda: p.statuses, timeout=5.0, message='the stream to end at shutdown')
                self.assertEqual(p.statuses[0][0], grpc.StatusCode.UNAVAILABLE)
                # At the GOAWAY, not when the shutdown grace (SHUTDOWN_GRACE_PERIOD, 10 s) closes the connection.
                self.assertLess(time.monotonic() - start, 5.0)
                self.assertEqual(sluice.wait_exit(10), 0)


class Tracing(unittest.TestCase):
    def test_a_span_per_usage_report_under_the_streams_trace_context(self):
        with HttpCollector() as col:
            env = {'TRACING_ENABLED': 'true', 'OTEL_BSP_SCHEDULE_DELAY': '100',
                   'OTEL_EXPORTER_OTLP_ENDPOINT': col.endpoint}
            with Sluice(rules={'quota.yaml': RULES}, env=env) as sluice:
                trace_id, parent = os.urandom(16).hex(), os.urandom(8).hex()
                channel = grpc.insecure_channel('127.0.0.1:%d' % sluice.grpc_port)
                self.addCleanup(channel.close)
                call = channel.stream_stream(
                    '/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas',
                    request_serializer=rlqs_pb2.RateLimitQuotaUsageReports.SerializeToString,
                    response_deserializer=rlqs_pb2.RateLimitQuotaResponse.FromString)
                report = rlqs_pb2.RateLimitQuotaUsageReports(domain='quota')
                usage = report.bucket_quota_usages.add(num_requests_allowed=1)
                usage.bucket_id.bucket['tenant'] = 'traced'
                responses = call(iter([report, report]),
                                 metadata=[('traceparent', '00-%s-%s-01' % (trace_id, parent))])
                self.assertEqual(len(next(responses).bucket_action), 1)
                spans = col.wait_for_spans(lambda sp: sp.trace_id == trace_id, count=2,
                                           message='a span for each of the two reports')
                for sp in spans:
                    self.assertEqual(sp.kind, 'SERVER', sp)
                    self.assertEqual(sp.parent_span_id, parent, sp)
                    self.assertEqual(sp.attributes.get('rpc.method'), 'StreamRateLimitQuotas', sp)
                    self.assertEqual(sp.attributes.get('rlqs.domain'), 'quota', sp)
                    self.assertEqual(sp.attributes.get('rlqs.buckets'), 1, sp)
                self.assertEqual(sorted(sp.attributes.get('rlqs.new_buckets') for sp in spans), [0, 1])


class Replicas(unittest.TestCase):
    """Two Sluice replicas on one Redis share each budget among all their clients."""

    def test_two_replicas_share_one_budget(self):
        with RedisServer() as redis:
            env = dict(redis.sluice_env(), BACKEND_TYPE='redis')
            with Sluice(rules={'quota.yaml': RULES}, env=env) as one, \
                    Sluice(rules={'quota.yaml': RULES}, env=env) as two:
                planes = [DataPlane('127.0.0.1:%d' % s.grpc_port, 'quota', interval=1.0)
                          for s in (one, one, two, two)]
                self.addCleanup(lambda: [p.close() for p in planes])
                loads = [Load(p, TENANT, 200) for p in planes]
                self.addCleanup(lambda: [l.stop() for l in loads])
                for p in planes:
                    wait_action(p, TENANT, lambda a: token_rate(a) < 0.35 * BUDGET, timeout=10.0,
                                message='a quarter share on each of four clients')
                time.sleep(2)
                rates = [token_rate(p.last_action(TENANT)) for p in planes]
                self.assertLessEqual(sum(rates), BUDGET, rates)
                self.assertGreater(sum(rates), 0.9 * BUDGET, rates)
                t0 = time.monotonic()
                before = [l.snapshot()[0] for l in loads]
                time.sleep(5)
                admitted = sum(l.snapshot()[0] for l in loads) - sum(before)
                bursts = sum(bursts_in(p, t0, time.monotonic()) for p in planes)
                self.assertLessEqual(admitted, BUDGET * 5 + bursts, bursts)

                # Redis gone: each replica keeps to half of the budget (two replicas seen), and says so once.
                redis.stop()
                one.wait_for_log('cannot reach Redis to share demand', timeout=10.0)
                # Each replica now sees only its own two clients; planning with half of the budget keeps the four
                # within it (with the whole budget each replica would give its two clients half each: 200/s).
                time.sleep(2)
                self.assertEqual(one.log().count('cannot reach Redis to share demand'), 1)
                rates = [token_rate(p.last_action(TENANT)) for p in planes]
                self.assertLessEqual(sum(rates), BUDGET, rates)

    def test_two_replicas_on_a_cluster(self):
        with ClusterSetup() as cluster:
            env = dict(cluster.sluice_env(), BACKEND_TYPE='redis')
            with Sluice(rules={'quota.yaml': RULES}, env=env) as one, \
                    Sluice(rules={'quota.yaml': RULES}, env=env) as two:
                buckets = [{'tenant': 't%d' % i} for i in range(4)]  # their hashes fall on different nodes
                planes = [DataPlane('127.0.0.1:%d' % s.grpc_port, 'quota', interval=1.0) for s in (one, two)]
                self.addCleanup(lambda: [p.close() for p in planes])
                loads = [Load(p, b, 200) for p in planes for b in buckets]
                self.addCleanup(lambda: [l.stop() for l in loads])
                for p in planes:
                    for b in buckets:
                        wait_action(p, b, lambda a: token_rate(a) < 0.6 * BUDGET, timeout=10.0,
                                    message='half of %r on each replica' % b)
                over = []  # never over the budget together; near all of it once both replicas have converged
                for b in buckets:
                    def converged(b=b):
                        rates = [token_rate(p.last_action(b)) for p in planes]
                        if sum(rates) > BUDGET:
                            over.append((b, rates))
                        return sum(rates) > 0.9 * BUDGET
                    harness.wait_until(converged, timeout=5, message='%r: both shares near the budget' % b)
                self.assertEqual(over, [])


if __name__ == '__main__':
    harness.main()
