#!/usr/bin/env python3
"""The docs' shell examples and exit codes, checked against the real binaries.

Every ```sh (or ```bash) block of README.md, deploy/README.md and docs/*.md is either run, as
written but for the substitutions below, in a temporary directory against a real fusord on
loopback, or skip-listed here with the reason it cannot run in a test (sudo, docker, a remote
host, a build of its own). A block neither runnable nor listed fails the test, so a new example
is either run or given a reason.

Then the exit codes the docs' tables give (README.md's for fusor, deploy/README.md's for fusord)
are read from the docs and checked against one command per code.

Usage: run_doc_commands.py SOURCE_DIR BUILD_DIR
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SOURCE, BUILD = sys.argv[1], sys.argv[2]
FUSOR = os.path.join(BUILD, "client", "fusor")
FUSORD = os.path.join(BUILD, "server", "fusord")
DOC_FILES = ["README.md", "deploy/README.md"] + sorted(
    os.path.join("docs", f) for f in os.listdir(os.path.join(SOURCE, "docs")) if f.endswith(".md"))

# Blocks that cannot run in a test, by their first line, each with its reason.
SKIPPED = {
    "./demo.sh": "installs packages with sudo and builds the tree",
    "./deploy/install-deps.sh": "installs packages with sudo and builds the tree",
    "sudo install -m 0755 build/server/fusord": "sudo: installs into /usr/local and /etc",
    "gen() { openssl rand -hex 32; }": "sudo: writes /etc/fusor/tokens",
    "sudo install -d -m 0750 -o root -g fusor /etc/fusor/tls": "sudo: installs TLS files into /etc",
    "sudo -u postgres createuser fusor": "sudo: needs a PostgreSQL server administered by root",
    "sudo install -m 0644 deploy/fusord@.service": "sudo and systemd",
    "sudo install -m 0644 deploy/fusord.service": "sudo and systemd",
    "grpcurl -cacert ca.pem fusor.example.com:7070": "network: a remote fusord with TLS",
    "export FUSOR_SERVER=fusor.example.com:7070": "network: a remote fusord with TLS",
    "fusor calibrate --out profile.json": "network: registers with a remote fusord over TLS",
    "fusor agent --server fusor.example.com:7070": "network: a remote fusord with TLS",
    "fusor agents list --server fusor.example.com:7070": "network: a remote fusord with TLS",
    "docker build -f deploy/Containerfile": "docker",
    "sqlite3 -readonly ~/.local/share/fusor/tuning.db": "an interactive sqlite3 shell",
    "cmake --install build --prefix /opt/fusor": "installs into /opt (the install test covers it)",
    "pip install .": "network: pip fetches the build backend",
    "cmake --install build --component engine --prefix /opt/fusor":
        "installs into /opt (ctest's engine_install covers the engine component)",
    "PYTHONPATH=build/python /usr/bin/python3 bench/python_onnxruntime_parity.py":
        "every bundled model against ONNX Runtime, minutes (python_test.test_session runs three)",
    "build-fuzz/tests/fuzz/": "a libFuzzer build of its own (clang 14, ASan), 20 minutes and more",
}

# What a runnable block's text becomes in the test: this build's binaries, a free loopback port
# instead of the default 7070 (another fusord may hold it), a temporary database.
def substitutions(port, tmp):
    return [
        ("./build/", BUILD + "/"),
        ("127.0.0.1:7070", "127.0.0.1:%d" % port),
        ("/var/lib/fusor/tuning.db", os.path.join(tmp, "tuning.db")),
        ("/tmp/squeezenet.onnx", os.path.join(tmp, "squeezenet.onnx")),
        (" [PLAN.json | --db DATABASE]", ""),  # Optional arguments, as a synopsis writes them.
        ("models/", os.path.join(SOURCE, "models") + "/"),
        ("tools/", os.path.join(SOURCE, "tools") + "/"),
    ]


def blocks():
    for name in DOC_FILES:
        lines = open(os.path.join(SOURCE, name)).read().split("\n")
        fence = None
        for number, line in enumerate(lines, 1):
            if line.startswith("```"):
                if fence is None:
                    fence, start, body = line[3:].strip(), number, []
                else:
                    if fence in ("sh", "bash"):
                        yield "%s:%d" % (name, start), body
                    fence = None
            elif fence is not None:
                body.append(line)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(log_path, process, seconds=60):
    end = time.time() + seconds
    while time.time() < end:
        if "listening on" in open(log_path).read():
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.1)
    return False


failures = []


def fail(message):
    failures.append(message)
    print("FAIL " + message, flush=True)


def run_block(where, body, tmp):
    """Runs the block's lines in order; a line starting fusord starts it in the background (it
    serves until stopped) and waits until it listens. Every other line must exit 0."""
    port = free_port()
    servers = []
    try:
        for line in body:
            command = line.split("#", 1)[0].strip()
            if not command:
                continue
            for old, new in substitutions(port, tmp):
                command = command.replace(old, new)
            print("  $ " + command, flush=True)
            if os.path.basename(command.split()[0]) == "fusord":
                if "--listen" not in command:  # The default 127.0.0.1:7070, moved as above.
                    command += " --listen 127.0.0.1:%d" % port
                log = os.path.join(tmp, "fusord-%d.log" % len(servers))
                # exec: SIGTERM reaches fusord itself, whose exit code the docs give.
                p = subprocess.Popen("exec " + command, shell=True, cwd=tmp, stdout=open(log, "w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
                servers.append(p)
                if not wait_listening(log, p):
                    fail("%s: fusord did not start: %s" % (where, open(log).read()[-2000:]))
                    return
                continue
            r = subprocess.run(command, shell=True, cwd=tmp, capture_output=True, text=True,
                               timeout=1200)
            if r.returncode != 0:
                fail("%s: `%s` exited %d, the docs expect 0:\n%s%s" %
                     (where, line.strip(), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
                return
    finally:
        for p in servers:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                code = p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                code = p.wait()
            if code != 0:
                fail("%s: fusord exited %d after SIGTERM; deploy/README.md says 0" % (where, code))


def exit_code_table(doc, anchor):
    """{"usage": 2, ...} from a line like 'Exit codes: 0 ok, 1 other error, 2 usage, ...'."""
    text = open(os.path.join(SOURCE, doc)).read()
    at = text.index(anchor)
    sentence = text[at:text.index("\n\n", at)].replace("\n", " ")
    return {m.group(2).strip(): int(m.group(1))
            for m in re.finditer(r"(\d) ([a-z][a-z ,]*?)(?=[,.;(]| \d |$)", sentence[11:])}


def check_exit_code(table, meaning, argv, tmp, **kwargs):
    expected = [code for name, code in table.items() if name.startswith(meaning)]
    if len(expected) != 1:
        fail("the exit-code table %s has no single entry starting '%s'" % (table, meaning))
        return
    r = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, timeout=120, **kwargs)
    print("  %s -> %d (%s)" % (" ".join(argv[1:]), r.returncode, meaning), flush=True)
    if r.returncode != expected[0]:
        fail("`%s` exited %d; the docs' table says %d (%s):\n%s" %
             (" ".join(argv), r.returncode, expected[0], meaning, r.stderr[-1500:]))


def check_exit_codes(tmp):
    fusor = exit_code_table("README.md", "Exit codes: 0 ok")
    print("fusor's exit codes (README.md): %s" % fusor, flush=True)
    not_onnx = os.path.join(tmp, "not_a_model.onnx")
    open(not_onnx, "w").write("this is not ONNX\n")
    check_exit_code(fusor, "usage", [FUSOR, "tune"], tmp)
    check_exit_code(fusor, "usage", [FUSOR, "agent"], tmp)
    check_exit_code(fusor, "usage", [FUSOR, "db", "show", "model.onnx"], tmp)
    check_exit_code(fusor, "usage", [FUSOR, "db", "stats", "--server", "127.0.0.1:1"], tmp)
    check_exit_code(fusor, "invalid model", [FUSOR, "inspect", not_onnx], tmp)
    check_exit_code(fusor, "other error", [FUSOR, "inspect", os.path.join(tmp, "absent.onnx")], tmp)
    check_exit_code(fusor, "server unavailable",
                    [FUSOR, "targets", "list", "--server", "127.0.0.1:%d" % free_port(),
                     "--timeout", "10"], tmp)
    tokens = os.path.join(tmp, "tokens")
    open(tokens, "w").write("reader-token-0123456789 read reader\n")
    port = free_port()
    log = os.path.join(tmp, "fusord-auth.log")
    p = subprocess.Popen([FUSORD, "--db", os.path.join(tmp, "auth.db"), "--listen",
                          "127.0.0.1:%d" % port, "--token-file", tokens],
                         stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        if not wait_listening(log, p):
            fail("fusord with a token file did not start: " + open(log).read()[-2000:])
        else:
            server = ["--server", "127.0.0.1:%d" % port]
            check_exit_code(fusor, "authentication",
                            [FUSOR, "targets", "list", "--token", "wrong-token-0123456789"] + server,
                            tmp)
            check_exit_code(fusor, "ok",
                            [FUSOR, "targets", "list", "--token", "reader-token-0123456789"] +
                            server, tmp)
    finally:
        p.terminate()
        p.wait(timeout=60)

    fusord = exit_code_table("deploy/README.md", "Exit codes: 0 after a clean shutdown")
    print("fusord's exit codes (deploy/README.md): %s" % fusord, flush=True)
    db = ["--db", os.path.join(tmp, "refused.db")]
    check_exit_code(fusord, "when it cannot start",
                    [FUSORD, "--listen", "127.0.0.1:0", "--metrics-listen", "0.0.0.0:0"] + db, tmp)
    check_exit_code(fusord, "when it cannot start", [FUSORD, "--listen", "0.0.0.0:0"] + db, tmp)
    check_exit_code(fusord, "for a bad command line", [FUSORD, "--no-such-flag"], tmp)
    check_exit_code(fusord, "for a bad command line",
                    [FUSORD, "--metrics-listen", "unix:/tmp/m.sock"] + db, tmp)


def main():
    unlisted = []
    runnable = []
    for where, body in blocks():
        first = next((l.strip() for l in body if l.strip()), "")
        reason = next((r for prefix, r in SKIPPED.items() if first.startswith(prefix)), None)
        if reason is not None:
            print("skip %s (%s): %s" % (where, first[:60], reason), flush=True)
        elif first.startswith("sudo") or "docker" in first or "example.com" in first:
            unlisted.append("%s: `%s` needs sudo, docker or a network; skip-list it with a reason"
                            % (where, first))
        else:
            runnable.append((where, body))
    for message in unlisted:
        fail(message)
    tmp = tempfile.mkdtemp(prefix="fusor-docs-")
    os.environ["HOME"] = tmp  # The per-user default database goes here, not to the user's.
    os.environ["XDG_DATA_HOME"] = os.path.join(tmp, "data")
    try:
        for where, body in runnable:
            print("run %s" % where, flush=True)
            run_block(where, body, tmp)
        check_exit_codes(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d blocks run, %d failures" % (len(runnable), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
