"""TLS to Redis (REDIS_TLS, REDIS_TLS_CACERT, REDIS_TLS_CLIENT_CERT / REDIS_TLS_CLIENT_KEY,
REDIS_TLS_SKIP_HOSTNAME_VERIFICATION, REDIS_PERSECOND_TLS; reference §1.7), against TLS-only redis-server processes
with certificates made fresh for each test class (harness.TlsCerts): the server verified against a CA file or the
system's CAs, by DNS name or IP address; mutual TLS; TLS failures that behave like an unreachable Redis (Sluice keeps
running, unhealthy, decisions fail fast with a message about the certificate); bad files at start-up; the per-second
store over TLS."""

import os
import re
import time
import unittest

import harness
from harness import RedisServer, Sluice, TlsCerts
from test_redis import FAST, TRANSPORTS, RedisCase, attempt, key_for, redis_env, wait_healthy

# what a message about a failed TLS connection mentions (OpenSSL's "certificate verify failed", "tlsv13 alert
# certificate required", "tlsv1 alert unknown ca", "sslv3 alert handshake failure", "hostname mismatch", ...), and
# what "Connection refused", "Connection reset by peer" or a time-out do not
TLS_PROBLEM = re.compile(r'certificate|handshake|verif|hostname|tls|ssl', re.IGNORECASE)

RULES = """
domain: t
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 100}
"""

PER_SECOND_RULES = """
domain: ps
descriptors:
  - key: sec
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: min
    rate_limit: {unit: hour, requests_per_unit: 100}
"""


class TlsCase(RedisCase):
    """Certificates of its own per test class; helpers to start TLS-only Redis servers and Sluices that use them."""

    certs = None

    @classmethod
    def setUpClass(cls):
        cls.certs = TlsCerts()

    @classmethod
    def tearDownClass(cls):
        cls.certs.close()

    def setUp(self):
        harness.avoid_window_edge('HOUR')

    def redis(self, server='server', auth_clients='no', **kwargs):
        """A TLS-only redis-server presenting certs.<server> (and requiring a client certificate signed by the CA
        when auth_clients='yes'), stopped after the test."""
        r = RedisServer(tls=self.certs.redis_tls(server, auth_clients), **kwargs)
        self.addCleanup(r.close)
        return r

    def sluice(self, redis, host='127.0.0.1', rules=None, healthy=True, **env):
        """A sluice counting in `redis` at host:port with REDIS_TLS=true, REDIS_TLS_CACERT=the CA and two connections
        unless `env` says otherwise (None removes a setting); stopped after the test."""
        settings = redis_env(REDIS_TLS_CACERT=self.certs.ca, REDIS_POOL_SIZE='2')
        settings.update(redis.sluice_env(host=host))
        settings.update(env)
        s = Sluice(rules=rules or {'t.yaml': RULES}, env=settings, wait_ready=True if healthy else 'answer')
        self.addCleanup(s.close)
        return s

    def check_counts(self, redis, sluice, value, pool=2):
        """Decisions over both transports count in `redis`; `pool` connections of Sluice's are up."""
        wait_healthy(sluice)
        t0 = time.time()
        d = self.assertOk(sluice, 'grpc', 't', [[('k', value)]])
        self.assertEqual((d.overall, d.statuses[0].remaining, d.statuses[0].limit), ('OK', 99, (100, 'HOUR')), d)
        d = self.assertOk(sluice, 'json', 't', [[('k', value)]])
        self.assertEqual((d.overall, d.statuses[0].remaining), ('OK', 98), d)
        key = self.assertOneKey(redis, 't_k_' + value, 'HOUR', t0, time.time())
        self.assertEqual(redis.get(key), '2')
        self.assertTtl(redis, key, 3600)
        harness.wait_until(lambda: len(redis.clients()) == pool, message='%d connections of Sluice\'s' % pool,
                           describe=lambda: repr(redis.clients()))
        self.assertNotIn('Error accepting a client connection', redis.log())
        return key

    def check_refused(self, redis, sluice, value='refused'):
        """The TLS connection fails, which behaves like an unreachable Redis: Sluice keeps running, is unhealthy and
        every decision fails fast (gRPC UNAVAILABLE / HTTP 503) with a message about Redis and the TLS problem;
        nothing reaches Redis. -> the messages."""
        seen = []

        def refused_for_tls(transport):
            outcome, detail, elapsed = attempt(sluice, transport, 't', [[('k', value)]])
            seen.append((transport, outcome, detail, round(elapsed, 3)))
            self.assertEqual(outcome, 'unavailable', detail)
            self.assertLess(elapsed, FAST, '%s: the failing decision took %.3fs' % (transport, elapsed))
            return TLS_PROBLEM.search(detail)

        # Each worker has its own connection, whose first attempt may not have ended yet (its decisions then say
        # Redis is not connected yet): poll, per transport, until a decision reports the TLS problem.
        for t in TRANSPORTS:
            harness.wait_until(lambda: refused_for_tls(t), timeout=5.0,
                               message='a %s decision failing with a TLS problem' % t,
                               describe=lambda: 'decisions: %r\nredis log:\n%s\n%s' % (
                                   seen[-3:], redis.log()[-2000:], sluice.log_tail(20)))
        self.assertEqual(sluice.healthcheck()[0], 500, sluice.log_tail(20))
        self.assertEqual(sluice.health(), 'NOT_SERVING')
        messages = [detail for _, outcome, detail, _ in seen if TLS_PROBLEM.search(detail)]
        # A retry may be mid-handshake (a TCP client that never ran a command); none may have got as far as a command.
        served = [c for c in redis.clients() if c.get('cmd') != 'NULL']
        self.assertEqual(served, [], 'Redis served a connection of Sluice\'s')
        self.assertEqual(redis.keys(), [])
        self.assertEqual(sluice.healthcheck()[0], 500)
        self.assertTrue(sluice.running(), sluice.log_tail())
        return messages


# ---------------------------------------------------------------------------------------------------------------
# Server verification: CA file, system CAs, names

class ServerVerification(TlsCase):
    def test_verified_with_ca_file(self):
        redis = self.redis()
        s = self.sluice(redis)
        self.assertEqual((s.extra_env['REDIS_TLS'], s.extra_env['REDIS_URL']), ('true', redis.address()))
        self.check_counts(redis, s, 'ca-file')
        # upstream's commands, over TLS
        with redis.monitor() as mon:
            t0 = time.time()
            self.assertOk(s, 'grpc', 't', [[('k', 'mon')]])
            key = key_for('t_k_mon', 'HOUR', t0)
            self.assertEqual(mon.wait_for(2, {'INCRBY', 'EXPIRE'}), [['INCRBY', key, '1'], ['EXPIRE', key, '3600']])

    def test_dns_name_localhost(self):
        redis = self.redis()
        s = self.sluice(redis, host='localhost')
        self.assertEqual(s.extra_env['REDIS_URL'], 'localhost:%d' % redis.port)
        self.check_counts(redis, s, 'localhost')

    def test_unknown_ca(self):
        redis = self.redis()
        s = self.sluice(redis, REDIS_TLS_CACERT=self.certs.other_ca, healthy=False)
        self.check_refused(redis, s)

    def test_system_cas_when_no_ca_file(self):
        # the test CA is not one of the system's: the server is not trusted
        redis = self.redis()
        s = self.sluice(redis, REDIS_TLS_CACERT='', healthy=False)
        self.check_refused(redis, s)

    def test_system_cas_follow_ssl_cert_file(self):
        # "the system's default CAs" is OpenSSL's (and Go's) default store, which SSL_CERT_FILE replaces
        redis = self.redis()
        s = self.sluice(redis, REDIS_TLS_CACERT=None, SSL_CERT_FILE=self.certs.ca)
        self.check_counts(redis, s, 'ssl-cert-file')

    def test_hostname_mismatch(self):
        # a certificate of the right CA for wrong.example only
        redis = self.redis(server='wrong')
        by_ip = self.sluice(redis, healthy=False)
        by_name = self.sluice(redis, host='localhost', healthy=False)
        for s in (by_ip, by_name):
            with self.subTest(url=s.extra_env['REDIS_URL']):
                self.check_refused(redis, s)
        # like an unreachable Redis, Sluice keeps trying: it serves once Redis presents a certificate that matches
        redis.tls = self.certs.redis_tls('server')
        redis.restart()
        for s, value in ((by_ip, 'ip'), (by_name, 'name')):
            with self.subTest(url=s.extra_env['REDIS_URL']):
                wait_healthy(s, timeout=5.0)
                d = self.assertOk(s, 'json', 't', [[('k', value)]])
                self.assertEqual((d.overall, d.statuses[0].remaining), ('OK', 99), d)

    def test_skip_hostname_verification(self):
        redis = self.redis(server='wrong')
        s = self.sluice(redis, REDIS_TLS_SKIP_HOSTNAME_VERIFICATION='true')
        self.check_counts(redis, s, 'skip-hostname')

    def test_skip_hostname_verification_still_verifies_the_chain(self):
        redis = self.redis(server='wrong')
        s = self.sluice(redis, REDIS_TLS_SKIP_HOSTNAME_VERIFICATION='true', REDIS_TLS_CACERT=self.certs.other_ca,
                        healthy=False)
        self.check_refused(redis, s)

    def test_reconnects_after_redis_restart(self):
        redis = self.redis()
        s = self.sluice(redis)
        self.check_counts(redis, s, 'before')
        redis.kill()
        for t in TRANSPORTS:
            self.assertUnavailable(s, t, 't', [[('k', 'during')]])
        redis.restart()

        def served():
            outcome, detail, elapsed = attempt(s, 'grpc', 't', [[('k', 'after')]])
            self.assertLess(elapsed, FAST, detail)
            return outcome == 'ok' and detail

        d = harness.wait_until(served, timeout=5.0, message='decisions served after the restart',
                               describe=s.log_tail)
        self.assertEqual(d.statuses[0].remaining, 99, d)  # Redis restarted empty
        harness.wait_until(lambda: len(redis.clients()) == 2, message='both connections back over TLS',
                           describe=lambda: repr(redis.clients()))
        self.assertEqual(s.healthcheck()[0], 200)


# ---------------------------------------------------------------------------------------------------------------
# Mutual TLS: Redis requires a client certificate signed by the CA

class MutualTls(TlsCase):
    def client_cert(self, which='client'):
        return {'REDIS_TLS_CLIENT_CERT': getattr(self.certs, which),
                'REDIS_TLS_CLIENT_KEY': getattr(self.certs, which + '_key')}

    def test_without_client_certificate(self):
        redis = self.redis(auth_clients='yes')
        s = self.sluice(redis, healthy=False)
        self.check_refused(redis, s)

    def test_with_client_certificate(self):
        redis = self.redis(auth_clients='yes')
        s = self.sluice(redis, **self.client_cert())
        self.check_counts(redis, s, 'mtls')

    def test_with_client_certificate_and_password(self):
        redis = self.redis(auth_clients='yes', user=('sluice', 'tls:pass'))
        # one worker: REDIS_POOL_SIZE=1 is then one connection (each worker has at least one)
        s = self.sluice(redis, REDIS_POOL_SIZE='1', IO_THREADS='1', **self.client_cert())
        self.assertEqual(s.extra_env['REDIS_AUTH'], 'sluice:tls:pass')
        self.check_counts(redis, s, 'mtls-auth', pool=1)
        self.assertEqual([c.get('user') for c in redis.clients()], ['sluice'])

    def test_client_certificate_of_another_ca(self):
        redis = self.redis(auth_clients='yes')
        s = self.sluice(redis, healthy=False, **self.client_cert('other_client'))
        self.check_refused(redis, s)


# ---------------------------------------------------------------------------------------------------------------
# Bad files stop start-up

class BadFiles(TlsCase):
    def test_bad_files_stop_start_up(self):
        garbage = os.path.join(self.certs.dir, 'garbage.pem')
        with open(garbage, 'w') as f:
            f.write('this is not a certificate\n')
        missing = os.path.join(self.certs.dir, 'missing.pem')
        c = self.certs
        cases = [
            ('REDIS_TLS_CACERT', {'REDIS_TLS_CACERT': missing}),
            ('REDIS_TLS_CACERT', {'REDIS_TLS_CACERT': garbage}),
            ('REDIS_TLS_CLIENT_CERT', {'REDIS_TLS_CACERT': c.ca, 'REDIS_TLS_CLIENT_CERT': missing,
                                       'REDIS_TLS_CLIENT_KEY': c.client_key}),
            ('REDIS_TLS_CLIENT_CERT', {'REDIS_TLS_CACERT': c.ca, 'REDIS_TLS_CLIENT_CERT': garbage,
                                       'REDIS_TLS_CLIENT_KEY': c.client_key}),
            ('REDIS_TLS_CLIENT_KEY', {'REDIS_TLS_CACERT': c.ca, 'REDIS_TLS_CLIENT_CERT': c.client,
                                      'REDIS_TLS_CLIENT_KEY': missing}),
            ('REDIS_TLS_CLIENT_KEY', {'REDIS_TLS_CACERT': c.ca, 'REDIS_TLS_CLIENT_CERT': c.client,
                                      'REDIS_TLS_CLIENT_KEY': garbage}),
            # a key that is not the certificate's
            ('REDIS_TLS_CLIENT_KEY', {'REDIS_TLS_CACERT': c.ca, 'REDIS_TLS_CLIENT_CERT': c.client,
                                      'REDIS_TLS_CLIENT_KEY': c.other_client_key}),
            # a certificate without its key
            ('REDIS_TLS_CLIENT_KEY', {'REDIS_TLS_CACERT': c.ca, 'REDIS_TLS_CLIENT_CERT': c.client}),
            # the files are shared: the per-second store alone over TLS reads them too
            ('REDIS_TLS_CACERT', {'REDIS_TLS': None, 'REDIS_PERSECOND': 'true', 'REDIS_PERSECOND_TLS': 'true',
                                  'REDIS_PERSECOND_SOCKET_TYPE': 'tcp', 'REDIS_PERSECOND_URL': '127.0.0.1:1',
                                  'REDIS_TLS_CACERT': missing}),
        ]
        for name, env in cases:
            with self.subTest(setting=name, env=env):
                settings = redis_env(REDIS_SOCKET_TYPE='tcp', REDIS_URL='127.0.0.1:1', REDIS_TLS='true')
                settings.update(env)
                with Sluice(rules={'t.yaml': RULES}, wait_ready=False, env=settings) as s:
                    rc = s.wait_exit(10)
                    self.assertIsNotNone(rc, 'the server started anyway; %s' % s.log_tail())
                    self.assertEqual(rc, 1, s.log())
                    self.assertIn(name, s.log())


# ---------------------------------------------------------------------------------------------------------------
# The per-second store: its own REDIS_PERSECOND_TLS, the shared files

class PerSecondTls(TlsCase):
    def check_split(self, main, per_second, sluice):
        """SECOND counters go to `per_second`, the others to `main`."""
        wait_healthy(sluice)
        t0 = time.time()
        d = self.assertOk(sluice, 'grpc', 'ps', [[('sec', 'a')], [('min', 'a')]])
        self.assertEqual([(st.code, st.remaining, st.limit) for st in d.statuses],
                         [('OK', 99, (100, 'SECOND')), ('OK', 99, (100, 'HOUR'))], d)
        d = self.assertOk(sluice, 'json', 'ps', [[('min', 'a')]])
        self.assertEqual(d.statuses[0].remaining, 98, d)
        t1 = time.time()
        sec_keys = per_second.keys('ps_sec_a_*')
        self.assertEqual(len(sec_keys), 1, per_second.keys())
        self.assertIn(sec_keys[0], {key_for('ps_sec_a', 'SECOND', t) for t in range(int(t0), int(t1) + 1)})
        self.assertEqual(per_second.keys('ps_min_*'), [])
        min_key = self.assertOneKey(main, 'ps_min_a', 'HOUR', t0, t1)
        self.assertEqual(main.keys(), [min_key])
        self.assertEqual(main.get(min_key), '2')
        for redis in (main, per_second):
            harness.wait_until(lambda: len(redis.clients()) == 2, message='2 connections',
                               describe=lambda: repr(redis.clients()))

    def test_per_second_store_over_tls(self):
        # the main store over plain TCP, the per-second one over mutual TLS with the shared files
        main = RedisServer()
        self.addCleanup(main.close)
        per_second = self.redis(auth_clients='yes')
        env = redis_env(main, REDIS_PERSECOND='true', REDIS_POOL_SIZE='2', REDIS_PERSECOND_POOL_SIZE='2',
                        REDIS_TLS_CACERT=self.certs.ca, REDIS_TLS_CLIENT_CERT=self.certs.client,
                        REDIS_TLS_CLIENT_KEY=self.certs.client_key)
        env.update(per_second.sluice_env(prefix='REDIS_PERSECOND_'))
        self.assertEqual((env.get('REDIS_TLS'), env['REDIS_PERSECOND_TLS']), (None, 'true'))
        s = Sluice(rules={'ps.yaml': PER_SECOND_RULES}, env=env)
        self.addCleanup(s.close)
        self.check_split(main, per_second, s)

    def test_main_store_over_tls_per_second_plain(self):
        main = self.redis()
        per_second = RedisServer()
        self.addCleanup(per_second.close)
        env = redis_env(main, REDIS_PERSECOND='true', REDIS_POOL_SIZE='2', REDIS_PERSECOND_POOL_SIZE='2',
                        REDIS_TLS_CACERT=self.certs.ca)
        env.update(per_second.sluice_env(prefix='REDIS_PERSECOND_'))
        self.assertEqual((env['REDIS_TLS'], env.get('REDIS_PERSECOND_TLS')), ('true', None))
        s = Sluice(rules={'ps.yaml': PER_SECOND_RULES}, env=env)
        self.addCleanup(s.close)
        self.check_split(main, per_second, s)

    def test_both_stores_over_tls(self):
        main = self.redis()
        per_second = self.redis(auth_clients='yes')
        env = redis_env(main, REDIS_PERSECOND='true', REDIS_POOL_SIZE='2', REDIS_PERSECOND_POOL_SIZE='2',
                        REDIS_TLS_CACERT=self.certs.ca, REDIS_TLS_CLIENT_CERT=self.certs.client,
                        REDIS_TLS_CLIENT_KEY=self.certs.client_key)
        env.update(per_second.sluice_env(prefix='REDIS_PERSECOND_', host='localhost'))
        s = Sluice(rules={'ps.yaml': PER_SECOND_RULES}, env=env)
        self.addCleanup(s.close)
        self.check_split(main, per_second, s)


if __name__ == '__main__':
    unittest.main()
