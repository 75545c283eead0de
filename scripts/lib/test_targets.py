"""Prints the ninja targets that some tests of a meson build directory need, one a line.

usage: test_targets.py BUILD_DIR [TEST_NAME | --suite SUITE | --no-suite SUITE]...

The tests are chosen as `meson test` chooses them from the same arguments: the named tests and those of each
--suite (all of them when neither is given), less those of each --no-suite. scripts/test builds only these
when it is given suites or tests, and scripts/sanitize for its TSan suites.
"""

import json
import os
import subprocess
import sys


def introspect(build_dir, what):
    out = subprocess.run(['meson', 'introspect', build_dir, what], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def in_suite(test, suite):
    # meson's suites are 'project:suite'; --suite names either part, or the whole.
    return any(s == suite or s.split(':')[0] == suite or s.split(':', 1)[-1] == suite for s in test['suite'])


def parse(args):
    names, suites, excluded = set(), [], []
    it = iter(args)
    for arg in it:
        if arg in ('--suite', '--no-suite'):
            value = next(it, None)
            if value is None:
                sys.exit('%s needs a suite name' % arg)
            (suites if arg == '--suite' else excluded).append(value)
        elif arg.startswith('-'):
            sys.exit('unsupported argument %s (test names, --suite and --no-suite only)' % arg)
        else:
            names.add(arg)
    return names, suites, excluded


def main():
    build_dir = sys.argv[1]
    names, suites, excluded = parse(sys.argv[2:])
    every = introspect(build_dir, '--tests')
    missing = names - {t['name'] for t in every}
    if missing:
        sys.exit('no such test in %s: %s' % (build_dir, ', '.join(sorted(missing))))
    unknown = [s for s in suites + excluded if not any(in_suite(t, s) for t in every)]
    if unknown:
        sys.exit('no such suite in %s: %s' % (build_dir, ', '.join(unknown)))
    chosen = [t for t in every
              if ((not names and not suites) or t['name'] in names or any(in_suite(t, s) for s in suites))
              and not any(in_suite(t, s) for s in excluded)]
    needed = {dep for t in chosen for dep in t['depends']}
    root = os.path.abspath(build_dir)
    for target in introspect(build_dir, '--targets'):
        if target['id'] in needed:
            for path in target['filename']:
                print(os.path.relpath(path, root))


if __name__ == '__main__':
    main()
