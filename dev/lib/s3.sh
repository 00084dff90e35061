# An S3-compatible object store for checkpoints: SeaweedFS, built once from its Go module
# (github.com/seaweedfs/seaweedfs, a pinned version; the binary is cached in $CACHE_DIR), run
# as one `weed server` (master, volume, filer and S3 gateway) on 127.0.0.1, S3 API on 8333,
# with one identity (access key / secret key below) and the bucket `rivus`.
#
# The first build downloads the module's dependencies from the Go module proxy and compiles
# for about 15 minutes on two cores; later runs reuse the binary.

S3_PORT=${RIVUS_S3_PORT:-8333}
S3_BUCKET=rivus
S3_ACCESS_KEY=rivus
S3_SECRET_KEY=rivus-s3-secret
SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6

s3_bin() { echo "$CACHE_DIR/seaweedfs-$SEAWEEDFS_VERSION/weed"; }

s3_install() {
  [ -x "$(s3_bin)" ] && return 0
  command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
  command -v go >/dev/null || die "s3: building SeaweedFS needs Go (1.26 or newer) on PATH"
  local gopath="$CACHE_DIR/go" src="$CACHE_DIR/seaweedfs-$SEAWEEDFS_VERSION/src" dir
  say "s3: building SeaweedFS $SEAWEEDFS_VERSION from its Go module (once; about 15 minutes)"
  mkdir -p "$gopath" "$(dirname "$src")"
  dir=$(GOPATH=$gopath GOFLAGS=-mod=mod go mod download -json "github.com/seaweedfs/seaweedfs@$SEAWEEDFS_VERSION" \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] && [ -d "$dir" ] || die "s3: could not download github.com/seaweedfs/seaweedfs@$SEAWEEDFS_VERSION"
  # The module has replace directives, so it builds as the main module, from a copy.
  rm -rf "$src" && cp -r "$dir" "$src" && chmod -R u+w "$src"
  (cd "$src" && GOPATH=$gopath GOFLAGS=-mod=mod go build -o "$(s3_bin).tmp" ./weed) \
    || die "s3: building SeaweedFS failed"
  mv "$(s3_bin).tmp" "$(s3_bin)"
  rm -rf "$src"
}

s3_address() { echo "http://127.0.0.1:$S3_PORT"; }

s3_version() { "$(s3_bin)" version 2>/dev/null | awk '{print $3}'; }

s3_log() { echo "$(svc_dir s3)/log"; }

# Answers when the S3 gateway refuses an unsigned request (403: it checks signatures).
s3_check() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$(s3_address)/")" = 403 ]; }

s3_start() {
  local d; d=$(svc_dir s3)
  mkdir -p "$d/data"
  cat > "$d/s3.json" <<JSON
{"identities":[{"name":"rivus","credentials":[{"accessKey":"$S3_ACCESS_KEY","secretKey":"$S3_SECRET_KEY"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
  nohup "$(s3_bin)" server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$d/data" \
    -master.port=9333 -volume.port=9340 -filer.port=8888 -master.volumeSizeLimitMB=64 -volume.max=50 \
    -master.telemetry=false -s3 -s3.port="$S3_PORT" -s3.config="$d/s3.json" -s3.port.iceberg=0 -s3.port.lance=0 \
    >"$d/log" 2>&1 &
  echo $! > "$d/pid"
}

s3_curl() {
  curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"
}

# The bucket, made through the S3 API once the gateway answers (again: 409, already ours);
# then one object written and deleted, so that the first volume exists before a test writes.
s3_ready() {
  local code i
  for i in $(seq 1 60); do
    code=$(s3_curl -X PUT "$(s3_address)/$S3_BUCKET")
    case $code in
      200|409) break ;;
    esac
    sleep 1
  done
  case $code in 200|409) ;; *) fail s3 "making bucket $S3_BUCKET" "$(s3_log)" "the S3 API answered $code" ;; esac
  for i in $(seq 1 60); do
    code=$(s3_curl -X PUT --data-binary probe "$(s3_address)/$S3_BUCKET/_ready-probe")
    if [ "$code" = 200 ]; then
      s3_curl -X DELETE "$(s3_address)/$S3_BUCKET/_ready-probe" >/dev/null
      return 0
    fi
    sleep 1
  done
  fail s3 "writing a first object" "$(s3_log)" "the S3 API answered $code (a full disk?)"
}
