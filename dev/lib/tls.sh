# Test certificates for the TLS listeners (Redis, RabbitMQ): a CA, a server certificate for
# 127.0.0.1/localhost and a client certificate, all signed by the CA. Made once per services
# directory with openssl; never used outside the tests. Sourced, not run.

tls_dir() { echo "$SERVICES_DIR/tls"; }

# tls_files: create the CA, server and client certificates unless they exist.
tls_files() {
  local d; d=$(tls_dir)
  [ -s "$d/client.key" ] && return 0
  command -v openssl >/dev/null || apt_install openssl
  mkdir -p "$d"
  (
    set -e
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=rivus test CA" \
      -keyout ca.key -out ca.crt
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > server.ext
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile server.ext -out server.crt
    printf 'extendedKeyUsage=clientAuth\n' > client.ext
    openssl req -newkey rsa:2048 -nodes -subj "/CN=rivus-client" -keyout client.key -out client.csr
    openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile client.ext -out client.crt
    rm -f ./*.csr ./*.ext
    # The servers run as their own users (rabbitmq) and must read the key.
    chmod 644 ./*.key ./*.crt
  ) >"$d/openssl.log" 2>&1 || fail tls "making test certificates" "$d/openssl.log" "openssl failed"
}
