"""A gRPC C++ client (grpc++ 1.51, tests/e2e/grpcpp_client.cpp: the client library nearest to Envoy's own)
against Sluice's HTTP/2 server: sequential calls counted exactly, 300 calls in flight at once on one channel,
health Check, an unknown method; over TCP with several workers and over the unix socket (issue 11)."""

import os
import subprocess
import tempfile
import unittest

from harness import Sluice

RULES = """
domain: cpp
descriptors:
  - key: k
    value: seq
    rate_limit: {unit: hour, requests_per_unit: 7}
  - key: k
    value: par
    rate_limit: {unit: hour, requests_per_unit: 1000}
"""


def run_client(address, sequential=10, concurrent=300):
    """-> {check name: result text} from grpcpp_client's output."""
    out = subprocess.run([os.environ['SLUICE_GRPCPP_CLIENT'], address, str(sequential), str(concurrent)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return dict(line.split(': ', 1) for line in out.splitlines() if ': ' in line)


class GrpcppClient(unittest.TestCase):
    def check(self, results):
        self.assertEqual(results['sequential'], 'ok=7 over=3 failed=0', results)
        self.assertEqual(results['concurrent'], 'ok=300 failed=0', results)
        self.assertEqual(results['health'], 'SERVING')
        # 12 = UNIMPLEMENTED
        self.assertEqual(results['unknown method'],
                         '12 unknown method Nope for service envoy.service.ratelimit.v3.RateLimitService')

    def test_tcp_with_four_workers(self):
        with Sluice(rules={'cpp.yaml': RULES}, env={'IO_THREADS': '4'}) as s:
            self.check(run_client('127.0.0.1:%d' % s.grpc_port))
            # the 300 concurrent calls were all counted: the next one sees 1000 - 301 left
            self.assertEqual(s.grpc('cpp', [[('k', 'par')]]).statuses[0].limit_remaining, 699)

    def test_unix_socket(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, 'rls.sock')
            with Sluice(rules={'cpp.yaml': RULES}, env={'GRPC_UDS': path}) as s:
                self.check(run_client('unix:' + path))


if __name__ == '__main__':
    unittest.main()
