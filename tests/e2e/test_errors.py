"""Bad requests: specific errors over /json (HTTP 4xx with a JSON body) and gRPC (INVALID_ARGUMENT, same message)."""

import json
import socket
import unittest

import grpc

import harness
from harness import Sluice

RULES = """
domain: e
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 100}
"""

server = None


def setUpModule():
    global server
    server = Sluice(rules={'e.yaml': RULES})


def tearDownModule():
    if server is not None:
        server.close()


class ErrorBodies(unittest.TestCase):
    def post(self, body):
        return harness.post_json(server.http_port, body)

    def assertError(self, status, body, want_status, message=None, prefix=None, contains=None):
        self.assertEqual(status, want_status, body)
        self.assertIsInstance(body, dict, body)
        self.assertEqual(set(body), {'code', 'message'}, body)
        self.assertIsInstance(body['code'], int, body)
        self.assertNotIsInstance(body['code'], bool, body)
        self.assertEqual(body['code'], want_status, body)
        self.assertIsInstance(body['message'], str, body)
        self.assertTrue(body['message'], body)
        if message is not None:
            self.assertEqual(body['message'], message, body)
        if prefix is not None:
            self.assertTrue(body['message'].startswith(prefix), body)
        if contains is not None:
            self.assertIn(contains, body['message'], body)
        return body['message']

    # -- /json parse errors -------------------------------------------------------------------------------------

    def test_malformed_json(self):
        for text in ('{"domain": "e", ', '{domain: e}', 'not json', '{"domain": "e"} trailing',
                     '{"domain": "e\\x"}', '{"domain": "e",}'):
            with self.subTest(body=text):
                status, headers, body = self.post(text)
                self.assertError(status, body, 400, prefix='invalid JSON:')
                self.assertGreater(len(body['message']), len('invalid JSON:'), body)
                self.assertTrue(headers.get('content-type', '').startswith('application/json'), headers)

    def test_empty_body(self):
        status, _, body = self.post('')
        self.assertError(status, body, 400, message='request body is empty')

    def test_unknown_field(self):
        status, _, body = self.post({'domain': 'e', 'foo': 1, 'descriptors': [{'entries': [{'key': 'k', 'value': 'v'}]}]})
        self.assertError(status, body, 400, contains="unknown field 'foo'")
        status, _, body = self.post({'domain': 'e', 'descriptors': [{'entries': [{'key': 'k', 'value': 'v',
                                                                                    'foo': 'x'}]}]})
        self.assertError(status, body, 400, contains="unknown field 'foo'")

    def test_wrong_types(self):
        cases = [
            {'domain': 5, 'descriptors': [{'entries': [{'key': 'k', 'value': 'v'}]}]},
            {'domain': 'e', 'descriptors': {'entries': []}},
            {'domain': 'e', 'descriptors': [{'entries': [{'key': 1, 'value': 'v'}]}]},
            {'domain': 'e', 'descriptors': [{'entries': [{'key': 'k', 'value': 'v'}]}], 'hitsAddend': -1},
            {'domain': 'e', 'descriptors': [{'entries': [{'key': 'k', 'value': 'v'}]}], 'hitsAddend': 'many'},
            {'domain': 'e', 'descriptors': [{'entries': [{'key': 'k', 'value': 'v'}]}], 'hitsAddend': 4294967296},
            {'domain': 'e', 'descriptors': [{'entries': [{'key': 'k', 'value': 'v'}],
                                             'limit': {'requestsPerUnit': 1, 'unit': 'FORTNIGHT'}}]},
            ['domain', 'e'],
            'null',
            '"just a string"',
        ]
        for body_in in cases:
            with self.subTest(body=body_in):
                status, _, body = self.post(body_in)
                self.assertError(status, body, 400)

    # -- semantic errors: same message over /json and gRPC -------------------------------------------------------

    def both(self, domain, descriptors, status, message=None, contains=None, hits_addend=None):
        http_status, _, body = self.post(harness.rls_request_json(domain, descriptors, hits_addend))
        got = self.assertError(http_status, body, status, message=message, contains=contains)
        with self.assertRaises(grpc.RpcError) as ctx:
            server.grpc(domain, descriptors, hits_addend)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, ctx.exception)
        self.assertEqual(ctx.exception.details(), got)
        return got

    def test_empty_domain(self):
        self.both('', [[('k', 'v')]], 400, message='rate limit domain must not be empty')

    def test_missing_domain(self):
        status, _, body = self.post({'descriptors': [{'entries': [{'key': 'k', 'value': 'v'}]}]})
        self.assertError(status, body, 400, message='rate limit domain must not be empty')

    def test_no_descriptors(self):
        self.both('e', [], 400, message='rate limit descriptor list must not be empty')
        status, _, body = self.post({'domain': 'e'})
        self.assertError(status, body, 400, message='rate limit descriptor list must not be empty')

    def test_empty_entry_key(self):
        self.both('e', [[('', 'v')]], 400, message='descriptors[0].entries[0]: key must not be empty')
        self.both('e', [[('k', 'v')], [('k', 'v'), ('', '')]], 400,
                  message='descriptors[1].entries[1]: key must not be empty')

    def test_override_with_unknown_unit(self):
        m = self.both('e', [{'entries': [('k', 'v')], 'limit': (5, 'UNKNOWN')}], 400,
                      contains='descriptors[0].limit.unit')
        self.assertIn('descriptors[0].limit.unit', m)
        self.both('e', [[('k', 'v')], {'entries': [('k', 'v')], 'limit': (5, 0)}], 400,
                  contains='descriptors[1].limit.unit')
        # out of range enum numbers (open enums keep them): refused, never a crash
        self.both('e', [{'entries': [('k', 'v')], 'limit': (5, 42)}], 400, contains='descriptors[0].limit.unit')
        status, _, body = self.post({'domain': 'e', 'descriptors': [{'entries': [{'key': 'k', 'value': 'v'}],
                                                                     'limit': {'requestsPerUnit': 5}}]})
        self.assertError(status, body, 400, contains='descriptors[0].limit.unit')
        # the server is still alive and deciding
        d = server.decide('grpc', 'e', [[('k', 'after-bad-unit')]])
        self.assertEqual(d.overall, 'OK', d)

    def test_errors_are_not_counted(self):
        harness.avoid_window_edge('HOUR')
        self.both('e', [[('k', 'nocount')], [('', 'x')]], 400)
        d = server.decide('json', 'e', [[('k', 'nocount')]])
        self.assertEqual(d.statuses[0].remaining, 99, d)

    # -- HTTP level ---------------------------------------------------------------------------------------------

    def test_unknown_path(self):
        status, headers, body = harness.http_get(server.http_port, '/nope')
        self.assertError(status, body, 404, message='no route for GET /nope')
        self.assertTrue(headers.get('content-type', '').startswith('application/json'), headers)
        status, _, body = harness.post_json(server.http_port, {'a': 1}, path='/json/extra')
        self.assertError(status, body, 404, message='no route for POST /json/extra')

    def test_body_over_1mib(self):
        payload = json.dumps({'domain': 'e', 'descriptors': [{'entries': [{'key': 'k', 'value': 'x' * (1 << 20)}]}]})
        status, body = raw_post(server.http_port, '/json', payload.encode())
        self.assertEqual(status, 413, body)
        parsed = json.loads(body)
        self.assertEqual(parsed['code'], 413, parsed)
        self.assertTrue(parsed['message'], parsed)
        # a body just under the limit is served
        ok = json.dumps({'domain': 'e', 'descriptors': [{'entries': [{'key': 'k', 'value': 'y' * 1000}]}]})
        status, body = raw_post(server.http_port, '/json', ok.encode())
        self.assertEqual(status, 200, body)

    def test_keep_alive_survives_an_error(self):
        import http.client
        conn = http.client.HTTPConnection('127.0.0.1', server.http_port, timeout=5)
        try:
            conn.request('POST', '/json', body=b'{bad', headers={'Content-Type': 'application/json'})
            r = conn.getresponse()
            self.assertEqual(r.status, 400)
            r.read()
            conn.request('POST', '/json', body=json.dumps(harness.rls_request_json('e', [[('k', 'ka')]])),
                         headers={'Content-Type': 'application/json'})
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            self.assertEqual(json.loads(r.read())['overallCode'], 'OK')
        finally:
            conn.close()


def raw_post(port, path, body, timeout=10.0):
    """POST over a raw socket, tolerating a server that answers and closes before reading the whole body.
    -> (status, body text)."""
    s = socket.create_connection(('127.0.0.1', port), timeout=timeout)
    try:
        head = ('POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n'
                'Connection: close\r\n\r\n' % (path, len(body))).encode()
        try:
            s.sendall(head)
            for i in range(0, len(body), 65536):
                s.sendall(body[i:i + 65536])
        except OSError:
            pass  # the server already answered and stopped reading
        data = b''
        while True:
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
            if b'\r\n\r\n' in data:
                head_part, _, rest = data.partition(b'\r\n\r\n')
                length = None
                for line in head_part.split(b'\r\n')[1:]:
                    k, _, v = line.partition(b':')
                    if k.strip().lower() == b'content-length':
                        length = int(v.strip())
                if length is not None and len(rest) >= length:
                    break
    finally:
        s.close()
    if not data:
        raise AssertionError('no response from the server')
    head_part, _, rest = data.partition(b'\r\n\r\n')
    status = int(head_part.split(b' ', 2)[1])
    return status, rest.decode('utf-8', 'replace')


if __name__ == '__main__':
    unittest.main()
