#!/usr/bin/env bash
# What TLS costs: the same `ferry local` job in plaintext and with mutual TLS
# + a bearer token on every channel, alternating, twice each, in PS and ring
# mode; prints samples/s (from --summary-json) and test accuracy.
# Certificates are made with openssl in a temporary directory.
# Usage: bench/tls_overhead.sh [--epochs N]   (after scripts/build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ferry="$root/build/bin/ferry"
epochs=2
[[ "${1:-}" == "--epochs" ]] && epochs=$2
work=$(mktemp -d /tmp/ferry-tls-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat > ca.cnf <<'CNF'
[req]
distinguished_name = dn
[dn]
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
[srv]
basicConstraints = CA:FALSE
subjectAltName = DNS:localhost,IP:127.0.0.1
extendedKeyUsage = serverAuth,clientAuth
CNF
key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
openssl req -x509 -new $key -keyout ca.key -out ca.pem -days 2 -subj /CN=ferry-ca \
  -config ca.cnf -extensions v3_ca 2>/dev/null
openssl req -new $key -keyout tls.key -out tls.csr -subj /CN=ferry -config ca.cnf 2>/dev/null
openssl x509 -req -in tls.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out tls.crt -days 2 \
  -extfile ca.cnf -extensions srv 2>/dev/null
openssl rand -hex 16 > token
security=(--tls-cert tls.crt --tls-key tls.key --tls-ca ca.pem --require-client-cert
          --auth-token-file token)
printf '%-5s %-9s %-4s %12s %9s\n' mode channels rep samples/s accuracy
for mode in ps ring; do
  for rep in 1 2; do
    for channels in plaintext tls; do
      extra=()
      [[ $channels == tls ]] && extra=("${security[@]}")
      "$ferry" local --mode "$mode" --workers 2 --shards 2 --epochs "$epochs" \
        --summary-json "s.json" "${extra[@]}" > "log-$mode-$channels-$rep.txt" 2>&1
      /usr/bin/python3 - "$mode" "$channels" "$rep" <<'PY'
import json, sys
s = json.load(open("s.json"))
print("%-5s %-9s %-4s %12.0f %9.4f" % (sys.argv[1], sys.argv[2], sys.argv[3],
                                      s["samples_per_second"], s["test_accuracy"]))
PY
    done
  done
done
