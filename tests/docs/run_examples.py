#!/usr/bin/python3
"""The documentation's examples, run: what a page shows is what Sluice does.

1. Runnable shell examples. A ```sh block right after a `<!-- test: run -->` line is a transcript: each `$ `
   line is a command (a line ending in `\\` or a heredoc continues it) and the lines after it, up to the next
   command, are its output. Each page's blocks run in order in one bash, in a fresh folder where `build/` is the
   build tree, so a later block sees an earlier block's files, variables and server. The output must match
   line by line, `…` standing for any text; a command must exit 0. A command ending in `&` starts a server: its
   output goes to a log, and the next command waits until its HTTP port answers /healthcheck. The pages' ports
   (8080, 8081, 6070) become free ports of this run, given to the server as PORT, GRPC_PORT and DEBUG_PORT.
   A page may have a server of its own, which the reader starts as the page says (`scripts/run`, say): a
   `<!-- test: server [NAME=value...] -->` line starts build/sluice before the next runnable block, on the memory
   backend with the settings given (`{repo}` in a value is the repository) and the page's rule files: each ```yaml block right after a
   `<!-- test: rules -->` line. A rule block after the server started restarts it before the next block.
   Such a block never starts in the last 5 s of a minute, so that its requests share their windows; and the
   seconds a page shows until a window ends (`durationUntilReset`, `reset_seconds`) match any whole number.
2. YAML examples. Every ```yaml block must parse. One that is a rule file (a mapping with `domain` and `descriptors`) is loaded by
   `sluice check-config --limit-tables-redis`, which must print "all rate limit configs ok"; a block right after a
   `<!-- test: bad-rules -->` line must be refused instead.
3. Settings tables. Each name in the first column of a page's `| Setting |` table is one `sluice settings`
   lists (docs/reference/settings.md is made from the same list): a topic page cannot document a setting that
   was renamed or never existed.

Usage: run_examples.py REPO BUILD_DIR [PAGE.md...]   (default pages: README.md and docs/**/*.md)
       run_examples.py --self-test BUILD_DIR          (transcripts and rule files that must fail)
"""

import os
import pathlib
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

MARK = re.compile(r"^<!-- test: ([\w-]+)((?: [^ ]+)*) -->\s*$")
PORTS = {"8080": "PORT", "8081": "GRPC_PORT", "6070": "DEBUG_PORT"}


def blocks(text, standalone=False):
    """(line, language, marker or None, body lines) of each fenced block; with `standalone`, also each marker
    that stands alone (`server`), as (line, None, marker, its arguments)."""
    lines = text.split("\n")
    marker = None
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if m:
            marker = m.group(1)
            if marker == "server":
                if standalone:
                    yield i + 1, None, marker, m.group(2).split()
                marker = None
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if fence:
            start = i
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            yield start + 1, fence.group(1), marker, lines[start + 1:j]
            marker = None
            i = j
        elif lines[i].strip() and not m:
            marker = None
        i += 1


def transcript(body):
    """[(command, expected output lines)] of a `$ ` transcript."""
    steps = []
    i = 0
    while i < len(body):
        if not body[i].startswith("$ "):
            raise ValueError(f"transcript line {i + 1} is neither a command nor a command's output: {body[i]!r}")
        command = [body[i][2:]]
        heredoc = re.search(r"<<-?\s*'?(\w+)'?", body[i])
        i += 1
        while command[-1].endswith("\\") and i < len(body):
            command.append(body[i])
            i += 1
        if heredoc:
            while i < len(body) and body[i - 1] != heredoc.group(1):
                command.append(body[i])
                i += 1
        expected = []
        while i < len(body) and not body[i].startswith("$ "):
            expected.append(body[i])
            i += 1
        steps.append(("\n".join(command), expected))
    return steps


# A page shows the seconds to a window's end as they were when it was written; any whole number matches them.
RESET = re.compile(r'(?<="durationUntilReset":")\d+(?=s")|(?<="reset_seconds":)\d+')


def matches(expected, actual):
    if len(expected) != len(actual):
        return False
    for e, a in zip(expected, actual):
        parts = [RESET.sub("\0", re.escape(part)) for part in e.rstrip().split("…")]
        pattern = "^" + ".*".join(p.replace("\0", r"\d+") for p in parts) + "$"
        if not re.match(pattern, a.rstrip()):
            return False
    return True


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Shell:
    """One bash for a page: its variables, folder and background servers last across the page's blocks."""

    server_wait = 30  # seconds for a server to answer /healthcheck

    def __init__(self, build_dir, folder, repo):
        self.ports = {name: str(free_port()) for name in PORTS.values()}
        env = dict(os.environ, HOST="127.0.0.1", GRPC_HOST="127.0.0.1", DEBUG_HOST="127.0.0.1", **self.ports)
        os.symlink(build_dir, os.path.join(folder, "build"))
        self.folder = folder
        self.repo = str(repo)
        self.bash_env = env
        self.page_server = None
        self.bash = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=folder, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.servers = 0

    def run(self, command, timeout=60):
        for number, name in PORTS.items():
            command = re.sub(r"(?<=[:/ ])" + number + r"\b", self.ports[name], command)
        background = command.rstrip().endswith("&")
        if background:
            self.servers += 1
            command = f"{command.rstrip()[:-1]} >server{self.servers}.log 2>&1 &"
        self.bash.stdin.write(command + "\nprintf '\\n__END__%d\\n' $?\n")
        self.bash.stdin.flush()
        out = []
        deadline = time.monotonic() + timeout
        while True:
            line = self.bash.stdout.readline()
            if not line or time.monotonic() > deadline:
                return 1, "".join(out) + "\n(bash ended or timed out)"
            if line.startswith("__END__"):
                text = "".join(out).rstrip("\n")  # the marker's own newline, and the output's last
                if background:
                    return self.wait_healthy(), text
                return int(line[7:]), text
            out.append(line)

    def wait_healthy(self):
        deadline = time.monotonic() + self.server_wait
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['PORT']}/healthcheck", timeout=1):
                    return 0
            except OSError:
                time.sleep(0.05)
        return 1

    def server_logs(self):
        return "".join(pathlib.Path(self.folder, f"server{k}.log").read_text(errors="replace")
                       for k in range(1, self.servers + 1) if pathlib.Path(self.folder, f"server{k}.log").exists())

    def start_page_server(self, settings):
        """(Re)starts the page's own server: the memory backend, the page's rule blocks, and `settings`."""
        self.stop_page_server()
        env = dict(self.bash_env, BACKEND_TYPE="memory", USE_STATSD="false", RUNTIME_ROOT=f"{self.folder}/rules",
                   RUNTIME_WATCH_ROOT="false")
        env.update(s.replace("{repo}", self.repo).split("=", 1) for s in settings)
        os.makedirs(f"{self.folder}/rules/config", exist_ok=True)
        self.servers += 1
        with open(f"{self.folder}/server{self.servers}.log", "w") as log:
            self.page_server = subprocess.Popen([f"{self.folder}/build/sluice"], cwd=self.folder, env=env,
                                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        return self.wait_healthy()

    def stop_page_server(self):
        if self.page_server:
            self.page_server.terminate()
            self.page_server.wait(timeout=30)
            self.page_server = None

    def close(self):
        self.stop_page_server()
        try:
            os.killpg(self.bash.pid, 15)
        except ProcessLookupError:
            pass
        self.bash.wait(timeout=30)


def run_page(page, shown, build_dir, repo, failures):
    steps = [(line, lang, marker, body) for line, lang, marker, body in
             blocks(page.read_text(encoding="utf-8"), standalone=True) if marker in ("run", "rules", "server")]
    if not any(marker == "run" for _, _, marker, _ in steps):
        return 0
    count = 0
    with tempfile.TemporaryDirectory() as folder:
        shell = Shell(build_dir, folder, repo)
        settings, restart, rule_files = None, False, 0
        try:
            for line, lang, marker, body in steps:
                if marker == "server":
                    settings, restart = body, True
                    continue
                if marker == "rules":
                    rule_files += 1
                    os.makedirs(f"{folder}/rules/config", exist_ok=True)
                    pathlib.Path(f"{folder}/rules/config/{rule_files:02}.yaml").write_text("\n".join(body) + "\n")
                    restart = settings is not None
                    continue
                if settings is not None and time.time() % 60 > 55:
                    # The page's windows are a minute or a multiple of one: its requests must not straddle a
                    # window's end, which would split their counts.
                    time.sleep(60.2 - time.time() % 60)
                if restart:
                    restart = False
                    if shell.start_page_server(settings) != 0:
                        failures.append(f"{shown}:{line}: the page's server did not start:\n{shell.server_logs()}")
                        return count
                for command, expected in transcript(body):
                    count += 1
                    status, out = shell.run(command)
                    actual = out.split("\n") if out else []
                    if status != 0 or (expected and not matches(expected, actual)):
                        failures.append(f"{shown}:{line}: `{command.splitlines()[0]}` exited {status}"
                                        f"\n  expected: {expected}\n  got:      {actual}"
                                        + (f"\n  server log:\n{shell.server_logs()}" if shell.servers else ""))
                        return count
        finally:
            shell.close()
    return count


def check_yaml(page, shown, sluice, failures):
    count = 0
    for line, lang, marker, body in blocks(page.read_text(encoding="utf-8")):
        if lang not in ("yaml", "yml"):
            continue
        text = "\n".join(body)
        try:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as e:
            failures.append(f"{shown}:{line}: not YAML: {e}")
            continue
        if not docs or not all(isinstance(d, dict) and "domain" in d and "descriptors" in d for d in docs):
            continue
        count += 1
        with tempfile.TemporaryDirectory() as folder:
            pathlib.Path(folder, "example.yaml").write_text(text + "\n")
            # A table a rule names (limits_from) is taken as a Redis table: the pages show no table files.
            r = subprocess.run([sluice, "check-config", folder, "--limit-tables-redis"], capture_output=True, text=True)
        ok = r.returncode == 0 and "all rate limit configs ok" in r.stdout
        if ok == (marker == "bad-rules"):
            want = "refused" if marker == "bad-rules" else "loaded"
            failures.append(f"{shown}:{line}: the rule file should be {want} by sluice check-config: "
                            f"{(r.stdout + r.stderr).strip()}")
    return count


def check_settings_tables(page, shown, known, failures):
    count = 0
    in_table = False
    for n, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
        if re.match(r"^\| Setting \|", line):
            in_table = True
        elif not line.startswith("|"):
            in_table = False
        elif in_table:
            for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", line.split("|")[1]):
                count += 1
                family = name.endswith("_") or any(name.startswith(k[:-1]) for k in known if k.endswith("*"))
                if name not in known and not family:
                    failures.append(f"{shown}:{n}: {name} is in a settings table but is not a setting "
                                    "(sluice settings does not list it)")
    return count


def known_settings(sluice):
    out = subprocess.run([sluice, "settings"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.split("\n") if line.strip()}


def pages(repo, named):
    if named:
        return [pathlib.Path(p).resolve() for p in named]
    return [repo / "README.md"] + sorted(p for p in (repo / "docs").rglob("*.md") if not p.is_symlink())


def check(repo, build_dir, named=()):
    failures = []
    commands = rules = settings = 0
    known = known_settings(os.path.join(build_dir, "sluice"))
    for page in pages(repo, named):
        shown = str(page.relative_to(repo)) if page.is_relative_to(repo) else str(page)
        commands += run_page(page, shown, build_dir, repo, failures)
        rules += check_yaml(page, shown, os.path.join(build_dir, "sluice"), failures)
        if page.name != "settings.md":
            settings += check_settings_tables(page, shown, known, failures)
    return commands, rules, settings, failures


def self_test(build_dir):
    samples = {
        "wrong output": "<!-- test: run -->\n```sh\n$ echo 1\n2\n```\n",
        "missing output": "<!-- test: run -->\n```sh\n$ printf 'a\\nb\\n'\na\n```\n",
        "a failing command": "<!-- test: run -->\n```sh\n$ false\n```\n",
        "a rule file Sluice refuses": "```yaml\ndomain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n```\n",
        "a bad-rules example that loads": "<!-- test: bad-rules -->\n```yaml\ndomain: d\ndescriptors: [{key: k}]\n```\n",
        "not YAML": "```yaml\na: [1\n```\n",
        "a setting that does not exist": "| Setting | Default |\n|---|---|\n| `BACKEND_TYP` | `redis` |\n",
        "a server that never answers": "<!-- test: run -->\n```sh\n$ sleep 60 &\n```\n",
        "another number beside the reset time": "<!-- test: run -->\n```sh\n"
                                                 "$ echo '{\"left\":2,\"durationUntilReset\":\"9s\"}'\n"
                                                 "{\"left\":1,\"durationUntilReset\":\"51s\"}\n```\n",
        "a page server that cannot start": "<!-- test: server GRPC_PORT=abc -->\n<!-- test: run -->\n```sh\n$ true\n```\n",
        "a page server without the rule": "<!-- test: server -->\n<!-- test: run -->\n```sh\n"
                                          "$ curl -sf localhost:8080/json -d '{\"domain\":\"d\",\"descriptors\":[]}'\n```\n",
    }
    # A page server with its rule file, started by the first runnable block and restarted by a later rule file.
    with_server = ("<!-- test: server LOG_LEVEL=info -->\n\n<!-- test: rules -->\n```yaml\ndomain: d\ndescriptors:\n"
                   "  - {key: k, rate_limit: {unit: minute, requests_per_unit: 1}}\n```\n\n<!-- test: run -->\n```sh\n"
                   "$ D='{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"k\",\"value\":\"v\"}]}]}'\n"
                   "$ curl -s localhost:8080/json -d \"$D\"; echo; curl -s localhost:8080/json -d \"$D\"\n"
                   '{"overallCode":"OK",…}\n{"overallCode":"OVER_LIMIT",…}\n```\n\n<!-- test: rules -->\n```yaml\n'
                   "domain: e\ndescriptors: [{key: k}]\n```\n\n<!-- test: run -->\n```sh\n"
                   "$ curl -s localhost:8080/json -d \"$D\"\n"
                   '{"overallCode":"OK",…}\n```\n')
    good = ("<!-- test: run -->\n```sh\n$ X=$(echo hi) && cat > f <<'EOF'\nline 1\nEOF\n$ cat f; echo \"$X\" \\\n"
            "  there\nline 1\nhi there\n```\n\n<!-- test: run -->\n```sh\n$ echo \"$X at :8080\"\nhi at …\n"
            "$ echo '{\"durationUntilReset\":\"9s\"}'\n{\"durationUntilReset\":\"51s\"}\n```\n"
            "```yaml\ndomain: d\ndescriptors: [{key: k, rate_limit: {unit: minute, requests_per_unit: 1}}]\n```\n")
    problems = []
    Shell.server_wait = 2  # the sample server never answers
    with tempfile.TemporaryDirectory() as folder:
        def run(text):
            page = pathlib.Path(folder, "page.md")
            page.write_text(text)
            return check(pathlib.Path(folder), build_dir, [page])[3]
        for name, page in (("a good page", good), ("a good page with a server", with_server)):
            if run(page):
                problems.append(f"{name} fails: {run(page)}")
        if not run("<!-- test: run -->\n```sh\n$ echo :8080\n:8080\n```\n"):
            problems.append("the page's port 8080 was not replaced by a free port")
        for name, text in samples.items():
            if not run(text):
                problems.append(f"{name}: not caught")
    for p in problems:
        print("self-test:", p, file=sys.stderr)
    print(f"self-test: {len(samples) + 3 - len(problems)} of {len(samples) + 3} cases as expected")
    return 1 if problems else 0


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--self-test":
        return self_test(os.path.abspath(args[1]))
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    repo = pathlib.Path(args[0]).resolve()
    commands, rules, settings, failures = check(repo, os.path.abspath(args[1]), args[2:])
    for f in failures:
        print(f, file=sys.stderr)
    print(f"run_examples: {commands} commands run, {rules} rule files loaded, {settings} settings in tables "
          f"checked, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
