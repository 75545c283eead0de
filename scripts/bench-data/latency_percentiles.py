"""Reads h2load --log-file lines (start time, status, duration in microseconds) and prints p50/p90/p99/max."""
import sys

durations = sorted(int(line.split()[2]) for line in open(sys.argv[1]) if line.strip())
if not durations:
    sys.exit('no requests in the log')


def pct(p):
    return durations[min(len(durations) - 1, int(len(durations) * p))] / 1000.0


print('latency over %d requests: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms'
      % (len(durations), pct(0.50), pct(0.90), pct(0.99), durations[-1] / 1000.0))
