"""A TCP proxy on 127.0.0.1 that adds a one-way delay to every byte, in order, either way: a wide-area link between
regions (Redis replication, remote reads). `connect_delay` holds each new connection that long before it reaches
the target (a server slow to answer its handshake). cut() drops its connections and refuses new ones (a
partition); heal() lets them through again."""

import socket
import threading
import time
from collections import deque


class DelayProxy:
    def __init__(self, target_port, delay, connect_delay=0.0):
        self.target_port, self.delay, self.connect_delay = target_port, delay, connect_delay
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(('127.0.0.1', 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.sockets = set()
        self.cut_off = False
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def retarget(self, port):
        """New connections go to `port` (a Redis that took over)."""
        self.target_port = port

    def cut(self):
        with self.lock:
            self.cut_off = True
            sockets, self.sockets = self.sockets, set()
        for s in sockets:
            _close(s)

    def heal(self):
        with self.lock:
            self.cut_off = False

    def close(self):
        self.closed = True
        self.cut()
        _close(self.listener)

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        time.sleep(self.connect_delay)
        with self.lock:
            refused = self.cut_off
        if refused:
            _close(client)
            return
        try:
            upstream = socket.create_connection(('127.0.0.1', self.target_port), timeout=5)
            upstream.settimeout(None)
        except OSError:
            _close(client)
            return
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.lock:
            self.sockets.update((client, upstream))
        self._pipe(client, upstream)
        self._pipe(upstream, client)

    def _pipe(self, source, sink):
        chunks = deque()
        ready = threading.Condition()

        def read():
            try:
                while True:
                    data = source.recv(65536)
                    if not data:
                        break
                    with ready:
                        chunks.append((time.monotonic() + self.delay, data))
                        ready.notify()
            except OSError:
                pass
            with ready:
                chunks.append((None, b''))
                ready.notify()

        def write():
            try:
                while True:
                    with ready:
                        while not chunks:
                            ready.wait()
                        due, data = chunks.popleft()
                    if due is None:
                        break
                    wait = due - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    sink.sendall(data)
            except OSError:
                pass
            _close(source)
            _close(sink)

        threading.Thread(target=read, daemon=True).start()
        threading.Thread(target=write, daemon=True).start()


def _close(s):
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
