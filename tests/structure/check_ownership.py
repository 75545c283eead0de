#!/usr/bin/python3
"""The ownership rules of docs/architecture.md, checked on the source tree.

1. Work reaches a worker through core::per_worker only: no code outside src/core/ posts, dispatches or spawns
   onto a worker's io_context chosen by index (`x[i]`, `.front()`, `context(i)`). An object's own executor
   (`socket.get_executor()`, `ex_`) is fine: that is the object's thread, not a worker picked from outside.
2. A backend's settings are its own: the environment variables of BACKEND_TYPE=redis, memcache and memory are
   read (by a file that reads the environment: it names core::env_reader) in src/ratelimit/backends/<name>/
   only, and their settings types are named outside it only by the one
   place that chooses the backend (src/app/backend_choice.*).

Usage: check_ownership.py SOURCE_ROOT    (exit 1 with each offence as file:line: why)
       check_ownership.py --self-test    (the rules on samples that must pass and must fail)
"""

import pathlib
import re
import sys

CALL = re.compile(r"\b(?:asio::)?(post|dispatch|defer|co_spawn)\s*\(")
INDEXED = re.compile(r"\[[^\]]*\]|\.front\(\)|\.back\(\)|\bcontext\s*\(")

# Each exception names why it is not a fan-out.
ALLOWED = {
    ("src/net/grpc/server.cpp", "target->ioc"):
        "GRPC_UDS: the one unix acceptor hands each accepted connection to the next worker in turn",
}

BACKEND_ENV = re.compile(r'"(REDIS_[A-Z_]*|MEMCACHE_[A-Z_]*|MEMORY_(?:MAX_COUNTERS|SNAPSHOT_[A-Z_]*))"')
BACKEND_TYPES = re.compile(r"\b(redis_settings|redis_store_settings|memcache_settings|memory_settings)\b")


def first_argument(text, start):
    """The text of a call's first argument, from the character after its opening parenthesis."""
    depth = 0
    for k in range(start, min(len(text), start + 400)):
        c = text[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return text[start:k]
            depth -= 1
        elif c == "," and depth == 0:
            return text[start:k]
    return text[start:start + 400]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def check_posts(path, text):
    offences = []
    code = strip_comments(text)
    for m in CALL.finditer(code):
        target = first_argument(code, m.end())
        if not INDEXED.search(target):
            continue
        if any(path == f and key in target for (f, key) in ALLOWED):
            continue
        line = code.count("\n", 0, m.start()) + 1
        offences.append(f"{path}:{line}: {m.group(1)} onto a worker picked by index ({target.strip()}): "
                        "use core::per_worker (post_each / on_each)")
    return offences


def backend_of(path):
    m = re.match(r"src/ratelimit/backends/(redis|memcache|memory)/", path)
    return m.group(1) if m else None


def check_backend_settings(path, text):
    offences = []
    code = strip_comments(text)
    owner = backend_of(path)
    selects = path.startswith("src/app/backend_choice.")
    reads_env = "env_reader" in code
    for m in BACKEND_ENV.finditer(code if reads_env else ""):
        name = m.group(1)
        backend = "redis" if name.startswith("REDIS_") else "memcache" if name.startswith("MEMCACHE_") \
            else "memory"
        if owner != backend:
            line = code.count("\n", 0, m.start()) + 1
            offences.append(f"{path}:{line}: {name} is read outside src/ratelimit/backends/{backend}/")
    if owner is None and not selects:
        for m in BACKEND_TYPES.finditer(code):
            line = code.count("\n", 0, m.start()) + 1
            offences.append(f"{path}:{line}: {m.group(1)} is a backend's own settings: reach it through "
                            "its module (src/ratelimit/backends/<name>/module.hpp)")
    return offences


def check_file(path, text):
    offences = []
    if not path.startswith("src/core/"):
        offences += check_posts(path, text)
    offences += check_backend_settings(path, text)
    return offences


def check_tree(root):
    offences = []
    for f in sorted((root / "src").rglob("*")):
        if f.suffix not in (".cpp", ".hpp", ".in"):
            continue
        rel = f.relative_to(root).as_posix()
        offences += check_file(rel, f.read_text(encoding="utf-8"))
    return offences


SAMPLES_BAD = [
    ("src/app/a.cpp", "asio::post(workers.context(i), [&] { f(); });"),
    ("src/app/a.cpp", "boost::asio::post(pool[i]->ioc,\n  [] {});"),
    ("src/ratelimit/api/b.cpp", "co_await asio::co_spawn(ctxs.front(), g(), asio::use_awaitable);"),
    ("src/app/c.cpp", "asio::dispatch(executors[k], h);"),
    ("src/app/d.cpp", 'void f(const core::env_reader& env) { auto url = env.get_string("REDIS_URL", ""); }'),
    ("src/ratelimit/settings.cpp", 'core::env_reader env; env.get_bool("MEMCACHE_TLS", false);'),
    ("src/ratelimit/backends/redis/x.cpp", 'g(const core::env_reader& e) { e.get_string("MEMORY_SNAPSHOT_FILE", ""); }'),
    ("src/app/e.cpp", "const ratelimit::backends::redis::redis_settings& s = x;"),
]
SAMPLES_GOOD = [
    ("src/core/per_worker.hpp", "boost::asio::post(pool_->context(i), f);"),
    ("src/net/h.cpp", "asio::post(socket_.get_executor(), [self] { self->go(); });"),
    ("src/app/a.cpp", "// asio::post(workers.context(i), f) was written here by hand\nf();"),
    ("src/app/a.cpp", "asio::post(control, [x = v[i]] { g(x); });"),
    ("src/net/grpc/server.cpp", "asio::post(target->ioc, [target] {});"),
    ("src/ratelimit/backends/redis/settings.cpp", 'const core::env_reader& env; env.get_string("REDIS_URL", "");'),
    ("src/ratelimit/backends/memory/settings.cpp", 'core::env_reader& env; env.get_string("MEMORY_SNAPSHOT_FILE", "");'),
    ("src/redis/connection_setup.cpp", 'make_tls({"REDIS_TLS_CACERT", "REDIS_TLS_CLIENT_CERT"});'),
    ("src/app/backend_choice.cpp", "redis_settings r = read(env);"),
    ("src/app/f.cpp", 'stats.get_counter("ratelimit.redis_sync.pending_hits");'),
]


def self_test():
    failures = []
    for path, text in SAMPLES_BAD:
        if not check_file(path, text):
            failures.append(f"not caught: {path}: {text!r}")
    for path, text in SAMPLES_GOOD:
        if found := check_file(path, text):
            failures.append(f"caught wrongly: {found}")
    return failures


def main():
    if sys.argv[1:] == ["--self-test"]:
        failures = self_test()
        print("\n".join(failures) or f"self-test: {len(SAMPLES_BAD)} offences caught, "
              f"{len(SAMPLES_GOOD)} clean samples passed")
        return 1 if failures else 0
    offences = check_tree(pathlib.Path(sys.argv[1]))
    for o in offences:
        print(o)
    if offences:
        print(f"{len(offences)} offences against docs/architecture.md (ownership)")
        return 1
    print("ownership rules hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
