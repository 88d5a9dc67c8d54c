"""Sealed job payloads for Python, as queue-core seals them (the guide: docs/encryption.md).
peer.py uses it for its *-sealed commands; it needs the `cryptography` package only.

A sealed JSON value (a job's `data`, or its `returnvalue`) is stored in place of the value
as an object with exactly these four keys:

    {"sealed":"aes-256-gcm/1","key":"<key id>","nonce":"<base64>","data":"<base64>"}

`data` is AES-256-GCM over the UTF-8 JSON text of the value, with a random 12-byte `nonce`
and the 16-byte tag appended; both are standard base64 with padding. The associated data
binds it to where it is stored:

    "queue-core sealed 1\\n" + key_id + "\\n" + queue_name + "\\n" + field

with the bare queue name (`email`, not `bull:email`) and the field `data` or
`returnvalue`, so an envelope moved to another queue or field does not open.

The keyring text (QUEUE_KEYS): entries `id=base64key` separated by commas or newlines, each
key 32 bytes in standard base64, ids of [A-Za-z0-9._-]{1,64}; blank entries and `#`
comments are skipped; the first entry is the current key, which seals. Errors name entries
and key ids, never key material.
"""

import base64
import binascii
import json
import os
import re

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

VERSION = "aes-256-gcm/1"
_ENVELOPE_KEYS = {"sealed", "key", "nonce", "data"}
_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_NONCE_BYTES = 12
_TAG_BYTES = 16


class Keyring:
    """Keys by id; `current` seals. Its repr shows ids only."""

    __slots__ = ("current", "_keys")

    def __init__(self, keys):
        self._keys = dict(keys)
        self.current = next(iter(self._keys))

    @property
    def ids(self):
        return list(self._keys)

    def __repr__(self):
        return f"Keyring(current={self.current!r}, ids={self.ids!r})"


def _decode_base64(text):
    """Strict standard base64 with padding: the bytes, or None."""
    if not isinstance(text, str):
        return None
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    # Canonical only: unused bits of the last character must be zero.
    return data if base64.b64encode(data).decode("ascii") == text else None


def parse_keyring(text):
    """Parses keyring text (see the module's doc) into a Keyring. Raises ValueError on a
    malformed entry, a duplicate id, or no entry at all."""
    if not isinstance(text, str):
        raise TypeError("the keyring text must be a string")
    keys = {}
    entry = 0
    for line in text.split("\n"):
        if line.strip().startswith("#"):
            continue
        for raw in line.split(","):
            item = raw.strip()
            if item == "" or item.startswith("#"):
                continue
            entry += 1
            if "=" not in item:
                raise ValueError(f"keyring entry {entry} is not id=base64key")
            key_id, _, encoded = item.partition("=")
            key_id = key_id.strip()
            if not _ID.fullmatch(key_id):
                raise ValueError(
                    f"keyring entry {entry}: the key id is not 1 to 64 of A-Z a-z 0-9 . _ -")
            key = _decode_base64(encoded.strip())
            if key is None or len(key) != 32:
                # The id is not named: an entry that is all key material (`<key>=`)
                # would show it.
                raise ValueError(
                    f"keyring entry {entry}: the key is not 32 bytes in standard base64 "
                    "with padding")
            if key_id in keys:
                raise ValueError(f'keyring entry {entry}: the key id "{key_id}" is there twice')
            keys[key_id] = key
    if not keys:
        raise ValueError("the keyring has no keys")
    return Keyring(keys)


def _associated_data(key_id, queue, field):
    if not isinstance(queue, str) or not isinstance(field, str):
        raise TypeError("the queue name and the field must be strings")
    return f"queue-core sealed 1\n{key_id}\n{queue}\n{field}".encode("utf-8")


def _seal_with(keyring, queue, field, value, nonce):
    # Not for callers: a nonce must never be reused with a key.
    key_id = keyring.current
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    data = AESGCM(keyring._keys[key_id]).encrypt(
        nonce, text.encode("utf-8"), _associated_data(key_id, queue, field))
    return {
        "sealed": VERSION,
        "key": key_id,
        "nonce": base64.b64encode(nonce).decode("ascii"),
        "data": base64.b64encode(data).decode("ascii"),
    }


def seal(keyring, queue, field, value):
    """Seals a JSON value with the keyring's current key, for `field` ("data" or
    "returnvalue") of a job of the queue `queue` (its bare name). Returns the envelope."""
    return _seal_with(keyring, queue, field, value, os.urandom(_NONCE_BYTES))


def is_sealed(value):
    """Whether a value is an envelope: an object of exactly its four keys, of this version."""
    return (isinstance(value, dict) and set(value) == _ENVELOPE_KEYS
            and isinstance(value["sealed"], str) and value["sealed"] == VERSION)


def open_sealed(keyring, queue, field, value):
    """Opens what `seal` made for the same queue and field; a value that is not sealed
    comes back as it is. Raises ValueError when the keyring lacks the envelope's key, or
    when the envelope does not authenticate (altered, or sealed for another queue or
    field)."""
    if not is_sealed(value):
        return value
    key_id = value["key"]
    named = json.dumps(key_id if isinstance(key_id, str) else str(key_id), ensure_ascii=False)
    key = keyring._keys.get(key_id) if isinstance(key_id, str) else None
    if key is None:
        raise ValueError(f"sealed with key {named}, which the keyring does not hold")
    refused = ValueError(
        f"does not open with key {named}: altered, or sealed for another queue or field")
    nonce = _decode_base64(value["nonce"])
    data = _decode_base64(value["data"])
    if nonce is None or len(nonce) != _NONCE_BYTES or data is None or len(data) < _TAG_BYTES:
        raise refused
    try:
        plain = AESGCM(key).decrypt(nonce, data, _associated_data(key_id, queue, field))
    except InvalidTag:
        raise refused from None
    try:
        return json.loads(plain.decode("utf-8"))
    except ValueError:
        raise ValueError(f"opens with key {named}, but what it holds is not JSON text") from None
