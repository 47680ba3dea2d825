"""An application server's side of Web Push, independent of the project: reads {"subscription", "vapid_pem",
"audience", "message"} as one JSON line on stdin, writes the aes128gcm body (http_ece) to the file named by argv[1]
and prints the request's Authorization header (a VAPID ES256 JWT signed with the `cryptography` package)."""
import base64
import json
import sys
import time

import http_ece
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64url(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


request = json.loads(sys.stdin.readline())
keys = request["subscription"]["keys"]
body = http_ece.encrypt(
    request["message"].encode(),
    private_key=ec.generate_private_key(ec.SECP256R1()),
    dh=unb64url(keys["p256dh"]),
    auth_secret=unb64url(keys["auth"]),
    version="aes128gcm",
)
with open(sys.argv[1], "wb") as out:
    out.write(body)
vapid = serialization.load_pem_private_key(request["vapid_pem"].encode(), password=None)
header = b64url(json.dumps({"typ": "JWT", "alg": "ES256"}).encode())
claims = b64url(json.dumps({"aud": request["audience"], "exp": int(time.time()) + 3600, "sub": "mailto:ops@example.com"}).encode())
r, s = decode_dss_signature(vapid.sign(f"{header}.{claims}".encode(), ec.ECDSA(hashes.SHA256())))
token = f"{header}.{claims}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"
public = vapid.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
print(f"vapid t={token}, k={b64url(public)}")
