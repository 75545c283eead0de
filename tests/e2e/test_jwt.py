"""JWT verification on the auth-info routes (issue 5): tokens minted here with python3-jwt and python3-cryptography
(RSA and EC keys), the key sets served over HTTPS by this test with a test CA (ECHO_JWKS_CACERT), as a JSON Web Key
Set and as Google's X.509 map. Every rule: algorithms, time claims with 60 s skew, issuer and audience, signatures,
unknown kid and key rotation, alg none / HS256 confusion, a JWKS server that is down or not trusted, token
locations and WWW-Authenticate."""

import base64
import datetime
import hashlib
import hmac
import http.server
import json
import os
import ssl
import tempfile
import threading
import time
import unittest

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

import harness
from harness import Sluice, TlsCerts

ISSUER = 'jwt-client.endpoints.sample.google.com'
AUDIENCE = 'echo.endpoints.sample.google.com'
ID_ISSUER = 'https://accounts.google.com'
CLIENT_ID = 'client-id.apps.googleusercontent.com'
SERVICE = 'echo-api.endpoints.sluice-test.cloud.goog'
KEYS = 'keys:\n  - {key: good-key, name: alice}\n'

OPENAPI = """swagger: "2.0"
info: {title: "Endpoints Example", version: "1.0.0"}
host: "%(service)s"
schemes: ["https"]
paths:
  "/echo":
    post:
      operationId: echo
      security: [{api_key: []}]
  "/auth/info/googlejwt":
    get:
      operationId: auth_info_google_jwt
      security: [{api_key: []}, {google_jwt: []}]
  "/auth/info/googleidtoken":
    get:
      operationId: authInfoGoogleIdToken
      security: [{api_key: []}, {google_id_token: []}]
securityDefinitions:
  api_key: {type: apiKey, name: key, in: query}
  google_jwt:
    authorizationUrl: ""
    flow: implicit
    type: oauth2
    x-google-issuer: "%(issuer)s"
    x-google-jwks_uri: "%(jwk_uri)s"
    x-google-audiences: "%(audience)s"
  google_id_token:
    authorizationUrl: ""
    flow: implicit
    type: oauth2
    x-google-issuer: "%(id_issuer)s"
    x-google-jwks_uri: "%(x509_uri)s"
    x-google-audiences: "%(client_id)s"
"""

EXPIRED = 'Jwt is expired'
NOT_YET = 'Jwt not yet valid'
BAD_ISSUER = 'Jwt issuer is not configured'
BAD_AUDIENCE = 'Audiences in Jwt are not allowed'
BAD_SIGNATURE = 'Jwt verification fails'
NO_KEY = "Jwks doesn't have key to match kid or alg from Jwt"
FETCH_FAILED = 'Jwks remote fetch is failed'
BAD_ALG = 'Jwt header [alg] is not supported'
INVALID = 'Bearer, error="invalid_token"'


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b'=').decode()


def jwk(public_key, kid):
    """The public JWK of an RSA or EC key, as PyJWT writes it."""
    algo = jwt.algorithms.RSAAlgorithm if isinstance(public_key, rsa.RSAPublicKey) else jwt.algorithms.ECAlgorithm
    d = json.loads(algo.to_jwk(public_key))
    d['kid'] = kid
    return d


def certificate(key, cn='test'):
    """A self-signed certificate, as Google's /robot/v1/metadata/x509 serves them."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.utcnow()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def claims(**changes):
    """The sample client's claims (google-jwt-client.py); None removes a claim."""
    now = int(time.time())
    c = {'iat': now, 'exp': now + 3600, 'aud': AUDIENCE, 'iss': ISSUER, 'sub': '12345678', 'email': 'user@example.com'}
    c.update(changes)
    return {k: v for k, v in c.items() if v is not None}


class JwksServer:
    """HTTPS server for key documents: `docs` maps a path to a JSON-able object; `hits` counts fetches per path."""

    def __init__(self, cert, key):
        self.docs = {}
        self.hits = {}
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits[self.path] = outer.hits.get(self.path, 0) + 1
                doc = outer.docs.get(self.path)
                body = json.dumps(doc).encode() if doc is not None else b'{}'
                self.send_response(200 if doc is not None else 404)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def uri(self, path, host='localhost'):
        return 'https://%s:%d%s' % (host, self.port, path)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Keys:
    rsa1 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec256 = ec.generate_private_key(ec.SECP256R1())
    ec384 = ec.generate_private_key(ec.SECP384R1())
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def start_sluice(tmp, jwk_uri, x509_uri, cacert):
    with open(os.path.join(tmp, 'api_keys.yaml'), 'w') as f:
        f.write(KEYS)
    openapi = os.path.join(tmp, 'openapi-%d.yaml' % time.monotonic_ns())
    with open(openapi, 'w') as f:
        f.write(OPENAPI % {'service': SERVICE, 'issuer': ISSUER, 'jwk_uri': jwk_uri, 'audience': AUDIENCE,
                           'id_issuer': ID_ISSUER, 'x509_uri': x509_uri, 'client_id': CLIENT_ID})
    env = {'ECHO_OPENAPI_FILE': openapi, 'API_KEYS_FILE': os.path.join(tmp, 'api_keys.yaml')}
    if cacert:
        env['ECHO_JWKS_CACERT'] = cacert
    return Sluice(env=env)


certs = None
jwks = None
tmp = None
server = None


def setUpModule():
    global certs, jwks, tmp, server
    certs = TlsCerts()
    jwks = JwksServer(certs.server, certs.server_key)
    jwks.docs['/jwk'] = {'keys': [jwk(Keys.rsa1.public_key(), 'rsa1'), jwk(Keys.ec256.public_key(), 'ec256'),
                                  jwk(Keys.ec384.public_key(), 'ec384')]}
    jwks.docs['/x509'] = {'google1': certificate(Keys.rsa2), 'google2': certificate(Keys.ec256)}
    tmp = tempfile.mkdtemp(prefix='sluice-e2e-jwt-')
    server = start_sluice(tmp, jwks.uri('/jwk'), jwks.uri('/x509'), certs.ca)


def tearDownModule():
    if server is not None:
        server.close()
    if jwks is not None:
        jwks.close()
    if certs is not None:
        certs.close()
    if tmp is not None:
        harness.remove_tmp(tmp)


def get(path, token=None, query_token=False, port=None):
    headers = {}
    if token is not None and not query_token:
        headers['Authorization'] = 'Bearer ' + token
    target = path + '?key=good-key' + ('&access_token=' + token if query_token else '')
    return harness.http_request(port or server.http_port, target, method='GET', headers=headers)


def mint(key, kid='rsa1', alg='RS256', **changes):
    headers = {'kid': kid} if kid else {}
    return jwt.encode(claims(**changes), key, algorithm=alg, headers=headers)


class Checks(unittest.TestCase):
    def assertOk(self, got):
        code, _, body = got
        self.assertEqual(code, 200, body)
        return body

    def assertFails(self, got, message, status=401, www_authenticate=INVALID):
        code, headers, body = got
        self.assertEqual((code, body), (status, {'code': status, 'message': message}))
        self.assertEqual(headers.get('www-authenticate'), www_authenticate)


class Valid(Checks):
    def test_the_sample_clients_token_yields_the_callers_info(self):
        c = claims()
        body = self.assertOk(get('/auth/info/googlejwt', jwt.encode(c, Keys.rsa1, 'RS256', headers={'kid': 'rsa1'})))
        self.assertEqual(body['id'], '12345678')
        self.assertEqual(body['email'], 'user@example.com')
        self.assertEqual(body['issuer'], ISSUER)
        self.assertEqual(body['audiences'], [AUDIENCE])
        self.assertEqual(body['claims'], c)

    def test_access_token_query_parameter(self):
        self.assertEqual(self.assertOk(get('/auth/info/googlejwt', mint(Keys.rsa1), query_token=True))['id'],
                         '12345678')

    def test_every_accepted_algorithm(self):
        for alg in ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512']:
            with self.subTest(alg=alg):
                self.assertOk(get('/auth/info/googlejwt', mint(Keys.rsa1, alg=alg)))
        self.assertOk(get('/auth/info/googlejwt', mint(Keys.ec256, kid='ec256', alg='ES256')))
        self.assertOk(get('/auth/info/googlejwt', mint(Keys.ec384, kid='ec384', alg='ES384')))

    def test_google_x509_map(self):
        token = mint(Keys.rsa2, kid='google1', iss=ID_ISSUER, aud=CLIENT_ID)
        body = self.assertOk(get('/auth/info/googleidtoken', token))
        self.assertEqual((body['issuer'], body['audiences']), (ID_ISSUER, [CLIENT_ID]))
        self.assertOk(get('/auth/info/googleidtoken',
                          mint(Keys.ec256, kid='google2', alg='ES256', iss='accounts.google.com/', aud=CLIENT_ID)))

    def test_no_kid_tries_every_key(self):
        self.assertOk(get('/auth/info/googlejwt', mint(Keys.rsa1, kid=None)))

    def test_service_name_is_always_an_audience(self):
        self.assertOk(get('/auth/info/googlejwt', mint(Keys.rsa1, aud='https://' + SERVICE)))
        self.assertOk(get('/auth/info/googlejwt', mint(Keys.rsa1, aud=['other', SERVICE])))


class Invalid(Checks):
    def test_missing_token(self):
        self.assertFails(get('/auth/info/googlejwt'), 'Jwt is missing', www_authenticate='Bearer')

    def test_time_claims_with_60s_skew(self):
        now = int(time.time())
        self.assertFails(get('/auth/info/googlejwt', mint(Keys.rsa1, exp=now - 120)), EXPIRED)
        self.assertFails(get('/auth/info/googlejwt', mint(Keys.rsa1, nbf=now + 120)), NOT_YET)
        self.assertOk(get('/auth/info/googlejwt', mint(Keys.rsa1, exp=now - 30)))
        self.assertOk(get('/auth/info/googlejwt', mint(Keys.rsa1, nbf=now + 30)))

    def test_issuer(self):
        self.assertFails(get('/auth/info/googlejwt', mint(Keys.rsa1, iss='evil.example.com')), BAD_ISSUER)
        self.assertFails(get('/auth/info/googlejwt', mint(Keys.rsa1, iss=None)), BAD_ISSUER)
        # The other route's issuer is not configured for this one.
        self.assertFails(get('/auth/info/googlejwt', mint(Keys.rsa1, iss=ID_ISSUER)), BAD_ISSUER)
        self.assertOk(get('/auth/info/googlejwt', mint(Keys.rsa1, iss='https://%s/' % ISSUER)))

    def test_audience_is_403(self):
        self.assertFails(get('/auth/info/googlejwt', mint(Keys.rsa1, aud='other')), BAD_AUDIENCE, 403)
        self.assertFails(get('/auth/info/googlejwt', mint(Keys.rsa1, aud=None)), BAD_AUDIENCE, 403)
        self.assertFails(get('/auth/info/googleidtoken', mint(Keys.rsa2, kid='google1', iss=ID_ISSUER)),
                         BAD_AUDIENCE, 403)

    def test_bad_signature(self):
        self.assertFails(get('/auth/info/googlejwt', mint(Keys.stranger)), BAD_SIGNATURE)
        token = mint(Keys.rsa1)
        head, _, sig = token.rpartition('.')
        forged = head.split('.')[0] + '.' + b64url(json.dumps(claims(sub='admin')).encode()) + '.' + sig
        self.assertFails(get('/auth/info/googlejwt', forged), BAD_SIGNATURE)

    def test_alg_none(self):
        header = b64url(json.dumps({'alg': 'none', 'typ': 'JWT'}).encode())
        payload = b64url(json.dumps(claims()).encode())
        self.assertFails(get('/auth/info/googlejwt', header + '.' + payload + '.'), BAD_ALG)

    def test_hs256_signed_with_the_public_key(self):
        pem = Keys.rsa1.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo)
        signing_input = (b64url(json.dumps({'alg': 'HS256', 'typ': 'JWT', 'kid': 'rsa1'}).encode()) + '.' +
                         b64url(json.dumps(claims()).encode()))
        mac = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()
        self.assertFails(get('/auth/info/googlejwt', signing_input + '.' + b64url(mac)), BAD_ALG)

    def test_key_type_must_match_alg(self):
        # An EC signature under the RSA key's kid: no key of that type has that kid.
        self.assertFails(get('/auth/info/googleidtoken',
                             mint(Keys.ec256, kid='google1', alg='ES256', iss=ID_ISSUER, aud=CLIENT_ID)), NO_KEY)

    def test_malformed(self):
        self.assertFails(get('/auth/info/googlejwt', 'not-a-jwt'),
                         'Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections')
        self.assertFails(get('/auth/info/googlejwt', '!!.e30.AA'), 'Jwt header is an invalid Base64url encoded')


class Rotation(Checks):
    """A Sluice of its own: the unknown-kid refetch is rate-limited per key set."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='sluice-e2e-jwt-rot-')
        jwks.docs['/rotating'] = {'keys': [jwk(Keys.rsa1.public_key(), 'rsa1')]}
        self.sluice = start_sluice(self.dir, jwks.uri('/rotating'), jwks.uri('/x509'), certs.ca)

    def tearDown(self):
        self.sluice.close()
        harness.remove_tmp(self.dir)

    def test_concurrent_first_requests_share_one_fetch_then_rotation_is_picked_up(self):
        token = mint(Keys.rsa1)
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            get('/auth/info/googlejwt', token, port=self.sluice.http_port)[0])) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, [200] * 10)
        self.assertEqual(jwks.hits.get('/rotating'), 1)
        # The key server adds a key: a token naming it makes Sluice refetch once.
        jwks.docs['/rotating'] = {'keys': [jwk(Keys.rsa1.public_key(), 'rsa1'), jwk(Keys.rsa2.public_key(), 'rsa2')]}
        self.assertOk(get('/auth/info/googlejwt', mint(Keys.rsa2, kid='rsa2'), port=self.sluice.http_port))
        self.assertEqual(jwks.hits['/rotating'], 2)
        # Unknown kids right after: no more fetches (rate-limited), and a clear failure.
        for _ in range(3):
            self.assertFails(get('/auth/info/googlejwt', mint(Keys.stranger, kid='nope'), port=self.sluice.http_port),
                             NO_KEY)
        self.assertEqual(jwks.hits['/rotating'], 2)


class FetchFailures(Checks):
    def test_server_down_untrusted_or_wrong_name(self):
        down_port = harness.free_port()
        wrong = JwksServer(certs.wrong, certs.wrong_key)
        wrong.docs['/jwk'] = jwks.docs['/jwk']
        d = tempfile.mkdtemp(prefix='sluice-e2e-jwt-down-')
        try:
            s = start_sluice(d, 'https://localhost:%d/jwk' % down_port, wrong.uri('/jwk'), certs.ca)
            try:
                self.assertFails(get('/auth/info/googlejwt', mint(Keys.rsa1), port=s.http_port), FETCH_FAILED)
                # A certificate for another name: hostname verification fails.
                self.assertFails(get('/auth/info/googleidtoken', mint(Keys.rsa1, iss=ID_ISSUER, aud=CLIENT_ID),
                                     port=s.http_port), FETCH_FAILED)
            finally:
                s.close()
            # Without ECHO_JWKS_CACERT the test CA is not trusted.
            s = start_sluice(d, jwks.uri('/jwk'), jwks.uri('/x509'), None)
            try:
                self.assertFails(get('/auth/info/googlejwt', mint(Keys.rsa1), port=s.http_port), FETCH_FAILED)
            finally:
                s.close()
        finally:
            wrong.close()
            harness.remove_tmp(d)


if __name__ == '__main__':
    unittest.main()
