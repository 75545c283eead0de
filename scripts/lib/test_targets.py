"""Prints the ninja targets that the named tests of a meson build directory need, one a line.

usage: test_targets.py BUILD_DIR TEST_NAME...  (scripts/sanitize builds only these for its TSan suites)
"""

import json
import os
import subprocess
import sys


def introspect(build_dir, what):
    out = subprocess.run(['meson', 'introspect', build_dir, what], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    build_dir, names = sys.argv[1], set(sys.argv[2:])
    tests = [t for t in introspect(build_dir, '--tests') if t['name'] in names]
    missing = names - {t['name'] for t in tests}
    if missing:
        sys.exit('no such test in %s: %s' % (build_dir, ', '.join(sorted(missing))))
    needed = {dep for t in tests for dep in t['depends']}
    root = os.path.abspath(build_dir)
    for target in introspect(build_dir, '--targets'):
        if target['id'] in needed:
            for path in target['filename']:
                print(os.path.relpath(path, root))


if __name__ == '__main__':
    main()
