"""OpenTelemetry collectors for the tracing tests: OTLP receivers of their own, in this process (threads), on
127.0.0.1, that record what an exporter sends them.

HttpCollector: OTLP/HTTP, a POST of an ExportTraceServiceRequest (protobuf, `Content-Encoding: gzip` allowed) to
               `path` (default /v1/traces), answered 200 with an empty ExportTraceServiceResponse; any other path
               404, another method 405, a body that does not decode 400.
GrpcCollector: OTLP/gRPC, opentelemetry.proto.collector.trace.v1.TraceService/Export over grpcio (no generated
               stubs: a generic handler with the messages generated from proto/, as xds_server.py does).

Both take `port` (a free one unless given), `tls` ({'cert', 'key'} paths: TLS only, with that certificate) and
record every request as an Export (`exports`), answered or refused; fail() makes them refuse the next ones (an
HTTP status, a gRPC code) for the fault tests. spans() flattens the spans of the accepted exports into Span
objects (ids in hex, attributes as Python values, the resource's attributes), wait_for_spans() polls them.
"""

import gzip
import http.server
import ssl
import sys
import threading
import time
import zlib
from concurrent import futures

import grpc

import harness  # noqa: F401  (puts the generated modules on sys.path)
import otlp_trace_pb2  # noqa: E402
import otlp_trace_service_pb2  # noqa: E402

SERVICE = 'opentelemetry.proto.collector.trace.v1.TraceService'
GRPC_PATH = '/%s/Export' % SERVICE
HTTP_PATH = '/v1/traces'
PROTOBUF = 'application/x-protobuf'

KINDS = {v: k[len('SPAN_KIND_'):] for k, v in otlp_trace_pb2.Span.SpanKind.items()}  # 2 -> 'SERVER'
STATUS_CODES = {v: k[len('STATUS_CODE_'):] for k, v in otlp_trace_pb2.Status.StatusCode.items()}  # 2 -> 'ERROR'


def any_value(v):
    """An OTLP AnyValue as a Python value: str, bool, int, float, bytes, list, dict; None when unset."""
    which = v.WhichOneof('value')
    if which is None:
        return None
    if which == 'array_value':
        return [any_value(x) for x in v.array_value.values]
    if which == 'kvlist_value':
        return attributes(v.kvlist_value.values)
    return getattr(v, which)


def attributes(key_values):
    """Repeated KeyValue -> dict (a repeated key keeps its last value)."""
    return {kv.key: any_value(kv.value) for kv in key_values}


class Export:
    """One request a collector received.

    transport:  'http' or 'grpc'
    path:       the HTTP path, or the gRPC method path
    method:     the HTTP method ('POST' for gRPC)
    headers:    HTTP headers or gRPC metadata, lower-case names (a repeated name keeps its last value)
    gzip:       the body came gzip-compressed: Content-Encoding: gzip (HTTP). gRPC: grpc-encoding: gzip in the
                metadata, but grpcio (1.51) takes grpc-encoding and grpc-accept-encoding out of what it shows the
                handler and decompresses the message itself, so this stays False there
    request:    the decoded ExportTraceServiceRequest (None when the body did not decode)
    status:     what was answered: the HTTP status (int), or the gRPC code's name ('OK', 'UNAVAILABLE', ...)
    accepted:   answered 200 / OK
    error:      why the body was refused ('' when it was not)
    at:         time.monotonic() when it arrived
    """

    def __init__(self, transport, path, method, headers, gzip_used, request, status, error=''):
        self.transport = transport
        self.path = path
        self.method = method
        self.headers = headers
        self.gzip = gzip_used
        self.request = request
        self.status = status
        self.accepted = status in (200, 'OK')
        self.error = error
        self.at = time.monotonic()

    def spans(self):
        return [] if self.request is None else list(flatten(self.request, self))

    def __repr__(self):
        return 'Export(%s %s %s, status=%r, gzip=%r, spans=%d%s)' % (
            self.transport, self.method, self.path, self.status, self.gzip, len(self.spans()),
            ', error=%r' % self.error if self.error else '')


class Span:
    """One span as received, with plain values.

    name, kind ('SERVER', 'INTERNAL', ...), trace_id, span_id, parent_span_id (lower-case hex; '' when there is
    no parent), trace_state, flags, start, end (Unix ns), attributes (dict of Python values), status (code name
    'UNSET' | 'OK' | 'ERROR', message), resource (the ResourceSpans' attributes), scope (its name), export (the
    Export it came in), proto (the Span message).
    """

    def __init__(self, span, resource, scope, export):
        self.name = span.name
        self.kind = KINDS.get(span.kind, str(span.kind))
        self.trace_id = span.trace_id.hex()
        self.span_id = span.span_id.hex()
        self.parent_span_id = span.parent_span_id.hex()
        self.trace_state = span.trace_state
        self.flags = span.flags
        self.start = span.start_time_unix_nano
        self.end = span.end_time_unix_nano
        self.attributes = attributes(span.attributes)
        self.status = (STATUS_CODES.get(span.status.code, str(span.status.code)), span.status.message)
        self.resource = resource
        self.scope = scope
        self.export = export
        self.proto = span

    def __repr__(self):
        return 'Span(%r %s trace=%s span=%s parent=%s %r)' % (self.name, self.kind, self.trace_id, self.span_id,
                                                            self.parent_span_id or '-', self.attributes)


def flatten(request, export=None):
    """The spans of one ExportTraceServiceRequest, in order."""
    for rs in request.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                yield Span(span, resource, ss.scope.name, export)


class _Collector:
    """What both collectors share: the record of exports, the fault switch, the span queries."""

    transport = None

    def __init__(self, port, tls):
        self.port = port or harness.free_port()
        self.tls = dict(tls) if tls else None
        self.exports = []
        self.errors = []  # connection-level failures (a TLS handshake the client gave up): their text
        self._lock = threading.Lock()
        self._faults = []  # answers for the next requests, consumed in order
        self._fault_forever = None
        self.delay = 0.0  # seconds to wait before answering each request (a slow collector)

    # -- what the tests do --------------------------------------------------------------------------------------

    def fail(self, answer, count=1):
        """Answers the next `count` requests with `answer` (an HTTP status for HttpCollector, a grpc.StatusCode
        for GrpcCollector) instead of accepting them; count=None: every request until succeed()."""
        with self._lock:
            if count is None:
                self._fault_forever = answer
            else:
                self._faults.extend([answer] * count)

    def succeed(self):
        """Accepts every request again."""
        with self._lock:
            self._faults.clear()
            self._fault_forever = None

    def clear(self):
        """Forgets what was received so far."""
        with self._lock:
            self.exports.clear()
            self.errors.clear()

    def accepted(self):
        """The exports answered 200 / OK."""
        with self._lock:
            return [e for e in self.exports if e.accepted]

    def refused(self):
        """The exports answered otherwise (a fault, a bad path or body)."""
        with self._lock:
            return [e for e in self.exports if not e.accepted]

    def spans(self, predicate=None, include_refused=False):
        """The spans of the accepted exports (of every export with include_refused), in arrival order; those for
        which predicate(span) holds when given."""
        with self._lock:
            exports = list(self.exports)
        out = []
        for e in exports:
            if e.accepted or include_refused:
                out.extend(s for s in e.spans() if predicate is None or predicate(s))
        return out

    def trace(self, trace_id):
        """The accepted spans of one trace (hex id)."""
        return self.spans(lambda s: s.trace_id == trace_id)

    def wait_for_spans(self, predicate=None, count=1, timeout=10.0, message=None):
        """Polls until at least `count` accepted spans match `predicate` (any span when None). -> those spans."""

        def matching():
            found = self.spans(predicate)
            return found if len(found) >= count else None

        return harness.wait_until(matching, timeout=timeout, interval=0.05,
                                  message=message or '%d spans at the collector' % count,
                                  describe=self.describe)

    def wait_for_exports(self, count=1, timeout=10.0, accepted_only=False):
        """Polls until `count` exports (accepted ones with accepted_only) were received. -> them."""

        def received():
            with self._lock:
                got = [e for e in self.exports if e.accepted or not accepted_only]
            return got if len(got) >= count else None

        return harness.wait_until(received, timeout=timeout, message='%d exports at the collector' % count,
                                  describe=self.describe)

    def settle(self, quiet=0.5, timeout=10.0):
        """Waits until nothing arrived for `quiet` seconds, counted from the call or the last export (at most
        `timeout`). -> the number of exports."""
        called = time.monotonic()
        deadline = called + timeout
        while True:
            with self._lock:
                n = len(self.exports)
                last = max(self.exports[-1].at if self.exports else 0.0, called)
            now = time.monotonic()
            if now - last >= quiet or now >= deadline:
                return n
            time.sleep(min(quiet - (now - last), max(deadline - now, 0.01)))

    def describe(self):
        with self._lock:
            exports = list(self.exports)
            errors = list(self.errors)
        lines = ['collector (%s, port %d): %d exports, %d connection errors' % (self.transport, self.port,
                                                                                 len(exports), len(errors))]
        lines += ['  %r' % e for e in exports[-10:]]
        lines += ['  spans of the last ones:'] + ['    %r' % s for e in exports[-3:] for s in e.spans()[:20]]
        lines += ['  error: %s' % e for e in errors[-5:]]
        return '\n'.join(lines)

    def stop(self):
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- shared by the servers ----------------------------------------------------------------------------------

    def _next_answer(self):
        with self._lock:
            if self._faults:
                return self._faults.pop(0)
            return self._fault_forever

    def _record(self, export):
        with self._lock:
            self.exports.append(export)

    def _record_error(self, text):
        with self._lock:
            self.errors.append(text)


# ---------------------------------------------------------------------------------------------------------------
# OTLP/HTTP


class _HttpHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'  # keep-alive, as exporters use it

    def log_message(self, *args):
        pass

    def _answer(self, status, body=b'', content_type=PROTOBUF):
        self.send_response(status)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        if 'chunked' in self.headers.get('Transfer-Encoding', '').lower():
            data = b''
            while True:
                size = int(self.rfile.readline().split(b';')[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b'\r\n', b'\n', b''):  # trailers
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get('Content-Length') or 0))

    def _handle(self, method):
        collector = self.server.collector
        headers = {k.lower(): v for k, v in self.headers.items()}
        body = self._body()
        encoding = headers.get('content-encoding', '').strip().lower()
        request, status, error = None, 200, ''
        try:
            if encoding == 'gzip':
                body = gzip.decompress(body)
            elif encoding == 'deflate':
                body = zlib.decompress(body)
            elif encoding not in ('', 'identity'):
                raise ValueError('unknown Content-Encoding %r' % encoding)
            request = otlp_trace_service_pb2.ExportTraceServiceRequest.FromString(body)
        except Exception as e:  # noqa: BLE001  (anything a bad body raises)
            status, error = 400, 'undecodable body: %r' % e
        if method != 'POST':
            status, error = 405, 'method %s' % method
        elif self.path != collector.path:
            status, error = 404, 'path %s' % self.path
        elif status == 200:
            fault = collector._next_answer()
            if fault is not None:
                status, error = fault, 'fault injected'
        if collector.delay:
            time.sleep(collector.delay)
        collector._record(Export('http', self.path, method, headers, encoding == 'gzip', request, status, error))
        if status == 200:
            self._answer(200, otlp_trace_service_pb2.ExportTraceServiceResponse().SerializeToString())
        else:
            self._answer(status, error.encode(), 'text/plain')

    def do_POST(self):
        self._handle('POST')

    def do_PUT(self):
        self._handle('PUT')

    def do_GET(self):
        self._handle('GET')


class _HttpServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that went away, or a TLS handshake it refused: recorded, not printed.
        self.collector._record_error('%s: %r' % (client_address, sys.exc_info()[1]))


class HttpCollector(_Collector):
    """OTLP/HTTP on 127.0.0.1:`port`. tls: {'cert', 'key'} (PEM paths): HTTPS only. `endpoint` is the base URL
    (OTEL_EXPORTER_OTLP_ENDPOINT: https://localhost:<port> with TLS, so the name matches the test certificate),
    `url` the full one (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)."""

    transport = 'http'

    def __init__(self, port=None, tls=None, path=HTTP_PATH):
        super().__init__(port, tls)
        self.path = path
        self._server = _HttpServer(('127.0.0.1', self.port), _HttpHandler)
        self._server.collector = self
        if self.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.tls['cert'], self.tls['key'])
            # The handshake happens in the connection's thread (first read), not in the accepting one.
            self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True,
                                                  do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={'poll_interval': 0.05},
                                        daemon=True)
        self._thread.start()

    @property
    def endpoint(self):
        return ('https://localhost:%d' if self.tls else 'http://127.0.0.1:%d') % self.port

    @property
    def url(self):
        return self.endpoint + self.path

    def fail(self, answer=503, count=1):
        super().fail(answer, count)

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(5)
            self._server = None


# ---------------------------------------------------------------------------------------------------------------
# OTLP/gRPC


class GrpcCollector(_Collector):
    """OTLP/gRPC on 127.0.0.1:`port`. tls: {'cert', 'key'} (PEM paths): TLS only. `endpoint` is what
    OTEL_EXPORTER_OTLP_ENDPOINT takes (http://127.0.0.1:<port>, or https://localhost:<port> with TLS), `address`
    the bare host:port."""

    transport = 'grpc'

    def __init__(self, port=None, tls=None):
        super().__init__(port, tls)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        handler = grpc.unary_unary_rpc_method_handler(
            self._export, request_deserializer=otlp_trace_service_pb2.ExportTraceServiceRequest.FromString,
            response_serializer=otlp_trace_service_pb2.ExportTraceServiceResponse.SerializeToString)
        self._server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {'Export': handler})])
        address = '127.0.0.1:%d' % self.port
        if self.tls:
            def read(path):
                with open(path, 'rb') as f:
                    return f.read()
            credentials = grpc.ssl_server_credentials([(read(self.tls['key']), read(self.tls['cert']))])
            bound = self._server.add_secure_port(address, credentials)
        else:
            bound = self._server.add_insecure_port(address)
        if bound != self.port:
            raise AssertionError('the OTLP/gRPC collector could not bind %s' % address)
        self._server.start()

    @property
    def endpoint(self):
        return ('https://localhost:%d' if self.tls else 'http://127.0.0.1:%d') % self.port

    @property
    def address(self):
        return '127.0.0.1:%d' % self.port

    def fail(self, answer=grpc.StatusCode.UNAVAILABLE, count=1):
        super().fail(answer, count)

    def _export(self, request, context):
        headers = {k.lower(): v for k, v in context.invocation_metadata()}
        fault = self._next_answer()
        if self.delay:
            time.sleep(self.delay)
        status = fault.name if fault is not None else 'OK'
        self._record(Export('grpc', GRPC_PATH, 'POST', headers, headers.get('grpc-encoding', '') == 'gzip', request,
                            status, 'fault injected' if fault is not None else ''))
        if fault is not None:
            context.abort(fault, 'fault injected by the test collector')
        return otlp_trace_service_pb2.ExportTraceServiceResponse()

    def stop(self):
        if self._server is not None:
            self._server.stop(0).wait(5)
            self._server = None


def collector(protocol='http', **kwargs):
    """An HttpCollector ('http') or a GrpcCollector ('grpc')."""
    return {'http': HttpCollector, 'grpc': GrpcCollector}[protocol](**kwargs)
