"""Connection limits (issue 12): the open file limit is raised to the hard one at start-up, MAX_CONNECTIONS
caps the client connections of the HTTP and gRPC listeners together (by default what the file limit leaves
after a reserve), and a client that connects to the gRPC port but never finishes its HTTP/2 preface is
closed after 10 seconds."""

import resource
import socket
import time
import unittest

from harness import Sluice, closed_by_server, http_get, wait_until

RULES = """
domain: lim
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000}
"""


def limits_of(pid):
    """-> (soft, hard) 'Max open files' of a process, as /proc shows them."""
    with open('/proc/%d/limits' % pid) as f:
        line = next(line for line in f if line.startswith('Max open files'))
    soft, hard = line.split()[3:5]
    return soft, hard


class OpenFileLimit(unittest.TestCase):
    def test_soft_limit_raised_to_hard_and_default_cap_below_it(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard <= 256:
            self.skipTest('needs a finite hard limit above 256 (have %r)' % hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))  # the server inherits it
        try:
            s = Sluice(rules={'lim.yaml': RULES})
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        with s:
            self.assertEqual(limits_of(s.proc.pid), (str(hard), str(hard)))
            self.assertIn('Open file limit raised from 256 to %d' % hard, s.log())
            reserve = min(max(hard // 8, 32), 1024)
            self.assertIn('At most %d client connections (MAX_CONNECTIONS)' % (hard - reserve), s.log())

    def test_max_connections_above_the_file_limit_is_refused(self):
        log = Sluice.failed_start(self, {'MAX_CONNECTIONS': '4294967295'})
        self.assertRegex(log, r'MAX_CONNECTIONS=4294967295 is more than the open file limit allows: at most \d+ '
                              r'\(RLIMIT_NOFILE \d+ less \d+ descriptors kept for backends, listeners and files\)')

    def test_max_connections_not_a_number(self):
        log = Sluice.failed_start(self, {'MAX_CONNECTIONS': 'lots'})
        self.assertIn('MAX_CONNECTIONS', log)


class MaxConnections(unittest.TestCase):
    def test_connections_past_the_cap_are_closed_and_taken_again_later(self):
        with Sluice(rules={'lim.yaml': RULES}, env={'MAX_CONNECTIONS': '8', 'IO_THREADS': '2'}) as s:
            self.assertEqual(s.grpc('lim', [[('k', 'v')]]).overall_code, 1)  # one connection, kept
            wait_until(lambda: 'At most 8 client connections' in s.log(), message='cap logged')
            idle = [socket.create_connection(('127.0.0.1', port))
                    for port in [s.http_port, s.grpc_port] * 3 + [s.http_port]]  # 7 more: the cap
            # Each is served (an HTTP request on one of them proves the slots are taken, not refused).
            time.sleep(0.3)
            for c in idle:
                self.assertFalse(closed_by_server(c, 0.05))
            refused = [socket.create_connection(('127.0.0.1', port)) for port in [s.http_port, s.grpc_port] * 2]
            for c in refused:
                self.assertTrue(closed_by_server(c, 2), 'a connection past MAX_CONNECTIONS stays open')
            wait_until(lambda: 'MAX_CONNECTIONS (8) reached' in s.log(), message='cap reached logged',
                       describe=s.log_tail)
            self.assertEqual(s.log().count('MAX_CONNECTIONS (8) reached'), 1, s.log_tail())
            # The connection made before still gets its decisions at once.
            start = time.monotonic()
            self.assertEqual(s.grpc('lim', [[('k', 'v')]]).overall_code, 1)
            self.assertLess(time.monotonic() - start, 1.0)

            for c in idle + refused:
                c.close()
            wait_until(lambda: http_get(s.http_port, '/healthcheck', timeout=1)[0] == 200, timeout=5,
                       message='a new HTTP connection served', describe=s.log_tail)
            self.assertIn('Below MAX_CONNECTIONS (8) again', s.log())


class Preface(unittest.TestCase):
    def test_grpc_client_that_never_finishes_its_preface_is_closed(self):
        with Sluice(rules={'lim.yaml': RULES}) as s:
            silent = socket.create_connection(('127.0.0.1', s.grpc_port))
            trickle = socket.create_connection(('127.0.0.1', s.grpc_port))
            preface = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'
            start = time.monotonic()
            closed_at = {}
            i = 0
            while len(closed_at) < 2 and time.monotonic() - start < 15:
                if 'trickle' not in closed_at and i < len(preface):
                    try:
                        trickle.send(preface[i:i + 1])  # one byte a second: it would take 24 s
                    except OSError:
                        closed_at['trickle'] = time.monotonic() - start
                    i += 1
                for name, sock in (('silent', silent), ('trickle', trickle)):
                    if name not in closed_at and closed_by_server(sock, 0.5):
                        closed_at[name] = time.monotonic() - start
                time.sleep(0.5)
            self.assertIn('silent', closed_at)
            self.assertIn('trickle', closed_at)
            for name, t in closed_at.items():
                self.assertGreater(t, 8, name)
                self.assertLess(t, 13, name)
            # Clients that do speak are served as before.
            self.assertEqual(s.grpc('lim', [[('k', 'v')]]).overall_code, 1)


if __name__ == '__main__':
    unittest.main()
