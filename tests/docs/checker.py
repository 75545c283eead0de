"""What the docs checkers share: their command line and their self-test's report."""

import pathlib
import sys


def self_test_result(failures, cases):
    """Prints the self-test's failures and its count; -> the exit status."""
    for f in failures:
        print("self-test:", f, file=sys.stderr)
    print(f"self-test: {cases - len(failures)} of {cases} cases as expected")
    return 1 if failures else 0


def main(name, doc, check, self_test):
    """`NAME REPO` prints check(REPO)'s offences; `NAME --self-test` runs self_test(). -> the exit status."""
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(doc, file=sys.stderr)
        return 2
    offences = check(pathlib.Path(sys.argv[1]).resolve())
    for o in offences:
        print(o, file=sys.stderr)
    print(f"{name}: {len(offences)} offence(s)")
    return 1 if offences else 0
