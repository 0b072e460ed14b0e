#!/usr/bin/env bash
# Makes the TLS test fixtures here (test-only keys: never use them anywhere
# else): a CA, a certificate it signs for IP 127.0.0.1 only (serverAuth and
# clientAuth: the nodes' and etcd's in tests/cluster/sharded_cluster.mjs
# --tls, and their client certificate toward etcd), and a second, unrelated
# CA that must not be trusted. Valid for 100 years; run again to replace.
set -euo pipefail
cd "$(dirname "$0")"
days=36500
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days $days \
  -subj "/CN=moeedb test CA" -keyout ca-key.pem -out ca.pem 2>/dev/null
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days $days \
  -subj "/CN=moeedb untrusted CA" -keyout /dev/null -out other-ca.pem 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -subj "/CN=moeedb test node" -keyout node-key.pem -out node.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n' > node.ext
openssl x509 -req -in node.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days $days \
  -extfile node.ext -out node.pem 2>/dev/null
rm -f node.csr node.ext ca.srl
chmod 600 node-key.pem ca-key.pem
echo "made ca.pem, node.pem (IP 127.0.0.1), node-key.pem, other-ca.pem"
