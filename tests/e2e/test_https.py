"""HTTPS on the HTTP listener (HTTP_SERVER_TLS_CERT / HTTP_SERVER_TLS_KEY; issue 5): requests over TLS, plain
HTTP refused, certificates reloaded when their files change, bad settings refused at start-up."""

import json
import os
import shutil
import socket
import ssl
import time
import unittest

import harness
from harness import Sluice, TlsCerts

RULES = """
domain: tls
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 100}
"""


def https(port, ca, path='/healthcheck', body=None, timeout=5.0):
    """-> (status, body text, the server certificate's subject CN)."""
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(('127.0.0.1', port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname='localhost') as s:
            cn = dict(x[0] for x in s.getpeercert()['subject'])['commonName']
            data = body.encode() if body is not None else b''
            method = 'POST' if body is not None else 'GET'
            s.sendall(('%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\nConnection: close\r\n\r\n'
                       % (method, path, len(data))).encode() + data)
            response = b''
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                response += chunk
    head, _, text = response.partition(b'\r\n\r\n')
    return int(head.split()[1]), text.decode(), cn


class Https(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = TlsCerts()
        cls.dir = os.path.join(cls.certs.dir, 'serving')
        os.mkdir(cls.dir)
        cls.cert, cls.key = os.path.join(cls.dir, 'cert.pem'), os.path.join(cls.dir, 'key.pem')
        shutil.copy(cls.certs.server, cls.cert)
        shutil.copy(cls.certs.server_key, cls.key)
        cls.s = Sluice(rules={'tls.yaml': RULES}, wait_ready=False,
                       env={'HTTP_SERVER_TLS_CERT': cls.cert, 'HTTP_SERVER_TLS_KEY': cls.key})
        harness.wait_until(lambda: cls.get()[0] == 200, message='HTTPS health check', describe=cls.s.log_tail)

    @classmethod
    def tearDownClass(cls):
        cls.s.close()
        cls.certs.close()

    @classmethod
    def get(cls, path='/healthcheck', body=None):
        try:
            return https(cls.s.http_port, cls.certs.ca, path, body)
        except OSError as e:
            return 0, str(e), None

    def test_decisions_over_https(self):
        body = json.dumps({'domain': 'tls', 'descriptors': [{'entries': [{'key': 'k', 'value': 'v'}]}]})
        status, text, cn = self.get('/json', body)
        self.assertEqual((status, cn), (200, 'localhost'), text)
        self.assertEqual(json.loads(text)['overallCode'], 'OK')
        self.assertEqual(self.s.decide('grpc', 'tls', [[('k', 'v')]]).statuses[0].remaining, 98)  # gRPC unchanged

    def test_plain_http_gets_no_answer(self):
        with socket.create_connection(('127.0.0.1', self.s.http_port), timeout=5) as c:
            c.sendall(b'GET /healthcheck HTTP/1.1\r\nHost: x\r\n\r\n')
            self.assertNotIn(b'200 OK', c.recv(4096))
        self.assertEqual(self.get()[0], 200)  # and the listener still serves TLS

    def test_certificate_reload(self):
        # the `wrong` certificate (CN=wrong.example) does not match "localhost": seeing the handshake fail proves
        # the new file is served; then the right one again
        shutil.copy(self.certs.wrong_key, self.key + '.new')
        shutil.copy(self.certs.wrong, self.cert + '.new')
        os.replace(self.key + '.new', self.key)
        os.replace(self.cert + '.new', self.cert)
        harness.wait_until(lambda: 'mismatch' in self.get()[1], message='the new certificate served',
                           describe=self.s.log_tail)
        self.assertIn('reloaded the HTTP server certificate', self.s.log())
        # a broken file keeps the certificate in use
        time.sleep(0.3)  # let any reload of the swap above finish
        seen = len(self.s.log())
        with open(self.cert, 'w') as f:
            f.write('not a certificate')
        harness.wait_until(lambda: 'keeping the previous certificate' in self.s.log()[seen:],
                           message='a bad file refused', describe=self.s.log_tail)
        self.assertIn('mismatch', self.get()[1])
        shutil.copy(self.certs.server_key, self.key + '.new')
        shutil.copy(self.certs.server, self.cert + '.new')
        os.replace(self.key + '.new', self.key)
        os.replace(self.cert + '.new', self.cert)
        harness.wait_until(lambda: self.get()[0] == 200, message='the right certificate again',
                           describe=self.s.log_tail)
        # Other files changing beside the certificate (a log file written there) reload and log nothing.
        time.sleep(0.3)
        seen = len(self.s.log())
        for i in range(5):
            with open(os.path.join(self.dir, 'sluice.log'), 'a') as f:
                f.write('line %d\n' % i)
            time.sleep(0.15)
        time.sleep(0.3)
        self.assertNotIn('certificate', self.s.log()[seen:])


class BadTlsSettings(unittest.TestCase):
    def test_refused_at_start_up(self):
        with TlsCerts() as certs:
            cases = [
                ({'HTTP_SERVER_TLS_CERT': certs.server}, 'HTTP_SERVER_TLS_CERT and HTTP_SERVER_TLS_KEY must be set'),
                ({'HTTP_SERVER_TLS_KEY': certs.server_key}, 'HTTP_SERVER_TLS_CERT and HTTP_SERVER_TLS_KEY must be set'),
                ({'HTTP_SERVER_TLS_CERT': '/nonexistent/cert.pem', 'HTTP_SERVER_TLS_KEY': certs.server_key},
                 "HTTP_SERVER_TLS_CERT: cannot use '/nonexistent/cert.pem'"),
                ({'HTTP_SERVER_TLS_CERT': certs.server, 'HTTP_SERVER_TLS_KEY': certs.ca},
                 'HTTP_SERVER_TLS_KEY: cannot use'),
            ]
            for env, message in cases:
                with self.subTest(env=env):
                    with Sluice(rules={'tls.yaml': RULES}, env=env, wait_ready=False) as s:
                        self.assertEqual(s.wait_exit(10), 1, s.log())
                        self.assertIn(message, s.log())


if __name__ == '__main__':
    unittest.main()
