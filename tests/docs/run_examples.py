#!/usr/bin/python3
"""The documentation's examples, run: what a page shows is what Sluice does.

1. Runnable shell examples. A ```sh block right after a `<!-- test: run -->` line is a transcript: each `$ `
   line is a command (a line ending in `\\` or a heredoc continues it) and the lines after it, up to the next
   command, are its output. Each page's blocks run in order in one bash, in a fresh folder where `build/` is the
   build tree, so a later block sees an earlier block's files, variables and server. The output must match
   line by line, `…` standing for any text; a command shown without output must print nothing; a command must
   exit 0 within a minute, with nothing to read on its stdin. A command ending in `&` starts a server: its
   output goes to a log, and the next command waits until it answers /healthcheck on its HTTP port (it must
   still run: a second server that cannot bind fails). The pages' ports (8080, 8081, 6070) become free ports of
   this run, given to the server as PORT, GRPC_PORT and DEBUG_PORT.
   A page may have a server of its own, which the reader starts as the page says (`scripts/run`, say): a
   `<!-- test: server [NAME=value...] -->` line starts build/sluice before the next runnable block, on the memory
   backend with the settings given (`{repo}` in a value is the repository) and the page's rule files: each
   ```yaml block right after a `<!-- test: rules -->` line. A rule block after the server started restarts it
   before the next block.
   A page's first runnable block never starts in the last 20 s of a minute, so that its requests share their
   windows (every window of the pages ends on a minute); the seconds a page shows until a window ends
   (`durationUntilReset`, `reset_seconds`) match any whole number.
2. YAML examples. Every ```yaml block must parse. One that is a rule file (a mapping with `domain` and
   `descriptors`) is loaded by `sluice check-config --limit-tables-redis`, which must print "all rate limit
   configs ok"; a block right after a `<!-- test: bad-rules -->` line must be refused instead.
3. Settings tables. Each name in the first column of a page's `| Setting |` table is one `sluice settings`
   lists (docs/reference/settings.md is made from the same list), and a default shown as a literal is the
   declared one: a topic page cannot document a setting that was renamed, never existed, or changed default.
A `<!-- test: ... -->` line of any other form is an error: a misspelt marker would skip its example silently.

Usage: run_examples.py REPO BUILD_DIR [PAGE.md...]   (default pages: README.md and docs/**/*.md)
       run_examples.py --self-test BUILD_DIR          (transcripts and rule files that must fail)
"""

import os
import pathlib
import re
import secrets
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import checker
import yaml

MARKERS = ("run", "rules", "bad-rules", "server")
MARK = re.compile(r"^<!-- test: ([\w-]+)((?: [^ ]+)*) -->\s*$")
PORTS = {"8080": "PORT", "8081": "GRPC_PORT", "6070": "DEBUG_PORT"}
# A heredoc's word starts with a letter (`$((1<<2))` is a shift), quoted or not; `<<-` strips leading tabs.
HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_]\w*)\2")


class PageError(Exception):
    """A page that cannot be read as the markers say: reported at its line, the other pages still run."""


def blocks(text, standalone=False):
    """(line, language, marker or None, body lines) of each fenced block (indented ones dedented); with
    `standalone`, also each `server` marker, as (line, None, "server", its arguments)."""
    lines = text.split("\n")
    fences = {start: (end, indent, info) for start, end, indent, info in checker.fenced_blocks(lines)}
    marker = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("<!-- test"):
            m = MARK.match(line.strip())
            if not m or m.group(1) not in MARKERS:
                raise PageError(f"{i + 1}: not a marker: {line.strip()!r} (markers: "
                                + ", ".join(f"<!-- test: {k} -->" for k in MARKERS) + ")")
            marker = m.group(1)
            if marker == "server":
                if standalone:
                    yield i + 1, None, marker, m.group(2).split()
                marker = None
        elif i in fences:
            end, indent, info = fences[i]
            body = [b[len(indent):] if b.startswith(indent) else b.lstrip() for b in lines[i + 1:end]]
            yield i + 1, info, marker, body
            marker = None
            i = end
        elif line.strip():
            marker = None
        i += 1


def transcript(body, first_line):
    """[(command, expected output lines)] of a `$ ` transcript."""
    steps = []
    i = 0
    while i < len(body):
        if not body[i].startswith("$ "):
            raise PageError(f"{first_line + i + 1}: neither a command nor a command's output: {body[i]!r}")
        command = [body[i][2:]]
        i += 1
        while command[-1].endswith("\\") and i < len(body):
            command.append(body[i])
            i += 1
        for strip_tabs, _, word in HEREDOC.findall("\n".join(command)):
            while i < len(body) and (body[i - 1].lstrip("\t") if strip_tabs else body[i - 1]) != word:
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


def answers(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthcheck", timeout=1):
            return True
    except OSError:
        return False


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
        self.servers = 0
        self.end = f"__end_{secrets.token_hex(8)}__"  # no output of a page's command can end a command early
        # Its own session: close() ends bash and everything a transcript started in the background.
        self.bash = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=folder, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.pending = b""

    def _read_until_end(self, timeout):
        """(exit status or None on a timeout, output) of the command just sent."""
        deadline = time.monotonic() + timeout
        while True:
            head, sep, rest = self.pending.partition(f"\n{self.end}".encode())
            if sep and b"\n" in rest:
                status, _, self.pending = rest.partition(b"\n")
                return int(status), head.decode(errors="replace").rstrip("\n")
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.bash.stdout], [], [], left)[0]:
                return None, self.pending.decode(errors="replace")
            chunk = os.read(self.bash.stdout.fileno(), 65536)
            if not chunk:
                return None, self.pending.decode(errors="replace") + "\n(bash ended)"
            self.pending += chunk

    def run(self, command, timeout=60):
        for number, name in PORTS.items():
            command = re.sub(r"(?<=[:/ =])" + number + r"\b", self.ports[name], command)
        background = command.rstrip().endswith("&")
        if background:
            if answers(self.ports["PORT"]):
                return 1, f"a server already answers on the page's port {self.ports['PORT']}"
            self.servers += 1
            command = f"{command.rstrip()[:-1]} >server{self.servers}.log 2>&1 &"
        # stdin is /dev/null: a command that reads it gets end of file, and never the runner's next lines.
        script = f"{{ {command}\n}} </dev/null\nprintf '\\n{self.end}%d\\n' $?\n"
        self.bash.stdin.write(script.encode())
        self.bash.stdin.flush()
        status, out = self._read_until_end(timeout)
        if status is None:
            return 124, out + f"\n(no end after {timeout} s)"
        if background and status == 0:
            self.bash.stdin.write(f"printf '%s\\n{self.end}0\\n' $!\n".encode())
            self.bash.stdin.flush()
            _, pid = self._read_until_end(10)
            return self.wait_healthy(lambda: _alive(int(pid))), out
        return status, out

    def wait_healthy(self, alive):
        deadline = time.monotonic() + self.server_wait
        while time.monotonic() < deadline and alive():
            if answers(self.ports["PORT"]):
                return 0
            time.sleep(0.05)
        return 1

    def start_page_server(self, settings):
        """(Re)starts the page's own server: the memory backend, the page's rule blocks, and `settings`."""
        self.stop_page_server()
        env = dict(self.bash_env, BACKEND_TYPE="memory", USE_STATSD="false", RUNTIME_ROOT=f"{self.folder}/rules",
                   RUNTIME_WATCH_ROOT="false")
        for setting in settings:
            name, eq, value = setting.partition("=")
            if not eq:
                raise PageError(f"server setting {setting!r} is not NAME=value")
            env[name] = value.replace("{repo}", self.repo)
        if answers(self.ports["PORT"]):
            return 1
        os.makedirs(f"{self.folder}/rules/config", exist_ok=True)
        self.servers += 1
        with open(f"{self.folder}/server{self.servers}.log", "w") as log:
            self.page_server = subprocess.Popen([f"{self.folder}/build/sluice"], cwd=self.folder, env=env,
                                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        return self.wait_healthy(lambda: self.page_server.poll() is None)

    def stop_page_server(self):
        if self.page_server:
            self.page_server.terminate()
            self.page_server.wait(timeout=30)
            self.page_server = None

    def server_logs(self):
        logs = (pathlib.Path(self.folder, f"server{k}.log") for k in range(1, self.servers + 1))
        return "".join(log.read_text(errors="replace") for log in logs if log.exists())

    def close(self):
        self.stop_page_server()
        try:
            os.killpg(self.bash.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.bash.wait(timeout=30)


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def wait_for_room_in_the_minute(margin=20):
    if time.time() % 60 > 60 - margin:
        time.sleep(60.2 - time.time() % 60)


def run_page(page, shown, build_dir, repo, failures):
    steps = [s for s in blocks(page.read_text(encoding="utf-8"), standalone=True) if s[2] in MARKERS]
    if not any(marker == "run" for _, _, marker, _ in steps):
        return 0
    count = 0
    with tempfile.TemporaryDirectory() as folder:
        shell = Shell(build_dir, folder, repo)
        settings, restart, rule_files, first = None, False, 0, True
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
                if marker != "run":
                    continue
                if restart:
                    restart = False
                    if shell.start_page_server(settings) != 0:
                        failures.append(f"{shown}:{line}: the page's server did not start:\n{shell.server_logs()}")
                        return count
                if first:
                    first = False
                    wait_for_room_in_the_minute()
                for command, expected in transcript(body, line):
                    count += 1
                    status, out = shell.run(command)
                    actual = out.split("\n") if out else []
                    if status != 0 or not matches(expected, actual):
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


def check_settings_tables(page, shown, declared, failures):
    """Names (and literal defaults) in a page's `| Setting | Default | ... |` tables against `declared`."""
    count = 0
    default_column = None
    for n, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
        if re.match(r"^\| Setting \|", line):
            heads = [h.strip() for h in line.strip("|").split("|")]
            default_column = heads.index("Default") if "Default" in heads else -1
            continue
        if not line.startswith("|"):
            default_column = None
        if default_column is None or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[0]):
            count += 1
            if name.endswith("_"):
                known = any(d.startswith(name) for d in declared)
            else:
                known = name in declared
            if not known:
                failures.append(f"{shown}:{n}: {name} is in a settings table but is not a setting "
                                "(sluice settings does not list it)")
                continue
            shown_default = re.fullmatch(r"`([^`]*)`", cells[default_column]) if 0 <= default_column < len(cells) else None
            if shown_default and name in declared and not same_default(shown_default.group(1), declared[name]):
                failures.append(f"{shown}:{n}: {name}'s default is shown as `{shown_default.group(1)}`, "
                                f"but it is {declared[name] or '(empty)'}")
    return count


def same_default(shown, declared):
    """Whether a page's default is the declared one (None: worked out at start-up, any shown value goes)."""
    if declared is None or shown == declared:
        return True
    try:
        return float(shown) == float(declared)  # 1.0 and 1
    except ValueError:
        return False


def declared_settings(sluice):
    """{name: literal default, '' when empty, None when worked out at start-up} from `sluice settings`."""
    out = subprocess.run([sluice, "settings"], capture_output=True, text=True, check=True).stdout
    declared = {}
    for line in out.split("\n"):
        fields = re.split(r"\s{2,}", line.strip())
        if not fields or not fields[0]:
            continue
        default = fields[1] if len(fields) > 2 else ""
        declared[fields[0]] = None if default.startswith("(") and default != "(empty)" else (
            "" if default == "(empty)" else default)
    return declared


def pages(repo, named):
    return [pathlib.Path(p).resolve() for p in named] if named else checker.pages(repo)


def check(repo, build_dir, named=()):
    failures = []
    commands = rules = settings = 0
    declared = declared_settings(os.path.join(build_dir, "sluice"))
    for page in pages(repo, named):
        shown = str(page.relative_to(repo)) if page.is_relative_to(repo) else str(page)
        try:
            commands += run_page(page, shown, build_dir, repo, failures)
            rules += check_yaml(page, shown, os.path.join(build_dir, "sluice"), failures)
        except PageError as e:
            failures.append(f"{shown}:{e}")
        if page.name != "settings.md":
            settings += check_settings_tables(page, shown, declared, failures)
    return commands, rules, settings, failures


def self_test(build_dir):
    samples = {
        "wrong output": "<!-- test: run -->\n```sh\n$ echo 1\n2\n```\n",
        "missing output": "<!-- test: run -->\n```sh\n$ printf 'a\\nb\\n'\na\n```\n",
        "output where none is shown": "<!-- test: run -->\n```sh\n$ echo ERROR\n```\n",
        "a failing command": "<!-- test: run -->\n```sh\n$ false\n```\n",
        "a failure behind an end-like line": "<!-- test: run -->\n```sh\n$ printf 'x\\n__END__0\\n'; false\nx\n__END__0\n```\n",
        "a misspelt marker": "<!-- test: runn -->\n```sh\n$ true\n```\n",
        "a transcript line that is no command": "<!-- test: run -->\n```sh\n# a comment\n```\n",
        "a rule file Sluice refuses": "```yaml\ndomain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n```\n",
        "an indented rule file Sluice refuses": "- item\n\n    ```yaml\n    domain: d\n    descriptors: [{key: k, rate_limit: {unit: x, requests_per_unit: 1}}]\n    ```\n",
        "a bad-rules example that loads": "<!-- test: bad-rules -->\n```yaml\ndomain: d\ndescriptors: [{key: k}]\n```\n",
        "not YAML": "```yaml\na: [1\n```\n",
        "a setting that does not exist": "| Setting | Default |\n|---|---|\n| `BACKEND_TYP` | `redis` |\n",
        "a prefix of no setting": "| Setting | Default |\n|---|---|\n| `REDSI_` | |\n",
        "a default that is not the declared one": "| Setting | Default |\n|---|---|\n| `PORT` | `8000` |\n",
        "a server that never answers": "<!-- test: run -->\n```sh\n$ sleep 60 &\n```\n",
        "a second server that cannot bind": "<!-- test: run -->\n```sh\n$ BACKEND_TYPE=memory USE_STATSD=false "
                                            "RUNTIME_ROOT=/nonexistent FORCE_START_WITHOUT_INITIAL_CONFIG=true build/sluice &\n"
                                            "$ BACKEND_TYPE=memory USE_STATSD=false RUNTIME_ROOT=/nonexistent "
                                            "FORCE_START_WITHOUT_INITIAL_CONFIG=true build/sluice &\n```\n",
        "another number beside the reset time": "<!-- test: run -->\n```sh\n"
                                                 "$ echo '{\"left\":2,\"durationUntilReset\":\"9s\"}'\n"
                                                 "{\"left\":1,\"durationUntilReset\":\"51s\"}\n```\n",
        "a page server that cannot start": "<!-- test: server GRPC_PORT=abc -->\n<!-- test: run -->\n```sh\n$ true\n```\n",
        # An unknown domain is OK, as upstream's: only the rule makes the second request over.
        "a page server without the rule": "<!-- test: server -->\n<!-- test: run -->\n```sh\n"
                                          "$ D='{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"k\",\"value\":\"v\"}]}]}'\n"
                                          "$ curl -s localhost:8080/json -d \"$D\"; echo; curl -s localhost:8080/json -d \"$D\"\n"
                                          '{"overallCode":"OK",…}\n{"overallCode":"OVER_LIMIT",…}\n```\n',
    }
    good = ("<!-- test: run -->\n```sh\n$ X=$(echo hi) && cat > f <<'EOF'\nline 1\nEOF\n$ cat f; echo \"$X\" \\\n"
            "  there\nline 1\nhi there\n$ echo $((1<<2)) && cat <<\"END\"\nquoted\nEND\n4\nquoted\n"
            "$ cat\n```\n\n"  # reads its stdin: end of file at once, never the runner's next line
            "<!-- test: run -->\n```sh\n$ echo \"$X at :8080\"\nhi at …\n"
            "$ echo '{\"durationUntilReset\":\"9s\"}'\n{\"durationUntilReset\":\"51s\"}\n```\n"
            "```yaml\ndomain: d\ndescriptors: [{key: k, rate_limit: {unit: minute, requests_per_unit: 1}}]\n```\n"
            "| Setting | Default | Meaning |\n|---|---|---|\n| `PORT` | `8080` | x |\n| `REDIS_PERSECOND_` | | x |\n")
    # A page server with its rule file, started by the first runnable block and restarted by a later rule file.
    with_server = ("<!-- test: server LOG_LEVEL=info -->\n\n<!-- test: rules -->\n```yaml\ndomain: d\ndescriptors:\n"
                   "  - {key: k, rate_limit: {unit: minute, requests_per_unit: 1}}\n```\n\n<!-- test: run -->\n```sh\n"
                   "$ D='{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"k\",\"value\":\"v\"}]}]}'\n"
                   "$ curl -s localhost:8080/json -d \"$D\"; echo; curl -s localhost:8080/json -d \"$D\"\n"
                   '{"overallCode":"OK",…}\n{"overallCode":"OVER_LIMIT",…}\n```\n\n<!-- test: rules -->\n```yaml\n'
                   "domain: e\ndescriptors: [{key: k}]\n```\n\n<!-- test: run -->\n```sh\n"
                   "$ curl -s localhost:8080/json -d \"$D\"\n"
                   '{"overallCode":"OK",…}\n```\n')
    problems = []
    Shell.server_wait = 3  # the sample servers that never answer
    with tempfile.TemporaryDirectory() as folder:
        def run(text):
            page = pathlib.Path(folder, "page.md")
            page.write_text(text)
            return check(pathlib.Path(folder), build_dir, [page])[3]
        for name, page in (("a good page", good), ("a good page with a server", with_server)):
            if run(page):
                problems.append(f"{name} fails: {run(page)}")
        if not run("<!-- test: run -->\n```sh\n$ echo :8080 PORT=8080\n:8080 PORT=8080\n```\n"):
            problems.append("the page's port 8080 was not replaced by a free port")
        for name, text in samples.items():
            if not run(text):
                problems.append(f"{name}: not caught")
    return checker.self_test_result(problems, len(samples) + 3)


def main():
    # A timeout's SIGTERM (meson's) runs the cleanups: no bash or server outlives the run.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
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
