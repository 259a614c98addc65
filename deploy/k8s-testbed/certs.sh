#!/usr/bin/env bash
# Certificates for the test control plane, made once per directory with openssl:
# a CA, the API server's serving certificate (127.0.0.1, localhost and the
# in-cluster names), client certificates (admin in system:masters, the
# controller manager as system:kube-controller-manager, KWOK in system:masters
# since it plays every node's kubelet) and the service-account signing key pair.
set -euo pipefail
pki="$1"
[ -f "$pki/done" ] && exit 0
rm -rf "$pki" && mkdir -p "$pki" && cd "$pki"
days=3650
ec_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }

ec_key ca
openssl req -x509 -new -key ca.key -subj "/CN=kai-portal-test-ca" -days "$days" -out ca.crt \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

sign() {  # name, subject, extensions
  ec_key "$1"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
server_ext="keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
client_ext="keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
sign apiserver "/CN=kube-apiserver" "$server_ext"
sign admin "/O=system:masters/CN=kubernetes-admin" "$client_ext"
sign controller-manager "/CN=system:kube-controller-manager" "$client_ext"
sign kwok "/O=system:masters/CN=kwok" "$client_ext"

openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
openssl pkey -in sa.key -pubout -out sa.pub
chmod 600 ./*.key
touch done
