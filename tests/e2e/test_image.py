"""The container image under podman, run as each downstream runs envoyproxy/ratelimit's (issue 28; the facts are in
the pages under docs/start/): Istio's sample (a ConfigMap at /data/ratelimit/config, reloaded as the kubelet
updates it), Envoy Gateway's Deployment (its whole env list, no /data, rules over xDS with mutual TLS, gRPC over
TLS from /certs and the certificate replaced in place, Prometheus on :19001 with its mapper file, its probes) and
Contour's example (Redis as a sidecar on localhost). Every container runs as UID 65534 on a read-only root with
all capabilities dropped and no-new-privileges, in a pod of its own (a network namespace, as in Kubernetes) with
its default ports published on free loopback ports. The image is built with `scripts/image --from-build`."""

import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import unittest

import grpc

import harness
import rls_pb2  # noqa: E402  (generated; harness puts it on sys.path)
from harness import TlsCerts
from xds_server import XdsServer, config

PODMAN_ENV = dict(os.environ, CONTAINERS_CONF=os.path.join(harness.REPO, 'scripts', 'lib', 'containers.conf'))
# What Envoy Gateway's security context asks for, as podman flags.
RESTRICTED = ['--user', '65534:65534', '--read-only', '--read-only-tmpfs=false', '--cap-drop=ALL',
              '--security-opt', 'no-new-privileges']
RULES_V1 = 'domain: mesh\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n'
RULES_V2 = 'domain: mesh\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 4}\n'
OK, OVER = 1, 2
IMAGE = None


def podman(*args, check=True, timeout=120):
    r = subprocess.run(['podman'] + list(args), env=PODMAN_ENV, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout, text=True)
    if check and r.returncode != 0:
        raise AssertionError('podman %s failed (%d): %s' % (' '.join(args), r.returncode, r.stderr))
    return r


def setUpModule():
    global IMAGE
    r = subprocess.run([os.path.join(harness.REPO, 'scripts', 'image'), '--from-build'], env=dict(
        PODMAN_ENV, SLUICE_BIN=harness.SLUICE_BIN), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError('scripts/image --from-build failed: %s' % r.stderr)
    IMAGE = r.stdout.strip().splitlines()[-1]


def bridge_gateway():
    """The host's address on podman's default bridge: what a container reaches the host at."""
    return podman('network', 'inspect', 'podman', '--format', '{{range .Subnets}}{{.Gateway}}{{end}}').stdout.strip()


class ConfigMapDir:
    """A directory laid out as the kubelet mounts a ConfigMap or Secret: `..<timestamp>/` holding the files, a
    `..data` symlink to it and one symlink per key; update() writes a new timestamp directory, swaps `..data`
    atomically (a rename over it) and removes the old one, as the kubelet's AtomicWriter does."""

    def __init__(self, files):
        self.dir = tempfile.mkdtemp(prefix='sluice-image-cm-')
        os.chmod(self.dir, 0o755)
        self._n = 0
        self._current = None
        self.update(files)
        for name in files:
            os.symlink(os.path.join('..data', name), os.path.join(self.dir, name))

    def update(self, files):
        self._n += 1
        stamp = '..2026_11_26_09_00_%02d.%d' % (self._n, 1000 + self._n)
        os.mkdir(os.path.join(self.dir, stamp))
        os.chmod(os.path.join(self.dir, stamp), 0o755)
        for name, content in files.items():
            path = os.path.join(self.dir, stamp, name)
            mode = 'wb' if isinstance(content, bytes) else 'w'
            with open(path, mode) as f:
                f.write(content)
            os.chmod(path, 0o644)
        tmp = os.path.join(self.dir, '..data_tmp')
        os.symlink(stamp, tmp)
        os.rename(tmp, os.path.join(self.dir, '..data'))
        if self._current:
            shutil.rmtree(os.path.join(self.dir, self._current))
        self._current = stamp

    def close(self):
        harness.remove_tmp(self.dir)


class Pod:
    """A podman pod (one network namespace) with the given container ports published on free loopback ports
    (self.port[container port]); a container of the image in it, and helper processes in its namespace."""

    def __init__(self, test, ports, hosts=()):
        self.test = test
        self.port = dict(zip(ports, harness.free_ports(len(ports))))
        self.name = 'sluice-e2e-%d-%d' % (os.getpid(), id(self) % 100000)
        args = ['pod', 'create', '--name', self.name]
        for container_port, host_port in self.port.items():
            args += ['-p', '127.0.0.1:%d:%d' % (host_port, container_port)]
        for host, address in hosts:
            args += ['--add-host', '%s:%s' % (host, address)]
        podman(*args)
        podman('pod', 'start', self.name)  # its infra container holds the namespace the sidecars join
        self.processes = []
        self.container = self.name + '-sluice'
        test.addCleanup(self.close)

    def infra_pid(self):
        infra = podman('pod', 'inspect', self.name, '--format', '{{.InfraContainerID}}').stdout.strip()
        return podman('inspect', infra, '--format', '{{.State.Pid}}').stdout.strip()

    def spawn_in_namespace(self, args):
        """A host program inside the pod's network namespace: a sidecar on its localhost."""
        p = subprocess.Popen(['nsenter', '-t', self.infra_pid(), '-n'] + args, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.processes.append(p)
        return p

    def redis_sidecar(self):
        workdir = tempfile.mkdtemp(prefix='sluice-image-redis-')
        self.test.addCleanup(harness.remove_tmp, workdir)
        self.spawn_in_namespace(['redis-server', '--port', '6379', '--bind', '127.0.0.1', '--save', '',
                                 '--appendonly', 'no', '--dir', workdir])

    def run(self, env, mounts=(), extra=()):
        args = ['run', '-d', '--pod', self.name, '--name', self.container] + RESTRICTED + list(extra)
        for host_path, container_path in mounts:
            args += ['-v', '%s:%s:ro' % (host_path, container_path)]
        for k, v in env.items():
            args += ['-e', '%s=%s' % (k, v)]
        podman(*(args + [IMAGE]))

    def logs(self):
        r = podman('logs', self.container, check=False)
        return r.stdout + r.stderr

    def wait_for_log(self, needle, timeout=15.0, count=1):
        harness.wait_until(lambda: self.logs().count(needle) >= count, timeout=timeout,
                           message='%r in the container log' % needle, describe=lambda: self.logs()[-3000:])

    def wait_http_ready(self, timeout=15.0):
        def ready():
            try:
                return harness.http_get(self.port[8080], '/healthcheck', timeout=1.0)[0] == 200
            except OSError:
                return False
        harness.wait_until(ready, timeout=timeout, message='/healthcheck answering 200',
                           describe=lambda: self.logs()[-3000:])

    def state(self):
        return json.loads(podman('inspect', self.container, '--format', '{{json .State}}').stdout)

    def close(self):
        for p in self.processes:
            p.kill()
            p.wait()
        if harness.KEEP:
            return
        podman('pod', 'rm', '--force', '--time', '2', self.name, check=False)


def decide_h2c(port, domain, value):
    return harness.rls(port, domain, [[('k', value)]]).overall_code


class ImageCase(unittest.TestCase):
    def assertCodes(self, decide, expected, message=''):
        self.assertEqual([decide() for _ in expected], expected, message)


class TheImage(ImageCase):
    def inspect(self):
        return json.loads(podman('image', 'inspect', IMAGE).stdout)[0]

    def test_size_labels_user_and_entrypoint(self):
        image = self.inspect()
        self.assertLessEqual(image['Size'], 60 * 1000 * 1000, 'the image is %d bytes' % image['Size'])
        labels = image['Config']['Labels']
        version = subprocess.run([harness.SLUICE_BIN, '--version'], stdout=subprocess.PIPE, text=True).stdout
        m = re.fullmatch(r'sluice (\d+\.\d+\.\d+) \(commit ([0-9a-f]{40}(-dirty)?|unknown)\)\n', version)
        self.assertIsNotNone(m, version)
        self.assertEqual(labels['org.opencontainers.image.version'], m.group(1))
        self.assertEqual(labels['org.opencontainers.image.revision'], m.group(2))
        self.assertEqual(labels['org.opencontainers.image.licenses'], 'Apache-2.0')
        # The repository's https address when the clone has one as its origin, else no source label (issue 40: it
        # was a local path).
        source = labels.get('org.opencontainers.image.source')
        self.assertTrue(source is None or source.startswith('https://'), source)
        with open(os.path.join(harness.REPO, 'Dockerfile')) as f:
            self.assertIn('ARG VERSION=%s\n' % m.group(1), f.read(), "the Dockerfile's default VERSION")
        self.assertEqual(image['Config']['User'], '65532:65532')
        self.assertEqual(image['Config']['Entrypoint'], ['/bin/ratelimit'])
        self.assertIn('localhost/sluice:%s' % m.group(1), image['RepoTags'])
        self.assertEqual(podman('run', '--rm', *RESTRICTED, IMAGE, '--version').stdout, version)

    def test_both_paths_and_the_subcommands(self):
        rules = tempfile.mkdtemp(prefix='sluice-image-rules-')
        self.addCleanup(harness.remove_tmp, rules)
        os.chmod(rules, 0o755)
        with open(os.path.join(rules, 'mesh.yaml'), 'w') as f:
            f.write(RULES_V1)
        # A calendar window: the zone is found in the image's zoneinfo.
        with open(os.path.join(rules, 'calendar.yaml'), 'w') as f:
            f.write('domain: cal\ndescriptors:\n  - key: plan\n'
                    '    rate_limit: {unit: month, requests_per_unit: 5, time_zone: Australia/Lord_Howe}\n')
        for name in ('mesh.yaml', 'calendar.yaml'):
            os.chmod(os.path.join(rules, name), 0o644)
        for binary in ('/bin/ratelimit', '/bin/sluice'):
            r = podman('run', '--rm', *RESTRICTED, '-v', rules + ':/rules:ro', '--entrypoint', binary, IMAGE,
                       'check-config', '/rules')
            self.assertEqual(r.stdout.strip().splitlines()[-1], 'all rate limit configs ok')
        r = podman('run', '--rm', *RESTRICTED, IMAGE, 'client', '-help', check=False)
        self.assertIn('-dial_string', r.stdout + r.stderr)

    def test_no_shell(self):
        for shell in ('/bin/sh', '/bin/bash', '/usr/bin/apt-get'):
            r = podman('run', '--rm', '--entrypoint', shell, IMAGE, check=False)
            self.assertNotEqual(r.returncode, 0, shell)


class Istio(ImageCase):
    """samples/ratelimit/rate-limit-service.yaml: the ConfigMap `ratelimit-config` at /data/ratelimit/config,
    Redis at redis:6379 (here a sidecar the name points to), HOST and GRPC_HOST "::"."""

    ENV = {'LOG_LEVEL': 'debug', 'REDIS_SOCKET_TYPE': 'tcp', 'REDIS_URL': 'redis:6379', 'USE_STATSD': 'false',
           'RUNTIME_ROOT': '/data', 'RUNTIME_SUBDIRECTORY': 'ratelimit', 'RUNTIME_WATCH_ROOT': 'false',
           'RUNTIME_IGNOREDOTFILES': 'true', 'HOST': '::', 'GRPC_HOST': '::'}

    def test_configmap_reload_and_decisions_over_h2c(self):
        cm = ConfigMapDir({'config.yaml': RULES_V1})
        self.addCleanup(cm.close)
        pod = Pod(self, [8080, 8081, 6070], hosts=[('redis', '127.0.0.1')])
        pod.redis_sidecar()
        pod.run(self.ENV, mounts=[(cm.dir, '/data/ratelimit/config')], extra=['--entrypoint', '/bin/ratelimit'])
        pod.wait_http_ready()
        grpc_port = pod.port[8081]
        self.assertCodes(lambda: decide_h2c(grpc_port, 'mesh', 'a'), [OK, OK, OVER])
        loaded = 'Successfully loaded new configuration'
        before = pod.logs().count(loaded)
        cm.update({'config.yaml': RULES_V2})
        pod.wait_for_log(loaded, count=before + 1)
        time.sleep(1.0)  # a second reload would come within the 100 ms debounce, or the directory's removal
        logs = pod.logs()
        self.assertEqual(logs.count(loaded), before + 1, logs[-3000:])
        self.assertNotIn('duplicate', logs)
        self.assertNotIn('Error loading', logs)
        self.assertCodes(lambda: decide_h2c(grpc_port, 'mesh', 'b'), [OK, OK, OK, OK, OVER])


def read_pem_pair(paths):
    """(certificate, key) files -> their bytes."""
    with open(paths[0], 'rb') as f, open(paths[1], 'rb') as g:
        return f.read(), g.read()


def presented_certificate(port, ca):
    """The DER certificate a new TLS connection (ALPN h2) to 127.0.0.1:port is given."""
    context = ssl.create_default_context(cafile=ca)
    context.check_hostname = False
    context.set_alpn_protocols(['h2'])
    with socket.create_connection(('127.0.0.1', port), timeout=3) as raw:
        with context.wrap_socket(raw, server_hostname='envoy-ratelimit') as tls:
            assert tls.selected_alpn_protocol() == 'h2', tls.selected_alpn_protocol()
            return tls.getpeercert(binary_form=True)


class EnvoyGateway(ImageCase):
    """internal/infrastructure/kubernetes/ratelimit/: the Deployment Envoy Gateway renders."""

    MAPPER = '\n'.join([
        'mappings:',
        '  - match: "ratelimit.service.rate_limit.*.*.*.over_limit"',
        '    name: "ratelimit_service_rate_limit_over_limit"',
        '    labels: {domain: "$1", key1: "$2", key2: "$3"}',
        '  - match: "ratelimit.service.rate_limit.*.*.over_limit"',
        '    name: "ratelimit_service_rate_limit_over_limit"',
        '    labels: {domain: "$1", key1: "$2"}', ''])

    def env(self, xds_port):
        return {'RUNTIME_ROOT': '/data', 'RUNTIME_SUBDIRECTORY': 'ratelimit', 'RUNTIME_IGNOREDOTFILES': 'true',
                'RUNTIME_WATCH_ROOT': 'false', 'LOG_LEVEL': 'info', 'USE_STATSD': 'false',
                'CONFIG_TYPE': 'GRPC_XDS_SOTW', 'CONFIG_GRPC_XDS_SERVER_URL': 'envoy-gateway:%d' % xds_port,
                'CONFIG_GRPC_XDS_NODE_ID': 'envoy-ratelimit', 'GRPC_SERVER_USE_TLS': 'true',
                'GRPC_SERVER_TLS_CERT': '/certs/tls.crt', 'GRPC_SERVER_TLS_KEY': '/certs/tls.key',
                'GRPC_SERVER_TLS_CA_CERT': '/certs/ca.crt', 'CONFIG_GRPC_XDS_SERVER_USE_TLS': 'true',
                'CONFIG_GRPC_XDS_CLIENT_TLS_CERT': '/certs/tls.crt',
                'CONFIG_GRPC_XDS_CLIENT_TLS_KEY': '/certs/tls.key',
                'CONFIG_GRPC_XDS_SERVER_TLS_CACERT': '/certs/ca.crt', 'FORCE_START_WITHOUT_INITIAL_CONFIG': 'true',
                'USE_PROMETHEUS': 'true', 'PROMETHEUS_ADDR': ':19001',
                'PROMETHEUS_MAPPER_YAML': '/etc/statsd-exporter/conf.yaml'}

    def probe(self, pod):
        """The startup, readiness and liveness probes: GET /healthcheck on 8080, 1 s timeout each."""
        return [harness.http_get(pod.port[8080], '/healthcheck', timeout=1.0)[0] for _ in range(3)]

    def test_xds_with_mutual_tls_grpc_over_tls_certificate_rotation_prometheus_and_probes(self):
        certs = TlsCerts()
        self.addCleanup(certs.close)
        with open(certs.ca) as f:
            ca_pem = f.read()
        crt, key = read_pem_pair(certs.rsa_leaf('ratelimit', 'envoy-ratelimit', 'DNS:envoy-ratelimit,DNS:localhost'))
        gateway_crt, gateway_key = certs.rsa_leaf('gateway', 'envoy-gateway', 'DNS:envoy-gateway')
        secret = ConfigMapDir({'ca.crt': ca_pem, 'tls.crt': crt, 'tls.key': key})
        self.addCleanup(secret.close)
        mapper = ConfigMapDir({'conf.yaml': self.MAPPER})
        self.addCleanup(mapper.close)

        gateway = bridge_gateway()
        xds_port = harness.free_port()
        pod = Pod(self, [8080, 8081, 19001], hosts=[('envoy-gateway', gateway)])
        pod.redis_sidecar()
        pod.run(dict(self.env(xds_port), REDIS_SOCKET_TYPE='tcp', REDIS_URL='localhost:6379'), mounts=[(secret.dir, '/certs'), (mapper.dir, '/etc/statsd-exporter')],
                extra=['--entrypoint', '/bin/ratelimit'])
        # The xDS server is not up yet: FORCE_START_WITHOUT_INITIAL_CONFIG starts it anyway, probes pass.
        pod.wait_http_ready()
        started_at = pod.state()['StartedAt']
        self.assertEqual(self.probe(pod), [200, 200, 200])
        stub = self.tls_stub(pod.port[8081], certs.ca)
        with self.assertRaises(grpc.RpcError) as raised:
            stub(harness.rls_request_proto('eg', [[('k', 'a')]]), timeout=5)
        self.assertIn('no rate limit configuration loaded', raised.exception.details())

        server = XdsServer(port=xds_port, host=gateway, tls={
            'cert': gateway_crt, 'key': gateway_key, 'ca': certs.ca,
            'require_client_auth': True},
            snapshot=('v1', [config('eg', 'eg', [{'key': 'k', 'unit': 'HOUR', 'requests': 2,
                                                  'descriptors': [{'key': 'path', 'unit': 'HOUR',
                                                                   'requests': 1}]}])]))
        self.addCleanup(server.stop)
        server.wait_for_ack('v1', timeout=30)
        self.assertEqual(server.requests[0][1].node.id, 'envoy-ratelimit')
        decide = lambda: stub(harness.rls_request_proto('eg', [[('k', 'b'), ('path', '/x')]]), timeout=5).overall_code
        self.assertCodes(decide, [OK, OVER, OVER])

        # Prometheus on :19001, named by the mapper file; what Envoy Gateway's e2e tests read.
        def scraped():
            _, _, text = harness.http_get(pod.port[19001], '/metrics', timeout=2.0)
            return re.search(r'ratelimit_service_rate_limit_over_limit\{domain="eg",key1="k",key2="path"\} 2',
                             text)
        harness.wait_until(scraped, timeout=20, message='the over_limit series on :19001', describe=lambda: '\n'.join(
            line for line in harness.http_get(pod.port[19001], '/metrics')[2].splitlines() if 'over_limit' in line))

        # The certificate in /certs replaced as a Secret update is: new connections get it, no restart.
        self.assertEqual(presented_certificate(pod.port[8081], certs.ca), ssl.PEM_cert_to_DER_cert(crt.decode()))
        new_crt, new_key = read_pem_pair(certs.rsa_leaf('ratelimit2', 'envoy-ratelimit', 'DNS:envoy-ratelimit'))
        secret.update({'ca.crt': ca_pem, 'tls.crt': new_crt, 'tls.key': new_key})
        harness.wait_until(lambda: presented_certificate(pod.port[8081], certs.ca) ==
                           ssl.PEM_cert_to_DER_cert(new_crt.decode()), timeout=15,
                           message='the new certificate on new connections', describe=lambda: pod.logs()[-3000:])
        fresh = self.tls_stub(pod.port[8081], certs.ca)
        self.assertEqual(fresh(harness.rls_request_proto('eg', [[('k', 'c')]]), timeout=5).overall_code, OK)
        state = pod.state()  # the same process all along: never restarted
        self.assertTrue(state['Running'])
        self.assertEqual(state['StartedAt'], started_at)

    def tls_stub(self, port, ca):
        with open(ca, 'rb') as f:
            credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
        channel = grpc.secure_channel('127.0.0.1:%d' % port, credentials, options=[
            ('grpc.ssl_target_name_override', 'envoy-ratelimit'), ('grpc.enable_http_proxy', 0)])
        self.addCleanup(channel.close)
        return channel.unary_unary('/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
                                   request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
                                   response_deserializer=rls_pb2.RateLimitResponse.FromString)


class Contour(ImageCase):
    """examples/ratelimit/: Redis as a sidecar on localhost, liveness /healthcheck on 8080; the rules mounted
    read-only. Also: `podman stop` ends it within the grace period with exit 0."""

    ENV = {'LOG_LEVEL': 'debug', 'REDIS_SOCKET_TYPE': 'tcp', 'REDIS_URL': 'localhost:6379', 'USE_STATSD': 'false',
           'RUNTIME_ROOT': '/data', 'RUNTIME_SUBDIRECTORY': 'ratelimit', 'RUNTIME_WATCH_ROOT': 'false',
           'RUNTIME_IGNOREDOTFILES': 'true'}

    def test_redis_sidecar_liveness_and_stop(self):
        cm = ConfigMapDir({'ratelimit-config.yaml': RULES_V1})
        self.addCleanup(cm.close)
        pod = Pod(self, [8080, 8081])
        pod.redis_sidecar()
        pod.run(self.ENV, mounts=[(cm.dir, '/data/ratelimit/config')])  # no command: the entrypoint
        pod.wait_http_ready()
        self.assertCodes(lambda: decide_h2c(pod.port[8081], 'mesh', 'c'), [OK, OK, OVER])
        started = time.monotonic()
        podman('stop', '--time', '30', pod.container)
        self.assertLess(time.monotonic() - started, 15.0)
        state = pod.state()
        self.assertEqual(state['ExitCode'], 0, pod.logs()[-3000:])
        self.assertIn('Shutdown complete', pod.logs())


class MissingMounts(ImageCase):
    """A mounted file that is missing or unreadable is named in one log line, and the process exits non-zero
    (rules, as upstream without FORCE_START_WITHOUT_INITIAL_CONFIG; certificates; the Prometheus mapping)."""

    BASE = {'USE_STATSD': 'false', 'BACKEND_TYPE': 'memory', 'RUNTIME_ROOT': '/data',
            'RUNTIME_SUBDIRECTORY': 'ratelimit', 'RUNTIME_WATCH_ROOT': 'false', 'RUNTIME_IGNOREDOTFILES': 'true'}

    def run_fails(self, env, needle, mounts=()):
        args = ['run', '--rm'] + RESTRICTED
        for host_path, container_path in mounts:
            args += ['-v', '%s:%s:ro' % (host_path, container_path)]
        for k, v in dict(self.BASE, **env).items():
            args += ['-e', '%s=%s' % (k, v)]
        r = podman(*(args + [IMAGE]), check=False, timeout=30)
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = [line for line in (r.stdout + r.stderr).splitlines() if needle in line]
        self.assertTrue(lines, 'no line names %r in:\n%s' % (needle, r.stdout + r.stderr))

    def test_rules_certificates_and_mapper(self):
        cm = ConfigMapDir({'config.yaml': RULES_V1})
        self.addCleanup(cm.close)
        rules = [(cm.dir, '/data/ratelimit/config')]
        self.run_fails({}, '/data/ratelimit/config')
        self.run_fails({'GRPC_SERVER_USE_TLS': 'true', 'GRPC_SERVER_TLS_CERT': '/certs/tls.crt',
                        'GRPC_SERVER_TLS_KEY': '/certs/tls.key'}, 'GRPC_SERVER_TLS_CERT', mounts=rules)
        self.run_fails({'USE_PROMETHEUS': 'true', 'PROMETHEUS_MAPPER_YAML': '/etc/statsd-exporter/conf.yaml'},
                       '/etc/statsd-exporter/conf.yaml', mounts=rules)
        unreadable = ConfigMapDir({'conf.yaml': 'mappings: []\n'})
        self.addCleanup(unreadable.close)
        os.chmod(os.path.join(unreadable.dir, os.readlink(os.path.join(unreadable.dir, '..data')), 'conf.yaml'), 0o600)
        self.run_fails({'USE_PROMETHEUS': 'true', 'PROMETHEUS_MAPPER_YAML': '/etc/statsd-exporter/conf.yaml'},
                       '/etc/statsd-exporter/conf.yaml', mounts=rules + [(unreadable.dir, '/etc/statsd-exporter')])


if __name__ == '__main__':
    unittest.main(verbosity=2)
