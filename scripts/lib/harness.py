"""What the Python test stages share (the browser test, the API spec test): free ports, running the executables as
the unprivileged service user (as root), psql, waiting with a deadline, a fresh database on the test cluster."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

SERVER_URL = os.environ["PUSHCHAT_TEST_DATABASE_URL"]
SERVICE_USER = os.environ.get("PUSHCHAT_TEST_SERVICE_USER") if os.geteuid() == 0 else None


class Harness:
    """A test stage's name (in failure messages) and its deadline: the whole stage stops by itself."""

    def __init__(self, name, seconds):
        self.name = name
        self.deadline = time.monotonic() + seconds

    def fail(self, message):
        print(f"{self.name}: FAILED: {message}", file=sys.stderr)
        raise SystemExit(1)

    def wait_until(self, what, condition, timeout=20):
        end = min(time.monotonic() + timeout, self.deadline)
        while time.monotonic() < end:
            value = condition()
            if value:
                return value
            time.sleep(0.1)
        self.fail(f"timed out waiting for {what}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_service_user(command):
    if not SERVICE_USER:
        return command
    return ["setpriv", f"--reuid={SERVICE_USER}", f"--regid={SERVICE_USER}", "--init-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"] + command


def psql(url, sql):
    return subprocess.run(["psql", url, "-tAc", sql], check=True, capture_output=True, text=True).stdout.strip()


def database_url(database):
    """The test cluster's URL for another database."""
    parsed = urllib.parse.urlsplit(SERVER_URL)
    return urllib.parse.urlunsplit(parsed._replace(path="/" + database))


def answers(port, path):
    """Whether http://127.0.0.1:PORT/PATH answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


def tear_down(processes, database, work):
    """Stops the processes (SIGTERM, then SIGKILL after 10 s), drops the test database, removes the folder."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
    psql(SERVER_URL, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    shutil.rmtree(work, ignore_errors=True)
