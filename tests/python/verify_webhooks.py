"""Verifies captured webhook deliveries with the Standard Webhooks reference library.

Usage: verify_webhooks.py FILE, where FILE holds {"secrets": [...], "deliveries": [{"headers":
{...}, "body": "..."}]}. Prints, per delivery, whether each secret verifies it, and the
signatures the header carries, in order.
"""

import json
import sys

from standardwebhooks.webhooks import Webhook


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    out = []
    for delivery in spec["deliveries"]:
        verified = []
        for secret in spec["secrets"]:
            try:
                Webhook(secret).verify(delivery["body"], delivery["headers"])
                verified.append(True)
            except Exception:  # the library raises WebhookVerificationError
                verified.append(False)
        out.append({
            "verified": verified,
            "signatures": delivery["headers"].get("webhook-signature", "").split(" "),
        })
    print(json.dumps(out))


main()
