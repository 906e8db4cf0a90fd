/**
 * A minimal ASN.1 DER encoder: just the types an X.509 v3 certificate needs (RFC 5280). Every function returns
 * the complete TLV bytes, so callers compose certificates bottom-up.
 */

/** Encodes a DER length: short form below 128, long form (0x80 | n, n big-endian bytes) above. */
function encodeLength(length: number): Uint8Array {
  if (length < 0x80) return Uint8Array.of(length);
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return Uint8Array.of(0x80 | bytes.length, ...bytes);
}

/** A TLV with the given tag byte and content. */
export function tlv(tag: number, content: Uint8Array): Uint8Array {
  const length = encodeLength(content.length);
  const out = new Uint8Array(1 + length.length + content.length);
  out[0] = tag;
  out.set(length, 1);
  out.set(content, 1 + length.length);
  return out;
}

/** Concatenates byte arrays. */
export function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/** SEQUENCE of the given elements. */
export function sequence(...elements: Uint8Array[]): Uint8Array {
  return tlv(0x30, concat(elements));
}

/** SET of the given elements (callers pass one element, so no sorting is needed). */
export function set(...elements: Uint8Array[]): Uint8Array {
  return tlv(0x31, concat(elements));
}

/** A non-negative INTEGER from big-endian magnitude bytes (a leading zero is added when the top bit is set). */
export function integer(magnitude: Uint8Array): Uint8Array {
  let start = 0;
  while (start < magnitude.length - 1 && magnitude[start] === 0) start++;
  const trimmed = magnitude.subarray(start);
  const needsPad = ((trimmed[0] ?? 0) & 0x80) !== 0;
  return tlv(0x02, needsPad ? concat([Uint8Array.of(0), trimmed]) : trimmed);
}

/** A small non-negative INTEGER. */
export function smallInteger(value: number): Uint8Array {
  return integer(Uint8Array.of(value & 0xff));
}

/** BOOLEAN. */
export function boolean(value: boolean): Uint8Array {
  return tlv(0x01, Uint8Array.of(value ? 0xff : 0));
}

/** OBJECT IDENTIFIER from dotted notation, e.g. `2.5.4.3`. */
export function oid(dotted: string): Uint8Array {
  const arcs = dotted.split(".").map(Number);
  const bytes: number[] = [40 * (arcs[0] ?? 0) + (arcs[1] ?? 0)];
  for (const arc of arcs.slice(2)) {
    const base128: number[] = [arc & 0x7f];
    for (let n = Math.floor(arc / 128); n > 0; n = Math.floor(n / 128)) base128.unshift(0x80 | (n & 0x7f));
    bytes.push(...base128);
  }
  return tlv(0x06, Uint8Array.from(bytes));
}

/** UTF8String. */
export function utf8String(value: string): Uint8Array {
  return tlv(0x0c, new TextEncoder().encode(value));
}

/** OCTET STRING. */
export function octetString(content: Uint8Array): Uint8Array {
  return tlv(0x04, content);
}

/** BIT STRING with `unusedBits` padding bits in the last byte. */
export function bitString(content: Uint8Array, unusedBits = 0): Uint8Array {
  return tlv(0x03, concat([Uint8Array.of(unusedBits), content]));
}

/** A time as RFC 5280 wants it: UTCTime before 2050, GeneralizedTime from 2050 on. */
export function time(date: Date): Uint8Array {
  const iso = date.toISOString(); // 2026-01-02T03:04:05.678Z
  const digits = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
  const utc = date.getUTCFullYear() < 2050;
  return tlv(utc ? 0x17 : 0x18, new TextEncoder().encode(utc ? digits.slice(2) : digits));
}

/** A context-specific constructed tag `[n]` wrapping `content` (explicit tagging). */
export function explicit(n: number, content: Uint8Array): Uint8Array {
  return tlv(0xa0 | n, content);
}

/** A context-specific primitive tag `[n]` with raw content (implicit tagging, e.g. GeneralName). */
export function implicitPrimitive(n: number, content: Uint8Array): Uint8Array {
  return tlv(0x80 | n, content);
}
