import unittest

from gantry_client import WebhookVerificationError, sign_webhook, verify_webhook

# The example of the Standard Webhooks reference libraries.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'
SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def headers(sig=SIGNATURE, ts=TIMESTAMP):
    return {"webhook-id": MSG_ID, "webhook-timestamp": str(ts), "webhook-signature": sig}


class WebhookTest(unittest.TestCase):
    def test_sign_matches_the_spec(self):
        self.assertEqual(sign_webhook(SECRET, MSG_ID, TIMESTAMP, BODY), SIGNATURE)

    def test_verify(self):
        self.assertEqual(verify_webhook(SECRET, headers(), BODY, now=TIMESTAMP), {"test": 2432232314})
        # Several signatures (after a rotation): one good one is enough;
        # header names in any case.
        h = {k.title(): v for k, v in headers("v1,AAAA " + SIGNATURE).items()}
        verify_webhook(SECRET, h, BODY, now=TIMESTAMP + 299)

    def test_refusals(self):
        cases = {
            "tampered body": (headers(), b'{"test": 1}', TIMESTAMP),
            "wrong signature": (headers("v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="), BODY, TIMESTAMP),
            "other scheme": (headers("v2," + SIGNATURE[3:]), BODY, TIMESTAMP),
            "too old": (headers(), BODY, TIMESTAMP + 301),
            "missing header": ({"webhook-id": MSG_ID}, BODY, TIMESTAMP),
        }
        for name, (h, body, now) in cases.items():
            with self.subTest(name), self.assertRaises(WebhookVerificationError):
                verify_webhook(SECRET, h, body, now=now)


if __name__ == "__main__":
    unittest.main()
