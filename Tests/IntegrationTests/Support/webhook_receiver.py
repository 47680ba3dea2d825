#!/usr/bin/env python3
"""A webhook receiver for the tests, independent of the project's code: it checks each POST's Standard Webhooks
signature with Python's own hmac and prints one JSON line per POST on standard output (the first line: its port).

  --secret whsec_...   a secret to verify with (repeatable: each is reported)
  --fail N             answer the first N POSTs 500
  --delay S            answer the first POST only after S seconds
  --port P             listen on P (default: any free port)
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--secret", action="append", default=[])
parser.add_argument("--fail", type=int, default=0)
parser.add_argument("--delay", type=float, default=0)
parser.add_argument("--port", type=int, default=0)
args = parser.parse_args()

lock = threading.Lock()
count = 0

# Each body is checked against docs/openapi.yaml's WebhookDelivery schema (the documented event shapes).
SPEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs", "openapi.yaml")
try:
    import jsonschema
    import yaml

    components = yaml.safe_load(open(SPEC))["components"]
    validator = jsonschema.Draft202012Validator({"$ref": "#/components/schemas/WebhookDelivery", "components": components})
except ImportError:
    validator = None


def conformance(document):
    if validator is None:
        return "not checked (jsonschema or yaml missing)"
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    return "conforms" if not errors else f"{list(errors[0].path)}: {errors[0].message}"


def verify(secret, message_id, timestamp, body, signatures):
    key = base64.b64decode(secret[len("whsec_"):])
    signed = message_id.encode() + b"." + timestamp.encode() + b"." + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(s.startswith("v1,") and hmac.compare_digest(s[3:], expected) for s in signatures)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        global count
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock:
            count += 1
            n = count
        message_id = self.headers.get("webhook-id", "")
        timestamp = self.headers.get("webhook-timestamp", "")
        signatures = self.headers.get("webhook-signature", "").split(" ")
        try:
            document = json.loads(body)
            events = document["events"]
            schema = conformance(document)
        except (ValueError, KeyError, TypeError):
            events = None
            schema = "not JSON with events"
        status = 500 if n <= args.fail else 200
        record = {
            "n": n,
            "path": self.path,
            "id": message_id,
            "timestamp": timestamp,
            "age": abs(time.time() - int(timestamp or 0)),
            "content_type": self.headers.get("Content-Type"),
            "signatures": len(signatures),
            "verified": [verify(s, message_id, timestamp, body, signatures) for s in args.secret],
            "events": events,
            "schema": schema,
            "answer": status,
        }
        # One write per line, under the lock: print() from two threads can interleave a line with another's newline.
        with lock:
            sys.stdout.write(json.dumps(record) + "\n")
            sys.stdout.flush()
        if n == 1 and args.delay:
            time.sleep(args.delay)
        answer = b"no" if status >= 300 else b"ok"
        try:
            self.send_response(status)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
        except OSError:
            pass

    def log_message(self, *_):
        pass


server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
print(json.dumps({"port": server.server_address[1]}), flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    pass
