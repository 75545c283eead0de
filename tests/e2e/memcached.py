"""Real memcached and dnsmasq servers for the memcache backend's end-to-end tests (test_memcache.py).

MemcachedServer: a memcached of its own on 127.0.0.1 (a free port unless `port` is given), optionally TLS only,
with a text-protocol connection of the harness' own to read counters and their expiry back (`mg`) and to list
what memcached holds (`lru_crawler metadump`).
Dnsmasq: a DNS server on a free loopback port that answers SRV records (`--srv-host`) and nothing else.
Both are killed when the tests end, whatever happens (harness.spawn).
"""

import os
import pwd
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.parse

import harness

MEMCACHED = shutil.which('memcached') or '/usr/bin/memcached'
DNSMASQ = shutil.which('dnsmasq') or '/usr/sbin/dnsmasq'


class MemcachedServer(harness.ServerProcess):
    """tls=dict(cert=, key=, ca=, verify='none'|'require', client_cert=, client_key=): TLS only on `port`, with the
    server certificate and key; with verify='require' a client must present a certificate that chains to `ca`.
    The harness' own connection then verifies the server's chain against `ca` (not its name) and presents
    client_cert/client_key."""

    log_name = 'memcached.log'

    def __init__(self, port=None, tls=None, start=True):
        self.tmp = tempfile.mkdtemp(prefix='sluice-e2e-memcached-')
        self.port = port or harness.free_port()
        self.tls = dict(tls) if tls else None
        self.proc = None
        self._log = None
        self._client = None
        self._buffer = b''
        if start:
            try:
                self.start()
            except BaseException:
                self.close()
                raise

    def args(self):
        a = [MEMCACHED, '-l', '127.0.0.1', '-p', str(self.port), '-U', '0', '-m', '64', '-t', '2', '-c', '4096']
        if os.getuid() == 0:
            a += ['-u', pwd.getpwuid(0).pw_name]  # memcached refuses to run as root without -u
        if self.tls:
            verify = {'none': 0, 'require': 2}[self.tls.get('verify', 'none')]
            a += ['-Z', '-o', 'ssl_chain_cert=%s,ssl_key=%s,ssl_ca_cert=%s,ssl_verify_mode=%d' %
                  (self.tls['cert'], self.tls['key'], self.tls['ca'], verify)]
        return a

    def start(self, timeout=10.0):
        if self._log is None:
            self._log = open(os.path.join(self.tmp, self.log_name), 'a+b')
        self.proc = harness.spawn(self.args(), harness.base_env(), self._log, subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.command('version')
                return self
            except OSError:
                self._drop_client()
            if self.proc.poll() is not None:
                rc = harness.reap(self.proc)
                self.proc = None
                raise AssertionError('memcached exited with code %d; log:\n%s' % (rc, self.log()))
            if time.monotonic() > deadline:
                raise AssertionError('memcached did not answer within %ss; log:\n%s' % (timeout, self.log()))
            time.sleep(0.02)

    # -- the harness' own connection ----------------------------------------------------------------------------

    def _connect(self):
        sock = socket.create_connection(('127.0.0.1', self.port), timeout=5.0)
        if self.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.load_verify_locations(self.tls['ca'])
            if self.tls.get('client_cert'):
                ctx.load_cert_chain(self.tls['client_cert'], self.tls['client_key'])
            sock = ctx.wrap_socket(sock)
        return sock

    def _drop_client(self):
        super()._drop_client()
        self._buffer = b''

    def _line(self):
        while b'\r\n' not in self._buffer:
            chunk = self._client.recv(65536)
            if not chunk:
                raise OSError('memcached closed the connection')
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b'\r\n', 1)
        return line.decode('utf-8', 'replace')

    def command(self, text, until=None):
        """Sends one command line; returns its reply lines (up to and including a line in `until`, or one line)."""
        if self._client is None:
            self._client = self._connect()
        self._client.sendall(text.encode() + b'\r\n')
        lines = [self._line()]
        while until and lines[-1] not in until:
            lines.append(self._line())
        return lines

    def counter(self, key):
        """(value, seconds left to live) of a key, or None when memcached does not hold it."""
        reply = self.command('mg %s v t' % key)
        if reply[0] == 'EN':
            return None
        head = reply[0].split()
        if head[0] != 'VA':
            raise AssertionError('unexpected mg reply %r' % reply)
        value = self._line()
        ttl = next(int(f[1:]) for f in head[2:] if f.startswith('t'))
        return int(value), ttl

    def keys(self):
        """Every key memcached holds, with its absolute expiry time (-1: never), from lru_crawler metadump. The
        crawler now and then skips a walk (an empty dump although mg finds keys): wait_until a dump shows what
        is expected rather than trusting one dump."""
        if self._client is None:
            self._client = self._connect()
        self._client.sendall(b'lru_crawler metadump all\r\n')
        # One key a line, ended by "\n" alone; the dump itself by "END\r\n".
        while not (self._buffer == b'END\r\n' or self._buffer.endswith(b'\nEND\r\n')):
            chunk = self._client.recv(65536)
            if not chunk:
                raise OSError('memcached closed the connection')
            self._buffer += chunk
        text, self._buffer = self._buffer[:-len(b'END\r\n')].decode(), b''
        out = {}
        for line in text.splitlines():
            fields = dict(f.split('=', 1) for f in line.split())
            out[urllib.parse.unquote(fields['key'])] = int(fields['exp'])
        return out

    def stats(self):
        """`stats` as a dict of integers (the numeric fields)."""
        out = {}
        for line in self.command('stats', until=('END',))[:-1]:
            _, name, value = line.split(' ', 2)
            if value.lstrip('-').isdigit():
                out[name] = int(value)
        return out

    def set(self, key, value, exptime=0):
        data = str(value)
        reply = self.command('set %s 0 %d %d\r\n%s' % (key, exptime, len(data), data))
        if reply != ['STORED']:
            raise AssertionError('set %s: %r' % (key, reply))

    def flush(self):
        self.command('flush_all')


class Dnsmasq(harness.ServerProcess):
    """dnsmasq answering only the given SRV records: srv = [(name, target, port), ...]. restart(srv) changes them
    (same port)."""

    log_name = 'dnsmasq.log'

    def __init__(self, srv):
        self.tmp = tempfile.mkdtemp(prefix='sluice-e2e-dnsmasq-')
        self.port = harness.free_port()
        self.proc = None
        self._client = None
        self._log = open(os.path.join(self.tmp, self.log_name), 'a+b')
        try:
            self.start(srv)
        except BaseException:
            self.close()
            raise

    @property
    def address(self):
        return '127.0.0.1:%d' % self.port

    def start(self, srv):
        args = [DNSMASQ, '--keep-in-foreground', '--no-daemon', '--conf-file=/dev/null', '--no-resolv', '--no-hosts',
                '--listen-address=127.0.0.1', '--bind-interfaces', '--port=%d' % self.port,
                '--user=' + pwd.getpwuid(os.getuid()).pw_name,
                '--pid-file=' + os.path.join(self.tmp, 'dnsmasq.pid')]
        args += ['--srv-host=%s,%s,%d' % record for record in srv]
        self.proc = harness.spawn(args, harness.base_env(), self._log, subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not self._answers():
            if self.proc.poll() is not None:
                raise AssertionError('dnsmasq exited with code %d; log:\n%s' % (self.kill(), self.log()))
            if time.monotonic() > deadline:
                raise AssertionError('dnsmasq did not answer; log:\n' + self.log())
            time.sleep(0.05)

    def _answers(self):
        # A query for the root's NS: any answer (even REFUSED) shows dnsmasq is listening.
        query = b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x01'
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(0.2)
            try:
                s.sendto(query, ('127.0.0.1', self.port))
                return s.recv(512)[:2] == b'\x12\x34'
            except OSError:
                return False

    def restart(self, srv):
        self.kill()
        self.start(srv)
