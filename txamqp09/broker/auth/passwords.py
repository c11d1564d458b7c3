"""Password hashes in RabbitMQ's format.

RabbitMQ stores a password as ``base64(salt + H(salt + utf8(password)))``
where the salt is four random bytes and ``H`` is the hash function the user's
``hashing_algorithm`` names. Definitions exported by RabbitMQ carry exactly
that string in ``password_hash``, so users move between RabbitMQ and this
broker without resetting passwords.

New hashes use SHA-256 (RabbitMQ's default since 3.6). SHA-512 and MD5 hashes
(and exports without ``hashing_algorithm``, which RabbitMQ reads as MD5) are
accepted for import. An empty ``password_hash`` means the user has no password
and can only log in through a mechanism that needs none (EXTERNAL).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass

__all__ = [
    "ALGORITHMS",
    "MD5",
    "SHA256",
    "SHA512",
    "PasswordHash",
    "hash_password",
]

SHA256 = "rabbit_password_hashing_sha256"
SHA512 = "rabbit_password_hashing_sha512"
MD5 = "rabbit_password_hashing_md5"

#: RabbitMQ's hashing module names and the hashlib function each stands for.
ALGORITHMS = {SHA256: "sha256", SHA512: "sha512", MD5: "md5"}

SALT_LENGTH = 4


@dataclass(frozen=True)
class PasswordHash:
    """A salted password hash.

    :ivar algorithm: one of :data:`ALGORITHMS`' keys.
    :ivar salted: the salt followed by the digest (empty: no password).
    """

    algorithm: str
    salted: bytes

    @classmethod
    def from_definition(cls, encoded: str, algorithm: str | None) -> PasswordHash:
        """Read a definitions file's ``password_hash`` and ``hashing_algorithm``.

        :raises ValueError: unknown algorithm, bad base64, or a hash whose length
            does not fit the algorithm.
        """
        algorithm = algorithm or MD5
        if algorithm not in ALGORITHMS:
            raise ValueError(
                f"unknown hashing_algorithm {algorithm!r}; expected one of {sorted(ALGORITHMS)}"
            )
        try:
            salted = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise ValueError(f"password_hash {encoded!r} is not base64") from None
        digest_size = hashlib.new(ALGORITHMS[algorithm]).digest_size
        if salted and len(salted) != SALT_LENGTH + digest_size:
            raise ValueError(
                f"password_hash holds {len(salted)} bytes; {algorithm} needs "
                f"{SALT_LENGTH + digest_size} (4 bytes of salt and the digest)"
            )
        return cls(algorithm, salted)

    def to_definition(self) -> str:
        """The base64 text for a definitions file's ``password_hash``."""
        return base64.b64encode(self.salted).decode("ascii")

    @property
    def usable(self) -> bool:
        """Whether any password can match (an empty hash matches none)."""
        return bool(self.salted)

    def verify(self, password: str) -> bool:
        """Whether ``password`` is the one this hash was made from.

        The comparison takes the same time wherever the digests differ.
        """
        if not self.usable:
            return False
        salt = self.salted[:SALT_LENGTH]
        return hmac.compare_digest(_salted_digest(self.algorithm, salt, password), self.salted)


def hash_password(password: str, algorithm: str = SHA256, salt: bytes | None = None) -> PasswordHash:
    """Hash ``password`` the way RabbitMQ does, with a fresh random salt."""
    if salt is None:
        salt = os.urandom(SALT_LENGTH)
    if len(salt) != SALT_LENGTH:
        raise ValueError(f"salt must be {SALT_LENGTH} bytes")
    return PasswordHash(algorithm, _salted_digest(algorithm, salt, password))


def _salted_digest(algorithm: str, salt: bytes, password: str) -> bytes:
    digest = hashlib.new(ALGORITHMS[algorithm], salt + password.encode("utf-8")).digest()
    return salt + digest
