#!/usr/bin/env python3
"""The API spec test: schemathesis (from PyPI) generates requests from docs/openapi.yaml, valid and invalid, and
sends them to a running pushchat-api; every answer must be as the spec says (status, content type, headers, body
schema) and none may be a 5xx. Run by scripts/test.sh.

    api-spec-test.py BIN_DIR OUTPUT_DIR

Needs PUSHCHAT_TEST_DATABASE_URL (the test cluster); as root, PUSHCHAT_TEST_SERVICE_USER (the executables drop to it).
Bounded: a fixed seed, PUSHCHAT_SPEC_EXAMPLES examples per operation (default 15) and at most 120 s of requests.
Talks to 127.0.0.1 only.
"""
import os
import shutil
import subprocess
import sys
import tempfile

BIN, OUTPUT = sys.argv[1], sys.argv[2]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts", "lib"))
from harness import SERVER_URL, Harness, answers, as_service_user, database_url, free_port, psql, tear_down  # noqa: E402

SCHEMATHESIS = "schemathesis==4.32.5"
harness = Harness("api-spec-test", 240)
fail = harness.fail


def schemathesis():
    """The `st` command, installed from PyPI when missing."""
    found = shutil.which("st")
    if not found:
        print(f"    installing {SCHEMATHESIS} from PyPI")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", SCHEMATHESIS], check=True)
        found = shutil.which("st") or os.path.join(os.path.dirname(sys.executable), "st")
    return found


def main():
    os.makedirs(OUTPUT, exist_ok=True)
    st = schemathesis()
    work = tempfile.mkdtemp(prefix="pushchat-spec-")
    os.chmod(work, 0o755)
    database = f"pushchat_spec_{os.getpid()}"
    url = database_url(database)
    psql(SERVER_URL, f"CREATE DATABASE {database}")
    api_process = None
    try:
        api, metrics = free_port(), free_port()
        environment = {k: v for k, v in os.environ.items() if not k.startswith("PUSHCHAT_")}
        environment.update({
            "PUSHCHAT_DATABASE_URL": url, "PUSHCHAT_API_HOST": "127.0.0.1", "PUSHCHAT_API_PORT": str(api),
            "PUSHCHAT_API_METRICS_PORT": str(metrics), "PUSHCHAT_LOG_FILE": "-", "PUSHCHAT_LOG_LEVEL": "warning",
            "PUSHCHAT_MIGRATIONS_DIR": os.path.join(REPO, "migrations"),
            # The per-address limit now covers /v1 too: off, so the examples reach the operations they test.
            "PUSHCHAT_API_RATE_PER_IP": "0",
        })

        def run(arguments):
            done = subprocess.run(as_service_user([os.path.join(BIN, "pushchat-api")] + arguments), env=environment,
                                  capture_output=True, text=True, cwd=work)
            if done.returncode != 0:
                fail(f"pushchat-api {' '.join(arguments)}: {done.stderr}")
            return done.stdout

        run(["migrate", "development"])
        # Every scope and no limit: the spec test exercises every operation, not the key's refusals.
        scopes = [arg for scope in ("send", "broadcast", "devices:read", "devices:write", "status") for arg in ("--scope", scope)]
        key = run(["keys", "create", "schemathesis", "development", *scopes, "--unlimited"]).strip().splitlines()[-1]
        log = open(os.path.join(OUTPUT, "api-spec-test-api.log"), "w")
        api_process = subprocess.Popen(as_service_user([os.path.join(BIN, "pushchat-api"), "serve", "development"]),
                                       env=environment, stdout=log, stderr=subprocess.STDOUT, cwd=work)
        harness.wait_until("the API", lambda: answers(api, "/healthz"))
        # Something to find: a user's devices and a notification (schemathesis also registers its own).
        psql(url, "INSERT INTO devices (device_token, user_ref, registered_by) VALUES "
                  f"('{'ab' * 32}', 'alice', 'schemathesis'), ('{'cd' * 32}', 'alice', 'schemathesis')")

        examples = os.environ.get("PUSHCHAT_SPEC_EXAMPLES", "15")
        checks = ",".join(["not_a_server_error", "status_code_conformance", "content_type_conformance",
                           "response_headers_conformance", "response_schema_conformance"])
        command = [st, "run", os.path.join(REPO, "docs", "openapi.yaml"), "--url", f"http://127.0.0.1:{api}",
                   "--header", f"Authorization: Bearer {key}", "--checks", checks, "--max-examples", examples,
                   "--seed", "1", "--workers", "1", "--request-timeout", "10", "--max-time", "120",
                   "--no-color", "--report", "junit", "--report-dir", OUTPUT]
        print(f"    schemathesis: {examples} examples per operation, seed 1, against 127.0.0.1:{api}")
        environment_st = dict(os.environ, SCHEMATHESIS_HOOKS="", NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
        result = subprocess.run(command, env=environment_st, timeout=180, cwd=OUTPUT)
        if result.returncode != 0:
            fail(f"schemathesis found answers that break the spec (exit {result.returncode}); see above")
        queued = psql(url, "SELECT count(*) FROM push_deliveries")
        print(f"    every answer as the spec says, none a 5xx; {queued} notifications queued on the way")
        if api_process.poll() is not None:
            fail("the API exited during the run")
    finally:
        tear_down([api_process] if api_process else [], database, work)


if __name__ == "__main__":
    main()
