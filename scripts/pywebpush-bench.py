"""pywebpush (PyPI), the Python library application servers send Web Push with, as a peer to measure against: one
process sends one message to each subscription of the JSON-lines file argv[1] (as PushSubscription.toJSON() gives
them) with the VAPID key in the PEM file argv[2], one after another on a kept-alive requests session, for at most
argv[3] seconds. Prints "MESSAGES SECONDS CREATED" (CREATED: answers 201). Trusts REQUESTS_CA_BUNDLE (the simulator's
CA). Run by `pushchat-bench --only webpush`."""
import json
import sys
import time

import requests
from pywebpush import webpush

subscriptions = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
key, budget = sys.argv[2], float(sys.argv[3])
claims = {"sub": "mailto:bench@example.com"}
message = json.dumps({"web_push": 8030, "notification": {"title": "Ann", "body": "message number 1", "navigate": "/"}})
session = requests.Session()
start = time.monotonic()
sent = created = 0
for subscription in subscriptions:
    if time.monotonic() - start > budget:
        break
    # pywebpush signs a VAPID token per call unless handed one: this is how its README sends.
    answer = webpush(subscription, data=message, vapid_private_key=key, vapid_claims=dict(claims), ttl=0, requests_session=session)
    sent += 1
    created += answer.status_code == 201
print(sent, time.monotonic() - start, created)
