"""scripts/bench sources: what an xDS update costs beside rule files (CONFIG_TYPE=FILE,GRPC_XDS_SOTW), as the time
from the test xDS server's push to Sluice's ACK (its rules loaded, joined to the files' and published), the median
and the largest of 20 pushes of one small resource, with 0 and with 1,000 rule files of 10 rules each beside it.
Unpinned, on the e2e harness (tests/e2e/xds_server.py); SLUICE_BIN and SLUICE_PY_PROTO as for the e2e tests."""

import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, 'tests', 'e2e'))

import harness  # noqa: E402
from xds_server import XdsServer, config  # noqa: E402

PUSHES = 20


def rule_file(domain, rules):
    return 'domain: %s\ndescriptors:\n' % domain + ''.join(
        '  - key: k%d\n    value: v%d\n    rate_limit: {unit: minute, requests_per_unit: %d}\n' % (i, i, i + 1)
        for i in range(rules))


def resource(requests):
    return config('mesh', 'mesh', [{'key': 'user', 'unit': 'HOUR', 'requests': requests}])


def measure(files):
    server = XdsServer(snapshot=('v0', [resource(1)]))
    env = {'CONFIG_TYPE': 'FILE,GRPC_XDS_SOTW', 'CONFIG_GRPC_XDS_SERVER_URL': '127.0.0.1:%d' % server.port,
           'LOG_LEVEL': 'warn'}
    for setting in os.environ.get('BENCH_STATS_ENV', 'DISABLE_STATS=true').split():
        name, _, value = setting.partition('=')
        env[name] = value
    sluice = harness.Sluice(rules={'f%04d.yaml' % i: rule_file('d%04d' % i, 10) for i in range(files)}, env=env)
    try:
        server.wait_for_ack('v0', timeout=60)
        times = []
        for v in range(1, PUSHES + 1):
            version = 'v%d' % v
            t0 = time.monotonic()
            server.push(version, [resource(v + 1)])
            while not any(acked == version for acked, _ in server.acks()):
                time.sleep(0.001)
            times.append(time.monotonic() - t0)
        times.sort()
        print('sources: %d rule files (%d rules) beside xDS: push to ACK median %.1f ms, max %.1f ms' %
              (files, files * 10, times[len(times) // 2] * 1000, times[-1] * 1000), flush=True)
    finally:
        sluice.close()
        server.stop()


if __name__ == '__main__':
    for files in (0, 1000):
        measure(files)
