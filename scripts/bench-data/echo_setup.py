"""Writes what `scripts/bench echo` needs into DIR: an RSA key's JWKS (jwks.json), an OpenAPI document whose
google_jwt provider reads it with file:// (openapi.yaml), an API key file (api_keys.yaml), and prints a token
valid for an hour. Uses Debian's python3-jwt and python3-cryptography."""

import json
import os
import sys
import time

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER = 'bench-issuer.example.com'
AUDIENCE = 'echo.endpoints.sample.google.com'


def main(directory):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({'kid': 'bench', 'alg': 'RS256', 'use': 'sig'})
    jwks_path = os.path.join(directory, 'jwks.json')
    with open(jwks_path, 'w') as f:
        json.dump({'keys': [jwk]}, f)
    with open(os.path.join(directory, 'api_keys.yaml'), 'w') as f:
        f.write('keys:\n  - {key: bench-key, name: bench, enabled: true}\n')
    with open(os.path.join(directory, 'openapi.yaml'), 'w') as f:
        f.write(f'''swagger: "2.0"
info: {{title: Endpoints Example, version: 1.0.0}}
host: echo-api.endpoints.bench.cloud.goog
schemes: [https]
consumes: [application/json]
produces: [application/json]
paths:
  /echo:
    post:
      operationId: echo
      parameters: [{{name: message, in: body, required: true, schema: {{$ref: "#/definitions/echoMessage"}}}}]
      responses: {{"200": {{description: Echo, schema: {{$ref: "#/definitions/echoMessage"}}}}}}
      security: [{{api_key: []}}]
  /auth/info/googlejwt:
    get:
      operationId: auth_info_google_jwt
      responses: {{"200": {{description: Authentication info., schema: {{$ref: "#/definitions/authInfoResponse"}}}}}}
      security: [{{api_key: [], google_jwt: []}}]
definitions:
  echoMessage: {{type: object, properties: {{message: {{type: string}}}}}}
  authInfoResponse: {{properties: {{id: {{type: string}}, email: {{type: string}}}}}}
securityDefinitions:
  api_key: {{type: apiKey, name: key, in: query}}
  google_jwt:
    authorizationUrl: ""
    flow: implicit
    type: oauth2
    x-google-issuer: "{ISSUER}"
    x-google-jwks_uri: "file://{jwks_path}"
    x-google-audiences: "{AUDIENCE}"
''')
    now = int(time.time())
    claims = {'iss': ISSUER, 'sub': 'bench-user', 'aud': AUDIENCE, 'email': 'bench@example.com',
              'iat': now, 'exp': now + 3600}
    print(jwt.encode(claims, key, algorithm='RS256', headers={'kid': 'bench'}))


if __name__ == '__main__':
    main(sys.argv[1])
