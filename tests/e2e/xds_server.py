"""An xDS management server for the tests: envoy.service.discovery.v3.AggregatedDiscoveryService over grpcio (no
generated stubs: a generic handler with the messages generated from proto/), serving the state of the world of
RateLimitConfig resources. Every request it receives is recorded with the stream's metadata; push() sends a new
snapshot to every open stream, and each new stream gets the current one after its first request."""

import itertools
import queue
import threading
from concurrent import futures

import grpc

import harness  # noqa: F401  (puts the generated modules on sys.path)
import discovery_pb2  # noqa: E402
import rls_conf_pb2  # noqa: E402

TYPE_URL = 'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig'
METHOD = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources'


def config(name, domain, descriptors):
    """A RateLimitConfig from plain values: descriptors are dicts with key, value, unit (a name), requests,
    unlimited, shadow_mode, metadata (a dict) and descriptors (nested)."""
    c = rls_conf_pb2.RateLimitConfig(name=name, domain=domain)
    _fill(c.descriptors, descriptors)
    return c


def _fill(out, descriptors):
    for d in descriptors:
        pb = out.add(key=d['key'], value=d.get('value', ''), shadow_mode=d.get('shadow_mode', False))
        if 'unit' in d or 'requests' in d or d.get('unlimited'):
            pb.rate_limit.unit = rls_conf_pb2.RateLimitUnit.Value(d.get('unit', 'UNKNOWN'))
            pb.rate_limit.requests_per_unit = d.get('requests', 0)
            pb.rate_limit.unlimited = d.get('unlimited', False)
        if 'metadata' in d:
            pb.metadata.update(d['metadata'])
        _fill(pb.descriptors, d.get('descriptors', []))


class Stream:
    def __init__(self, number, metadata):
        self.number = number
        self.metadata = metadata
        self.outbox = queue.Queue()


class XdsServer:
    def __init__(self, port=None, tls=None, snapshot=None, host='127.0.0.1'):
        """host: the address to listen on (a container reaches the host at its bridge's gateway). tls: {'cert', 'key', 'ca' (for client certificates), 'require_client_auth'} paths and flag, or None.
        snapshot: (version, [resources]) served to each stream from the start."""
        self.port = port or harness.free_port()
        self.tls = tls
        self.requests = []  # (stream number, DiscoveryRequest)
        self.opened = []  # every stream opened: its metadata, in order
        self._open = []  # the streams open now
        self._snapshot = None
        self._nonces = itertools.count(1)
        self._lock = threading.Condition()
        if snapshot:
            self._snapshot = (snapshot[0], snapshot[1], TYPE_URL)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        handler = grpc.stream_stream_rpc_method_handler(
            self._serve, request_deserializer=discovery_pb2.DiscoveryRequest.FromString,
            response_serializer=discovery_pb2.DiscoveryResponse.SerializeToString)
        self._server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            'envoy.service.discovery.v3.AggregatedDiscoveryService', {'StreamAggregatedResources': handler})])
        address = '%s:%d' % (host, self.port)
        if tls:
            def read(path):
                with open(path, 'rb') as f:
                    return f.read()
            credentials = grpc.ssl_server_credentials(
                [(read(tls['key']), read(tls['cert']))], root_certificates=read(tls['ca']) if tls.get('ca') else None,
                require_client_auth=tls.get('require_client_auth', False))
            bound = self._server.add_secure_port(address, credentials)
        else:
            bound = self._server.add_insecure_port(address)
        if bound != self.port:
            raise AssertionError('the xDS server could not bind %s' % address)
        self._server.start()

    def stop(self):
        with self._lock:
            for s in self._open:
                s.outbox.put(None)
        self._server.stop(0).wait(5)

    # -- what the tests do --------------------------------------------------------------------------------------

    def push(self, version, resources, type_url=TYPE_URL):
        """A new state of the world for every open stream (and the next ones). resources: RateLimitConfig messages
        or ready-made Any messages. -> the nonce of the response sent on the newest stream (or of the next one)."""
        with self._lock:
            self._snapshot = (version, resources, type_url)
            nonce = None
            for s in self._open:
                nonce = self._send(s)
            return nonce

    def _send(self, stream):
        version, resources, type_url = self._snapshot
        response = discovery_pb2.DiscoveryResponse(version_info=version, type_url=type_url,
                                                   nonce='n%d' % next(self._nonces))
        for r in resources:
            if isinstance(r, rls_conf_pb2.RateLimitConfig):
                response.resources.add().Pack(r)
            else:
                response.resources.append(r)
        stream.outbox.put(response)
        return response.nonce

    def acks(self):
        """(version, nonce) of every ACK received, in order."""
        with self._lock:
            return [(r.version_info, r.response_nonce) for _, r in self.requests
                    if r.response_nonce and not r.HasField('error_detail')]

    def nacks(self):
        """(version, nonce, message) of every NACK received, in order."""
        with self._lock:
            return [(r.version_info, r.response_nonce, r.error_detail.message) for _, r in self.requests
                    if r.HasField('error_detail')]

    def wait_for_ack(self, version, timeout=10.0):
        harness.wait_until(lambda: any(v == version for v, _ in self.acks()), timeout=timeout,
                           message='an ACK of version %r' % version, describe=lambda: repr(self.requests[-5:]))

    def wait_for_nack(self, timeout=10.0, count=1):
        return harness.wait_until(lambda: len(self.nacks()) >= count and self.nacks()[count - 1], timeout=timeout,
                                  message='NACK number %d' % count, describe=lambda: repr(self.requests[-5:]))

    def wait_for_streams(self, n, timeout=10.0):
        harness.wait_until(lambda: len(self.opened) >= n, timeout=timeout, message='%d streams' % n)

    # -- the service --------------------------------------------------------------------------------------------

    def _serve(self, request_iterator, context):
        with self._lock:
            stream = Stream(len(self.opened) + 1, dict(context.invocation_metadata()))
            self.opened.append(stream.metadata)
            self._open.append(stream)

        def read():
            try:
                for request in request_iterator:
                    with self._lock:
                        first = not any(n == stream.number for n, _ in self.requests)
                        self.requests.append((stream.number, request))
                        self._lock.notify_all()
                        if first and self._snapshot:
                            self._send(stream)
            except grpc.RpcError:
                pass
            stream.outbox.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            while True:
                response = stream.outbox.get()
                if response is None or not context.is_active():
                    return
                yield response
        finally:
            with self._lock:
                self._open.remove(stream)
