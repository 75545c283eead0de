"""Out of file descriptors (issue 12, findings 1 and 7): idle clients take every descriptor the server may
open. Each listener says once that accepting fails (not every 50 ms), health says unhealthy while it fails
(asked on connections opened before), and once the clients go, both the HTTP and the gRPC listeners accept
again and serve, and health says healthy again."""

import http.client
import os
import resource
import socket
import time
import unittest

from harness import Sluice, grpc_health, wait_until

RULES = """
domain: fd
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000}
"""


def healthcheck(conn):
    conn.request('GET', '/healthcheck')
    resp = conn.getresponse()
    resp.read()
    return resp.status


class FdExhaustion(unittest.TestCase):
    def test_listeners_accept_again_after_exhaustion(self):
        s = Sluice(rules={'fd.yaml': RULES}, env={'IO_THREADS': '1'})
        try:
            pid = s.proc.pid
            # Opened before: they still answer when no new connection can be accepted.
            kept = http.client.HTTPConnection('127.0.0.1', s.http_port, timeout=5)
            self.assertEqual(healthcheck(kept), 200)
            self.assertEqual(grpc_health(s.grpc_port), 'SERVING')
            in_use = len(os.listdir('/proc/%d/fd' % pid))
            limit = in_use + 20
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
            clients = []
            for port in [s.http_port] * 30 + [s.grpc_port] * 30:  # more than the 20 descriptors left
                clients.append(socket.create_connection(('127.0.0.1', port)))
            # Both listeners have met the limit: each says so once, however long it lasts.
            wait_until(lambda: 'HTTP accept failed' in s.log() and 'gRPC accept failed' in s.log(),
                       timeout=5, message='both listeners failing to accept', describe=s.log_tail)
            time.sleep(0.6)  # a dozen retries at 50 ms
            self.assertEqual(s.log().count('HTTP accept failed'), 1, s.log_tail())
            self.assertEqual(s.log().count('gRPC accept failed'), 1, s.log_tail())
            self.assertEqual(healthcheck(kept), 500)
            self.assertEqual(grpc_health(s.grpc_port), 'NOT_SERVING')

            for c in clients:
                c.close()
            wait_until(lambda: 'HTTP accepts connections again' in s.log() and
                       'gRPC accepts connections again' in s.log(),
                       timeout=5, message='both listeners accepting again', describe=s.log_tail)
            # Healthy again with no new client needed to show it (once the connections the clients left in
            # the listen queues, which may meet the limit again for a moment, have been accepted and closed).
            wait_until(lambda: healthcheck(kept) == 200, timeout=5, message='healthy again', describe=s.log_tail)
            self.assertEqual(grpc_health(s.grpc_port), 'SERVING')
            self.assertEqual(s.healthcheck()[0], 200)
            self.assertEqual(s.grpc('fd', [[('k', 'v')]]).overall_code, 1)  # OK
        finally:
            s.close()


if __name__ == '__main__':
    unittest.main()
