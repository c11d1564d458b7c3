"""RabbitMQ-compatible password hashes."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.auth.passwords import (
    MD5,
    SHA256,
    SHA512,
    PasswordHash,
    hash_password,
)

#: Hashes RabbitMQ itself produced: an export's SHA-256 hash of "1", and the
#: MD5 hash of "simon" from the RabbitMQ team's worked example.
RABBITMQ_SHA256_OF_1 = "y4xPTRVfzXg68sz9ALqeQzARam3CwnGo53xS752cDV5+Utzh"
RABBITMQ_MD5_OF_SIMON = "ytUIm8s3AnKsXQjptplKFytfVxI="


class PasswordHashTests(SynchronousTestCase):
    def test_rabbitmq_sha256_hash_verifies(self) -> None:
        hashed = PasswordHash.from_definition(RABBITMQ_SHA256_OF_1, SHA256)
        self.assertTrue(hashed.verify("1"))
        self.assertFalse(hashed.verify("2"))

    def test_rabbitmq_md5_hash_verifies_and_is_the_default_algorithm(self) -> None:
        hashed = PasswordHash.from_definition(RABBITMQ_MD5_OF_SIMON, None)
        self.assertEqual(hashed.algorithm, MD5)
        self.assertTrue(hashed.verify("simon"))
        self.assertFalse(hashed.verify("Simon"))

    def test_new_hash_has_rabbitmq_layout(self) -> None:
        hashed = hash_password("1", salt=bytes.fromhex("cb8c4f4d"))
        self.assertEqual(hashed.to_definition(), RABBITMQ_SHA256_OF_1)

    def test_salts_differ(self) -> None:
        first, second = hash_password("secret"), hash_password("secret")
        self.assertNotEqual(first.salted, second.salted)
        self.assertTrue(first.verify("secret") and second.verify("secret"))

    def test_sha512_round_trip(self) -> None:
        hashed = hash_password("päss", SHA512)
        again = PasswordHash.from_definition(hashed.to_definition(), SHA512)
        self.assertEqual(len(again.salted), 4 + 64)
        self.assertTrue(again.verify("päss"))

    def test_empty_hash_matches_nothing(self) -> None:
        hashed = PasswordHash.from_definition("", SHA256)
        self.assertFalse(hashed.usable)
        self.assertFalse(hashed.verify(""))

    def test_bad_definitions_are_refused_with_reasons(self) -> None:
        for encoded, algorithm, words in [
            ("not base64!", SHA256, "not base64"),
            (RABBITMQ_MD5_OF_SIMON, SHA256, "needs 36"),
            (RABBITMQ_SHA256_OF_1, "rabbit_password_hashing_rot13", "unknown hashing_algorithm"),
        ]:
            with self.assertRaises(ValueError) as caught:
                PasswordHash.from_definition(encoded, algorithm)
            self.assertIn(words, str(caught.exception))
