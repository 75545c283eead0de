"""Test data planes for the Rate Limit Quota Service, behaving as the real clients do (see docs/guides/rlqs.md):

- flavor 'envoy': Envoy's rate_limit_quota filter (its global client). One stream per domain, opened by the first
  request of a bucket; `domain` in every message; a new bucket is allowed (no_assignment_behavior ALLOW_ALL) and
  reported at once alone (1/0, time_elapsed 0); every `interval` (Envoy: 5 s, fixed) every bucket is reported,
  0/0 ones included, time_elapsed in whole seconds, counters reset; applies blanket_rule and token_bucket only
  (requests_per_time_unit is skipped); keeps its token bucket when max_tokens, tokens_per_fill and the interval's
  nanos are unchanged, else starts a new one full; a TTL of whole seconds, then back to the default; actions for
  buckets it does not have are ignored; abandon_action erases the bucket; a stream the server ends is reopened at
  the next report tick, buckets and assignments kept.
- flavor 'a77': gRPC's proposal A77: `domain` only in a stream's first message; nanosecond time_elapsed; applies
  all three strategies (tokens_per_fill defaults to 1 when unset).

Requests are simulated: request() runs one request through the data plane's local decision and counts it.
"""

import queue
import threading
import time

import grpc
import rlqs_pb2

METHOD = '/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas'
UNIT_SECONDS = {1: 1, 2: 60, 3: 3600, 4: 86400, 5: 2592000, 6: 31536000}


class TokenBucket:
    """Envoy's AtomicTokenBucketImpl: continuous refill at `fill_rate` per second, starting full."""

    def __init__(self, max_tokens, fill_rate, now):
        self.max_tokens = max_tokens
        self.fill_rate = fill_rate
        self.tokens = float(max_tokens)
        self.last = now

    def consume(self, now):
        self.tokens = min(self.max_tokens, self.tokens + (now - self.last) * self.fill_rate)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class FixedWindow:
    """requests_per_time_unit as A77 applies it: a counter per window of the unit."""

    def __init__(self, limit, seconds):
        self.limit = limit
        self.seconds = seconds
        self.window = None
        self.count = 0

    def consume(self, now):
        w = int(now // self.seconds)
        if w != self.window:
            self.window, self.count = w, 0
        if self.count < self.limit:
            self.count += 1
            return True
        return False


class Bucket:
    def __init__(self, bucket_id, now):
        self.id = dict(bucket_id)
        self.allowed = 0  # since the last report
        self.denied = 0
        self.admitted_total = 0
        self.denied_total = 0
        self.strategy = None  # the RateLimitStrategy applied, None: no assignment
        self.limiter = None
        self.expires = None
        self.last_report = now


def bucket_key(bucket_id):
    return tuple(sorted(bucket_id.items()))


class DataPlane:
    def __init__(self, target, domain, flavor='envoy', interval=5.0, credentials=None, deny_without_assignment=False):
        self.target = target
        self.domain = domain
        self.flavor = flavor
        self.interval = interval
        self.credentials = credentials
        self.deny_without_assignment = deny_without_assignment
        self.lock = threading.Lock()
        self.buckets = {}
        self.actions = []  # (time, bucket_id dict, 'assign'|'abandon', strategy or None, ttl seconds)
        self.statuses = []  # (code, details) of each stream the server ended
        self.streams_opened = 0
        self._queue = None
        self._sent_domain = False
        self._stop = threading.Event()
        self._channel = None
        self._call = None
        self._timer = threading.Thread(target=self._report_loop, daemon=True)
        self._timer.start()

    # -- the request path ------------------------------------------------------------------------------------

    def request(self, bucket_id):
        """One request matching `bucket_id`: True when admitted."""
        now = time.monotonic()
        key = bucket_key(bucket_id)
        with self.lock:
            b = self.buckets.get(key)
            if b is None:
                b = self.buckets[key] = Bucket(bucket_id, now)
                admitted = not self.deny_without_assignment
                self._count(b, admitted)
                # The first request is reported at once, alone, with time_elapsed 0.
                first = self._usage(b, now, elapsed=0.0)
                self._send_locked([first])
                return admitted
            admitted = self._decide(b, now)
            self._count(b, admitted)
            return admitted

    def _decide(self, b, now):
        if b.expires is not None and now >= b.expires:
            b.strategy, b.limiter, b.expires = None, None, None
        s = b.strategy
        if s is None:
            return not self.deny_without_assignment
        which = s.WhichOneof('strategy')
        if which == 'blanket_rule':
            return s.blanket_rule == 0
        if b.limiter is not None:
            return b.limiter.consume(now)
        return not self.deny_without_assignment

    @staticmethod
    def _count(b, admitted):
        if admitted:
            b.allowed += 1
            b.admitted_total += 1
        else:
            b.denied += 1
            b.denied_total += 1

    # -- reports ---------------------------------------------------------------------------------------------

    def _usage(self, b, now, elapsed=None):
        u = rlqs_pb2.RateLimitQuotaUsageReports.BucketQuotaUsage()
        u.bucket_id.bucket.update(b.id)
        e = now - b.last_report if elapsed is None else elapsed
        if self.flavor == 'envoy':
            u.time_elapsed.seconds = int(e)
        else:
            u.time_elapsed.seconds = int(e)
            u.time_elapsed.nanos = int((e - int(e)) * 1e9)
        u.num_requests_allowed = b.allowed
        u.num_requests_denied = b.denied
        b.allowed = b.denied = 0
        b.last_report = now
        return u

    def _report_loop(self):
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            with self.lock:
                usages = [self._usage(b, now) for b in self.buckets.values()]
                if usages or self._queue is not None:
                    self._send_locked(usages)

    def _send_locked(self, usages):
        if self._queue is None:
            self._open_locked()
        msg = rlqs_pb2.RateLimitQuotaUsageReports(bucket_quota_usages=usages)
        if self.flavor == 'envoy' or not self._sent_domain:
            msg.domain = self.domain
            self._sent_domain = True
        self._queue.put(msg)

    def send_raw(self, msg):
        """Sends a message as given (bad domains, odd reports)."""
        with self.lock:
            if self._queue is None:
                self._open_locked()
            self._queue.put(msg)

    def _open_locked(self):
        if self._channel is None:
            opts = [('grpc.enable_http_proxy', 0)]
            if self.credentials is not None:
                self._channel = grpc.secure_channel(self.target, self.credentials, options=opts)
            else:
                self._channel = grpc.insecure_channel(self.target, options=opts)
        q = queue.Queue()
        self._queue = q
        self._sent_domain = False
        self.streams_opened += 1

        def requests():
            while True:
                m = q.get()
                if m is None:
                    return
                yield m

        call = self._channel.stream_stream(METHOD, request_serializer=rlqs_pb2.RateLimitQuotaUsageReports.SerializeToString,
                                           response_deserializer=rlqs_pb2.RateLimitQuotaResponse.FromString)(requests())
        self._call = call
        threading.Thread(target=self._receive, args=(call, q), daemon=True).start()

    def _receive(self, call, q):
        try:
            for response in call:
                self._apply(response)
            code, details = grpc.StatusCode.OK, ''
        except grpc.RpcError as e:
            code, details = e.code(), e.details()
        with self.lock:
            self.statuses.append((code, details))
            if self._queue is q:
                self._queue = None  # reopened at the next report tick (Envoy) or at once on the next send
        q.put(None)

    # -- actions ---------------------------------------------------------------------------------------------

    def _apply(self, response):
        now = time.monotonic()
        with self.lock:
            for action in response.bucket_action:
                bid = dict(action.bucket_id.bucket)
                b = self.buckets.get(bucket_key(bid))
                which = action.WhichOneof('bucket_action')
                if which == 'abandon_action':
                    self.actions.append((now, bid, 'abandon', None, None))
                    if b is not None:
                        del self.buckets[bucket_key(bid)]
                    continue
                qa = action.quota_assignment_action
                self.actions.append((now, bid, 'assign', qa.rate_limit_strategy, qa.assignment_time_to_live.seconds))
                if b is None:
                    continue  # Envoy ignores actions for buckets it does not have
                self._assign(b, qa, now)

    def _assign(self, b, qa, now):
        s = qa.rate_limit_strategy
        which = s.WhichOneof('strategy')
        if which is None:
            return
        if which == 'requests_per_time_unit':
            if self.flavor == 'envoy':
                return  # "not yet supported"
            per = s.requests_per_time_unit
            b.limiter = FixedWindow(per.requests_per_time_unit, UNIT_SECONDS.get(per.time_unit, 1))
        elif which == 'token_bucket':
            tb = s.token_bucket
            old = b.strategy.token_bucket if b.strategy is not None and b.strategy.WhichOneof('strategy') == 'token_bucket' else None
            same = (old is not None and old.max_tokens == tb.max_tokens
                    and old.tokens_per_fill.value == tb.tokens_per_fill.value
                    and old.fill_interval.nanos == tb.fill_interval.nanos)
            if not same or b.limiter is None:
                per_fill = tb.tokens_per_fill.value
                if self.flavor == 'a77' and not tb.HasField('tokens_per_fill'):
                    per_fill = 1
                seconds = tb.fill_interval.seconds
                rate = per_fill / seconds if seconds > 0 else float('inf')
                b.limiter = TokenBucket(tb.max_tokens, rate, now)
        else:
            b.limiter = None
        b.strategy = s
        ttl = qa.assignment_time_to_live.seconds
        b.expires = now + ttl

    # -- helpers for tests -----------------------------------------------------------------------------------

    def last_action(self, bucket_id):
        with self.lock:
            for a in reversed(self.actions):
                if a[1] == dict(bucket_id):
                    return a
        return None

    def admitted(self, bucket_id):
        with self.lock:
            b = self.buckets.get(bucket_key(bucket_id))
            return (b.admitted_total, b.denied_total) if b else (0, 0)

    def close(self):
        self._stop.set()
        with self.lock:
            if self._queue is not None:
                self._queue.put(None)
            call, self._call = self._call, None
            channel, self._channel = self._channel, None
        if call is not None:
            call.cancel()
        if channel is not None:
            channel.close()


class Load:
    """Drives `rate` requests per second (changeable while it runs) for `bucket_id` through a data plane in a
    thread, evenly spaced; counts admitted and denied requests."""

    def __init__(self, plane, bucket_id, rate):
        self.plane = plane
        self.bucket_id = bucket_id
        self.rate = rate
        self.admitted = 0
        self.denied = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        last = time.monotonic()
        owed = 0.0  # requests due and not sent yet (`rate` may change while it runs)
        while not self._stop.is_set():
            now = time.monotonic()
            owed += (now - last) * self.rate
            last = now
            while owed >= 1:
                if self.plane.request(self.bucket_id):
                    self.admitted += 1
                else:
                    self.denied += 1
                owed -= 1
            self._stop.wait(0.01)

    def snapshot(self):
        return self.admitted, self.denied

    def stop(self):
        self._stop.set()
        self._thread.join(5)
