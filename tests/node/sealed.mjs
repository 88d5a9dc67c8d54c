// Sealed job payloads for Node, as queue-core seals them (the guide: docs/encryption.md).
// peer.mjs uses it for its *-sealed commands; a Node producer or worker sharing queues
// with an encrypting Rust service can copy it as it is (it needs node:crypto only).
//
// A sealed JSON value (a job's `data`, or its `returnvalue`) is stored in place of the
// value as an object with exactly these four keys:
//
//   {"sealed":"aes-256-gcm/1","key":"<key id>","nonce":"<base64>","data":"<base64>"}
//
// `data` is AES-256-GCM over the UTF-8 JSON text of the value, with a random 12-byte
// `nonce` and the 16-byte tag appended; both are standard base64 with padding. The
// associated data binds it to where it is stored:
//
//   "queue-core sealed 1\n" + keyId + "\n" + queueName + "\n" + field
//
// with the bare queue name (`email`, not `bull:email`) and the field `data` or
// `returnvalue`, so an envelope moved to another queue or field does not open.
//
// The keyring text (QUEUE_KEYS): entries `id=base64key` separated by commas or newlines,
// each key 32 bytes in standard base64, ids of [A-Za-z0-9._-]{1,64}; blank entries and
// `#` comments are skipped; the first entry is the current key, which seals. Errors name
// entries and key ids, never key material.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const VERSION = 'aes-256-gcm/1';
const ENVELOPE_KEYS = ['data', 'key', 'nonce', 'sealed'];
const ID = /^[A-Za-z0-9._-]{1,64}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

// The keys themselves, out of reach of JSON.stringify, console.log and the like.
const secrets = new WeakMap();

// Strict standard base64 with padding (Buffer.from alone skips characters it does not
// know): the bytes, or null.
function decodeBase64(text) {
  if (typeof text !== 'string' || !BASE64.test(text)) return null;
  const bytes = Buffer.from(text, 'base64');
  // Canonical only: unused bits of the last character must be zero.
  return bytes.toString('base64') === text ? bytes : null;
}

/**
 * Parses keyring text (see the header). Returns a frozen `{current, ids}`; the keys are
 * kept where only seal and open reach them. Throws on a malformed entry, a duplicate id,
 * or no entry at all.
 * @param {string} text
 */
export function parseKeyring(text) {
  if (typeof text !== 'string') throw new TypeError('the keyring text must be a string');
  const keys = new Map();
  let entry = 0;
  for (const line of text.split('\n')) {
    if (line.trim().startsWith('#')) continue;
    for (const raw of line.split(',')) {
      const item = raw.trim();
      if (item === '' || item.startsWith('#')) continue;
      entry += 1;
      const eq = item.indexOf('=');
      if (eq < 0) throw new Error(`keyring entry ${entry} is not id=base64key`);
      const id = item.slice(0, eq).trim();
      if (!ID.test(id)) {
        throw new Error(`keyring entry ${entry}: the key id is not 1 to 64 of A-Z a-z 0-9 . _ -`);
      }
      const key = decodeBase64(item.slice(eq + 1).trim());
      if (key === null || key.length !== 32) {
        // The id is not named: an entry that is all key material (`<key>=`) would show it.
        throw new Error(`keyring entry ${entry}: the key is not 32 bytes in standard base64 with padding`);
      }
      if (keys.has(id)) throw new Error(`keyring entry ${entry}: the key id "${id}" is there twice`);
      keys.set(id, key);
    }
  }
  if (keys.size === 0) throw new Error('the keyring has no keys');
  const keyring = Object.freeze({ current: keys.keys().next().value, ids: Object.freeze([...keys.keys()]) });
  secrets.set(keyring, keys);
  return keyring;
}

function keysOf(keyring) {
  const keys = secrets.get(keyring);
  if (!keys) throw new TypeError('not a keyring from parseKeyring');
  return keys;
}

function associatedData(keyId, queue, field) {
  if (typeof queue !== 'string' || typeof field !== 'string') {
    throw new TypeError('the queue name and the field must be strings');
  }
  return Buffer.from(`queue-core sealed 1\n${keyId}\n${queue}\n${field}`, 'utf8');
}

// seal with a given nonce; not exported, since a nonce must never be reused with a key.
function sealWith(keyring, queue, field, value, nonce) {
  const keyId = keyring.current;
  const key = keysOf(keyring).get(keyId);
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError('only a JSON value can be sealed');
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(associatedData(keyId, queue, field));
  const data = Buffer.concat([cipher.update(text, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return { sealed: VERSION, key: keyId, nonce: nonce.toString('base64'), data: data.toString('base64') };
}

/**
 * Seals a JSON value with the keyring's current key, for `field` ("data" or
 * "returnvalue") of a job of the queue `queue` (its bare name). Returns the envelope.
 */
export function seal(keyring, queue, field, value) {
  return sealWith(keyring, queue, field, value, randomBytes(NONCE_BYTES));
}

/** Whether a value is an envelope: an object of exactly its four keys, of this version. */
export function isSealed(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const keys = Object.keys(value).sort();
  return (
    keys.length === ENVELOPE_KEYS.length &&
    keys.every((key, i) => key === ENVELOPE_KEYS[i]) &&
    value.sealed === VERSION
  );
}

/**
 * Opens what `seal` made for the same queue and field; a value that is not sealed comes
 * back as it is. Throws when the keyring lacks the envelope's key, or when the envelope
 * does not authenticate (altered, or sealed for another queue or field).
 */
export function open(keyring, queue, field, value) {
  if (!isSealed(value)) return value;
  const keys = keysOf(keyring);
  const keyId = value.key;
  const named = JSON.stringify(String(keyId));
  const key = typeof keyId === 'string' ? keys.get(keyId) : undefined;
  if (!key) throw new Error(`sealed with key ${named}, which the keyring does not hold`);
  const refused = () => new Error(`does not open with key ${named}: altered, or sealed for another queue or field`);
  const nonce = decodeBase64(value.nonce);
  const data = decodeBase64(value.data);
  if (!nonce || nonce.length !== NONCE_BYTES || !data || data.length < TAG_BYTES) throw refused();
  const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  decipher.setAAD(associatedData(keyId, queue, field));
  decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
  let plain;
  try {
    plain = Buffer.concat([decipher.update(data.subarray(0, data.length - TAG_BYTES)), decipher.final()]);
  } catch {
    throw refused();
  }
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(plain));
  } catch {
    throw new Error(`opens with key ${named}, but what it holds is not JSON text`);
  }
}
