"""Hostile HTTP/2 clients against the gRPC port (issues 11 and 12), with raw frames written by hand: HTTP/2
Rapid Reset (CVE-2023-44487), a CONTINUATION flood (CVE-2024-28182), SETTINGS and PING floods. The server must shut such a connection
down, keep its memory bounded, go on serving everyone else and still stop at once on SIGTERM."""

import socket
import struct
import time
import unittest

from harness import Sluice, closed_by_server, read_until_closed, rss_kb

RULES = """
domain: h
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000}
"""

PREFACE = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'
HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, CONTINUATION = 0x1, 0x3, 0x4, 0x6, 0x7, 0x9
END_STREAM, END_HEADERS = 0x1, 0x4


def frame(kind, flags, stream, payload=b''):
    return struct.pack('>I', len(payload))[1:] + bytes([kind, flags]) + struct.pack('>I', stream) + payload


def literal(name, value):
    """An HPACK literal header field without indexing, no Huffman (names and values under 127 bytes)."""
    return b'\x00' + bytes([len(name)]) + name + bytes([len(value)]) + value


REQUEST_BLOCK = b''.join(literal(n, v) for n, v in [
    (b':method', b'POST'), (b':scheme', b'http'), (b':authority', b'x'),
    (b':path', b'/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit'),
    (b'content-type', b'application/grpc')])


def goaway_seen(data):
    """Whether the frames in `data` (what the server sent) include a GOAWAY."""
    goaway, i = False, 0
    while i + 9 <= len(data):
        length = int.from_bytes(data[i:i + 3], 'big')
        goaway = goaway or data[i + 3] == GOAWAY
        i += 9 + length
    return goaway


class HostileClients(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Sluice(rules={'h.yaml': RULES})

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def still_serving(self):
        self.assertEqual(self.s.grpc('h', [[('k', 'v')]]).overall_code, 1)  # OK
        self.assertEqual(self.s.healthcheck()[0], 200)

    def test_rapid_reset(self):
        """Streams opened and reset at once, 20,000 of them: past nghttp2's reset budget (1,000, then 33/s) the
        server sends GOAWAY and closes; memory stays flat and everyone else is served."""
        before = rss_kb(self.s.proc.pid)
        sock = socket.create_connection(('127.0.0.1', self.s.grpc_port))
        burst = bytearray(PREFACE + frame(SETTINGS, 0, 0))
        for n in range(20000):
            stream = 2 * n + 1
            burst += frame(HEADERS, END_HEADERS, stream, REQUEST_BLOCK) + frame(RST_STREAM, 0, stream, b'\x00\x00\x00\x08')
        try:
            sock.sendall(burst)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed by the server before it had read everything: what is wanted
        goaway = goaway_seen(read_until_closed(sock, 5))
        sock.close()
        self.assertTrue(goaway, 'the server should say GOAWAY before closing')
        self.still_serving()
        self.assertLess(rss_kb(self.s.proc.pid) - before, 50 * 1024, 'RSS grew by more than 50 MB')

    def test_unfinished_requests(self):
        """64 calls that each send 1 MB of a 4 MB message and never finish: the server gives the connection's
        flow-control window back only for finished requests, so after ~16 MB the client must stop (this one
        ignores flow control, so it is disconnected with FLOW_CONTROL_ERROR) and the server's memory does not
        follow what it tries to send."""
        before = rss_kb(self.s.proc.pid)
        sock = socket.create_connection(('127.0.0.1', self.s.grpc_port))
        sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
        sock.settimeout(3)
        sent = 0
        chunk = b'\0' * 16384
        try:
            for n in range(64):
                stream = 2 * n + 1
                head = b'\x00' + struct.pack('>I', 4 * 1024 * 1024)  # the gRPC prefix of a 4 MB message
                sock.sendall(frame(HEADERS, END_HEADERS, stream, REQUEST_BLOCK) + frame(0, 0, stream, head))
                for _ in range(64):  # 1 MB of DATA, no END_STREAM
                    sock.sendall(frame(0, 0, stream, chunk))
                    sent += len(chunk)
        except (socket.timeout, ConnectionResetError, BrokenPipeError):
            pass  # held back by flow control, or disconnected for sending past the window
        time.sleep(0.5)
        grown_mb = (rss_kb(self.s.proc.pid) - before) / 1024
        sock.close()
        self.assertLess(sent, 40 * 1024 * 1024, 'the client was never held back')
        # the ~16 MB window, and room for a sanitizer build's overhead
        self.assertLess(grown_mb, 64, 'RSS grew by %.0f MB' % grown_mb)
        self.still_serving()

    def test_continuation_flood(self):
        """One HEADERS frame followed by endless CONTINUATION frames: the connection is closed after a few."""
        sock = socket.create_connection(('127.0.0.1', self.s.grpc_port))
        flood = bytearray(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, 0, 1, REQUEST_BLOCK))
        for _ in range(10000):
            flood += frame(CONTINUATION, 0, 1, literal(b'x-pad', b'y' * 100))
        try:
            sock.sendall(flood)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = read_until_closed(sock, 5)
        sock.close()
        self.assertLess(len(data), 1024 * 1024)
        self.still_serving()

    def flood_without_reading(self, one_frame, count):
        """Sends `count` copies of a frame that the server must acknowledge, never reading the answers. nghttp2
        queues at most 1,000 acknowledgements: past that the connection is dropped, so the server's memory
        does not follow the flood. -> (RSS growth in MB, whether the server closed the connection)."""
        before = rss_kb(self.s.proc.pid)
        sock = socket.create_connection(('127.0.0.1', self.s.grpc_port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the answers back up at once
        sock.settimeout(5)
        closed = False
        try:
            sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
            for _ in range(count // 1000):
                sock.sendall(one_frame * 1000)
        except (socket.timeout, ConnectionResetError, BrokenPipeError):
            closed = True
        grown_mb = (rss_kb(self.s.proc.pid) - before) / 1024
        if not closed:  # all sent: the server must still end the connection
            closed = closed_by_server(sock, 5)
        sock.close()
        return grown_mb, closed

    def test_settings_flood(self):
        """1,000,000 SETTINGS frames, their ACKs never read."""
        grown_mb, closed = self.flood_without_reading(frame(SETTINGS, 0, 0, b'\x00\x04\x00\x01\x00\x00'), 1000000)
        self.assertTrue(closed)
        self.assertLess(grown_mb, 20, 'RSS grew by %.0f MB' % grown_mb)
        self.still_serving()

    def test_ping_flood(self):
        """1,000,000 PINGs, their ACKs never read."""
        grown_mb, closed = self.flood_without_reading(frame(PING, 0, 0, b'12345678'), 1000000)
        self.assertTrue(closed)
        self.assertLess(grown_mb, 20, 'RSS grew by %.0f MB' % grown_mb)
        self.still_serving()

    def test_stop_after_abuse(self):
        """After hostile connections, SIGTERM still ends the process quickly."""
        s = Sluice(rules={'h.yaml': RULES}, env={'SHUTDOWN_GRACE_PERIOD': '2s'})
        socks = []
        try:
            for _ in range(3):
                sock = socket.create_connection(('127.0.0.1', s.grpc_port))
                # the stream stays open (no END_STREAM, no body): a call that never completes
                sock.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_HEADERS, 1, REQUEST_BLOCK))
                socks.append(sock)
            start = time.monotonic()
            s.terminate()
            self.assertEqual(s.wait_exit(timeout=10), 0)
            # the grace period (2 s) bounds the wait for the calls that never complete
            self.assertLess(time.monotonic() - start, 5)
        finally:
            for sock in socks:
                sock.close()
            s.close()


if __name__ == '__main__':
    unittest.main()
