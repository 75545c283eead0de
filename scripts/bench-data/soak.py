"""Soak with faults (`scripts/bench soak`, issue 12).

Sluice on the Redis backend behind Redis sentinels (tests/e2e/harness.py's SentinelSetup: a master, a replica,
three sentinels), its gRPC listener on TLS, under a steady moderate load of ShouldRateLimit (gRPC) and POST /json,
every call with a deadline. Meanwhile, one fault every ~25 s, in turn:
  kill-master   the current master is killed (SIGKILL); once the sentinels have promoted the replica, it is
                started again as a replica of the new master
  failover      SENTINEL FAILOVER (the master is demoted, the replica promoted)
  reload        the rule file is replaced with a good one (a changed limit), a bad one (invalid YAML: the previous
                rules must stay, the error logged), then a good one again
  cert          a new certificate and key (same CA, new serial) are written over the served files; a new TLS
                handshake must get the new certificate
A fault's window runs from its start until Sluice has answered 10 decisions in a row again (for the Redis faults,
once the sentinels agree on the new master); what follows it (the old master demoted, the replica in sync and seen
by every sentinel, which takes up to ~20 s) is outside it, so probes then must be exact.
A probe sends, every few seconds, exactly N decisions on a fresh descriptor value with a known limit and checks
that `remaining` steps down exactly (and that the master the sentinels name holds N). Probes and failed calls
within a fault's window (1 s before it, 3 s after) are excused. The server's RSS, open descriptors and CPU time
are sampled every 5 s: RSS and descriptors are compared between minute 2 (the first sample from 120 s on away from
a fault) and the end (descriptors once the load has stopped and its connections are closed: the server's own may
not have grown, and no client connection may be left). One summary block is printed at the end; the exit code is
1 when a check failed.

Environment: BENCH_SOAK_SECONDS (600), BENCH_SOAK_RATE (total load calls per second, 280), BENCH_SOAK_FAULT_EVERY
(seconds from one fault's start to the next, 25), BENCH_SOAK_FAULTS (the cycle, default
"kill-master failover reload cert"), BENCH_SOAK_LOG_DIR (copy the server's log there), BENCH_STATS_ENV
(settings such as DISABLE_STATS=true, as scripts/bench passes them); SLUICE_BIN and SLUICE_PY_PROTO as for the
e2e tests.
"""

import collections
import hashlib
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, 'tests', 'e2e'))

import grpc  # noqa: E402

import harness  # noqa: E402
import rls_pb2  # noqa: E402
from harness import RespClient, SentinelSetup, Sluice, TlsCerts  # noqa: E402

DURATION = float(os.environ.get('BENCH_SOAK_SECONDS') or 600)
RATE = float(os.environ.get('BENCH_SOAK_RATE') or 280)
FAULT_EVERY = float(os.environ.get('BENCH_SOAK_FAULT_EVERY') or 25)
FAULT_CYCLE = (os.environ.get('BENCH_SOAK_FAULTS') or 'kill-master failover reload cert').split()
LOG_DIR = os.environ.get('BENCH_SOAK_LOG_DIR') or ''

DEADLINE = 1.0          # seconds: every call's deadline (gRPC timeout; HTTP socket timeout)
HUNG = DEADLINE + 0.5   # a call still unanswered this long after it started hung past its deadline
GRPC_THREADS, JSON_THREADS = 2, 2
GRPC_SHARE = 0.55       # of RATE
CHANNEL_AGE = 20.0      # seconds: a gRPC load thread opens a new TLS connection this often (sees a rotated cert)
PROBE_EVERY = 3.0       # seconds between probe starts
PROBE_CALLS = 10        # decisions per probe, alternately gRPC and /json
PROBE_LIMIT = 8         # the probe rule's requests_per_unit (hour): the last two calls are OVER_LIMIT
CAPPED_PER_SECOND = 200  # a per-second counter every load call shares, so the load sees OVER_LIMIT too
SAMPLE_EVERY = 5.0      # seconds between RSS / descriptor / CPU samples
BASELINE_AT = 120.0     # seconds into the load: the RSS and descriptor baseline ("minute 2")
FIRST_FAULT = 30.0      # seconds into the load
QUIET_AFTER = 10.0      # seconds of no fault after one has recovered, at least
LAST_FAULT_BEFORE_END = 30.0  # no fault starts later than this before the end
MARGIN_BEFORE, MARGIN_AFTER = 1.0, 3.0  # seconds around a fault window in which probes and errors are excused
RECOVERY_TIMEOUT = 30.0
# RSS may grow from minute 2 to the end by at most 5 % + 2 MB. Sluice holds ~21 MB here and moves by a few hundred
# KB as the allocator's caches and per-connection buffers (TLS, HPACK, a new gRPC connection every 10 s) come and
# go; a leak of ~25 bytes per decision (some 130,000 decisions after minute 2 in 10 minutes), or of ~150 KB per
# fault (~19 of them), crosses it.
RSS_BOUND_SHARE, RSS_BOUND_MB = 0.05, 2.0

RLS = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit'
DOMAIN = 'soak'
RULES = """domain: soak
descriptors:
  - key: load
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
  - key: capped
    rate_limit: {unit: second, requests_per_unit: %d}
  - key: probe
    rate_limit: {unit: hour, requests_per_unit: %d}
  - key: reload
    rate_limit: {unit: hour, requests_per_unit: %%d}
""" % (CAPPED_PER_SECOND, PROBE_LIMIT)
BAD_RULES = 'domain: soak\ndescriptors:\n  - key: [unclosed\n    rate_limit: {unit: hour\n'

T0 = None  # monotonic time at which the load starts; every time reported is seconds since then


def now():
    return time.monotonic() - T0


def fmt_t(t):
    return 't=%.1fs' % t


# ---------------------------------------------------------------------------------------------------------------
# Calls, each classified: OK | OVER_LIMIT | UNAVAILABLE (a clear error naming Redis or the sentinels) | DEADLINE
# (gRPC DEADLINE_EXCEEDED, HTTP timeout) | ERROR (anything else)


def names_backend(message):
    m = message.lower()
    return 'redis' in m or 'sentinel' in m


def read(path):
    with open(path, 'rb') as f:
        return f.read()


def tls_channel(port, ca):
    """A channel with a TLS connection of its own (grpcio shares subchannels between channels unless told not
    to)."""
    creds = grpc.ssl_channel_credentials(root_certificates=read(ca))
    return grpc.secure_channel('127.0.0.1:%d' % port, creds,
                               options=[('grpc.enable_http_proxy', 0), ('grpc.use_local_subchannel_pool', 1)])


def rls_stub(ch):
    return ch.unary_unary(RLS, request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
                          response_deserializer=rls_pb2.RateLimitResponse.FromString)


def grpc_call(stub, request):
    """-> (outcome, detail, seconds, Decision or None)."""
    start = time.monotonic()
    try:
        resp = stub(request, timeout=DEADLINE)
    except grpc.RpcError as e:
        elapsed = time.monotonic() - start
        code, details = e.code(), e.details() or ''
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return 'DEADLINE', 'gRPC DEADLINE_EXCEEDED: ' + details, elapsed, None
        if code == grpc.StatusCode.UNAVAILABLE and names_backend(details):
            return 'UNAVAILABLE', 'gRPC UNAVAILABLE: ' + details, elapsed, None
        return 'ERROR', 'gRPC %s: %s' % (code.name, details), elapsed, None
    elapsed = time.monotonic() - start
    try:
        d = harness.decision_from_proto(resp)
    except AssertionError as e:
        return 'ERROR', 'gRPC answer: %s' % e, elapsed, None
    return d.overall, '', elapsed, d


def json_outcome(status, raw, elapsed):
    try:
        body = json.loads(raw.decode('utf-8', 'replace'))
    except ValueError:
        body = raw[:200]
    if status in (200, 429):
        try:
            d = harness.decision_from_json(status, body)
        except AssertionError as e:
            return 'ERROR', 'HTTP %d: %s' % (status, e), elapsed, None
        return d.overall, '', elapsed, d
    if status == 503 and isinstance(body, dict) and names_backend(str(body.get('message', ''))):
        return 'UNAVAILABLE', 'HTTP 503: %s' % body['message'], elapsed, None
    return 'ERROR', 'HTTP %d: %r' % (status, body), elapsed, None


class JsonClient:
    """POST /json on one kept-alive connection (made again after an error; never retried)."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def call(self, body):
        start = time.monotonic()
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=DEADLINE)
            self.conn.request('POST', '/json', body=body, headers={'Content-Type': 'application/json'})
            r = self.conn.getresponse()
            raw = r.read()
            status = r.status
        except (socket.timeout, TimeoutError) as e:
            self.close()
            return 'DEADLINE', 'HTTP timeout: %r' % e, time.monotonic() - start, None
        except (OSError, http.client.HTTPException) as e:
            self.close()
            return 'ERROR', 'HTTP: %r' % e, time.monotonic() - start, None
        return json_outcome(status, raw, time.monotonic() - start)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def json_call_fresh(port, body):
    """POST /json on a new connection (probes and canaries: a count must not depend on a kept-alive connection)."""
    start = time.monotonic()
    req = urllib.request.Request('http://127.0.0.1:%d/json' % port, data=body, method='POST',
                                 headers={'Content-Type': 'application/json'})
    try:
        with _opener.open(req, timeout=DEADLINE) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
        e.close()
    except (socket.timeout, TimeoutError) as e:
        return 'DEADLINE', 'HTTP timeout: %r' % e, time.monotonic() - start, None
    except urllib.error.URLError as e:
        if isinstance(e.reason, (socket.timeout, TimeoutError)):
            return 'DEADLINE', 'HTTP timeout: %r' % e, time.monotonic() - start, None
        return 'ERROR', 'HTTP: %r' % e, time.monotonic() - start, None
    except (OSError, http.client.HTTPException) as e:
        return 'ERROR', 'HTTP: %r' % e, time.monotonic() - start, None
    return json_outcome(status, raw, time.monotonic() - start)


def json_body(descriptors, hits_addend=None):
    return json.dumps(harness.rls_request_json(DOMAIN, descriptors, hits_addend)).encode()


# ---------------------------------------------------------------------------------------------------------------
# What happened: every call, every probe, every fault, every sample


class Record:
    def __init__(self):
        self.lock = threading.Lock()
        self.calls = []    # (t, kind, transport, outcome, seconds, detail)
        self.probes = []   # dict(t0, t1, value, exact, problems)
        self.faults = []   # dict(kind, t0, t1, ok, text, problems)
        self.samples = []  # dict(t, rss_kb, fds, cats, ticks)

    def call(self, kind, transport, t, outcome, elapsed, detail):
        with self.lock:
            self.calls.append((t, kind, transport, outcome, elapsed, detail if outcome not in ('OK', 'OVER_LIMIT')
                               else ''))


def paced(rate, stop, body):
    """Calls body() `rate` times a second until `stop` is set; when it falls behind (a slow call) it skips ahead
    rather than sending a burst."""
    interval = 1.0 / rate
    due = time.monotonic()
    while not stop.is_set():
        delay = due - time.monotonic()
        if delay > 0:
            if stop.wait(delay):
                return
        elif delay < -0.5:
            due = time.monotonic()
        body()
        due += interval


def grpc_load(n, ctx, rate, stop, rec):
    request = harness.rls_request_proto(DOMAIN, [[('load', 'g%d' % n)], [('capped', 'all')]])
    opened = time.monotonic() - n * CHANNEL_AGE / GRPC_THREADS  # the threads' new connections staggered
    ch = tls_channel(ctx.sluice.grpc_port, ctx.certs.ca)
    stub = rls_stub(ch)

    def one():
        nonlocal ch, stub, opened
        if time.monotonic() - opened > CHANNEL_AGE:
            ch.close()
            ch = tls_channel(ctx.sluice.grpc_port, ctx.certs.ca)
            stub = rls_stub(ch)
            opened = time.monotonic()
        t = now()
        outcome, detail, elapsed, _ = grpc_call(stub, request)
        rec.call('load', 'grpc', t, outcome, elapsed, detail)

    try:
        paced(rate, stop, one)
    finally:
        ch.close()


def json_load(n, ctx, rate, stop, rec):
    body = json_body([[('load', 'h%d' % n)], [('capped', 'all')]])
    client = JsonClient(ctx.sluice.http_port)

    def one():
        t = now()
        outcome, detail, elapsed, _ = client.call(body)
        rec.call('load', 'json', t, outcome, elapsed, detail)

    try:
        paced(rate, stop, one)
    finally:
        client.close()


def probe_key(value, wall):
    return '%s_probe_%s_%d' % (DOMAIN, value, int(wall) // 3600 * 3600)


def current_master_port(ctx):
    """The master the first answering sentinel names (own connections: this runs beside the fault loop)."""
    for s in ctx.setup.sentinels:
        try:
            c = RespClient(s.port, timeout=1.0)
            try:
                reply = c.command('SENTINEL', 'get-master-addr-by-name', ctx.setup.name)
            finally:
                c.close()
            if reply:
                return int(reply[1])
        except (OSError, harness.RedisError):
            continue
    return None


def probe_loop(ctx, stop, rec):
    """Every PROBE_EVERY seconds: PROBE_CALLS decisions on a new value of `probe` (limit PROBE_LIMIT per hour),
    alternately gRPC and /json. Exact: call i (1-based) is OK with remaining PROBE_LIMIT - i up to the limit, then
    OVER_LIMIT with remaining 0, every answer names the limit (PROBE_LIMIT, HOUR), and the master holds
    PROBE_CALLS."""
    ch = tls_channel(ctx.sluice.grpc_port, ctx.certs.ca)
    stub = rls_stub(ch)
    seq = 0
    try:
        while not stop.is_set():
            started = time.monotonic()
            harness.avoid_window_edge('HOUR', 3.0)
            seq += 1
            value = 'p%05d-%d' % (seq, os.getpid())
            wall = time.time()
            t0 = now()
            request = harness.rls_request_proto(DOMAIN, [[('probe', value)]])
            body = json_body([[('probe', value)]])
            problems = []
            answered = 0
            for i in range(1, PROBE_CALLS + 1):
                transport = 'grpc' if i % 2 else 'json'
                t = now()
                if transport == 'grpc':
                    outcome, detail, elapsed, d = grpc_call(stub, request)
                else:
                    outcome, detail, elapsed, d = json_call_fresh(ctx.sluice.http_port, body)
                rec.call('probe', transport, t, outcome, elapsed, detail)
                if d is None:
                    problems.append('call %d (%s): %s %s' % (i, transport, outcome, detail))
                    continue
                answered += 1
                want = ('OK', PROBE_LIMIT - i) if i <= PROBE_LIMIT else ('OVER_LIMIT', 0)
                s = d.statuses[0] if d.statuses else None
                got = (d.overall, s.remaining if s else None)
                if got != want or s.limit != (PROBE_LIMIT, 'HOUR'):
                    problems.append('call %d (%s): %s remaining %s limit %r, want %s remaining %d'
                                    % (i, transport, got[0], got[1], s.limit if s else None, want[0], want[1]))
            port = current_master_port(ctx)
            stored = None
            if port is not None:
                try:
                    c = RespClient(port, timeout=1.0)
                    try:
                        stored = c.command('GET', probe_key(value, wall))
                    finally:
                        c.close()
                except (OSError, harness.RedisError) as e:
                    stored = 'error: %r' % e
            if stored != str(PROBE_CALLS):
                problems.append('the master (:%s) holds %r for %s, want %d' % (port, stored, probe_key(value, wall),
                                                                               PROBE_CALLS))
            with rec.lock:
                rec.probes.append({'t0': t0, 't1': now(), 'value': value, 'exact': not problems,
                                   'problems': problems})
            stop.wait(max(0.0, PROBE_EVERY - (time.monotonic() - started)))
    finally:
        ch.close()


# ---------------------------------------------------------------------------------------------------------------
# The server's resources: RSS, descriptors (by kind), CPU ticks


def proc_ticks(pid):
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rpartition(')')[2].split()
    return int(fields[11]), int(fields[12])  # utime, stime (fields 14 and 15)


def proc_rss_kb(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0


def tcp_sockets():
    """{inode: (local port, remote port, state)} from /proc/net/tcp and tcp6."""
    out = {}
    for name in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    p = line.split()
                    out[p[9]] = (int(p[1].rsplit(':', 1)[1], 16), int(p[2].rsplit(':', 1)[1], 16), p[3])
        except OSError:
            pass
    return out


def fd_categories(ctx):
    """The server's open descriptors by kind: listeners, client connections (HTTP, gRPC, debug), Redis
    connections, sentinel connections, other sockets, other (epoll, eventfd, timerfd, inotify, files, pipes)."""
    pid = ctx.sluice.proc.pid
    d = '/proc/%d/fd' % pid
    links = []
    for fd in os.listdir(d):
        try:
            links.append(os.readlink(os.path.join(d, fd)))
        except OSError:
            pass
    sockets = tcp_sockets()
    own = {ctx.sluice.http_port, ctx.sluice.grpc_port, ctx.sluice.debug_port}
    redis_ports = {r.port for r in ctx.setup.servers}
    sentinel_ports = {s.port for s in ctx.setup.sentinels}
    cats = collections.Counter()
    for link in links:
        m = re.match(r'socket:\[(\d+)\]', link)
        if not m:
            cats['other'] += 1
            continue
        info = sockets.get(m.group(1))
        if info is None:
            cats['other sockets'] += 1
        elif info[2] == '0A':
            cats['listeners'] += 1
        elif info[0] in own:
            cats['clients'] += 1
        elif info[1] in redis_ports:
            cats['redis'] += 1
        elif info[1] in sentinel_ports:
            cats['sentinels'] += 1
        else:
            cats['other sockets'] += 1
    return len(links), dict(cats)


def sample(ctx, rec):
    pid = ctx.sluice.proc.pid
    total, cats = fd_categories(ctx)
    s = {'t': now(), 'rss_kb': proc_rss_kb(pid), 'fds': total, 'cats': cats, 'ticks': proc_ticks(pid)}
    with rec.lock:
        rec.samples.append(s)
    return s


def sampler(ctx, stop, rec):
    while not stop.wait(SAMPLE_EVERY):
        try:
            sample(ctx, rec)
        except OSError:
            return  # the server is gone: the summary says so


# ---------------------------------------------------------------------------------------------------------------
# Faults (run on the main thread: the harness kills a process it spawned when the spawning thread ends)


class FaultFailed(Exception):
    pass


class Context:
    def __init__(self, certs, setup, sluice, cert, key):
        self.certs, self.setup, self.sluice, self.cert, self.key = certs, setup, sluice, cert, key
        self.canary_channel = None
        self.canary_stub = None
        self.rotations = 0
        self.reload_limit = 100
        self.sentinel_turn = 0


def canary_stub(ctx):
    if ctx.canary_stub is None:
        ctx.canary_channel = tls_channel(ctx.sluice.grpc_port, ctx.certs.ca)
        ctx.canary_stub = rls_stub(ctx.canary_channel)
    return ctx.canary_stub


def wait_served(ctx, rec, what, consecutive=10, timeout=RECOVERY_TIMEOUT):
    """Until `consecutive` decisions in a row (alternately gRPC on one connection and /json, each on a new
    connection, 0.1 s apart) are answered OK or OVER_LIMIT. Their calls are recorded (kind 'canary')."""
    request = harness.rls_request_proto(DOMAIN, [[('load', 'canary')]])
    body = json_body([[('load', 'canary')]])
    deadline = time.monotonic() + timeout
    good, i = 0, 0
    last = ''
    while good < consecutive:
        if time.monotonic() > deadline:
            raise FaultFailed('%s: Sluice did not serve %d decisions in a row within %.0fs (last: %s)'
                              % (what, consecutive, timeout, last))
        i += 1
        t = now()
        if i % 2:
            outcome, detail, elapsed, _ = grpc_call(canary_stub(ctx), request)
            transport = 'grpc'
        else:
            outcome, detail, elapsed, _ = json_call_fresh(ctx.sluice.http_port, body)
            transport = 'json'
        rec.call('canary', transport, t, outcome, elapsed, detail)
        if outcome in ('OK', 'OVER_LIMIT'):
            good += 1
        else:
            good, last = 0, '%s %s' % (outcome, detail)
        time.sleep(0.1)


def master_of(setup):
    """The RedisServer every running sentinel names as the master (None while they disagree)."""
    addrs = set()
    for s in setup.sentinels:
        try:
            addrs.add(s.master_addr(setup.name))
        except (OSError, harness.RedisError):
            return None
    if len(addrs) != 1:
        return None
    return setup.server(addrs.pop())


def wait_replica_ready(setup, master, replica, timeout=RECOVERY_TIMEOUT):
    """`replica` replicates `master` (link up), and every sentinel names `master` and sees `replica` as a healthy
    replica: ready for the next failover."""

    def ready():
        if setup.role(master) != 'master' or replica.info('replication').get('master_link_status') != 'up':
            return False
        for s in setup.sentinels:
            if s.master_addr(setup.name) != master.address():
                return False
            peers = [r for r in s.peers('replicas', setup.name) if r.get('port') == str(replica.port)]
            if not peers or not setup._healthy(peers[0]) or peers[0].get('master-link-status') != 'ok':
                return False
        return True

    harness.wait_until(ready, timeout=timeout, interval=0.2,
                       message='%s a healthy replica of %s' % (replica.address(), master.address()),
                       describe=setup.describe)


def other_server(setup, server):
    return next(r for r in setup.servers if r is not server)


def start_as_replica(server, master):
    """Starts a killed RedisServer again on its port, as a replica of `master`."""
    args = server.extra_args
    if '--replicaof' in args:
        i = args.index('--replicaof')
        del args[i:i + 3]
    args += ['--replicaof', '127.0.0.1', str(master.port)]
    deadline = time.monotonic() + 10
    while True:
        try:
            return server.start()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def fault_kill_master(ctx, rec):
    setup = ctx.setup
    old = master_of(setup)
    if old is None:
        raise FaultFailed('the sentinels disagree on the master before the fault')
    replica = other_server(setup, old)
    t_kill = now()
    old.kill()
    try:
        new = setup.wait_failover(old, timeout=RECOVERY_TIMEOUT)
    except AssertionError as e:
        raise FaultFailed('no failover after the master :%d was killed: %s' % (old.port, str(e)[:500]))
    if new is not replica:
        raise FaultFailed('the sentinels promoted %s' % new.address())
    t_switch = now()
    start_as_replica(old, new)
    wait_served(ctx, rec, 'after the master was killed')
    return 'master :%d killed; sentinels promoted :%d after %.1fs; :%d restarted as its replica' % (
        old.port, new.port, t_switch - t_kill, old.port), (new, old)


def fault_failover(ctx, rec):
    setup = ctx.setup
    old = master_of(setup)
    if old is None:
        raise FaultFailed('the sentinels disagree on the master before the fault')
    replica = other_server(setup, old)
    sentinel = setup.sentinels[ctx.sentinel_turn % len(setup.sentinels)]
    ctx.sentinel_turn += 1
    t_cmd = now()
    try:
        sentinel.command('SENTINEL', 'FAILOVER', setup.name)
    except harness.RedisError as e:
        raise FaultFailed('SENTINEL FAILOVER on :%d: %s' % (sentinel.port, e))
    try:
        new = setup.wait_failover(old, timeout=RECOVERY_TIMEOUT)
    except AssertionError as e:
        raise FaultFailed('SENTINEL FAILOVER on :%d: no switch: %s' % (sentinel.port, str(e)[:500]))
    if new is not replica:
        raise FaultFailed('the sentinels promoted %s' % new.address())
    t_switch = now()
    wait_served(ctx, rec, 'after SENTINEL FAILOVER')
    # The window ends here. The sentinels demote the old master only when they next look at it (up to ~10 s
    # later): until then it still takes writes, so the probes meanwhile (required exact, and checked on the new
    # master) show that Sluice has left it.
    return 'SENTINEL FAILOVER on :%d: :%d → :%d after %.1fs' % (
        sentinel.port, old.port, new.port, t_switch - t_cmd), (new, old)


def reload_limit_now(ctx):
    """The limit of `reload` now, asked with hits_addend 0 over /json (consumes nothing)."""
    outcome, detail, _, d = json_call_fresh(ctx.sluice.http_port,
                                            json_body([{'entries': [('reload', 'x')], 'hits_addend': 0}]))
    if d is None:
        raise AssertionError('%s %s' % (outcome, detail))
    return d.statuses[0].limit


def install_rules(ctx, text):
    """Replaces the rule file atomically (written beside the rule directory, then renamed into it)."""
    staging = os.path.join(ctx.sluice.tmp, 'soak.yaml.new')
    with open(staging, 'w') as f:
        f.write(text)
    os.replace(staging, os.path.join(ctx.sluice.rules_dir, 'soak.yaml'))


def fault_reload(ctx, rec):
    s = ctx.sluice
    before = ctx.reload_limit
    steps = []
    for good in (True, False, True):
        seen = len(s.log())
        if good:
            ctx.reload_limit += 1
            install_rules(ctx, RULES % ctx.reload_limit)
            try:
                s.wait_for_log('Successfully loaded new configuration', since=seen, timeout=10,
                               message='the good rules loaded')
                harness.wait_until(lambda: reload_limit_now(ctx) == (ctx.reload_limit, 'HOUR'), timeout=5,
                                   message='the new limit %d in force' % ctx.reload_limit)
            except AssertionError as e:
                raise FaultFailed('good rules (reload limit %d): %s' % (ctx.reload_limit, str(e)[:800]))
            steps.append('limit %d' % ctx.reload_limit)
        else:
            install_rules(ctx, BAD_RULES)
            try:
                s.wait_for_log('Error loading new configuration', since=seen, timeout=10,
                               message='the bad rules refused')
            except AssertionError as e:
                raise FaultFailed('bad rules: no error logged: %s' % str(e)[:800])
            line = next(ln for ln in s.log()[seen:].splitlines() if 'Error loading new configuration' in ln)
            if 'Successfully loaded' in s.log()[seen:]:
                raise FaultFailed('the bad rules were loaded: %s' % s.log()[seen:][-800:])
            for _ in range(5):
                got = reload_limit_now(ctx)
                if got != (ctx.reload_limit, 'HOUR'):
                    raise FaultFailed('after the bad rules the limit is %r, want the previous (%d, HOUR)'
                                      % (got, ctx.reload_limit))
                time.sleep(0.1)
            steps.append('bad YAML refused, limit %d kept (log: %s)'
                         % (ctx.reload_limit, re.sub(r'^.*msg="?', '', line)[:120]))
    wait_served(ctx, rec, 'after the reloads', consecutive=4)
    return 'rules: limit %d → %s' % (before, '; '.join(steps))


def served_certificate(ctx):
    """A new TLS handshake with the gRPC port (ALPN h2) -> (SHA-256 of the certificate, serial number)."""
    tls = ssl.create_default_context(cafile=ctx.certs.ca)
    tls.set_alpn_protocols(['h2'])
    with socket.create_connection(('127.0.0.1', ctx.sluice.grpc_port), timeout=2.0) as raw:
        with tls.wrap_socket(raw, server_hostname='localhost') as s:
            return hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest(), s.getpeercert()['serialNumber']


def pem_fingerprint(path):
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(read(path).decode())).hexdigest()


def fault_cert(ctx, rec, prepared):
    crt, key = prepared
    want = pem_fingerprint(crt)
    old_fp, old_serial = served_certificate(ctx)
    if old_fp == want:
        raise FaultFailed('the new certificate is already served?')
    for src, dst in ((key, ctx.key), (crt, ctx.cert)):  # key first, each with a rename
        shutil.copy(src, dst + '.new')
        os.replace(dst + '.new', dst)
    t_write = now()
    def new_one_served():
        fp, serial = served_certificate(ctx)
        return (fp, serial) if fp == want else None

    try:
        fp, serial = harness.wait_until(new_one_served, timeout=10, interval=0.1, message='the new certificate served',
                                        describe=ctx.sluice.log_tail)
    except AssertionError as e:
        raise FaultFailed(str(e)[:800])
    t_served = now()
    # a new gRPC connection works with it
    ch = tls_channel(ctx.sluice.grpc_port, ctx.certs.ca)
    try:
        outcome, detail, elapsed, _ = grpc_call(rls_stub(ch), harness.rls_request_proto(DOMAIN, [[('load', 'cert')]]))
        rec.call('canary', 'grpc', now(), outcome, elapsed, detail)
        if outcome not in ('OK', 'OVER_LIMIT'):
            raise FaultFailed('a new gRPC connection after the rotation: %s %s' % (outcome, detail))
    finally:
        ch.close()
    ctx.rotations += 1
    return 'certificate serial %s → %s (sha256 %s… → %s…) served %.2fs after the files were written' % (
        old_serial, serial, old_fp[:12], fp[:12], t_served - t_write)


def prepare_cert(ctx):
    """A new leaf from the same CA (TlsCerts' own recipe, a new serial)."""
    return ctx.certs._leaf('rotated-%d' % (ctx.rotations + 1), 'localhost', 'DNS:localhost,IP:127.0.0.1',
                           'serverAuth')


def run_fault(kind, ctx, rec):
    prepared = prepare_cert(ctx) if kind == 'cert' else None
    fault = {'kind': kind, 't0': now(), 't1': None, 'ok': False, 'text': '', 'problems': []}
    with rec.lock:
        rec.faults.append(fault)
    pair = None
    try:
        if kind == 'kill-master':
            fault['text'], pair = fault_kill_master(ctx, rec)
        elif kind == 'failover':
            fault['text'], pair = fault_failover(ctx, rec)
        elif kind == 'reload':
            fault['text'] = fault_reload(ctx, rec)
        elif kind == 'cert':
            fault['text'] = fault_cert(ctx, rec, prepared)
        else:
            raise FaultFailed('unknown fault %r' % kind)
        fault['ok'] = True
    except (FaultFailed, AssertionError, OSError, harness.RedisError) as e:
        fault['problems'].append('%s: %s' % (type(e).__name__, e))
        fault['text'] = fault['text'] or kind + ' failed'
        # let the next fault start from a working setup if it can
        try:
            wait_served(ctx, rec, 'after a failed fault')
        except FaultFailed as e2:
            fault['problems'].append(str(e2))
    finally:
        fault['t1'] = now()
    if pair is not None:
        # Outside the fault's window: the replica catches up and the sentinels see it healthy (ready for the next
        # failover). Probes and calls meanwhile must be exact.
        try:
            new, old = pair
            harness.wait_until(lambda: ctx.setup.role(old) == 'slave', timeout=RECOVERY_TIMEOUT, interval=0.1,
                               message='the old master :%d demoted' % old.port, describe=ctx.setup.describe)
            demoted = now() - fault['t1']
            wait_replica_ready(ctx.setup, new, old)
            fault['text'] += '; after the window: :%d a replica %.1fs later, in sync and seen by every sentinel ' \
                             '%.1fs later' % (old.port, demoted, now() - fault['t1'])
        except AssertionError as e:
            fault['ok'] = False
            fault['problems'].append(str(e)[:800])
    return fault


# ---------------------------------------------------------------------------------------------------------------
# The summary


def pct(sorted_values, p):
    if not sorted_values:
        return float('nan')
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


def ms(x):
    return '%.1f ms' % (x * 1000) if x < 1 else '%.2f s' % x


def excused(faults, t0, t1):
    """The fault whose window (with the margins) overlaps [t0, t1], or None."""
    for f in faults:
        end = f['t1'] if f['t1'] is not None else float('inf')
        if f['t0'] - MARGIN_BEFORE <= t1 and t0 <= end + MARGIN_AFTER:
            return f
    return None


def log_messages(log, levels=('error', 'warning', 'warn', 'fatal', 'panic')):
    """Counts of the server's log lines at `levels`, numbers and ports masked."""
    counts = collections.Counter()
    for line in log.splitlines():
        m = re.search(r'level=(\w+) msg="(.*)"$', line)
        if not m or m.group(1) not in levels:
            continue
        counts['%s: %s' % (m.group(1), re.sub(r'\d+', 'N', m.group(2))[:150])] += 1
    return counts


def summarize(ctx, rec, load_seconds, idle, ticks0, ticks1, end_sample, settled, rc, stats_text, log):
    checks = []

    def check(ok, text):
        checks.append(('PASS' if ok else 'FAIL', text))

    out = []
    p = out.append
    calls = rec.calls
    faults = rec.faults
    load = [c for c in calls if c[1] == 'load']
    by_outcome = collections.Counter(c[3] for c in calls)
    load_outcomes = collections.Counter(c[3] for c in load)
    decisions = by_outcome['OK'] + by_outcome['OVER_LIMIT']
    p('== soak summary: %.0f s of load, Sluice pid %d (IO_THREADS=2, BACKEND_TYPE=redis, REDIS_TYPE=sentinel: '
      'master, replica, 3 sentinels; gRPC on TLS)' % (load_seconds, ctx.sluice.proc_pid))
    p('load: %d gRPC threads (TLS, a new connection every %.0f s) + %d /json threads (kept-alive), %.0f calls/s '
      'offered, deadline %.1f s; probes of %d calls (limit %d/hour) every %.0f s; faults every %.0f s: %s'
      % (GRPC_THREADS, CHANNEL_AGE, JSON_THREADS, RATE, DEADLINE, PROBE_CALLS, PROBE_LIMIT, PROBE_EVERY,
         FAULT_EVERY, ', '.join(FAULT_CYCLE)))
    p('calls: %d (load %d, probes %d, canaries %d): %s'
      % (len(calls), len(load), sum(1 for c in calls if c[1] == 'probe'), sum(1 for c in calls if c[1] == 'canary'),
         ', '.join('%s %d' % (k, by_outcome[k]) for k in ('OK', 'OVER_LIMIT', 'UNAVAILABLE', 'DEADLINE', 'ERROR'))))
    p('decision rate: %.1f decisions/s (load alone %.1f/s: OK %d, OVER_LIMIT %d)'
      % (decisions / load_seconds, (load_outcomes['OK'] + load_outcomes['OVER_LIMIT']) / load_seconds,
         load_outcomes['OK'], load_outcomes['OVER_LIMIT']))
    for name, sel in (('all load', load), ('gRPC', [c for c in load if c[2] == 'grpc']),
                      ('/json', [c for c in load if c[2] == 'json'])):
        lat = sorted(c[4] for c in sel if c[3] in ('OK', 'OVER_LIMIT'))
        p('latency, %s decisions (%d): p50 %s, p99 %s, max %s'
          % (name, len(lat), ms(pct(lat, 0.5)), ms(pct(lat, 0.99)), ms(lat[-1]) if lat else '-'))
    quiet = sorted(c[4] for c in load if c[3] in ('OK', 'OVER_LIMIT') and not excused(faults, c[0], c[0] + c[4]))
    p('latency outside fault windows (%d): p50 %s, p99 %s, max %s'
      % (len(quiet), ms(pct(quiet, 0.5)), ms(pct(quiet, 0.99)), ms(quiet[-1]) if quiet else '-'))
    hz = os.sysconf('SC_CLK_TCK')
    user, system = (ticks1[0] - ticks0[0]) / hz, (ticks1[1] - ticks0[1]) / hz
    cpu = user + system
    p('server CPU: %.1f s over the load (user %.1f s + system %.1f s) = %.0f µs per decision (%.0f + %.0f), '
      '%.1f%% of one core; idle before the load: %.2f%% of one core'
      % (cpu, user, system, cpu / max(1, decisions) * 1e6, user / max(1, decisions) * 1e6,
         system / max(1, decisions) * 1e6, cpu / load_seconds * 100, idle * 100))

    # faults
    p('faults (%d):' % len(faults))
    for f in faults:
        errs = [c for c in calls if c[3] not in ('OK', 'OVER_LIMIT') and f['t0'] - MARGIN_BEFORE <= c[0]
                <= (f['t1'] or 1e9) + MARGIN_AFTER]
        seen = ('; %d failed calls, %s–%s' % (len(errs), fmt_t(errs[0][0]), fmt_t(errs[-1][0] + errs[-1][4]))
                if errs else '; no failed call')
        p('  %s–%.1fs %-11s %s%s%s' % (fmt_t(f['t0']), f['t1'] or -1, f['kind'], f['text'], seen,
                                       '' if f['ok'] else '  FAILED: ' + ' | '.join(f['problems'])))
    failed_faults = [f for f in faults if not f['ok']]
    check(not failed_faults and faults, '%d faults, each recovered from (%s)' % (
        len(faults), ', '.join('%s %d' % (k, sum(1 for f in faults if f['kind'] == k)) for k in FAULT_CYCLE)))

    # every call answered
    errors = [c for c in calls if c[3] == 'ERROR']
    deadlines = [c for c in calls if c[3] == 'DEADLINE']
    hung = [c for c in calls if c[4] > HUNG]
    unavailable = [c for c in calls if c[3] == 'UNAVAILABLE']
    msgs = collections.Counter(re.sub(r'\d+', 'N', c[5])[:160] for c in unavailable)
    p('clear errors (UNAVAILABLE naming Redis or a sentinel): %d%s'
      % (len(unavailable), ''.join('\n    %5d × %s' % (n, m) for m, n in msgs.most_common(8))))
    p('DEADLINE_EXCEEDED / timeouts: %d%s' % (len(deadlines), ''.join(
        '\n    %s %s %s after %s: %s' % (fmt_t(c[0]), c[1], c[2], ms(c[4]), c[5][:160]) for c in deadlines[:30])))
    if errors:
        p('other errors: %d%s' % (len(errors), ''.join('\n    %s %s %s after %s: %s'
                                                        % (fmt_t(c[0]), c[1], c[2], ms(c[4]), c[5][:200])
                                                        for c in errors[:30])))
    check(not errors, 'every call answered OK, OVER_LIMIT or with a clear error (other errors: %d)' % len(errors))
    check(not deadlines and not hung, 'no call past its %.1f s deadline (DEADLINE_EXCEEDED/timeouts: %d; calls '
          'longer than %.1f s: %d)' % (DEADLINE, len(deadlines), HUNG, len(hung)))
    stray = [c for c in calls if c[3] != 'OK' and c[3] != 'OVER_LIMIT' and not excused(faults, c[0], c[0] + c[4])]
    if stray:
        p('failed calls outside fault windows (± %.0f/%.0f s):%s' % (MARGIN_BEFORE, MARGIN_AFTER, ''.join(
            '\n    %s %s %s %s after %s: %s' % (fmt_t(c[0]), c[1], c[2], c[3], ms(c[4]), c[5][:160])
            for c in stray[:30])))
    check(not stray, 'no failed call outside the fault windows (± %.0f/%.0f s): %d'
          % (MARGIN_BEFORE, MARGIN_AFTER, len(stray)))

    # probes
    probes = rec.probes
    outside = [q for q in probes if not excused(faults, q['t0'], q['t1'])]
    inside = [q for q in probes if excused(faults, q['t0'], q['t1'])]
    bad_out = [q for q in outside if not q['exact']]
    by_kind = collections.defaultdict(lambda: [0, 0])
    for q in inside:
        k = excused(faults, q['t0'], q['t1'])['kind']
        by_kind[k][0] += 1
        by_kind[k][1] += q['exact']
    p('probes: %d; %d outside fault windows, %d exact; %d overlapping a fault (not required exact): %s'
      % (len(probes), len(outside), len(outside) - len(bad_out), len(inside),
         ', '.join('%s %d (%d exact)' % (k, v[0], v[1]) for k, v in sorted(by_kind.items())) or '-'))
    for q in [q for q in inside if not q['exact']][:12]:
        p('    %s–%.1fs %s (during %s): %s' % (fmt_t(q['t0']), q['t1'], q['value'], excused(faults, q['t0'], q['t1'])
                                              ['kind'], '; '.join(q['problems'])[:300]))
    for q in bad_out[:20]:
        p('    NOT EXACT %s–%.1fs %s: %s' % (fmt_t(q['t0']), q['t1'], q['value'], '; '.join(q['problems'])[:400]))
    check(outside and not bad_out, 'counts exact outside fault windows: %d of %d probes exact'
          % (len(outside) - len(bad_out), len(outside)))

    # memory and descriptors
    samples = rec.samples
    target = min(BASELINE_AT, load_seconds * 0.4)
    calm = [s for s in samples if s['t'] >= target and not excused(faults, s['t'] - 3, s['t'] + 3)]
    base = calm[0] if calm else min(samples, key=lambda s: abs(s['t'] - target))
    rss0, rss1 = base['rss_kb'] / 1024, end_sample['rss_kb'] / 1024
    bound = rss0 * RSS_BOUND_SHARE + RSS_BOUND_MB
    peak = max(s['rss_kb'] for s in samples + [end_sample]) / 1024
    p('RSS (every %.0f s, %d samples): %.1f MB at %s, %.1f MB at the end (%s): %+.2f MB (bound %.2f MB = 5%% + '
      '%.0f MB); peak %.1f MB' % (SAMPLE_EVERY, len(samples), rss0, fmt_t(base['t']), rss1, fmt_t(end_sample['t']),
                                  rss1 - rss0, bound, RSS_BOUND_MB, peak))
    per_minute = [s for s in samples if int(s['t']) % 60 < SAMPLE_EVERY]
    p('RSS by minute: %s' % ', '.join('%.0fs %.1f' % (s['t'], s['rss_kb'] / 1024) for s in per_minute))
    check(rss1 - rss0 <= bound, 'RSS flat: %+.2f MB from %s to the end (bound %.2f MB)'
          % (rss1 - rss0, fmt_t(base['t']), bound))

    def cats_text(c):
        return ', '.join('%s %d' % (k, v) for k, v in sorted(c.items()))

    own0 = base['fds'] - base['cats'].get('clients', 0)
    own1 = settled['fds'] - settled['cats'].get('clients', 0)
    p('descriptors: %d at %s (%s); %d at the end, load stopped and clients closed (%s)'
      % (base['fds'], fmt_t(base['t']), cats_text(base['cats']), settled['fds'], cats_text(settled['cats'])))
    check(own1 <= own0 and not settled['cats'].get('clients', 0),
          'no descriptor leak: %d open at the end, %d at %s less its %d client connections'
          % (settled['fds'], own0, fmt_t(base['t']), base['cats'].get('clients', 0)))

    # the process and its log
    counts = log_messages(log)
    p('server log: %d lines; at warn/error: %s' % (len(log.splitlines()), ''.join(
        '\n    %5d × %s' % (n, m) for m, n in counts.most_common(14)) or 'none'))
    bad_reloads = sum(1 for f in faults if f['kind'] == 'reload' and f['ok'])
    logged = log.count('Error loading new configuration')
    check(logged == bad_reloads, 'each bad rule file logged once (Error loading new configuration: %d, bad files '
          'refused: %d)' % (logged, bad_reloads))
    if stats_text:
        p('server stats (debug /stats):%s' % ''.join('\n    ' + ln for ln in stats_text))
    crash = [ln for ln in log.splitlines() if re.search(r'level=(fatal|panic)|AddressSanitizer|terminate called|'
                                                        r'Segmentation|Aborted', ln)]
    check(rc == 0 and not crash, 'Sluice ran throughout and stopped cleanly on SIGTERM (exit code %r%s)'
          % (rc, '; ' + crash[0][:200] if crash else ''))

    failed = [c for c in checks if c[0] == 'FAIL']
    p('checks:')
    for status, text in checks:
        p('  %s %s' % (status, text))
    p('== soak: %s (%d of %d checks passed)' % ('PASSED' if not failed else 'FAILED', len(checks) - len(failed),
                                                len(checks)))
    return '\n'.join(out), not failed


def debug_stats(port):
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                'http://127.0.0.1:%d/stats' % port, timeout=3) as r:
            text = r.read().decode('utf-8', 'replace')
    except OSError as e:
        return ['(debug /stats: %r)' % e]
    keep = ('should_rate_limit.redis_error', 'total_hits', 'over_limit', 'redis_pool', 'config_load')
    return [ln for ln in text.splitlines() if any(k in ln for k in keep) and 'soak.' not in ln][:20]


# ---------------------------------------------------------------------------------------------------------------


def settle(ctx, timeout=20.0):
    """After the load stopped: waits until the server holds no client connection and its descriptor count has
    been the same for 2 s. -> (total, categories) at that point."""
    deadline = time.monotonic() + timeout
    history = []
    while True:
        total, cats = fd_categories(ctx)
        history.append(total)
        if not cats.get('clients') and len(history) >= 5 and len(set(history[-5:])) == 1:
            return total, cats
        if time.monotonic() > deadline:
            return total, cats
        time.sleep(0.5)


def main():
    global T0
    extra = dict(kv.split('=', 1) for kv in (os.environ.get('BENCH_STATS_ENV') or 'DISABLE_STATS=true').split())
    certs = setup = sluice = None
    stop = threading.Event()
    threads = []
    ok = False
    try:
        certs = TlsCerts()
        serving = os.path.join(certs.dir, 'serving')
        os.mkdir(serving)
        cert, key = os.path.join(serving, 'cert.pem'), os.path.join(serving, 'key.pem')
        shutil.copy(certs.server, cert)
        shutil.copy(certs.server_key, key)
        setup = SentinelSetup()
        env = {'BACKEND_TYPE': 'redis', 'EXPIRATION_JITTER_MAX_SECONDS': '0', 'GRPC_SERVER_USE_TLS': 'true',
               'GRPC_SERVER_TLS_CERT': cert, 'GRPC_SERVER_TLS_KEY': key}
        env.update(setup.sluice_env())
        env.update(extra)
        sluice = Sluice(rules={'soak.yaml': RULES % 100}, env=env)
        sluice.proc_pid = sluice.proc.pid
        ctx = Context(certs, setup, sluice, cert, key)
        rec = Record()
        print('soak: Sluice pid %d (HTTP :%d, gRPC TLS :%d), Redis master :%d, replica :%d, sentinels %s; %.0f s'
              % (sluice.proc.pid, sluice.http_port, sluice.grpc_port, setup.master.port, setup.replica.port,
                 ' '.join(':%d' % s.port for s in setup.sentinels), DURATION), flush=True)
        T0 = time.monotonic()
        wait_served(ctx, Record(), 'at start')

        grpc_rate = RATE * GRPC_SHARE / GRPC_THREADS
        json_rate = RATE * (1 - GRPC_SHARE) / JSON_THREADS
        for n in range(GRPC_THREADS):
            threads.append(threading.Thread(target=grpc_load, args=(n, ctx, grpc_rate, stop, rec), daemon=True))
        for n in range(JSON_THREADS):
            threads.append(threading.Thread(target=json_load, args=(n, ctx, json_rate, stop, rec), daemon=True))
        threads.append(threading.Thread(target=probe_loop, args=(ctx, stop, rec), daemon=True))
        threads.append(threading.Thread(target=sampler, args=(ctx, stop, rec), daemon=True))
        idle0, idle_t0 = proc_ticks(sluice.proc.pid), time.monotonic()
        time.sleep(5)
        idle1, idle_t1 = proc_ticks(sluice.proc.pid), time.monotonic()
        idle = (sum(idle1) - sum(idle0)) / os.sysconf('SC_CLK_TCK') / (idle_t1 - idle_t0)
        T0 = time.monotonic()
        ticks0 = proc_ticks(sluice.proc.pid)
        sample(ctx, rec)
        for th in threads:
            th.start()

        # faults, on this thread
        next_fault = FIRST_FAULT
        i = 0
        while True:
            if next_fault > DURATION - LAST_FAULT_BEFORE_END:
                break
            if next_fault > now():
                time.sleep(next_fault - now())
            if not sluice.running():
                break
            kind = FAULT_CYCLE[i % len(FAULT_CYCLE)]
            i += 1
            f = run_fault(kind, ctx, rec)
            print('soak: %s–%.1fs %s: %s%s' % (fmt_t(f['t0']), f['t1'], kind, f['text'],
                                               '' if f['ok'] else ' FAILED: ' + ' | '.join(f['problems'])),
                  flush=True)
            next_fault = max(f['t0'] + FAULT_EVERY, f['t1'] + QUIET_AFTER)
        if DURATION > now():
            time.sleep(DURATION - now())

        load_seconds = now()
        running = sluice.running()
        end_sample = sample(ctx, rec) if running else rec.samples[-1]
        ticks1 = end_sample['ticks']
        stop.set()
        for th in threads:
            th.join(10)
        if ctx.canary_channel is not None:
            ctx.canary_channel.close()
        settled_total, settled_cats = settle(ctx) if running else (0, {})
        stats_text = debug_stats(sluice.debug_port) if running else []
        rc = sluice.stop(timeout=15)
        log = sluice.log()
        if LOG_DIR:
            os.makedirs(LOG_DIR, exist_ok=True)
            with open(os.path.join(LOG_DIR, 'sluice.log'), 'w') as f:
                f.write(log)
        text, ok = summarize(ctx, rec, load_seconds, idle, ticks0, ticks1, end_sample,
                             {'fds': settled_total, 'cats': settled_cats}, rc, stats_text, log)
        print(text, flush=True)
        if not ok:
            print(sluice.log_tail(30), flush=True)
    except KeyboardInterrupt:
        print('soak: interrupted; stopping everything', file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        if sluice is not None:
            print(sluice.log_tail(30), file=sys.stderr)
        return 1
    finally:
        stop.set()
        for th in threads:
            th.join(5)
        for closer in (sluice, setup, certs):
            if closer is not None:
                try:
                    closer.close()
                except Exception as e:  # keep closing the rest
                    print('soak: cleanup: %r' % e, file=sys.stderr)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
