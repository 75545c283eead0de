"""Shared helpers for Sluice's end-to-end tests.

Every test module starts the real binary ($SLUICE_BIN) with its own settings and rule files and talks to it with
real clients: urllib for HTTP, grpcio with stubs generated from proto/ ($SLUICE_PY_PROTO) for gRPC.

Environment:
  SLUICE_BIN        the server binary (default: <repo>/build/sluice)
  SLUICE_PY_PROTO   directory with the generated *_pb2.py modules (default: <repo>/build/tests/e2e; if the modules
                    are not there they are generated into a temporary directory with protoc)
  SLUICE_FIXTURES   directory of the rule-file fixtures (default: <repo>/tests/fixtures)
  SLUICE_E2E_KEEP   set to keep the temporary directories (rules, logs) of every server started
"""

import atexit
import faulthandler
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLUICE_BIN = os.environ.get('SLUICE_BIN') or os.path.join(REPO, 'build', 'sluice')
# A sanitizer build under test (scripts/sanitize sets these): timings and memory are the sanitizer's, not
# Sluice's, so tests that measure them only report them.
SANITIZED = bool(os.environ.get('ASAN_OPTIONS') or os.environ.get('TSAN_OPTIONS'))
SLUICE_FIXTURES = os.environ.get('SLUICE_FIXTURES') or os.path.join(REPO, 'tests', 'fixtures')
KEEP = bool(os.environ.get('SLUICE_E2E_KEEP'))

# ---------------------------------------------------------------------------------------------------------------
# Generated protobuf modules


def _import_protos():
    proto_dir = os.environ.get('SLUICE_PY_PROTO') or os.path.join(REPO, 'build', 'tests', 'e2e')
    if not os.path.exists(os.path.join(proto_dir, 'rls_pb2.py')):
        # Not built yet: generate the modules ourselves (needs protoc).
        proto_dir = tempfile.mkdtemp(prefix='sluice-e2e-pb-')
        atexit.register(shutil.rmtree, proto_dir, True)
        src = os.path.join(REPO, 'proto')
        protos = sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith('.proto'))
        subprocess.run(['protoc', '--proto_path=' + src, '--python_out=' + proto_dir] + protos, check=True)
    if proto_dir not in sys.path:
        sys.path.insert(0, proto_dir)


_import_protos()

import grpc  # noqa: E402
import health_pb2  # noqa: E402
import ratelimit_pb2  # noqa: E402
import ratelimit_unit_pb2  # noqa: E402
import rls_pb2  # noqa: E402

UINT32_MAX = 4294967295
UNIT_SECONDS = {'SECOND': 1, 'MINUTE': 60, 'HOUR': 3600, 'DAY': 86400, 'WEEK': 604800, 'MONTH': 2592000,
                'YEAR': 31536000}

# ---------------------------------------------------------------------------------------------------------------
# Process hygiene: no server may outlive the tests.

_live = set()
_live_lock = threading.Lock()


def _kill_all():
    with _live_lock:
        procs = list(_live)
    for p in procs:
        if p.poll() is None:
            try:
                p.kill()
                p.wait(5)
            except Exception:
                pass


atexit.register(_kill_all)

# A crash inside a C extension (grpcio) then prints every thread's Python stack instead of dying silently.
faulthandler.enable()

if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
    # meson's test timeout (and CI cancellation) sends SIGTERM: run the atexit handlers on the way out.
    signal.signal(signal.SIGTERM, lambda signo, frame: sys.exit(128 + signo))

SETPRIV = shutil.which('setpriv') or '/usr/bin/setpriv'


def spawn(args, env, stdout, stderr, stdin=subprocess.DEVNULL):
    """Starts a process that is killed when the tests end, whatever happens: atexit, and PR_SET_PDEATHSIG (set by
    util-linux's setpriv, which then execs the command) if the test process dies, even by SIGKILL. Not with
    preexec_fn: Python code between fork and exec can deadlock on a lock another thread (grpcio's) held at the
    fork; a TSan run of e2e_grpc hung there."""
    p = subprocess.Popen([SETPRIV, '--pdeathsig', 'KILL', '--'] + list(args), env=env, stdin=stdin, stdout=stdout,
                         stderr=stderr)
    with _live_lock:
        _live.add(p)
    return p


def reap(p, timeout=10):
    """Waits for p (killing it after timeout) and forgets it. Returns the exit code."""
    try:
        rc = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait(10)
    with _live_lock:
        _live.discard(p)
    return rc


def run_sluice(args, env=None, timeout=15):
    """Runs the binary to completion (CLI commands). Returns CompletedProcess with text stdout/stderr."""
    full_env = base_env()
    full_env.update(env or {})
    full_env = {k: v for k, v in full_env.items() if v is not None}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = spawn([SLUICE_BIN] + list(args), full_env, out, err)
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            reap(p, 0)
            raise AssertionError('sluice %s did not finish within %ss' % (' '.join(args), timeout))
        reap(p)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess([SLUICE_BIN] + list(args), rc,
                                           out.read().decode('utf-8', 'replace'),
                                           err.read().decode('utf-8', 'replace'))


def base_env():
    # Two workers whatever the machine, so connection counts (REDIS_POOL_SIZE is shared out among the workers)
    # and the paths between workers are the same everywhere; tests of the default unset it.
    env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'IO_THREADS': '2'}
    for k in ('LANG', 'LC_ALL', 'TZ'):
        if k in os.environ:
            env[k] = os.environ[k]
    # A sanitizer build (docs/development.md) reports through these: keep them.
    env.update({k: v for k, v in os.environ.items() if k.split('_')[0] in ('ASAN', 'UBSAN', 'LSAN', 'TSAN')})
    return env


# ---------------------------------------------------------------------------------------------------------------
# Small utilities


def rss_kb(pid):
    """A process's resident memory (VmRSS), in KB."""
    with open('/proc/%d/status' % pid) as f:
        return next(int(line.split()[1]) for line in f if line.startswith('VmRSS'))


def cpu_seconds(pid):
    """The CPU time (user + system) a process has used so far, in seconds: unlike wall time, what a busy machine
    does not stretch."""
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def read_until_closed(sock, timeout):
    """Reads until the server closes `sock` (or resets it, or `timeout` passes); -> the bytes read."""
    sock.settimeout(timeout)
    data = b''
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data


def closed_by_server(sock, timeout):
    """Whether the server closes `sock` within `timeout` (what it sends first, like its SETTINGS, is read)."""
    deadline = time.monotonic() + timeout
    try:
        while True:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            if sock.recv(4096) == b'':
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


SANITIZER_MARKERS = ('ERROR: AddressSanitizer', 'ERROR: LeakSanitizer', 'WARNING: ThreadSanitizer',
                     'runtime error:')


def thread_stacks(pid):
    """Every thread's stack of a running process, by gdb (a hang's only witness before its kill)."""
    try:
        out = subprocess.run(['gdb', '-batch', '-nx', '-p', str(pid), '-ex', 'thread apply all bt 30'],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        return out.stdout.decode(errors='replace')
    except (OSError, subprocess.TimeoutExpired) as e:
        return 'no stacks: %s' % e


def sanitizer_report(log):
    """The first sanitizer report in a server's log (a sanitizer build: scripts/sanitize), or ''."""
    starts = [i for i in (log.find(m) for m in SANITIZER_MARKERS) if i >= 0]
    if not starts:
        return ''
    start = log.rfind('\n', 0, min(starts)) + 1
    return log[start:start + 6000]


def free_ports(n=1):
    """n distinct free loopback TCP ports."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(('127.0.0.1', 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port():
    return free_ports(1)[0]


_held_ports = []


def backend_env(backend, servers):
    """The settings of `backend` ('memory', 'redis', 'cluster' or 'memcache') on the servers a suite started
    (servers['redis'] a RedisServer, servers['cluster'] a ClusterSetup, servers['memcache'] a MemcachedServer), with
    no expiry jitter."""
    env = {'BACKEND_TYPE': backend, 'EXPIRATION_JITTER_MAX_SECONDS': '0'}
    if backend == 'redis':
        env.update(servers['redis'].sluice_env())
    elif backend == 'cluster':
        env.update(servers['cluster'].sluice_env(), BACKEND_TYPE='redis')
    elif backend == 'memcache':
        env['MEMCACHE_HOST_PORT'] = '127.0.0.1:%d' % servers['memcache'].port
    return env


def dead_port():
    """A loopback port where nothing listens for the rest of this test process: the socket stays bound (never
    listening), so a connection is refused and no server another suite starts meanwhile can take the port."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(('127.0.0.1', 0))
    _held_ports.append(s)
    return s.getsockname()[1]


def go_duration_seconds(text):
    """A Go duration of the forms the tests use ('500ms', '2s', '1m30s') in seconds."""
    units = {'h': 3600.0, 'm': 60.0, 's': 1.0, 'ms': 1e-3, 'us': 1e-6, 'µs': 1e-6, 'ns': 1e-9}
    parts = re.findall(r'(\d+(?:\.\d*)?)(ms|us|µs|ns|h|m|s)', text)
    if not parts or ''.join(n + u for n, u in parts) != text:
        raise ValueError('not a Go duration: %r' % text)
    return sum(float(n) * units[u] for n, u in parts)


def wait_until(predicate, timeout=5.0, interval=0.05, message='condition', describe=None):
    """Polls predicate() until it returns a truthy value (returned). On timeout fails with the last value."""
    deadline = time.monotonic() + timeout
    last = None
    last_exc = None
    while True:
        try:
            last = predicate()
            last_exc = None
            if last:
                return last
        except (AssertionError, grpc.RpcError, OSError) as e:
            last_exc = e
        if time.monotonic() >= deadline:
            extra = describe() if describe else ''
            raise AssertionError('timed out after %.1fs waiting for %s; last value: %r; last error: %r%s'
                                 % (timeout, message, last, last_exc, ('\n' + extra) if extra else ''))
        time.sleep(interval)


def wait_for_value(read, accept, timeout=5.0, message='a value'):
    """Polls read() until accept(value), and returns that value (one read: several fields of one stats page). On
    timeout fails with the last value read."""
    last = []

    def accepted():
        last[:] = [read()]
        return accept(last[0])
    wait_until(accepted, timeout=timeout, message=message, describe=lambda: repr(last[0]) if last else '')
    return last[0]


def avoid_window_edge(unit='HOUR', margin=2.0):
    """Sleeps past the next epoch-aligned window boundary of `unit` if it is less than `margin` seconds away, so a
    counting test does not straddle two windows."""
    divider = UNIT_SECONDS[unit.upper()]
    now = time.time()
    left = divider - (now % divider)
    if left < margin:
        time.sleep(left + 0.05)


def expected_resets(unit, t0, t1):
    """The set of durationUntilReset values (seconds) the service may answer between wall-clock times t0 and t1."""
    divider = UNIT_SECONDS[unit.upper()]
    return {divider - (t % divider) for t in range(int(t0), int(t1) + 1)}


# ---------------------------------------------------------------------------------------------------------------
# HTTP

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _decode_body(headers, raw):
    text = raw.decode('utf-8', 'replace')
    ctype = headers.get('content-type', '')
    if 'json' in ctype or text[:1] in ('{', '['):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def http_request(port, path, body=None, method=None, headers=None, timeout=5.0):
    """-> (status, headers with lower-case names, parsed JSON or text). 4xx/5xx are returned, not raised."""
    if isinstance(body, str):
        body = body.encode('utf-8')
    req = urllib.request.Request('http://127.0.0.1:%d%s' % (port, path), data=body, method=method)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with _opener.open(req, timeout=timeout) as r:
            hdrs = {k.lower(): v for k, v in r.headers.items()}
            return r.status, hdrs, _decode_body(hdrs, r.read())
    except urllib.error.HTTPError as e:
        hdrs = {k.lower(): v for k, v in e.headers.items()}
        raw = e.read()
        e.close()
        return e.code, hdrs, _decode_body(hdrs, raw)


def post_json(port, body, path='/json', timeout=5.0):
    """POSTs a dict (serialized) or a str/bytes (sent verbatim). -> (status, headers, parsed JSON or text)."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    return http_request(port, path, body=body if body is not None else b'', method='POST',
                        headers={'Content-Type': 'application/json'}, timeout=timeout)


def http_get(port, path, timeout=5.0):
    return http_request(port, path, method='GET', timeout=timeout)


# ---------------------------------------------------------------------------------------------------------------
# Descriptors in both wire forms


def _split_descriptor(d):
    if isinstance(d, dict):
        entries = d.get('entries', [])
        return entries, d.get('limit'), d.get('hits_addend')
    return d, None, None


def _unit_number(unit):
    if isinstance(unit, int):
        return unit
    return ratelimit_unit_pb2.RateLimitUnit.Value(unit.upper())


def rls_request_proto(domain, descriptors, hits_addend=None):
    req = rls_pb2.RateLimitRequest(domain=domain)
    if hits_addend is not None:
        req.hits_addend = hits_addend
    for d in descriptors:
        entries, limit, hits = _split_descriptor(d)
        pd = req.descriptors.add()
        for k, v in entries:
            pd.entries.add(key=k, value=v)
        if limit is not None:
            pd.limit.requests_per_unit = limit[0]
            pd.limit.unit = _unit_number(limit[1])
        if hits is not None:
            pd.hits_addend.value = hits
        if isinstance(d, dict) and d.get('is_negative_hits'):
            pd.is_negative_hits = True
    return req


def rls_request_json(domain, descriptors, hits_addend=None):
    body = {'domain': domain, 'descriptors': []}
    if hits_addend is not None:
        body['hitsAddend'] = hits_addend
    for d in descriptors:
        entries, limit, hits = _split_descriptor(d)
        jd = {'entries': [{'key': k, 'value': v} for k, v in entries]}
        if limit is not None:
            jd['limit'] = {'requestsPerUnit': limit[0], 'unit': limit[1]}
        if hits is not None:
            jd['hitsAddend'] = hits
        if isinstance(d, dict) and d.get('is_negative_hits'):
            jd['isNegativeHits'] = True
        body['descriptors'].append(jd)
    return body


# ---------------------------------------------------------------------------------------------------------------
# gRPC

_channels = {}
_channels_lock = threading.Lock()


def channel(port):
    with _channels_lock:
        ch = _channels.get(port)
        if ch is None:
            ch = grpc.insecure_channel('127.0.0.1:%d' % port, options=[('grpc.enable_http_proxy', 0)])
            _channels[port] = ch
        return ch


def close_channel(port):
    with _channels_lock:
        ch = _channels.pop(port, None)
    if ch is not None:
        ch.close()


def _rls_stub(port):
    return channel(port).unary_unary('/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
                                     request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
                                     response_deserializer=rls_pb2.RateLimitResponse.FromString)


def rls(port, domain, descriptors, hits_addend=None, timeout=5.0):
    """ShouldRateLimit over gRPC. -> rls_pb2.RateLimitResponse; raises grpc.RpcError on a non-OK status."""
    return _rls_stub(port)(rls_request_proto(domain, descriptors, hits_addend), timeout=timeout)


def rls_raw(port, request, timeout=5.0):
    return _rls_stub(port)(request, timeout=timeout)


def grpc_health(port, service='ratelimit', timeout=3.0):
    """grpc.health.v1.Health/Check. -> status name ('SERVING', 'NOT_SERVING', ...); raises grpc.RpcError."""
    call = channel(port).unary_unary('/grpc.health.v1.Health/Check',
                                     request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                                     response_deserializer=health_pb2.HealthCheckResponse.FromString)
    resp = call(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)


# ---------------------------------------------------------------------------------------------------------------
# One decision, normalized so the same assertions hold for both transports


def remove_tmp(path):
    """Removes a test's temporary directory, or keeps it (and says where) when SLUICE_E2E_KEEP is set."""
    if KEEP:
        sys.stderr.write('sluice e2e: kept %s\n' % path)
    else:
        shutil.rmtree(path, ignore_errors=True)


class Status:
    __slots__ = ('code', 'limit', 'name', 'remaining', 'reset')

    def __init__(self, code, limit, name, remaining, reset):
        self.code = code            # 'OK' | 'OVER_LIMIT' | 'UNKNOWN'
        self.limit = limit          # (requests_per_unit, 'UNIT') or None when no current limit
        self.name = name            # current_limit.name ('' when absent)
        self.remaining = remaining  # limit_remaining (0 when absent)
        self.reset = reset          # duration_until_reset in whole seconds, or None when absent

    def __repr__(self):
        return 'Status(code=%s, limit=%r, remaining=%d, reset=%r)' % (self.code, self.limit, self.remaining,
                                                                       self.reset)


class Decision:
    def __init__(self, overall, statuses, headers, http_status=None, raw=None):
        self.overall = overall
        self.statuses = statuses
        self.headers = headers      # response_headers_to_add as a list of (key, value)
        self.http_status = http_status
        self.raw = raw

    def __repr__(self):
        return 'Decision(overall=%s, statuses=%r, headers=%r, http=%r)' % (self.overall, self.statuses, self.headers,
                                                                          self.http_status)


_DURATION_RE = re.compile(r'^(\d+)s$')


def decision_from_proto(resp):
    statuses = []
    for s in resp.statuses:
        limit = None
        name = ''
        if s.HasField('current_limit'):
            limit = (s.current_limit.requests_per_unit,
                     rls_pb2.RateLimitResponse.RateLimit.Unit.Name(s.current_limit.unit))
            name = s.current_limit.name
        reset = None
        if s.HasField('duration_until_reset'):
            if s.duration_until_reset.nanos != 0:
                raise AssertionError('duration_until_reset has nanos: %r' % s.duration_until_reset)
            reset = s.duration_until_reset.seconds
        statuses.append(Status(rls_pb2.RateLimitResponse.Code.Name(s.code), limit, name, s.limit_remaining, reset))
    headers = [(h.key, h.value) for h in resp.response_headers_to_add]
    return Decision(rls_pb2.RateLimitResponse.Code.Name(resp.overall_code), statuses, headers, None, resp)


def decision_from_json(status, body):
    if not isinstance(body, dict):
        raise AssertionError('HTTP %d with a non-JSON body: %r' % (status, body))
    if 'overallCode' not in body:
        raise AssertionError('HTTP %d without overallCode: %r' % (status, body))
    statuses = []
    for s in body.get('statuses', []):
        limit = None
        name = ''
        if 'currentLimit' in s:
            cl = s['currentLimit']
            limit = (cl.get('requestsPerUnit', 0), cl.get('unit', 'UNKNOWN'))
            name = cl.get('name', '')
        reset = None
        if 'durationUntilReset' in s:
            m = _DURATION_RE.match(str(s['durationUntilReset']))
            if not m:
                raise AssertionError('durationUntilReset is not "<n>s": %r' % s['durationUntilReset'])
            reset = int(m.group(1))
        statuses.append(Status(s.get('code', 'UNKNOWN'), limit, name, s.get('limitRemaining', 0), reset))
    headers = [(h.get('key', ''), h.get('value', '')) for h in body.get('responseHeadersToAdd', [])]
    d = Decision(body['overallCode'], statuses, headers, status, body)
    want = {'OK': 200, 'OVER_LIMIT': 429}.get(d.overall)
    if want != status:
        raise AssertionError('/json answered HTTP %d for overallCode %s (want %r): %r' % (status, d.overall, want,
                                                                                        body))
    return d


def decide(transport, port, domain, descriptors, hits_addend=None):
    """One ShouldRateLimit over 'grpc' (port = gRPC port) or 'json' (port = HTTP port) -> Decision."""
    if transport == 'grpc':
        return decision_from_proto(rls(port, domain, descriptors, hits_addend))
    if transport == 'json':
        status, _, body = post_json(port, rls_request_json(domain, descriptors, hits_addend))
        return decision_from_json(status, body)
    raise ValueError(transport)


# ---------------------------------------------------------------------------------------------------------------
# The server under test


class StartupError(AssertionError):
    pass


class Sluice:
    """A running sluice with its own temporary rule directory, ports and log.

    layout='directory': RUNTIME_WATCH_ROOT=false, RUNTIME_ROOT=<tmp>, RUNTIME_SUBDIRECTORY=ratelimit,
                        RUNTIME_APPDIRECTORY=config; rules live in <tmp>/ratelimit/config.
    layout='watch_root': default RUNTIME_WATCH_ROOT (true), RUNTIME_ROOT=<tmp>/current, a symlink to <tmp>/v1,
                        RUNTIME_SUBDIRECTORY=ratelimit; rules live in <tmp>/current/ratelimit/config.
    rules: {file name: YAML text} written before start. env: extra settings (None removes a default).
    wait_ready: True waits for /healthcheck 200; 'answer' for any answer (a server meant to start unhealthy);
    False returns at once.
    """

    def __init__(self, rules=None, env=None, layout='directory', start=True, wait_ready=True):
        self.tmp = tempfile.mkdtemp(prefix='sluice-e2e-')
        self.layout = layout
        self.extra_env = dict(env or {})
        self.proc = None
        self.http_port = None
        self.grpc_port = None
        self.debug_port = None
        self.returncode = None
        self._stderr = None
        self._stdout = None
        if layout == 'directory':
            self.root = self.tmp
            self.rules_dir = os.path.join(self.tmp, 'ratelimit', 'config')
        elif layout == 'watch_root':
            self.root = os.path.join(self.tmp, 'current')
            os.makedirs(os.path.join(self.tmp, 'v1', 'ratelimit', 'config'))
            os.symlink('v1', self.root)
            self.rules_dir = os.path.join(self.root, 'ratelimit', 'config')
        else:
            raise ValueError(layout)
        os.makedirs(self.rules_dir, exist_ok=True)
        for name, text in (rules or {}).items():
            self.write_rule(name, text)
        if start:
            try:
                self.start(wait_ready=wait_ready)
            except BaseException:
                self.close()
                raise

    # -- rule files ---------------------------------------------------------------------------------------------

    def write_rule(self, name, text, directory=None):
        path = os.path.join(directory or self.rules_dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def remove_rule(self, name, directory=None):
        os.remove(os.path.join(directory or self.rules_dir, name))

    def swap_root(self, version, rules):
        """watch_root layout: builds <tmp>/<version>/ratelimit/config with `rules` and swaps the root symlink to it
        atomically (ln -s <version> tmp && mv -T tmp current)."""
        assert self.layout == 'watch_root'
        d = os.path.join(self.tmp, version, 'ratelimit', 'config')
        os.makedirs(d)
        for name, text in rules.items():
            with open(os.path.join(d, name), 'w') as f:
                f.write(text)
        tmp_link = os.path.join(self.tmp, 'current.tmp')
        os.symlink(version, tmp_link)
        os.replace(tmp_link, self.root)
        return d

    # -- process ------------------------------------------------------------------------------------------------

    def env(self):
        e = base_env()
        e.update({
            'BACKEND_TYPE': 'memory',
            'HOST': '127.0.0.1',
            'PORT': str(self.http_port),
            'GRPC_HOST': '127.0.0.1',
            'GRPC_PORT': str(self.grpc_port),
            'DEBUG_HOST': '127.0.0.1',
            'DEBUG_PORT': str(self.debug_port),
            'LOG_LEVEL': 'info',
        })
        if self.layout == 'directory':
            e.update({'RUNTIME_ROOT': self.tmp, 'RUNTIME_SUBDIRECTORY': 'ratelimit', 'RUNTIME_APPDIRECTORY': 'config',
                      'RUNTIME_WATCH_ROOT': 'false'})
        else:
            e.update({'RUNTIME_ROOT': self.root, 'RUNTIME_SUBDIRECTORY': 'ratelimit', 'RUNTIME_APPDIRECTORY': 'config'})
        e.update(self.extra_env)
        return {k: v for k, v in e.items() if v is not None}

    def start(self, wait_ready=True):
        for attempt in range(3):
            self.http_port, self.grpc_port, self.debug_port = free_ports(3)
            for f in (self._stderr, self._stdout):  # a restart: the last run's logs are replaced
                if f is not None:
                    f.close()
            self._stderr = open(os.path.join(self.tmp, 'stderr.log'), 'w+b')
            self._stdout = open(os.path.join(self.tmp, 'stdout.log'), 'w+b')
            self.proc = spawn([SLUICE_BIN], self.env(), self._stdout, self._stderr)
            if not wait_ready:
                return self
            try:
                self.wait_ready(healthy=wait_ready != 'answer')
                return self
            except StartupError:
                if self.proc.poll() is not None and 'in use' in self.log() and attempt < 2:
                    self.stop()
                    continue  # a port got taken between picking and binding: pick new ones
                raise
        return self

    def wait_ready(self, timeout=10.0, healthy=True):
        """Waits until GET /healthcheck answers 200: ready, its backend reached (issue 40: a test that waited for
        any answer raced the workers' first Redis connections). healthy=False: any answer (a server meant to
        start unhealthy)."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise StartupError('sluice exited with code %d during start-up; log:\n%s' % (rc, self.log()))
            try:
                last = http_get(self.http_port, '/healthcheck', timeout=1.0)[0]
                if last == 200 or not healthy:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise StartupError('sluice did not answer /healthcheck %s within %ss (last: %r); log:\n%s'
                                   % ('200' if healthy else 'at all', timeout, last, self.log()))
            time.sleep(0.02)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def terminate(self):
        """Sends SIGTERM without waiting."""
        self.proc.send_signal(signal.SIGTERM)

    def wait_exit(self, timeout=10.0):
        """Waits for the process to exit by itself (no kill). -> exit code or None if still running."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    @classmethod
    def failed_start(cls, test, env, timeout=10.0):
        """Starts Sluice with `env`, expecting it to stop by itself with exit code 1. -> its log."""
        s = cls(env=env, wait_ready=False)
        test.addCleanup(s.close)
        test.assertEqual(s.wait_exit(timeout), 1, s.log())
        return s.log()

    def stop_deadline(self):
        """How long a stop may take after SIGTERM: SHUTDOWN_GRACE_PERIOD for calls in flight, as long again at most
        for a backend's drain (batched hits waiting for Redis: the grace, 1 s at least), and a margin for a busy
        (or sanitized) machine."""
        grace = go_duration_seconds(self.extra_env.get('SHUTDOWN_GRACE_PERIOD') or '10s')
        return grace + max(grace, 1.0) + (15.0 if SANITIZED else 5.0)

    def stop(self, timeout=None):
        """SIGTERM, wait. -> exit code. A server still running after `timeout` (default: stop_deadline()) is
        killed with SIGKILL and the test fails: a server must stop cleanly on SIGTERM (a kill hid a shutdown that
        hung on the table watch)."""
        if self.proc is None:
            return self.returncode
        if self.http_port is not None:
            close_channel(self.grpc_port)
        killed = False
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(self.stop_deadline() if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                killed = True
                stacks = thread_stacks(self.proc.pid)
        self.returncode = reap(self.proc, 0)
        self.proc = None
        if killed:
            raise AssertionError('sluice did not stop within %.0fs of SIGTERM and was killed with SIGKILL: it must '
                                 'stop cleanly on SIGTERM; %s\nits threads before the kill:\n%s'
                                 % (self.stop_deadline() if timeout is None else timeout, self.log_tail(), stacks))
        return self.returncode

    def close(self):
        try:
            self.stop()
            log_file = os.path.join(self.tmp, 'stderr.log')
            report = sanitizer_report(self.log()) if os.path.exists(log_file) else ''  # not closed before
            if report:
                raise AssertionError('the server wrote a sanitizer report:\n' + report)
        finally:
            for f in (self._stderr, self._stdout):
                if f is not None:
                    f.close()
            self._stderr = self._stdout = None
            remove_tmp(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- output -------------------------------------------------------------------------------------------------

    def log(self):
        """Everything the server wrote to stderr so far."""
        with open(os.path.join(self.tmp, 'stderr.log'), 'rb') as f:
            return f.read().decode('utf-8', 'replace')

    def stdout(self):
        with open(os.path.join(self.tmp, 'stdout.log'), 'rb') as f:
            return f.read().decode('utf-8', 'replace')

    def log_tail(self, n=40):
        return 'server log (last %d lines):\n%s' % (n, '\n'.join(self.log().splitlines()[-n:]))

    def wait_for_log(self, predicate, since=0, timeout=5.0, message='log line'):
        """Polls the log (from character offset `since`) until predicate(text) or substring matches."""
        if isinstance(predicate, str):
            needle = predicate
            predicate = lambda text: needle in text  # noqa: E731
        return wait_until(lambda: predicate(self.log()[since:]), timeout=timeout, message=message,
                          describe=self.log_tail)

    # -- clients ------------------------------------------------------------------------------------------------

    def grpc(self, domain, descriptors, hits_addend=None):
        return rls(self.grpc_port, domain, descriptors, hits_addend)

    def json(self, body):
        return post_json(self.http_port, body)

    def decide(self, transport, domain, descriptors, hits_addend=None):
        port = self.grpc_port if transport == 'grpc' else self.http_port
        return decide(transport, port, domain, descriptors, hits_addend)

    def healthcheck(self):
        return http_get(self.http_port, '/healthcheck')

    def health(self, service='ratelimit'):
        return grpc_health(self.grpc_port, service)

    def limit_of(self, domain, entries, transport='grpc'):
        """The limit (requests_per_unit, unit) that applies to one descriptor now, without consuming a hit;
        None when no limit applies."""
        d = self.decide(transport, domain, [{'entries': entries, 'hits_addend': 0}])
        return d.statuses[0].limit


# ---------------------------------------------------------------------------------------------------------------
# Redis (Debian's redis-server / redis-cli), for the Redis backend's tests

REDIS_SERVER = os.environ.get('SLUICE_REDIS_SERVER') or shutil.which('redis-server') or '/usr/bin/redis-server'
REDIS_CLI = os.environ.get('SLUICE_REDIS_CLI') or shutil.which('redis-cli') or '/usr/bin/redis-cli'


def _resp_command(*args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        if not isinstance(a, bytes):
            a = str(a).encode('utf-8')
        out.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(out)


_MONITOR_ARG_RE = re.compile(r'"((?:[^"\\]|\\.)*)"')
_MONITOR_ESCAPES = {'n': '\n', 'r': '\r', 't': '\t', 'a': '\a', 'b': '\b', '"': '"', '\\': '\\'}


def _unrepr(text):
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == '\\' and i + 1 < len(text):
            n = text[i + 1]
            if n == 'x' and i + 3 < len(text):
                out.append(chr(int(text[i + 2:i + 4], 16)))
                i += 4
                continue
            out.append(_MONITOR_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return ''.join(out)


class RedisError(Exception):
    pass


class RespClient:
    """A minimal blocking RESP2 client on one connection (the harness' own reads of Redis state); over TLS when
    `ssl_context` is given."""

    def __init__(self, port, auth=None, timeout=5.0, ssl_context=None):
        self.sock = socket.create_connection(('127.0.0.1', port), timeout=timeout)
        if ssl_context is not None:
            try:
                self.sock = ssl_context.wrap_socket(self.sock)
            except BaseException:
                self.sock.close()
                raise
        self.addr = '127.0.0.1:%d' % self.sock.getsockname()[1]
        self._buf = b''
        if auth:
            self.command('AUTH', *auth)

    def close(self):
        self.sock.close()

    def command(self, *args):
        self.sock.sendall(_resp_command(*args))
        reply = self._reply()
        if isinstance(reply, RedisError):
            raise reply
        return reply

    def _line(self):
        while b'\r\n' not in self._buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError('Redis closed the connection')
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b'\r\n')
        return line

    def _exact(self, n):
        while len(self._buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError('Redis closed the connection')
            self._buf += chunk
        data, self._buf = self._buf[:n], self._buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b'+':
            return rest.decode('utf-8', 'replace')
        if kind == b'-':
            return RedisError(rest.decode('utf-8', 'replace'))
        if kind == b':':
            return int(rest)
        if kind == b'$':
            n = int(rest)
            return None if n < 0 else self._exact(n).decode('utf-8', 'replace')
        if kind == b'*':
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise OSError('unexpected RESP reply %r' % line)


OPENSSL = os.environ.get('SLUICE_OPENSSL') or shutil.which('openssl') or '/usr/bin/openssl'


class TlsCerts:
    """A fresh set of certificates in a temporary directory, made with the `openssl` command (EC P-256 keys, valid
    for two days from now). Every name below is the path of a PEM file:

      ca, ca_key                        the CA ("Sluice e2e CA")
      server, server_key                CN=localhost, SAN DNS:localhost, IP:127.0.0.1, serverAuth; signed by the CA
      wrong, wrong_key                  CN=wrong.example, SAN DNS:wrong.example, serverAuth; signed by the CA
      client, client_key                CN=sluice-client, clientAuth; signed by the CA
      other_ca, other_ca_key            a second CA, unrelated to the first
      other_client, other_client_key    CN=sluice-client, clientAuth; signed by the second CA

    redis_tls() makes the `tls` argument of RedisServer. A context manager; close() removes the directory.
    """

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix='sluice-e2e-certs-')
        self._serial = 0x5100
        try:
            self.ca, self.ca_key = self._ca('ca', 'Sluice e2e CA')
            self.server, self.server_key = self._leaf('server', 'localhost', 'DNS:localhost,IP:127.0.0.1',
                                                      'serverAuth')
            self.wrong, self.wrong_key = self._leaf('wrong', 'wrong.example', 'DNS:wrong.example', 'serverAuth')
            self.client, self.client_key = self._leaf('client', 'sluice-client', None, 'clientAuth')
            self.other_ca, self.other_ca_key = self._ca('other-ca', 'Sluice e2e other CA')
            self.other_client, self.other_client_key = self._leaf('other-client', 'sluice-client', None, 'clientAuth',
                                                                  ca=(self.other_ca, self.other_ca_key))
        except BaseException:
            self.close()
            raise

    def path(self, name):
        return os.path.join(self.dir, name)

    def _openssl(self, *args):
        r = subprocess.run([OPENSSL] + list(args), cwd=self.dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30, env=base_env())
        if r.returncode != 0:
            raise AssertionError('openssl %s failed (%d): %s' % (' '.join(args), r.returncode,
                                                                r.stdout.decode('utf-8', 'replace')))

    def _ca(self, name, cn):
        crt, key = self.path(name + '.crt'), self.path(name + '.key')
        self._openssl('req', '-x509', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
                      '-keyout', key, '-out', crt, '-days', '2', '-subj', '/CN=' + cn,
                      '-addext', 'basicConstraints=critical,CA:TRUE',
                      '-addext', 'keyUsage=critical,keyCertSign,cRLSign')
        return crt, key

    def rsa_leaf(self, name, cn, san):
        """A leaf as Envoy Gateway makes them: RSA-2048, the key in PKCS#1 PEM, no extended key usage (so one
        certificate serves as a server's and as a client's), signed by the CA. -> (cert path, key path)."""
        return self._leaf(name, cn, san, None, rsa=True)

    def _leaf(self, name, cn, san, usage, ca=None, rsa=False):
        ca_crt, ca_key = ca or (self.ca, self.ca_key)
        crt, key, csr, ext = (self.path(name + x) for x in ('.crt', '.key', '.csr', '.ext'))
        if rsa:
            self._openssl('genrsa', '-traditional', '-out', key, '2048')
            self._openssl('req', '-new', '-key', key, '-out', csr, '-subj', '/CN=' + cn)
        else:
            self._openssl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
                          '-keyout', key, '-out', csr, '-subj', '/CN=' + cn)
        with open(ext, 'w') as f:
            f.write('basicConstraints=CA:FALSE\n')
            f.write('keyUsage=critical,digitalSignature,keyEncipherment\n' if rsa else
                    'keyUsage=critical,digitalSignature\n')
            if usage:
                f.write('extendedKeyUsage=%s\n' % usage)
            if san:
                f.write('subjectAltName=%s\n' % san)
        self._serial += 1
        self._openssl('x509', '-req', '-in', csr, '-CA', ca_crt, '-CAkey', ca_key, '-set_serial', str(self._serial),
                      '-days', '2', '-extfile', ext, '-out', crt)
        os.remove(csr)
        os.remove(ext)
        return crt, key

    def redis_tls(self, server='server', auth_clients='no'):
        """RedisServer's `tls` argument: redis-server presents `server` ('server' or 'wrong'), trusts the CA for
        client certificates and requires one when auth_clients='yes'; the harness' own connections present the
        client certificate."""
        return {'cert': getattr(self, server), 'key': getattr(self, server + '_key'), 'ca': self.ca,
                'auth_clients': auth_clients, 'client_cert': self.client, 'client_key': self.client_key}

    def close(self):
        remove_tmp(self.dir)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class ServerProcess:
    """What the servers the tests start (redis-server, sentinels, memcached, dnsmasq) share: a temporary directory
    (`tmp`) with the log (`log_name`, written through `_log`), the process (`proc`), the harness' own connection
    (`_client`, or None), and being killed and cleaned up whatever happens."""

    log_name = 'redis.log'

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def _drop_client(self):
        if self._client is not None:
            self._client.close()
            self._client = None

    def kill(self):
        """SIGKILL, as a crash: connections are reset, nothing is saved."""
        self._drop_client()
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.kill()
        rc = reap(self.proc)
        self.proc = None
        return rc

    def close(self):
        try:
            self.kill()
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None
            remove_tmp(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def log(self):
        try:
            with open(os.path.join(self.tmp, self.log_name), 'rb') as f:
                return f.read().decode('utf-8', 'replace')
        except OSError:
            return ''


class RedisServer(ServerProcess):
    """A redis-server of its own on 127.0.0.1 (a free port unless `port` is given), without persistence.

    unix=True:        also listens on a unix socket (`unix_path`, permissions 700).
    requirepass:      the default user's password.
    user=(name, pw):  an ACL user with every permission (`--user name on >pw ~* &* +@all`); cli() logs in as it.
    tls=dict(cert=, key=, ca=, auth_clients='no'|'yes', client_cert=, client_key=) (TlsCerts.redis_tls() makes
                      one): TLS only, on `port` (`--port 0 --tls-port <port>`, the server certificate and key, the CA
                      that client certificates must chain to, `--tls-auth-clients`). The harness' own connections
                      (ping, command, monitor, cli) verify the server's chain against `ca` but not its name, and
                      present client_cert/client_key when given.
    Killed when the tests end whatever happens (registered like the servers under test).
    """

    def __init__(self, port=None, unix=False, requirepass=None, user=None, start=True, extra_args=(), tls=None):
        self.tmp = tempfile.mkdtemp(prefix='sluice-e2e-redis-')
        self.port = port or free_port()
        self.tls = dict(tls) if tls else None
        self._ssl_context = None
        self.unix_path = os.path.join(self.tmp, 'redis.sock') if unix else None
        self.requirepass = requirepass
        self.user = tuple(user) if user else None
        self.extra_args = list(extra_args)
        self.proc = None
        self._log = None
        self._paused = False
        self._client = None
        self.harness_addrs = set()  # the harness' own connections (MONITOR leaves them out)
        if start:
            try:
                self.start()
            except BaseException:
                self.close()
                raise

    # -- process ------------------------------------------------------------------------------------------------

    def args(self):
        if self.tls:
            a = [REDIS_SERVER, '--port', '0', '--tls-port', str(self.port),
                 '--tls-cert-file', self.tls['cert'], '--tls-key-file', self.tls['key'],
                 '--tls-ca-cert-file', self.tls['ca'], '--tls-auth-clients', self.tls.get('auth_clients', 'no')]
        else:
            a = [REDIS_SERVER, '--port', str(self.port)]
        a += ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
              '--daemonize', 'no', '--dir', self.tmp, '--logfile', '', '--protected-mode', 'no']
        if self.unix_path:
            a += ['--unixsocket', self.unix_path, '--unixsocketperm', '700']
        if self.requirepass is not None:
            a += ['--requirepass', self.requirepass]
        if self.user:
            a += ['--user', self.user[0], 'on', '>' + self.user[1], '~*', '&*', '+@all']
        return a + self.extra_args

    def start(self, timeout=10.0):
        if self.running():
            raise AssertionError('redis-server is already running')
        if self._log is None:
            self._log = open(os.path.join(self.tmp, 'redis.log'), 'a+b')
        self.proc = spawn(self.args(), base_env(), self._log, subprocess.STDOUT)
        self._paused = False
        deadline = time.monotonic() + timeout
        while not self.ping():
            if self.proc.poll() is not None:
                rc = reap(self.proc)
                self.proc = None
                raise AssertionError('redis-server exited with code %d; log:\n%s' % (rc, self.log()))
            if time.monotonic() > deadline:
                raise AssertionError('redis-server did not answer PING within %ss; log:\n%s' % (timeout, self.log()))
            time.sleep(0.02)
        return self

    def ssl_context(self):
        """The harness' own TLS client settings (None without TLS): the server's chain is verified against the CA,
        its name is not; the client certificate is presented when there is one."""
        if not self.tls:
            return None
        if self._ssl_context is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(self.tls['ca'])
            if self.tls.get('client_cert'):
                ctx.load_cert_chain(self.tls['client_cert'], self.tls.get('client_key'))
            self._ssl_context = ctx
        return self._ssl_context

    def connect(self, timeout=5.0):
        """A connected socket to the server (a TLS socket, handshake done, when the server is TLS-only)."""
        sock = socket.create_connection(('127.0.0.1', self.port), timeout=timeout)
        if self.tls:
            try:
                sock = self.ssl_context().wrap_socket(sock)
            except BaseException:
                sock.close()
                raise
        return sock

    def ping(self):
        """True when something answers a RESP PING on the port (an auth error counts: the server is up)."""
        try:
            with self.connect(timeout=1.0) as s:
                s.sendall(_resp_command('PING'))
                reply = s.recv(256)
                return reply[:1] in (b'+', b'-')
        except OSError:
            return False

    def kill(self):
        rc = super().kill()
        self._paused = False
        return rc

    def stop(self, timeout=10.0):
        """SIGTERM (redis-server shuts down cleanly; nothing is saved: --save '')."""
        self._drop_client()
        if self.proc is None:
            return None
        if self._paused:
            self.resume()
        if self.proc.poll() is None:
            self.proc.terminate()
        rc = reap(self.proc, timeout)
        self.proc = None
        return rc

    def restart(self, timeout=10.0):
        """Kills the server if it runs and starts a new one on the same port (and socket path). Data is lost."""
        self.kill()
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.start(timeout=max(1.0, deadline - time.monotonic()))
            except AssertionError:
                # the port may still be held for a moment after the kill
                if time.monotonic() > deadline or 'in use' not in self.log():
                    raise
                time.sleep(0.1)

    def pause(self):
        """SIGSTOP: connections stay open but nothing is answered."""
        self.proc.send_signal(signal.SIGSTOP)
        self._paused = True

    def resume(self):
        if self.proc is not None and self._paused:
            self.proc.send_signal(signal.SIGCONT)
        self._paused = False

    # -- settings for sluice ------------------------------------------------------------------------------------

    def address(self, host='127.0.0.1'):
        return '%s:%d' % (host, self.port)

    def auth(self):
        if self.user:
            return '%s:%s' % self.user
        return self.requirepass

    def sluice_env(self, prefix='REDIS_', unix=False, host='127.0.0.1'):
        """The REDIS_* (or REDIS_PERSECOND_*) settings that point sluice at this server (at `host`:port over TCP);
        with <prefix>TLS=true when the server is TLS-only. The TLS files (REDIS_TLS_CACERT, ...) are the test's."""
        env = {prefix + 'SOCKET_TYPE': 'unix' if unix else 'tcp',
               prefix + 'URL': self.unix_path if unix else self.address(host)}
        if self.auth():
            env[prefix + 'AUTH'] = self.auth()
        if self.tls and not unix:
            env[prefix + 'TLS'] = 'true'
        return env

    # -- client -------------------------------------------------------------------------------------------------

    def cli_args(self):
        a = [REDIS_CLI, '-h', '127.0.0.1', '-p', str(self.port), '--no-auth-warning', '-e']
        if self.user:
            a += ['--user', self.user[0], '--pass', self.user[1]]
        elif self.requirepass is not None:
            a += ['-a', self.requirepass]
        if self.tls:
            a += ['--tls', '--cacert', self.tls['ca']]
            if self.tls.get('client_cert'):
                a += ['--cert', self.tls['client_cert'], '--key', self.tls['client_key']]
        return a

    def cli(self, *args, check=True, timeout=10.0):
        """redis-cli <args> with the right credentials -> its output without the final newline (raw form: an
        integer reply is its digits, a nil reply is an empty string)."""
        r = subprocess.run(self.cli_args() + [str(a) for a in args], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, env=base_env())
        out = r.stdout.decode('utf-8', 'replace')
        if check and r.returncode != 0:
            raise AssertionError('redis-cli %s failed (%d): %s %s' % (' '.join(map(str, args)), r.returncode, out,
                                                                     r.stderr.decode('utf-8', 'replace')))
        return out[:-1] if out.endswith('\n') else out

    def command(self, *args):
        """One command on the harness' own connection (made again after a restart) -> the reply: str, int, None
        or a list; an error reply raises RedisError."""
        for attempt in range(2):
            if self._client is None:
                auth = self.user if self.user else ((self.requirepass,) if self.requirepass is not None else None)
                self._client = RespClient(self.port, auth, ssl_context=self.ssl_context())
                self.harness_addrs.add(self._client.addr)
            try:
                return self._client.command(*args)
            except OSError:
                self._client.close()
                self._client = None
                if attempt:
                    raise

    def get(self, key):
        """GET key -> str, or None when the key does not exist."""
        return self.command('GET', key)

    def keys(self, pattern='*'):
        return sorted(self.command('KEYS', pattern))

    def pttl(self, key):
        return self.command('PTTL', key)

    def info(self, section):
        """INFO <section> -> {name: value text}."""
        out = {}
        for line in self.command('INFO', section).splitlines():
            line = line.strip()
            if not line or line.startswith('#') or ':' not in line:
                continue
            k, _, v = line.partition(':')
            out[k] = v
        return out

    def command_calls(self):
        """INFO commandstats -> {'incrby': calls, ...} (lower-case command names; absent = never called). Counts the
        harness' own commands too (get() is a GET)."""
        calls = {}
        for k, v in self.info('commandstats').items():
            if k.startswith('cmdstat_'):
                fields = dict(f.split('=', 1) for f in v.split(',') if '=' in f)
                calls[k[len('cmdstat_'):]] = int(fields.get('calls', 0))
        return calls

    def reset(self):
        """FLUSHALL + CONFIG RESETSTAT: no keys, command statistics at zero."""
        self.command('FLUSHALL')
        self.command('CONFIG', 'RESETSTAT')

    def clients(self):
        """CLIENT LIST -> one dict per connection, the harness' own and MONITORs left out."""
        out = []
        for line in self.command('CLIENT', 'LIST').splitlines():
            fields = dict(f.split('=', 1) for f in line.split(' ') if '=' in f)
            if fields.get('addr') not in self.harness_addrs and 'O' not in fields.get('flags', ''):
                out.append(fields)
        return out

    def monitor(self):
        return RedisMonitor(self)


class RedisMonitor:
    """MONITOR on its own connection: every command the server executes (except the harness' own), as a list of
    strings, in order. A context manager; commands() returns what was seen so far."""

    def __init__(self, redis):
        self.redis = redis
        self._lines = []
        self._lock = threading.Lock()
        self._sock = redis.connect(timeout=5.0)
        redis.harness_addrs.add('127.0.0.1:%d' % self._sock.getsockname()[1])
        if redis.user:
            self._sock.sendall(_resp_command('AUTH', redis.user[0], redis.user[1]))
            self._expect_ok()
        elif redis.requirepass is not None:
            self._sock.sendall(_resp_command('AUTH', redis.requirepass))
            self._expect_ok()
        self._buf = b''
        self._sock.sendall(_resp_command('MONITOR'))
        self._expect_ok()
        self._sock.settimeout(None)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _expect_ok(self):
        data = b''
        while b'\r\n' not in data:
            chunk = self._sock.recv(4096)
            if not chunk:
                raise AssertionError('MONITOR connection closed: %r' % data)
            data += chunk
        line, _, rest = data.partition(b'\r\n')
        if line != b'+OK':
            raise AssertionError('MONITOR set-up failed: %r' % line)
        self._buf = rest

    def _read(self):
        buf = self._buf
        while True:
            while b'\r\n' in buf:
                line, _, buf = buf.partition(b'\r\n')
                text = line.decode('utf-8', 'replace')
                if text.startswith('+'):
                    # +1700000000.123456 [0 127.0.0.1:54321] "INCRBY" "key" "1"
                    head, _, rest = text.partition('] ')
                    client = head.rpartition(' ')[2]
                    if client in self.redis.harness_addrs:
                        continue
                    args = [_unrepr(m) for m in _MONITOR_ARG_RE.findall(rest)]
                    with self._lock:
                        self._lines.append(args)
            try:
                chunk = self._sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk

    def commands(self, names=None):
        """Commands seen so far; `names` (upper-case) keeps only those commands."""
        with self._lock:
            got = list(self._lines)
        if names is not None:
            got = [c for c in got if c and c[0].upper() in names]
        return got

    def clear(self):
        with self._lock:
            self._lines.clear()

    def wait_for(self, count, names=None, timeout=5.0):
        """Polls until at least `count` commands (of `names`) were seen; returns them."""
        wait_until(lambda: len(self.commands(names)) >= count, timeout=timeout,
                   message='%d commands %s on MONITOR' % (count, sorted(names) if names else ''),
                   describe=lambda: repr(self.commands(names)))
        return self.commands(names)

    def close(self):
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def main():
    """unittest.main() for a test module run as a script; exits non-zero on failure."""
    unittest.main(module='__main__', verbosity=int(os.environ.get('SLUICE_E2E_VERBOSITY', '1')))


# ---------------------------------------------------------------------------------------------------------------
# Redis Sentinel: a master, a replica and sentinels watching them

REDIS_SENTINEL = os.environ.get('SLUICE_REDIS_SENTINEL') or shutil.which('redis-sentinel')


class RedisSentinel(ServerProcess):
    """One sentinel (`redis-sentinel <conf>`, or `redis-server <conf> --sentinel` when Debian's redis-sentinel is
    not installed) on 127.0.0.1:`port`, with its config file in a temporary directory (the sentinel rewrites it).
    `config` is the text written after port/bind/dir. Killed when the tests end whatever happens."""

    log_name = 'sentinel.log'

    def __init__(self, port, config, password=None):
        self.port = port
        self.password = password
        self.tmp = tempfile.mkdtemp(prefix='sluice-e2e-sentinel-')
        self.conf = os.path.join(self.tmp, 'sentinel.conf')
        with open(self.conf, 'w') as f:
            f.write('port %d\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\nlogfile ""\ndir %s\n%s'
                    % (port, self.tmp, config))
        self.proc = None
        self._log = None
        self._client = None

    def args(self):
        if REDIS_SENTINEL:
            return [REDIS_SENTINEL, self.conf]
        return [REDIS_SERVER, self.conf, '--sentinel']

    def start(self, timeout=10.0):
        if self._log is None:
            self._log = open(os.path.join(self.tmp, 'sentinel.log'), 'a+b')
        self.proc = spawn(self.args(), base_env(), self._log, subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.command('PING') == 'PONG':
                    return self
            except (OSError, RedisError):
                self._drop_client()
            if self.proc.poll() is not None:
                rc = reap(self.proc)
                self.proc = None
                raise AssertionError('redis sentinel exited with code %d; log:\n%s' % (rc, self.log()))
            if time.monotonic() > deadline:
                raise AssertionError('redis sentinel did not answer PING within %ss; log:\n%s' % (timeout, self.log()))
            time.sleep(0.02)

    def command(self, *args):
        """One command on the harness' own connection -> the reply; an error reply raises RedisError."""
        for attempt in range(2):
            if self._client is None:
                self._client = RespClient(self.port, (self.password,) if self.password else None, timeout=3.0)
            try:
                return self._client.command(*args)
            except OSError:
                self._drop_client()
                if attempt:
                    raise

    def address(self):
        return '127.0.0.1:%d' % self.port

    def master_addr(self, name):
        """SENTINEL get-master-addr-by-name -> 'host:port', or None when the sentinel does not know `name`."""
        reply = self.command('SENTINEL', 'get-master-addr-by-name', name)
        return '%s:%s' % tuple(reply) if reply else None

    def peers(self, kind, name):
        """SENTINEL replicas|sentinels <name> -> one dict per instance."""
        return [dict(zip(r[0::2], r[1::2])) for r in self.command('SENTINEL', kind, name)]


class SentinelSetup:
    """A master RedisServer, one replica (`--replicaof` the master) and `count` sentinels monitoring them as
    `name` (quorum 2, down-after-milliseconds 1000, failover-timeout 5000, resolve-hostnames no). Each sentinel is
    told about the replica and the other sentinels in its config file (known-replica, known-sentinel), so it is
    ready at once; __init__ still waits until every sentinel reports the master and sees the replica and the other
    sentinels as up.

    sentinel_password: the sentinels' requirepass (and sentinel-pass, for talking to each other).
    master_password:   requirepass of both Redis servers (masterauth too, and the sentinels' auth-pass).
    A context manager; close() stops everything (sentinels first).
    """

    def __init__(self, count=3, name='mymaster', sentinel_password=None, master_password=None):
        self.name = name
        self.sentinel_password = sentinel_password
        self.master_password = master_password
        self.sentinels = []
        self.servers = []
        try:
            # no 5 s wait before the full sync of a (new) replica
            auth = ['--repl-diskless-sync-delay', '0'] + (['--masterauth', master_password] if master_password else [])
            self.master = RedisServer(requirepass=master_password, extra_args=auth)
            self.servers.append(self.master)
            self.replica = RedisServer(requirepass=master_password,
                                       extra_args=auth + ['--replicaof', '127.0.0.1', str(self.master.port)])
            self.servers.append(self.replica)
            wait_until(lambda: self.replica.info('replication').get('master_link_status') == 'up', timeout=10,
                       message='the replica in sync with the master', describe=self.replica.log)
            ports = free_ports(count)
            ids = [os.urandom(20).hex() for _ in ports]
            for port, myid in zip(ports, ids):
                conf = ['sentinel myid %s' % myid,
                        'sentinel resolve-hostnames no',
                        'sentinel monitor %s 127.0.0.1 %d 2' % (name, self.master.port),
                        'sentinel down-after-milliseconds %s 1000' % name,
                        'sentinel failover-timeout %s 5000' % name,
                        'sentinel known-replica %s 127.0.0.1 %d' % (name, self.replica.port)]
                conf += ['sentinel known-sentinel %s 127.0.0.1 %d %s' % (name, p, i)
                         for p, i in zip(ports, ids) if p != port]
                if master_password:
                    conf.append('sentinel auth-pass %s %s' % (name, master_password))
                if sentinel_password:
                    conf += ['requirepass %s' % sentinel_password, 'sentinel sentinel-pass %s' % sentinel_password]
                self.sentinels.append(RedisSentinel(port, '\n'.join(conf) + '\n', sentinel_password))
            for s in self.sentinels:
                s.start()
            self.wait_ready()
        except BaseException:
            self.close()
            raise

    def _healthy(self, peer):
        flags = set(peer.get('flags', '').split(','))
        return not flags & {'s_down', 'o_down', 'disconnected'}

    def wait_ready(self, timeout=20.0):
        """Every sentinel reports the master and sees the replica and the other sentinels as up."""
        want = self.master.address()

        def ready(s):
            return (s.master_addr(self.name) == want
                    and [r.get('port') for r in s.peers('replicas', self.name) if self._healthy(r)]
                    == [str(self.replica.port)]
                    and len([p for p in s.peers('sentinels', self.name) if self._healthy(p)])
                    == len(self.sentinels) - 1)

        wait_until(lambda: all(ready(s) for s in self.sentinels), timeout=timeout,
                   message='every sentinel ready (master %s, replica, %d peers)' % (want, len(self.sentinels) - 1),
                   describe=self.describe)

    def describe(self):
        out = []
        for s in self.sentinels:
            try:
                out.append('sentinel %d: master %r, replicas %r, sentinels %r'
                           % (s.port, s.master_addr(self.name), s.peers('replicas', self.name),
                              s.peers('sentinels', self.name)))
            except (OSError, RedisError) as e:
                out.append('sentinel %d: %r' % (s.port, e))
            out.append('\n'.join(s.log().splitlines()[-15:]))
        return '\n'.join(out)

    def server(self, address):
        """The RedisServer at 'host:port' (one of master and replica)."""
        for r in self.servers:
            if r.address() == address:
                return r
        raise AssertionError('no Redis of the setup at %s' % address)

    def role(self, redis):
        try:
            return redis.command('ROLE')[0]
        except (OSError, RedisError):
            return None

    def wait_failover(self, old, timeout=20.0):
        """Waits until every running sentinel names a master other than `old` (a RedisServer) and that server says
        it is a master. -> the new master's RedisServer."""

        def switched():
            addrs = {s.master_addr(self.name) for s in self.sentinels if s.running()}
            if len(addrs) != 1 or old.address() in addrs:
                return None
            new = self.server(addrs.pop())
            return new if self.role(new) == 'master' else None

        return wait_until(switched, timeout=timeout, interval=0.1, message='the sentinels to fail %s over'
                          % old.address(), describe=self.describe)

    def sluice_env(self, sentinels=None, name=None, sentinel_auth=None, auth=None):
        """REDIS_TYPE=sentinel, REDIS_URL=<name>,<sentinel>,... (every sentinel of the setup unless `sentinels`, a
        list of 'host:port', is given), REDIS_SENTINEL_AUTH and REDIS_AUTH from the setup's passwords unless
        given."""
        urls = sentinels if sentinels is not None else [s.address() for s in self.sentinels]
        env = {'REDIS_TYPE': 'sentinel', 'REDIS_URL': ','.join([name or self.name] + list(urls))}
        sentinel_auth = sentinel_auth if sentinel_auth is not None else self.sentinel_password
        auth = auth if auth is not None else self.master_password
        if sentinel_auth:
            env['REDIS_SENTINEL_AUTH'] = sentinel_auth
        if auth:
            env['REDIS_AUTH'] = auth
        return env

    def close(self):
        for s in self.sentinels:
            s.close()
        for r in self.servers:
            r.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# ---------------------------------------------------------------------------------------------------------------
# Redis Cluster: masters sharing the 16384 hash slots

CLUSTER_SLOTS = 16384


def _crc16_table():
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return table


_CRC16 = _crc16_table()


def key_slot(key):
    """The hash slot of `key` computed locally (CRC16/XMODEM mod 16384, hash tags honoured), as CLUSTER KEYSLOT
    answers: for searching many keys without asking Redis."""
    data = key.encode('utf-8') if isinstance(key, str) else key
    start = data.find(b'{')
    if start >= 0:
        end = data.find(b'}', start + 1)
        if end > start + 1:
            data = data[start + 1:end]
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[((crc >> 8) ^ b) & 0xFF]
    return crc % CLUSTER_SLOTS


def free_cluster_ports(n):
    """n distinct free loopback ports below 55536 whose cluster bus port (port + 10000) is free too."""
    out = []
    for _ in range(500):
        if len(out) == n:
            return out
        p = free_port()
        if p > 65535 - 10000 or p in out or p + 10000 in out or p - 10000 in out:
            continue
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(('127.0.0.1', p + 10000))
        except OSError:
            continue
        finally:
            s.close()
        out.append(p)
    raise AssertionError('could not find %d free ports with free cluster bus ports' % n)


class ClusterSetup:
    """`masters` RedisServers in cluster mode (--cluster-enabled yes, each with its nodes.conf in its own temporary
    directory, --cluster-node-timeout `node_timeout` ms, --cluster-require-full-coverage no so the other masters keep
    serving their slots while one is down), joined with `redis-cli --cluster create ... --cluster-replicas 0`;
    __init__ waits until every node says cluster_state:ok and all agree on who owns every slot.
    `nodes` are the RedisServers, in port order of creation (redis-cli gives the first one slots 0-5460, ...).
    A context manager; close() stops everything."""

    def __init__(self, masters=3, node_timeout=2000):
        self.nodes = []
        self.replicas = []  # added by add_replica(); not in `nodes` (they own no slots), stopped by close()
        self.node_timeout = node_timeout
        self._ids = {}
        try:
            for port in free_cluster_ports(masters):
                r = RedisServer(port=port, start=False)
                self.nodes.append(r)
                r.extra_args += ['--cluster-enabled', 'yes',
                                 '--cluster-config-file', os.path.join(r.tmp, 'nodes.conf'),
                                 '--cluster-node-timeout', str(node_timeout),
                                 '--cluster-require-full-coverage', 'no']
                r.start()
            out = subprocess.run([REDIS_CLI, '--cluster', 'create'] + [r.address() for r in self.nodes]
                                 + ['--cluster-replicas', '0', '--cluster-yes'],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 timeout=60, env=base_env())
            if out.returncode != 0:
                raise AssertionError('redis-cli --cluster create failed (%d): %s'
                                     % (out.returncode, out.stdout.decode('utf-8', 'replace')))
            self.wait_ready()
        except BaseException:
            self.close()
            raise

    # -- state --------------------------------------------------------------------------------------------------

    def running(self):
        return [r for r in self.nodes if r.running()]

    def node_id(self, redis):
        """CLUSTER MYID of one node (remembered: it survives restarts, it is in nodes.conf)."""
        if redis.port not in self._ids:
            self._ids[redis.port] = redis.command('CLUSTER', 'MYID')
        return self._ids[redis.port]

    def server(self, address):
        """The RedisServer at 'host:port' (a master, or a replica added with add_replica())."""
        for r in self.nodes + self.replicas:
            if r.address() == address:
                return r
        raise AssertionError('no node of the cluster at %s' % address)

    def slot_map(self, redis=None):
        """CLUSTER SLOTS as one node (the first running one unless `redis`) sees it -> sorted list of
        (first slot, last slot, 'host:port' of the master)."""
        redis = redis or self.running()[0]
        return sorted((int(r[0]), int(r[1]), '%s:%s' % (r[2][0], r[2][1])) for r in redis.command('CLUSTER', 'SLOTS'))

    def slot(self, key):
        """CLUSTER KEYSLOT key."""
        return int(self.running()[0].command('CLUSTER', 'KEYSLOT', key))

    def owner_of_slot(self, slot, redis=None):
        for first, last, address in self.slot_map(redis):
            if first <= slot <= last:
                return self.server(address)
        raise AssertionError('slot %d is not served (slot map %r)' % (slot, self.slot_map(redis)))

    def owner(self, key):
        """The RedisServer (master) that owns the slot of `key`."""
        return self.owner_of_slot(self.slot(key))

    def get(self, redis, key):
        """GET key on that node, after ASKING (so a node importing the key's slot answers too). None when absent;
        RedisError (-MOVED) when the node neither owns nor imports the slot."""
        redis.command('ASKING')
        return redis.command('GET', key)

    def pttl(self, redis, key):
        redis.command('ASKING')
        return redis.command('PTTL', key)

    def command_stats(self, redis):
        """INFO commandstats of one node -> {'incrby': (calls, rejected_calls), ...}; a command redirected with
        -MOVED or -ASK counts as rejected, not as a call."""
        out = {}
        for k, v in redis.info('commandstats').items():
            if k.startswith('cmdstat_'):
                fields = dict(f.split('=', 1) for f in v.split(',') if '=' in f)
                out[k[len('cmdstat_'):]] = (int(fields.get('calls', 0)), int(fields.get('rejected_calls', 0)))
        return out

    def cluster_info(self, redis):
        return dict(line.split(':', 1) for line in redis.command('CLUSTER', 'INFO').splitlines() if ':' in line)

    def wait_ready(self, timeout=30.0):
        """Every running node says cluster_state:ok, knows an owner for every slot, and they all agree."""

        def ready():
            maps = []
            for r in self.running():
                if self.cluster_info(r).get('cluster_state') != 'ok':
                    return False
                m = self.slot_map(r)
                if sum(last - first + 1 for first, last, _ in m) != CLUSTER_SLOTS:
                    return False
                maps.append(m)
            return all(m == maps[0] for m in maps)

        wait_until(ready, timeout=timeout, interval=0.1, message='the cluster ready on every node',
                   describe=self.describe)

    def describe(self):
        out = []
        for r in self.nodes:
            if not r.running():
                out.append('node %d: not running' % r.port)
                continue
            try:
                out.append('node %d: %s; slots %r' % (r.port, self.cluster_info(r).get('cluster_state'),
                                                      self.slot_map(r)))
                out.append(r.command('CLUSTER', 'NODES'))
            except (OSError, RedisError) as e:
                out.append('node %d: %r' % (r.port, e))
        return '\n'.join(out)

    # -- changes ------------------------------------------------------------------------------------------------

    def begin_migration(self, slot, target):
        """Moves the keys of `slot` to `target` (a RedisServer) the way redis-cli --cluster reshard does, but stops
        before the slot changes owner: target IMPORTING, source MIGRATING, every key MIGRATEd. From now on the
        source answers -ASK for keys it no longer has. -> the source RedisServer."""
        source = self.owner_of_slot(slot)
        if source is target:
            raise AssertionError('slot %d is already on %s' % (slot, target.address()))
        target.command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', self.node_id(source))
        source.command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', self.node_id(target))
        while True:
            keys = source.command('CLUSTER', 'GETKEYSINSLOT', slot, 100)
            if not keys:
                return source
            source.command('MIGRATE', '127.0.0.1', target.port, '', 0, 5000, 'KEYS', *keys)

    def finish_migration(self, slot, target):
        """CLUSTER SETSLOT <slot> NODE <target> on the target, then on every other running node; waits until they
        all agree."""
        target_id = self.node_id(target)
        for r in [target] + [n for n in self.running() if n is not target]:
            r.command('CLUSTER', 'SETSLOT', slot, 'NODE', target_id)
        wait_until(lambda: all(self.owner_of_slot(slot, r) is target for r in self.running()), timeout=10.0,
                   message='every node to name %s as the owner of slot %d' % (target.address(), slot),
                   describe=self.describe)

    def move_slot(self, slot, target):
        """begin_migration + finish_migration. -> the former owner."""
        source = self.begin_migration(slot, target)
        self.finish_migration(slot, target)
        return source

    # -- settings for sluice ------------------------------------------------------------------------------------

    def sluice_env(self, seeds=None):
        """REDIS_TYPE=cluster, REDIS_SOCKET_TYPE=tcp, REDIS_URL=<seeds> ('host:port' list; by default the first
        node only: sluice must discover the others from its slot map)."""
        return {'REDIS_TYPE': 'cluster', 'REDIS_SOCKET_TYPE': 'tcp',
                'REDIS_URL': ','.join(seeds if seeds is not None else [self.nodes[0].address()])}

    def add_replica(self, master, timeout=30.0):
        """A new RedisServer with the same cluster settings, joined to the cluster (CLUSTER MEET) as a replica of
        `master` (CLUSTER REPLICATE); waits until its replication link is up, its master counts it, every running
        master lists it as a replica of `master`, and it says cluster_state:ok. Registered in `replicas` (close()
        stops it). -> the RedisServer."""
        r = RedisServer(port=free_cluster_ports(1)[0], start=False)
        self.replicas.append(r)
        r.extra_args += ['--cluster-enabled', 'yes',
                         '--cluster-config-file', os.path.join(r.tmp, 'nodes.conf'),
                         '--cluster-node-timeout', str(self.node_timeout),
                         '--cluster-require-full-coverage', 'no']
        r.start()
        master_id = self.node_id(master)
        replica_id = self.node_id(r)
        r.command('CLUSTER', 'MEET', '127.0.0.1', master.port)
        wait_until(lambda: master_id in r.command('CLUSTER', 'NODES'), timeout=timeout, interval=0.1,
                   message='the new node to know its master %s' % master.address(), describe=self.describe)
        r.command('CLUSTER', 'REPLICATE', master_id)

        def replicating():
            if r.info('replication').get('master_link_status') != 'up':
                return False
            if int(master.info('replication').get('connected_slaves', 0)) < 1:
                return False
            for m in self.running():
                line = next((l for l in m.command('CLUSTER', 'NODES').splitlines() if l.startswith(replica_id)),
                            None)
                if line is None or line.split()[3] != master_id or 'slave' not in line.split()[2]:
                    return False
            return self.cluster_info(r).get('cluster_state') == 'ok'

        wait_until(replicating, timeout=timeout, interval=0.1,
                   message='%s to replicate %s, every master agreeing' % (r.address(), master.address()),
                   describe=lambda: '%s\n%s' % (self.describe(), r.command('CLUSTER', 'NODES')))
        return r

    def role(self, redis):
        """INFO replication role of one node: 'master' or 'slave'."""
        return redis.info('replication').get('role')

    def close(self):
        for r in self.nodes + self.replicas:
            r.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
