"""An HTTP front that lets a request through to a search server only when it carries the
expected credentials: HTTP basic, an API key, a bearer token, or an AWS Signature Version 4
that botocore (AWS's own implementation) computes the same. It stands in for the security
layer of a managed cluster, which the tests cannot reach.

    python auth_front.py UPSTREAM basic USER PASSWORD
    python auth_front.py UPSTREAM apikey ID KEY
    python auth_front.py UPSTREAM bearer TOKEN
    python auth_front.py UPSTREAM sigv4 REGION SERVICE ACCESS_KEY SECRET_KEY [SESSION_TOKEN]

Prints `port N` once it listens on 127.0.0.1:N. `GET /__front/stats` answers
`{"verified": n, "refused": n, "reasons": [...]}`. Refused requests get 401 (no or other
credentials) or 403 (a signature that does not match), as the managed services answer.
"""

import base64
import datetime
import hashlib
import hmac
import http.client
import json
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UPSTREAM = urllib.parse.urlsplit(sys.argv[1])
MODE = sys.argv[2]
ARGS = sys.argv[3:]
LOCK = threading.Lock()
STATS = {"verified": 0, "refused": 0, "reasons": []}


def expected_header():
    if MODE == "basic":
        return "Basic " + base64.b64encode(f"{ARGS[0]}:{ARGS[1]}".encode()).decode()
    if MODE == "apikey":
        return "ApiKey " + base64.b64encode(f"{ARGS[0]}:{ARGS[1]}".encode()).decode()
    if MODE == "bearer":
        return "Bearer " + ARGS[0]
    return None


def check_sigv4(method, raw_path, headers, body):
    """None when the signature is AWS's, else why not (and the status to answer)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    region, service, access, secret = ARGS[:4]
    token = ARGS[4] if len(ARGS) > 4 else None
    auth = headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return 401, "no SigV4 authorization header"
    parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    scope = parts.get("Credential", "").split("/")
    amz_date = headers.get("x-amz-date", "")
    if len(scope) != 5 or scope[0] != access or scope[2:] != [region, service, "aws4_request"]:
        return 403, f"credential scope {scope} is not {access}/*/{region}/{service}"
    if scope[1] != amz_date[:8]:
        return 403, "the scope's day is not x-amz-date's"
    when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    if abs((datetime.datetime.now(datetime.timezone.utc) - when).total_seconds()) > 300:
        return 403, f"x-amz-date {amz_date} is too far from now"
    if token is not None and headers.get("x-amz-security-token") != token:
        return 403, "x-amz-security-token is not the session's"
    content = headers.get("x-amz-content-sha256")
    if content is not None and content != hashlib.sha256(body).hexdigest():
        return 403, "x-amz-content-sha256 is not the body's hash"
    signed = parts.get("SignedHeaders", "").split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return 403, f"host and x-amz-date must be signed: {signed}"
    request = AWSRequest(
        method=method,
        url=f"http://{headers.get('host')}{raw_path}",
        data=body,
        headers={h: headers[h] for h in signed if h in headers},
    )
    signer = SigV4Auth(Credentials(access, secret, token), service, region)
    request.context["timestamp"] = amz_date
    signer._modify_request_before_signing(request)
    canonical = signer.canonical_request(request)
    if signer.signed_headers(signer.headers_to_sign(request)) != ";".join(signed):
        return 403, "the signed headers differ"
    want = signer.signature(signer.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(want, parts.get("Signature", "")):
        return 403, "The request signature we calculated does not match the signature you provided"
    return None


class Front(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, payload, content_type="application/json"):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def handle_any(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path == "/__front/stats":
            with LOCK:
                return self.answer(200, json.dumps(STATS).encode())
        headers = {k.lower(): v for k, v in self.headers.items()}
        if MODE == "sigv4":
            refusal = check_sigv4(self.command, self.path, headers, body)
        else:
            given = headers.get("authorization")
            refusal = None if given == expected_header() else (401, "missing or wrong credentials")
        if refusal is not None:
            status, reason = refusal
            with LOCK:
                STATS["refused"] += 1
                STATS["reasons"].append(reason)
            error = {"error": {"type": "security_exception", "reason": reason}, "status": status}
            return self.answer(status, json.dumps(error).encode())
        with LOCK:
            STATS["verified"] += 1
        forward = {k: v for k, v in self.headers.items()
                   if k.lower() in ("content-type", "accept")}
        conn = http.client.HTTPConnection(UPSTREAM.hostname, UPSTREAM.port, timeout=60)
        try:
            conn.request(self.command, self.path, body=body or None, headers=forward)
            r = conn.getresponse()
            payload = r.read()
            self.answer(r.status, payload, r.getheader("content-type", "application/json"))
        finally:
            conn.close()

    do_GET = do_POST = do_PUT = do_DELETE = handle_any


server = ThreadingHTTPServer(("127.0.0.1", 0), Front)
server.daemon_threads = True
print(f"port {server.server_address[1]}", flush=True)
server.serve_forever()
