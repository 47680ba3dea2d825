#!/usr/bin/env bash
# Creates development certificates for the local APNs simulator (pushchat-apns-sim) in DIR:
#
#   ca.pem, ca-key.pem            a development CA (the simulator trusts client certificates it signed;
#                                 the daemons trust the simulator through PUSHCHAT_APNS_CA_FILE=ca.pem)
#   server.pem, server-key.pem    the simulator's certificate for localhost, 127.0.0.1 and ::1
#   ck.pem                        the provider identity in the tutorial's shape: certificate + private key
#                                 encrypted (PKCS#8, AES-256) with the passphrase
#   ck.p12                        the same identity as PKCS#12
#   ck-legacy.pem                 the same with the older "Proc-Type: 4,ENCRYPTED" key encryption
#   ck-unencrypted.pem            the same with an unencrypted key
#   other-ck.pem                  an identity signed by another CA (the simulator refuses it), unencrypted
#   AuthKey_DEVKEY0001.p8         an HTTP/2 token-signing key like Apple's .p8 (key id DEVKEY0001, team DEVTEAM001),
#   AuthKey_DEVKEY0001.pub.pem    and its public half, which the simulator checks tokens against
#   AuthKey_BETAKEY001.p8         a second signing key of the same team (an app's own key; Apple may restrict a key to
#   AuthKey_BETAKEY001.pub.pem    one bundle id or environment), and its public half
#   AuthKey_OTHERKEY01.p8         a key the simulator does not know
#   fcm-service-account.json      a Firebase service account like the console's JSON key file (project pushchat-dev,
#                                 an RSA key), whose token_uri is the simulator's token endpoint on 127.0.0.1, port
#                                 $PUSHCHAT_DEV_FCM_PORT (default 2198)
#
# The passphrase is $PUSHCHAT_DEV_PASSPHRASE, default "pushchat". Idempotent: a complete, valid set is kept.
# Needs the openssl command (Debian package openssl).
set -euo pipefail
dir=${1:?usage: deploy/dev-certs.sh DIR}
passphrase=${PUSHCHAT_DEV_PASSPHRASE:-pushchat}
command -v openssl >/dev/null || { echo "dev-certs: the openssl command is missing (apt-get install openssl)" >&2; exit 1; }

mkdir -p "$dir"
cd "$dir"
files=(ca.pem server.pem server-key.pem ck.pem ck.p12 ck-legacy.pem ck-unencrypted.pem other-ck.pem AuthKey_DEVKEY0001.p8 AuthKey_DEVKEY0001.pub.pem AuthKey_BETAKEY001.p8 AuthKey_BETAKEY001.pub.pem AuthKey_OTHERKEY01.p8 fcm-service-account.json)
complete=true
for file in "${files[@]}"; do [ -s "$file" ] || complete=false; done
if $complete && openssl verify -CAfile ca.pem server.pem >/dev/null 2>&1 && openssl verify -CAfile ca.pem ck.pem >/dev/null 2>&1 \
    && openssl x509 -in ck.pem -noout -checkend 86400 >/dev/null; then
    echo "dev-certs: $dir is up to date"
    exit 0
fi

umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
days=825

# CA
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca-key.pem -out ca.pem -days 3650 \
    -subj "/O=PushChat Server/CN=PushChat Development CA" 2>/dev/null

# Server (the simulator)
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server-key.pem -out "$work/server.csr" \
    -subj "/O=PushChat Server/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature\n' > "$work/server.ext"
openssl x509 -req -in "$work/server.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -CAserial "$work/ca.srl" \
    -out server.pem -days "$days" -extfile "$work/server.ext" 2>/dev/null

# Provider (client) identity, RSA like Apple's push certificates
client_subject="/UID=com.example.PushChat/CN=Apple Development IOS Push Services: com.example.PushChat/O=PushChat Server"
printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' > "$work/client.ext"
openssl req -newkey rsa:2048 -nodes -keyout "$work/client-key.pem" -out "$work/client.csr" -subj "$client_subject" 2>/dev/null
openssl x509 -req -in "$work/client.csr" -CA ca.pem -CAkey ca-key.pem -CAserial "$work/ca.srl" \
    -out "$work/client.crt" -days "$days" -extfile "$work/client.ext" 2>/dev/null
openssl pkcs8 -topk8 -v2 aes-256-cbc -in "$work/client-key.pem" -passout "pass:$passphrase" -out "$work/client-key.p8.pem"
openssl rsa -in "$work/client-key.pem" -aes256 -traditional -passout "pass:$passphrase" -out "$work/client-key.legacy.pem" 2>/dev/null
cat "$work/client.crt" "$work/client-key.p8.pem" > ck.pem
cat "$work/client.crt" "$work/client-key.legacy.pem" > ck-legacy.pem
cat "$work/client.crt" "$work/client-key.pem" > ck-unencrypted.pem
openssl pkcs12 -export -in "$work/client.crt" -inkey "$work/client-key.pem" -name "PushChat development push" \
    -passout "pass:$passphrase" -out ck.p12

# An identity from a CA the simulator does not trust
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/other-ca-key.pem" -out "$work/other-ca.pem" \
    -days 3650 -subj "/CN=Some Other CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/other-key.pem" -out "$work/other.csr" \
    -subj "/CN=Not PushChat" 2>/dev/null
openssl x509 -req -in "$work/other.csr" -CA "$work/other-ca.pem" -CAkey "$work/other-ca-key.pem" -CAcreateserial \
    -CAserial "$work/other.srl" -out "$work/other.crt" -days "$days" -extfile "$work/client.ext" 2>/dev/null
cat "$work/other.crt" "$work/other-key.pem" > other-ck.pem

# A token-auth signing key for the HTTP/2 API, like the .p8 Apple hands out (EC P-256, PKCS#8), with its public half
# for the simulator (key id DEVKEY0001, team id DEVTEAM001 by convention)
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out AuthKey_DEVKEY0001.p8 2>/dev/null
openssl pkey -in AuthKey_DEVKEY0001.p8 -pubout -out AuthKey_DEVKEY0001.pub.pem 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out AuthKey_BETAKEY001.p8 2>/dev/null
openssl pkey -in AuthKey_BETAKEY001.p8 -pubout -out AuthKey_BETAKEY001.pub.pem 2>/dev/null
# Another key: tokens it signs are refused
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out AuthKey_OTHERKEY01.p8 2>/dev/null

# A Firebase service account, as the console's "Generate new private key" gives it (RSA 2048, PKCS#8 in the JSON)
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/fcm-key.pem" 2>/dev/null
fcm_port=${PUSHCHAT_DEV_FCM_PORT:-2198}
{
    printf '{\n  "type": "service_account",\n  "project_id": "pushchat-dev",\n  "private_key_id": "%s",\n' "$(openssl rand -hex 20)"
    printf '  "private_key": "%s",\n' "$(awk '{printf "%s\\n", $0}' "$work/fcm-key.pem")"
    printf '  "client_email": "pushchat-push@pushchat-dev.iam.gserviceaccount.com",\n  "client_id": "100000000000000000001",\n'
    printf '  "auth_uri": "https://accounts.google.com/o/oauth2/auth",\n  "token_uri": "https://127.0.0.1:%s/token"\n}\n' "$fcm_port"
} > fcm-service-account.json

chmod 644 ca.pem server.pem AuthKey_DEVKEY0001.pub.pem AuthKey_BETAKEY001.pub.pem
echo "dev-certs: created development certificates in $dir (passphrase: \$PUSHCHAT_DEV_PASSPHRASE or the default)"
