#!/usr/bin/env bash
# Regenerates the TLS test fixtures in crates/sluice/tests/fixtures/tls (committed; valid for
# 100 years except the deliberately expired one). Test-only keys: never use them elsewhere.
set -euo pipefail
out="$(cd "$(dirname "$0")/.." && pwd)/crates/sluice/tests/fixtures/tls"
mkdir -p "$out"
cd "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
days=36500
ca() { # name subject
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.pem" -days $days \
    -subj "$2" -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}
leaf() { # name subject ca ext
  openssl req -newkey rsa:2048 -nodes -keyout "$work/$1.key" -out "$work/$1.csr" -subj "$2" 2>/dev/null
  printf '%s\n' "$4" > "$work/$1.ext"
  openssl x509 -req -in "$work/$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial \
    -out "$work/$1.crt" -days $days -extfile "$work/$1.ext" 2>/dev/null
  # Kafka's PEM key store: the private key and the certificate chain in one file.
  cat "$work/$1.key" "$work/$1.crt" > "$1.pem"
}
ca ca "/CN=Sluice Test CA"
ca foreign-ca "/CN=Foreign Test CA"
# Server certificates serve as client certificates too (brokers and controllers connecting
# to each other's mutual-TLS listeners), as Kafka deployments' do.
leaf server "/CN=localhost" ca "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
# A renewed server certificate (same subject, new key) and one for another subject, for
# dynamic key store updates.
leaf server-renewed "/CN=localhost" ca "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
leaf server-other "/CN=otherhost" ca "subjectAltName=DNS:otherhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
leaf client "/C=US/O=Sluice/CN=writer" ca "extendedKeyUsage=clientAuth"
leaf foreign-client "/CN=intruder" foreign-ca "extendedKeyUsage=clientAuth"
# An expired client certificate from the trusted CA.
openssl req -newkey rsa:2048 -nodes -keyout "$work/expired.key" -out "$work/expired.csr" \
  -subj "/CN=expired" 2>/dev/null
mkdir -p "$work/db"; : > "$work/db/index"; echo 01 > "$work/db/serial"
cat > "$work/ca.cnf" <<CNF
[ca]
default_ca = test
[test]
database = $work/db/index
serial = $work/db/serial
new_certs_dir = $work/db
default_md = sha256
policy = any
copy_extensions = none
[any]
commonName = supplied
CNF
openssl ca -batch -config "$work/ca.cnf" -cert ca.pem -keyfile ca.key -in "$work/expired.csr" \
  -out "$work/expired.crt" -startdate 20200101000000Z -enddate 20210101000000Z -notext 2>/dev/null
cat "$work/expired.key" "$work/expired.crt" > expired-client.pem
rm -f ca.srl foreign-ca.srl foreign-ca.key ca.key
ls
