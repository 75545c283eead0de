"""The echo API (issue 5) without token details: the shipped OpenAPI document served as it is, the echo and
auth-info routes, every bad body, 404/405, API keys in each location with ESPv2's exact error bodies, the key file
reloaded on change (a broken file keeps the old keys), JWT checked before the API key, and start-up errors.
Token verification itself is covered by test_jwt.py."""

import json
import os
import tempfile
import time
import unittest

import harness
from harness import Sluice

OPENAPI = os.path.join(harness.REPO, 'etc', 'echo', 'openapi.yaml')

KEYS = """keys:
  - {key: good-key, name: alice}
  - {key: "other+key/=", name: bob}
  - {key: off-key, name: carol, enabled: false}
"""

KEY_MISSING = ("UNAUTHENTICATED: Method doesn't allow unregistered callers (callers without established identity). "
               "Please use API Key or other form of API consumer identity to call this API.")
KEY_INVALID = "INVALID_ARGUMENT: API key not valid. Please pass a valid API key."
KEY_DISABLED = "PERMISSION_DENIED: API key is disabled. Please use an enabled API key or ask for this one to be enabled."
NOT_DEFINED = "The current request is not defined by this API."
SHAPE = '; expected a JSON object like {"message": "hello"}'

server = None
tmp = None


def write_atomically(path, text):
    with open(path + '.tmp', 'w') as f:
        f.write(text)
    os.replace(path + '.tmp', path)


def echo_env(directory, keys=KEYS, openapi=OPENAPI):
    """Settings for an echo API with its key file in `directory`."""
    keys_file = os.path.join(directory, 'api_keys.yaml')
    with open(keys_file, 'w') as f:
        f.write(keys)
    return {'ECHO_OPENAPI_FILE': openapi, 'API_KEYS_FILE': keys_file}


def setUpModule():
    global server, tmp
    tmp = tempfile.mkdtemp(prefix='sluice-e2e-echo-')
    server = Sluice(env=echo_env(tmp))


def tearDownModule():
    if server is not None:
        server.close()
    if tmp is not None:
        harness.remove_tmp(tmp)


def request(path, body=None, method=None, headers=None, port=None):
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    hdrs = {'Content-Type': 'application/json'} if body is not None else {}
    hdrs.update(headers or {})
    return harness.http_request(port or server.http_port, path, body=body, method=method, headers=hdrs)


class Checks(unittest.TestCase):
    def assertError(self, got, status, message, www_authenticate=None):
        code, headers, body = got
        self.assertEqual((code, body), (status, {'code': status, 'message': message}))
        self.assertEqual(headers.get('content-type'), 'application/json')
        self.assertEqual(headers.get('www-authenticate'), www_authenticate)


class Echo(Checks):
    def test_echo_returns_the_message(self):
        for message in ['hello', '', 'héllo "quoted" \\ \n ☃', 'x' * 10000]:
            code, headers, body = request('/echo?key=good-key', {'message': message})
            self.assertEqual((code, body), (200, {'message': message}))
            self.assertEqual(headers.get('content-type'), 'application/json')

    def test_only_the_echo_message_shape_comes_back(self):
        self.assertEqual(request('/echo?key=good-key', {'message': 'm', 'extra': [1]})[:3:2], (200, {'message': 'm'}))

    def test_bad_bodies(self):
        cases = [
            ('', 'Body is empty' + SHAPE),
            ('[{"message": "a"}]', 'Body must be a JSON object, got an array' + SHAPE),
            ('"message"', 'Body must be a JSON object, got a string' + SHAPE),
            ('42', 'Body must be a JSON object, got a number' + SHAPE),
            ('{"msg": "a"}', 'Body has no "message" field' + SHAPE),
            ('{"message": 1}', '"message" must be a string, got a number'),
            ('{"message": null}', '"message" must be a string, got null'),
            ('{"message": ["a"]}', '"message" must be a string, got an array'),
            ('{"message": true}', '"message" must be a string, got a boolean'),
        ]
        for raw, message in cases:
            with self.subTest(body=raw):
                self.assertError(request('/echo?key=good-key', raw, method='POST'), 400, message)
        for raw in ['{', 'hello', '{"message": "a",}', b'{"message": "\xff"}']:
            with self.subTest(body=raw):
                code, _, body = request('/echo?key=good-key', raw, method='POST')
                self.assertEqual(code, 400, body)
                self.assertTrue(body['message'].startswith('Body was not valid JSON: '), body)
                self.assertTrue(body['message'].endswith(SHAPE), body)

    def test_body_over_the_echo_limit(self):
        # ECHO_MAX_BODY_BYTES (64 KiB by default) answers 400; HTTP_MAX_BODY_BYTES (1 MiB), checked by the server
        # before any route, answers 413
        self.assertEqual(request('/echo?key=good-key', {'message': 'x' * (65536 - 20)})[0], 200)
        self.assertError(request('/echo?key=good-key', {'message': 'x' * 65536}), 400,
                         'Body is larger than 65536 bytes (ECHO_MAX_BODY_BYTES)' + SHAPE)
        code, _, body = request('/echo?key=good-key', {'message': 'x' * (1 << 20)})
        self.assertEqual((code, body['message']), (413, 'request body is larger than 1048576 bytes'))

    def test_body_is_checked_after_the_key(self):
        self.assertError(request('/echo', 'not json', method='POST'), 401, KEY_MISSING)

    def test_unknown_path_is_404(self):
        for path in ['/nope', '/echo/', '/auth/info/other?key=good-key', '/auth/info', '/Echo']:
            with self.subTest(path=path):
                self.assertError(request(path), 404, NOT_DEFINED)
                self.assertError(request(path, {'message': 'a'}), 404, NOT_DEFINED)

    def test_wrong_method_is_405(self):
        code, headers, body = request('/echo?key=good-key')
        self.assertEqual((code, body), (405, {'code': 405, 'message': 'Method GET is not allowed for /echo; allowed: POST'}))
        self.assertEqual(headers.get('allow'), 'POST')
        code, headers, body = request('/auth/info/googlejwt?key=good-key', {'message': 'a'})
        self.assertEqual(code, 405, body)
        self.assertEqual(body['message'], 'Method POST is not allowed for /auth/info/googlejwt; allowed: GET')
        self.assertEqual(headers.get('allow'), 'GET')

    def test_rate_limit_routes_still_served(self):
        self.assertEqual(server.healthcheck()[0], 200)
        code, _, body = server.json({'domain': 'nothing', 'descriptors': [{'entries': [{'key': 'k', 'value': 'v'}]}]})
        self.assertEqual(code, 200, body)


class ApiKeys(Checks):
    def echo(self, query='', headers=None):
        return request('/echo' + query, {'message': 'm'}, headers=headers)

    def test_each_location(self):
        self.assertEqual(self.echo('?key=good-key')[0], 200)
        self.assertEqual(self.echo('?api_key=good-key')[0], 200)
        self.assertEqual(self.echo(headers={'x-api-key': 'good-key'})[0], 200)
        self.assertEqual(self.echo(headers={'X-API-Key': 'good-key'})[0], 200)
        self.assertEqual(self.echo('?other=1&key=good-key&x=2')[0], 200)

    def test_query_values_are_percent_decoded(self):
        self.assertEqual(self.echo('?key=other%2Bkey%2F%3D')[0], 200)
        self.assertEqual(self.echo(headers={'x-api-key': 'other+key/='})[0], 200)

    def test_precedence_key_then_api_key_then_header(self):
        self.assertError(self.echo('?key=bad&api_key=good-key'), 400, KEY_INVALID)
        self.assertEqual(self.echo('?key=good-key&api_key=bad', {'x-api-key': 'bad'})[0], 200)
        self.assertError(self.echo('?api_key=bad', {'x-api-key': 'good-key'}), 400, KEY_INVALID)

    def test_missing(self):
        self.assertError(self.echo(), 401, KEY_MISSING)
        self.assertError(self.echo('?keys=good-key'), 401, KEY_MISSING)
        self.assertError(self.echo(headers={'Authorization': 'Bearer good-key'}), 401, KEY_MISSING)

    def test_unknown(self):
        for key in ['bad', 'good-ke', 'good-key%20', 'GOOD-KEY', '']:
            with self.subTest(key=key):
                self.assertError(self.echo('?key=' + key), 400, KEY_INVALID)
        self.assertError(self.echo(headers={'x-api-key': 'good-keyy'}), 400, KEY_INVALID)

    def test_disabled(self):
        self.assertError(self.echo('?key=off-key'), 403, KEY_DISABLED)
        self.assertError(self.echo(headers={'x-api-key': 'off-key'}), 403, KEY_DISABLED)


class JwtBeforeKey(Checks):
    def test_missing_token_is_reported_before_the_key(self):
        for route in ['/auth/info/googlejwt', '/auth/info/googleidtoken']:
            for query in ['', '?key=bad', '?key=off-key', '?key=good-key']:
                with self.subTest(route=route, query=query):
                    self.assertError(request(route + query), 401, 'Jwt is missing', 'Bearer')

    def test_authorization_without_bearer_counts_as_missing(self):
        for value in ['Basic dXNlcjpwYXNz', 'a.b.c', 'Bearer']:
            with self.subTest(value=value):
                self.assertError(request('/auth/info/googlejwt?key=bad', headers={'Authorization': value}), 401,
                                 'Jwt is missing', 'Bearer')

    def test_a_bad_token_is_reported_before_the_key(self):
        for where in [{'headers': {'Authorization': 'Bearer not-a-jwt'}}, {'query': '&access_token=not-a-jwt'}]:
            with self.subTest(where=where):
                code, headers, body = request('/auth/info/googlejwt?key=bad' + where.get('query', ''),
                                              headers=where.get('headers'))
                self.assertEqual(code, 401, body)
                self.assertEqual(set(body), {'code', 'message'})
                self.assertNotIn('API key', body['message'])
                self.assertEqual(headers.get('www-authenticate'), 'Bearer, error="invalid_token"')


class WithValidToken(Checks):
    """A token the verifier accepts (RS256, JWKS from a file:// URI), to check what comes after the JWT: the API key
    and the auth-info body. Token failures themselves are in test_jwt.py."""

    @classmethod
    def setUpClass(cls):
        import jwt
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        cls.dir = tempfile.mkdtemp(prefix='sluice-e2e-echo-jwt-')
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        jwk.update({'kid': 'k1', 'alg': 'RS256', 'use': 'sig'})
        jwks = os.path.join(cls.dir, 'jwks.json')
        with open(jwks, 'w') as f:
            json.dump({'keys': [jwk]}, f)
        with open(OPENAPI) as f:
            doc = f.read().replace('https://www.googleapis.com/service_accounts/v1/jwk/YOUR-SERVICE-ACCOUNT-EMAIL',
                                   'file://' + jwks)
        # An auth-info route that needs only a key: the sample backends answer {"id": "anonymous"} there.
        doc = doc.replace('definitions:\n', '  "/auth/info/open":\n    get:\n      operationId: "authInfoOpen"\n'
                          '      security:\n        - api_key: []\n' + 'definitions:\n', 1)
        openapi = os.path.join(cls.dir, 'openapi.yaml')
        with open(openapi, 'w') as f:
            f.write(doc)
        cls.server = Sluice(env=echo_env(cls.dir, openapi=openapi))
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        now = int(time.time())
        cls.claims = {'iat': now, 'exp': now + 3600, 'aud': 'echo.endpoints.sample.google.com',
                      'iss': 'jwt-client.endpoints.sample.google.com', 'sub': '12345678', 'email': 'user@example.com'}
        cls.token = jwt.encode(cls.claims, pem, algorithm='RS256', headers={'kid': 'k1'})

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
        harness.remove_tmp(cls.dir)

    def get(self, path, token=True):
        headers = {'Authorization': 'Bearer ' + self.token} if token else None
        return request(path, headers=headers, port=self.server.http_port)

    def test_auth_info_is_the_callers_identity(self):
        code, headers, body = self.get('/auth/info/googlejwt?key=good-key')
        self.assertEqual(code, 200, body)
        self.assertEqual(headers.get('content-type'), 'application/json')
        self.assertEqual(body, {'id': '12345678', 'email': 'user@example.com',
                                'issuer': 'jwt-client.endpoints.sample.google.com',
                                'audiences': ['echo.endpoints.sample.google.com'], 'claims': self.claims})

    def test_token_in_the_query(self):
        code, _, body = self.get('/auth/info/googlejwt?key=good-key&access_token=' + self.token, token=False)
        self.assertEqual((code, body['id']), (200, '12345678'))

    def test_key_is_checked_after_a_valid_token(self):
        self.assertError(self.get('/auth/info/googlejwt'), 401, KEY_MISSING)
        self.assertError(self.get('/auth/info/googlejwt?key=bad'), 400, KEY_INVALID)
        self.assertError(self.get('/auth/info/googlejwt?key=off-key'), 403, KEY_DISABLED)

    def test_route_without_jwt_is_anonymous(self):
        self.assertEqual(self.get('/auth/info/open?key=good-key', token=False)[::2], (200, {'id': 'anonymous'}))
        self.assertError(self.get('/auth/info/open', token=False), 401, KEY_MISSING)


class KeyFileReload(Checks):
    """Each test gets its own server, so edits do not leak between tests."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='sluice-e2e-keys-')
        self.addCleanup(harness.remove_tmp, self.dir)
        env = echo_env(self.dir, keys='keys:\n  - {key: first, name: one}\n')
        self.keys_file = env['API_KEYS_FILE']
        self.server = Sluice(env=env)
        self.addCleanup(self.server.close)

    def status(self, key):
        return request('/echo?key=' + key, {'message': 'm'}, port=self.server.http_port)[0]

    def wait_status(self, key, want):
        harness.wait_until(lambda: self.status(key) == want, timeout=5.0, message='key %s -> %d' % (key, want),
                           describe=self.server.log_tail)

    def test_add_disable_remove(self):
        self.assertEqual(self.status('first'), 200)
        self.assertEqual(self.status('second'), 400)
        # in place, as `echo >>` or a plain editor save does
        with open(self.keys_file, 'w') as f:
            f.write('keys:\n  - {key: first, name: one}\n  - {key: second, name: two}\n')
        self.wait_status('second', 200)
        write_atomically(self.keys_file, 'keys:\n  - {key: first, name: one, enabled: false}\n  - {key: second}\n')
        self.wait_status('first', 403)
        self.assertEqual(self.status('second'), 200)
        write_atomically(self.keys_file, 'keys:\n  - {key: second}\n')
        self.wait_status('first', 400)
        self.assertEqual(self.status('second'), 200)

    def test_broken_file_keeps_the_old_keys(self):
        since = len(self.server.log())
        write_atomically(self.keys_file, 'keys:\n  - {key: second, enabled: perhaps}\n')
        self.server.wait_for_log(self.keys_file + ": `enabled` must be true or false, got 'perhaps' (line 2)",
                                 since=since)
        self.assertEqual(self.status('first'), 200)
        self.assertEqual(self.status('second'), 400)
        since = len(self.server.log())
        os.remove(self.keys_file)
        self.server.wait_for_log(self.keys_file + ': cannot read the file', since=since)
        self.assertEqual(self.status('first'), 200)
        # a good file again is picked up
        write_atomically(self.keys_file, 'keys:\n  - {key: second}\n')
        self.wait_status('second', 200)
        self.assertEqual(self.status('first'), 400)


class Settings(unittest.TestCase):
    def start_failing(self, env):
        return Sluice.failed_start(self, env)

    def test_echo_api_is_off_by_default(self):
        with Sluice() as s:
            code, _, body = harness.post_json(s.http_port, {'message': 'm'}, path='/echo?key=good-key')
            self.assertEqual((code, body), (404, {'code': 404, 'message': 'no route for POST /echo'}))

    def test_bad_echo_max_body_bytes(self):
        for value in ('0', 'lots', str(65 << 20)):
            with self.subTest(value=value):
                log = self.start_failing({'ECHO_OPENAPI_FILE': OPENAPI, 'ECHO_MAX_BODY_BYTES': value,
                                          'API_KEYS_FILE': os.path.join(harness.REPO, 'etc', 'echo', 'api_keys.yaml')})
                self.assertIn("for ECHO_MAX_BODY_BYTES", log)

    def test_api_keys_file_is_required(self):
        log = self.start_failing({'ECHO_OPENAPI_FILE': OPENAPI})
        self.assertIn('API_KEYS_FILE is required: operations of %s (ECHO_OPENAPI_FILE) need an API key' % OPENAPI,
                      log)

    def test_bad_key_file(self):
        d = tempfile.mkdtemp(prefix='sluice-e2e-keys-')
        self.addCleanup(harness.remove_tmp, d)
        env = echo_env(d, keys='keys:\n  - {key: a}\n  - {key: a}\n')
        log = self.start_failing(env)
        self.assertIn('API_KEYS_FILE: %s: keys[1] repeats the key of an earlier entry' % env['API_KEYS_FILE'], log)
        log = self.start_failing({'ECHO_OPENAPI_FILE': OPENAPI, 'API_KEYS_FILE': os.path.join(d, 'missing.yaml')})
        self.assertIn('API_KEYS_FILE: %s: cannot read the file: No such file or directory'
                      % os.path.join(d, 'missing.yaml'), log)

    def test_bad_openapi_documents(self):
        d = tempfile.mkdtemp(prefix='sluice-e2e-openapi-')
        self.addCleanup(harness.remove_tmp, d)
        with open(OPENAPI) as f:
            sample = f.read()
        cases = {
            'openapi3.yaml': (sample.replace('swagger: "2.0"', 'openapi: "3.0.0"'),
                              'OpenAPI 3 documents are not supported'),
            'unknown_op.yaml': (sample.replace('"/echo":\n    post:', '"/shelves":\n    get:'),
                                'operation echo (GET /shelves): Sluice has no handler for it'),
            'unknown_scheme.yaml': (sample.replace('- google_jwt: []', '- google_jwt2: []'),
                                    "GET /auth/info/googlejwt: security scheme 'google_jwt2' is not in "
                                    "securityDefinitions"),
            'mixed_or.yaml': (sample.replace('        - api_key: []\n        - google_jwt: []',
                                             '        - {api_key: [], google_jwt: []}\n'
                                             '        - google_id_token: []'),
                              'GET /auth/info/googlejwt: the security alternatives mix api_key with JWT schemes'),
            'no_issuer.yaml': (sample.replace('x-google-issuer: "https://accounts.google.com"', ''),
                               'securityDefinitions.google_id_token: x-google-issuer is missing'),
        }
        for name, (text, message) in cases.items():
            with self.subTest(name=name):
                path = os.path.join(d, name)
                with open(path, 'w') as f:
                    f.write(text)
                log = self.start_failing(echo_env(d, openapi=path))
                self.assertIn('ECHO_OPENAPI_FILE: %s: %s' % (path, message), log)
        log = self.start_failing(echo_env(d, openapi=os.path.join(d, 'missing.yaml')))
        self.assertIn('ECHO_OPENAPI_FILE: %s: cannot read the file' % os.path.join(d, 'missing.yaml'), log)


if __name__ == '__main__':
    unittest.main()
