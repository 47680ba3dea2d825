"""A browser's side of Web Push, independent of the project: reads {"body", "ua_private", "auth"} (base64url) as one
JSON line on stdin, decrypts the aes128gcm body with http_ece (RFC 8188/8291), prints {"plaintext": base64url}."""
import base64
import json
import sys

import http_ece
from cryptography.hazmat.primitives.asymmetric import ec


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


request = json.loads(sys.stdin.readline())
private_key = ec.derive_private_key(int.from_bytes(b64url(request["ua_private"]), "big"), ec.SECP256R1())
plaintext = http_ece.decrypt(
    b64url(request["body"]), private_key=private_key, auth_secret=b64url(request["auth"]), version="aes128gcm"
)
print(json.dumps({"plaintext": base64.urlsafe_b64encode(plaintext).decode().rstrip("=")}))
