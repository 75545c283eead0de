"""scripts/bench rlqs (accuracy): 50 simulated Envoys (tests/e2e/rlqs_dataplane.py: Envoy's client, 5 s reports)
share one budget of 200 requests per second (12000 per minute) with Zipf demand (exponent BENCH_RLQS_ZIPF, default
1.5) adding up to 10 times the budget. Prints the fleet's admitted rate from the third report interval on (its
error against the budget), each client's admitted rate against its max-min fair share, then reverses the demand
(the heaviest client becomes the lightest) and prints, second by second, how the admitted total and the clients'
shares converge to the new fair shares.

Run by scripts/bench (which pins the server); alone: /usr/bin/python3 scripts/bench-data/rlqs_accuracy.py"""

import os
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
sys.path.insert(0, os.path.join(REPO, 'tests', 'e2e'))

import harness  # noqa: E402
from harness import Sluice  # noqa: E402
from rlqs_dataplane import DataPlane, Load  # noqa: E402

BUDGET = 200.0
CLIENTS = 50
TENANT = {'tenant': 'zipf'}
RULES = 'domain: quota\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: minute, requests_per_unit: 12000}\n'


def zipf(n, total, exponent):
    weights = [1.0 / (k ** exponent) for k in range(1, n + 1)]
    s = sum(weights)
    return [total * w / s for w in weights]


def fair_shares(demands, budget):
    """Max-min fair shares of `budget` for `demands` (no headroom): what an ideal allocator gives."""
    shares = [0.0] * len(demands)
    order = sorted(range(len(demands)), key=lambda i: demands[i])
    left = budget
    for pos, i in enumerate(order):
        equal = left / (len(demands) - pos)
        shares[i] = min(demands[i], equal)
        left -= shares[i]
    return shares


def main():
    exponent = float(os.environ.get('BENCH_RLQS_ZIPF', '1.5'))
    with Sluice(rules={'quota.yaml': RULES}) as sluice:
        print('server pid: %d' % sluice.proc.pid)
        target = '127.0.0.1:%d' % sluice.grpc_port
        demands = zipf(CLIENTS, 10 * BUDGET, exponent)
        planes = [DataPlane(target, 'quota', interval=5.0) for _ in range(CLIENTS)]
        loads = [Load(p, TENANT, d) for p, d in zip(planes, demands)]
        try:
            time.sleep(10)  # two report intervals
            t0 = time.monotonic()
            before = [l.snapshot()[0] for l in loads]
            time.sleep(20)
            seconds = time.monotonic() - t0
            admitted = [l.snapshot()[0] - b for l, b in zip(loads, before)]
            total = sum(admitted) / seconds
            print('zipf exponent %.2f, %d clients, demand %.0f/s in all (%.1f/s .. %.1f/s), budget %.0f/s'
                  % (exponent, CLIENTS, sum(demands), min(demands), max(demands), BUDGET))
            print('admitted from 10 s to 30 s: %.1f/s, %+.2f%% against the budget' % (total, 100 * (total / BUDGET - 1)))
            fair = fair_shares(demands, BUDGET)
            worst = max(abs(a / seconds - f) / f for a, f in zip(admitted, fair))
            print('per client: admitted vs max-min fair share, worst relative difference %.1f%%' % (100 * worst))
            for i in (0, 1, 4, 9, 24, 49):
                print('  client %2d: demand %7.1f/s fair %6.2f/s admitted %6.2f/s'
                      % (i + 1, demands[i], fair[i], admitted[i] / seconds))

            # The shift: demands reversed.
            for load, d in zip(loads, reversed(demands)):
                load.rate = d
            new_demands = list(reversed(demands))
            new_fair = fair_shares(new_demands, BUDGET)
            print('demand reversed at t=30 s; per second: admitted total, clients within 20% of their new fair share')
            prev = [l.snapshot()[0] for l in loads]
            for second in range(1, 26):
                time.sleep(1)
                now = [l.snapshot()[0] for l in loads]
                rates = [n - p for n, p in zip(now, prev)]
                prev = now
                close = sum(1 for r, f in zip(rates, new_fair) if abs(r - f) <= max(0.2 * f, 1.0))
                print('  +%2d s: %6.1f/s (%+5.1f%%), %2d of %d clients near their share'
                      % (second, sum(rates), 100 * (sum(rates) / BUDGET - 1), close, CLIENTS))
        finally:
            for l in loads:
                l.stop()
            for p in planes:
                p.close()


if __name__ == '__main__':
    main()
