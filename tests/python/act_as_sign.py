"""Builds an `X-Svc-Act-As` header the way DESIGN §10 describes, with nothing but Python's
standard library: claims = {sub, email, groups, ts}; canonical JSON with sorted keys and no
insignificant whitespace; sig = base64(HMAC-SHA256(secret, canonical_json(claims)));
header = base64(canonical_json(claims + {sig})).

usage: act_as_sign.py hmac SECRET CLAIMS_JSON [TS] [--escape-non-ascii]
       act_as_sign.py none CLAIMS_JSON [--escape-non-ascii]
TS defaults to now. `--escape-non-ascii` writes non-ASCII characters as \\uXXXX escapes
(Python's json.dumps default); without it they are written as UTF-8, as RFC 8785 does.
Prints the header value on stdout.
"""
import base64
import hashlib
import hmac
import json
import sys
import time


def canonical(value: dict, escape: bool) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=escape)
    return text.encode("utf-8")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    escape = "--escape-non-ascii" in sys.argv
    method = args[0]
    if method == "none":
        claims = json.loads(args[1])
        print(base64.b64encode(canonical(claims, escape)).decode())
        return
    secret, claims = args[1], json.loads(args[2])
    claims["ts"] = int(args[3]) if len(args) > 3 else int(time.time())
    sig = hmac.new(secret.encode(), canonical(claims, escape), hashlib.sha256).digest()
    claims["sig"] = base64.b64encode(sig).decode()
    print(base64.b64encode(canonical(claims, escape)).decode())


if __name__ == "__main__":
    main()
