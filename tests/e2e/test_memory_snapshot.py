"""Counters that survive a restart (issue 41, part 4): MEMORY_SNAPSHOT_FILE on the memory backend. SIGTERM under
load, then a restart: every algorithm's counts continue exactly. kill -9 with MEMORY_SNAPSHOT_INTERVAL: at most
one interval's hits are lost. A missing file starts empty silently; a corrupt, truncated or other-version file
starts empty with one warning naming the file and the reason; a folder that cannot take the file, or settings
that do not fit, stop the start naming the setting."""

import datetime
import os
import re
import shutil
import struct
import tempfile
import threading
import time
import unittest
import zlib

import harness
from harness import Sluice
from test_redis import attempt

RULES = """
domain: snap
descriptors:
  - key: fixed
    rate_limit: {unit: hour, requests_per_unit: 1000000}
  - key: sliding
    rate_limit: {unit: hour, requests_per_unit: 1000000, algorithm: sliding_window}
  - key: gcra
    rate_limit: {unit: day, requests_per_unit: 100000, algorithm: gcra, burst: 100000}
"""
KEYS = ('fixed', 'sliding', 'gcra')
GCRA_INTERVAL = 86400 / 100000  # 0.864 s


class Load:
    """Threads deciding one hit on each key in turn until stopped; the answered hits per key, with their times."""

    def __init__(self, sluice, threads=4):
        self.answered = {k: [] for k in KEYS}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(sluice, n), daemon=True) for n in range(threads)]
        for t in self.threads:
            t.start()

    def run(self, sluice, n):
        i = n
        while not self.stopping.is_set():
            key = KEYS[i % len(KEYS)]
            i += 1
            outcome, detail, _ = attempt(sluice, 'grpc' if n % 2 else 'json', 'snap', [{'entries': [(key, 'v')]}],
                                         timeout=2.0)
            if outcome == 'ok':
                self.assert_ok(detail)
                with self.lock:
                    self.answered[key].append(time.time())
            elif not sluice.running():
                return

    @staticmethod
    def assert_ok(detail):
        if detail.overall != 'OK':
            raise AssertionError(repr(detail))

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(10)

    def count(self, key, before=None):
        with self.lock:
            return sum(1 for t in self.answered[key] if before is None or t < before)


class SnapshotCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='sluice-e2e-snapshot-')
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.file = os.path.join(self.dir, 'counters.bin')

    def sluice(self, **env):
        s = Sluice(rules={'snap.yaml': RULES},
                   env=dict({'MEMORY_SNAPSHOT_FILE': self.file, 'LOG_LEVEL': 'info'}, **env))
        self.addCleanup(s.close)
        return s

    def remaining(self, s, key):
        outcome, detail, _ = attempt(s, 'grpc', 'snap', [{'entries': [(key, 'v')], 'hits_addend': 0}])
        self.assertEqual(outcome, 'ok', detail)
        return detail.statuses[0].remaining

    def assertCounts(self, s, counted, since):
        """The restarted server's counters hold exactly `counted` hits per key (GCRA: less what has refilled since
        `since`, the first hit's time at the latest)."""
        self.assertEqual(self.remaining(s, 'fixed'), 1000000 - counted['fixed'])
        self.assertEqual(self.remaining(s, 'sliding'), 1000000 - counted['sliding'])
        refilled = (time.time() - since) / GCRA_INTERVAL
        gcra = self.remaining(s, 'gcra')
        self.assertTrue(100000 - counted['gcra'] <= gcra <= 100000 - counted['gcra'] + refilled + 1,
                        (gcra, counted['gcra'], refilled))


class Restart(SnapshotCase):
    def test_sigterm_under_load_then_a_restart_continues_the_counts_exactly(self):
        s = self.sluice()
        started = time.time()  # GCRA refills from the first hit on: the load's start
        load = Load(s)
        time.sleep(1.5)
        s.terminate()
        self.assertEqual(s.wait_exit(15), 0, s.log_tail())
        load.stop()
        log = s.log()
        counted = {k: load.count(k) for k in KEYS}
        self.assertTrue(all(c > 20 for c in counted.values()), counted)
        self.assertIn('wrote 3 counters to %s' % self.file, log)
        s.proc = None
        s.start()
        self.assertIn('restored 3 counters from %s (0 dropped' % self.file, s.log())
        self.assertCounts(s, counted, started)

    def test_kill_9_loses_at_most_one_interval(self):
        interval = 0.3
        s = self.sluice(MEMORY_SNAPSHOT_INTERVAL='300ms', LOG_LEVEL='debug')
        load = Load(s)
        time.sleep(1.6)
        killed = time.time()
        s.proc.kill()
        s.proc.wait()
        load.stop()
        counted = {k: load.count(k) for k in KEYS}
        # The periodic writes, at debug (an info log does not gain a line every interval), every interval: when
        # the last began (its line's time less its duration) is what it must hold, whatever a busy machine did
        # to the timer (a fixed 0.1 s for a write's own time failed beside a CPU hog).
        writes = [(line, m) for line in s.log().splitlines()
                  for m in [re.search(r'time="([^"]+)" level=(\w+) msg="wrote .* in (\d+) ms"', line)] if m]
        self.assertGreaterEqual(len(writes), 3, s.log_tail())
        self.assertTrue(all(m.group(2) == 'debug' for _, m in writes), writes)
        last = writes[-1][1]
        stamp = datetime.datetime.fromisoformat(last.group(1)[:26]).replace(tzinfo=datetime.timezone.utc)
        began = stamp.timestamp() - int(last.group(3)) / 1000
        s.proc = None
        s.start()
        # What the last write held: every hit answered before it began, at most every hit answered.
        for key in ('fixed', 'sliding'):
            held = 1000000 - self.remaining(s, key)
            floor = load.count(key, before=began - 0.01)
            print('\n%s: %d answered, %d restored, %d answered before the last write, %.2f s before the kill'
                  % (key, counted[key], held, floor, killed - began))
            self.assertLessEqual(held, counted[key])
            self.assertGreaterEqual(held, floor)


class BadFiles(SnapshotCase):
    def test_a_missing_file_starts_empty_silently(self):
        s = self.sluice(LOG_LEVEL=None)
        self.assertEqual(self.remaining(s, 'fixed'), 1000000)
        self.assertNotIn('MEMORY_SNAPSHOT_FILE', s.log())

    def test_corrupt_truncated_and_other_version_files_start_empty_with_one_warning(self):
        body = b'SLUICEMS' + struct.pack('<Iqq', 1, int(time.time()), 1)
        key = b'snap_fixed_v_%d' % (int(time.time()) // 3600 * 3600)
        body += b'\x00' + struct.pack('<I', len(key)) + key + struct.pack('<Qq', 5, int(time.time()) + 3600)
        good = body + struct.pack('<I', zlib.crc32(body))
        other = good.replace(b'SLUICEMS\x01', b'SLUICEMS\x07', 1)
        other = other[:-4] + struct.pack('<I', zlib.crc32(other[:-4]))
        # `good` is a version 1 file (before leases per holder): an upgrade reads it, and loses no counters.
        for name, content, reason in (('good, version 1', good, None),
                                      ('flipped', good[:30] + bytes([good[30] ^ 1]) + good[31:],
                                       'checksum mismatch (truncated or corrupt)'),
                                      ('truncated', good[:25], 'truncated (25 bytes)'),
                                      ('other version', other, 'version 7 (this Sluice reads versions 1 to 2)'),
                                      ('not one', b'{"counters": []}', 'not a Sluice memory snapshot')):
            with self.subTest(file=name):
                with open(self.file, 'wb') as f:
                    f.write(content)
                s = self.sluice()
                if reason is None:
                    self.assertEqual(self.remaining(s, 'fixed'), 1000000 - 5)
                else:
                    self.assertEqual(self.remaining(s, 'fixed'), 1000000)
                    warnings = [line for line in s.log().splitlines() if 'MEMORY_SNAPSHOT_FILE' in line]
                    self.assertEqual(len(warnings), 1, warnings)
                    self.assertIn('level=warning', warnings[0])
                    self.assertIn('%s cannot be read: %s; starting with no counters' % (self.file, reason),
                                  warnings[0])
                s.close()

    def test_settings_and_folders_that_do_not_fit_stop_the_start(self):
        blocker = os.path.join(self.dir, 'a-file')
        with open(blocker, 'w') as f:
            f.write('not a folder')
        for env, message in (
                ({'MEMORY_SNAPSHOT_FILE': '/nonexistent-sluice/counters.bin'},
                 'MEMORY_SNAPSHOT_FILE: cannot create /nonexistent-sluice/counters.bin.probe-'),
                ({'MEMORY_SNAPSHOT_FILE': blocker + '/counters.bin'}, 'Not a directory'),
                # A folder where the file should be: every write would fail, and the counters be lost at stop.
                ({'MEMORY_SNAPSHOT_FILE': self.dir}, 'MEMORY_SNAPSHOT_FILE: %s is a directory' % self.dir),
                ({'MEMORY_SNAPSHOT_FILE': self.file, 'BACKEND_TYPE': 'redis'},
                 'MEMORY_SNAPSHOT_FILE applies to BACKEND_TYPE=memory only (BACKEND_TYPE is redis): unset it'),
                ({'MEMORY_SNAPSHOT_INTERVAL': '1s'},
                 'MEMORY_SNAPSHOT_INTERVAL needs MEMORY_SNAPSHOT_FILE'),
                ({'MEMORY_SNAPSHOT_FILE': self.file, 'MEMORY_SNAPSHOT_INTERVAL': '10ms'},
                 "invalid value '10ms' for MEMORY_SNAPSHOT_INTERVAL: expected 0 or a duration from 100ms to 24h")):
            with self.subTest(env=env):
                log = Sluice.failed_start(self, dict({'BACKEND_TYPE': 'memory'}, **env))
                self.assertIn(message, log)


if __name__ == '__main__':
    unittest.main()
