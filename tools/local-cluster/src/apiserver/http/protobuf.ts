/**
 * Decoding of Kubernetes protobuf request bodies for the built-in kinds kubectl's typed commands send
 * (`kubectl create namespace|configmap|secret|serviceaccount|rolebinding|clusterrolebinding|token`,
 * `kubectl auth can-i`) and client-go programs write (Leases: kwok's node heartbeats, leader election): client-go
 * posts those as
 * `application/vnd.kubernetes.protobuf` and has no JSON fallback. Responses stay JSON (every client accepts it).
 *
 *   body = "k8s\0" + runtime.Unknown{1: typeMeta{1: apiVersion, 2: kind}, 2: raw (the object), 3, 4}
 *   wire: tag = field << 3 | type; 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32; map entries {1: key, 2: value}
 *
 * Anything else is a 415 that names the supported media types.
 */
import { type ApiError, statusError } from "../errors.ts";

type FieldType = "string" | "bytes" | "bool" | "int" | "time" | "microtime" | "smap" | "bmap" | Schema;
type Field = readonly [name: string, type: FieldType, repeated?: boolean];
interface Schema {
  readonly [field: number]: Field;
}

const TIME: Schema = { 1: ["seconds", "int"], 2: ["nanos", "int"] };
const OWNER_REF: Schema = {
  1: ["kind", "string"],
  3: ["name", "string"],
  4: ["uid", "string"],
  5: ["apiVersion", "string"],
  6: ["controller", "bool"],
  7: ["blockOwnerDeletion", "bool"],
};
const OBJECT_META: Schema = {
  1: ["name", "string"],
  2: ["generateName", "string"],
  3: ["namespace", "string"],
  5: ["uid", "string"],
  6: ["resourceVersion", "string"],
  7: ["generation", "int"],
  8: ["creationTimestamp", "time"],
  9: ["deletionTimestamp", "time"],
  10: ["deletionGracePeriodSeconds", "int"],
  11: ["labels", "smap"],
  12: ["annotations", "smap"],
  13: ["ownerReferences", OWNER_REF, true],
  14: ["finalizers", "string", true],
};
const NAME_REF: Schema = { 1: ["name", "string"] };
const OBJECT_REF: Schema = {
  1: ["kind", "string"],
  2: ["namespace", "string"],
  3: ["name", "string"],
  4: ["uid", "string"],
  5: ["apiVersion", "string"],
  6: ["resourceVersion", "string"],
  7: ["fieldPath", "string"],
};
const RESOURCE_ATTRS: Schema = {
  1: ["namespace", "string"],
  2: ["verb", "string"],
  3: ["group", "string"],
  4: ["version", "string"],
  5: ["resource", "string"],
  6: ["subresource", "string"],
  7: ["name", "string"],
};
const NON_RESOURCE_ATTRS: Schema = { 1: ["path", "string"], 2: ["verb", "string"] };
const BINDING: Schema = {
  1: ["metadata", OBJECT_META],
  2: [
    "subjects",
    { 1: ["kind", "string"], 2: ["apiGroup", "string"], 3: ["name", "string"], 4: ["namespace", "string"] },
    true,
  ],
  3: ["roleRef", { 1: ["apiGroup", "string"], 2: ["kind", "string"], 3: ["name", "string"] }],
};

/** Schemas by `apiVersion/kind`. */
const KINDS: Readonly<Record<string, Schema>> = {
  "v1/ConfigMap": {
    1: ["metadata", OBJECT_META],
    2: ["data", "smap"],
    3: ["binaryData", "bmap"],
    4: ["immutable", "bool"],
  },
  "v1/Secret": {
    1: ["metadata", OBJECT_META],
    2: ["data", "bmap"],
    3: ["type", "string"],
    4: ["stringData", "smap"],
    5: ["immutable", "bool"],
  },
  "v1/Namespace": {
    1: ["metadata", OBJECT_META],
    2: ["spec", { 1: ["finalizers", "string", true] }],
    3: ["status", { 1: ["phase", "string"] }],
  },
  "v1/ServiceAccount": {
    1: ["metadata", OBJECT_META],
    2: ["secrets", OBJECT_REF, true],
    3: ["imagePullSecrets", NAME_REF, true],
    4: ["automountServiceAccountToken", "bool"],
  },
  "authorization.k8s.io/v1/SelfSubjectAccessReview": {
    1: ["metadata", OBJECT_META],
    2: ["spec", { 1: ["resourceAttributes", RESOURCE_ATTRS], 2: ["nonResourceAttributes", NON_RESOURCE_ATTRS] }],
  },
  "rbac.authorization.k8s.io/v1/RoleBinding": BINDING,
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding": BINDING,
  "authentication.k8s.io/v1/TokenRequest": {
    1: ["metadata", OBJECT_META],
    2: [
      "spec",
      {
        1: ["audiences", "string", true],
        3: [
          "boundObjectRef",
          { 1: ["kind", "string"], 2: ["apiVersion", "string"], 3: ["name", "string"], 4: ["uid", "string"] },
        ],
        4: ["expirationSeconds", "int"],
      },
    ],
  },
  // Node heartbeats and leader election (client-go's resourcelock, kwok's node leases): coordination.k8s.io/v1.
  "coordination.k8s.io/v1/Lease": {
    1: ["metadata", OBJECT_META],
    2: [
      "spec",
      {
        1: ["holderIdentity", "string"],
        2: ["leaseDurationSeconds", "int"],
        3: ["acquireTime", "microtime"],
        4: ["renewTime", "microtime"],
        5: ["leaseTransitions", "int"],
        6: ["strategy", "string"],
        7: ["preferredHolder", "string"],
      },
    ],
  },
  "authorization.k8s.io/v1/SelfSubjectRulesReview": {
    1: ["metadata", OBJECT_META],
    2: ["spec", { 1: ["namespace", "string"] }],
  },
};

class Reader {
  pos = 0;
  readonly buf: Buffer;
  constructor(buf: Buffer) {
    this.buf = buf;
  }
  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.pos >= this.buf.length) throw new Error("truncated varint");
      const b = this.buf[this.pos++];
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
      if (shift > 70n) throw new Error("varint too long");
    }
  }
  bytes(): Buffer {
    const n = Number(this.varint());
    if (n < 0 || this.pos + n > this.buf.length) throw new Error("truncated field");
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }
  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.pos += 8;
    else if (wire === 2) this.bytes();
    else if (wire === 5) this.pos += 4;
    else throw new Error(`unsupported wire type ${wire}`);
  }
}

function toTime(v: Record<string, unknown>): string {
  return `${new Date(Number(v.seconds ?? 0) * 1000).toISOString().slice(0, 19)}Z`;
}

/** A metav1.MicroTime as its JSON form: RFC 3339 with six fractional digits (`2006-01-02T15:04:05.000000Z`). */
function toMicroTime(v: Record<string, unknown>): string {
  const micros = String(Math.floor(Number(v.nanos ?? 0) / 1000)).padStart(6, "0");
  return `${new Date(Number(v.seconds ?? 0) * 1000).toISOString().slice(0, 19)}.${micros}Z`;
}

function decodeMessage(buf: Buffer, schema: Schema): Record<string, unknown> {
  const r = new Reader(buf);
  const out: Record<string, unknown> = {};
  while (r.pos < buf.length) {
    const tag = Number(r.varint());
    const field = schema[tag >> 3];
    const wire = tag & 7;
    if (!field) {
      r.skip(wire);
      continue;
    }
    const [name, type, repeated] = field;
    let value: unknown;
    if (type === "int" || type === "bool") {
      const v = r.varint();
      value = type === "bool" ? v !== 0n : Number(BigInt.asIntN(64, v));
    } else if (type === "string") value = r.bytes().toString("utf8");
    else if (type === "bytes") value = r.bytes().toString("base64");
    else if (type === "time") value = toTime(decodeMessage(r.bytes(), TIME));
    else if (type === "microtime") value = toMicroTime(decodeMessage(r.bytes(), TIME));
    else if (type === "smap" || type === "bmap") {
      const entry = decodeMessage(r.bytes(), {
        1: ["key", "string"],
        2: ["value", type === "smap" ? "string" : "bytes"],
      });
      const m = (out[name] ?? {}) as Record<string, unknown>;
      m[typeof entry.key === "string" ? entry.key : ""] = entry.value ?? "";
      out[name] = m;
      continue;
    } else value = decodeMessage(r.bytes(), type);
    if (repeated) out[name] = [...((out[name] as unknown[] | undefined) ?? []), value];
    else out[name] = value;
  }
  return out;
}

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

/** Decodes a protobuf request body into the JSON form of the object. */
export function decodeProtobuf(body: Buffer): Record<string, unknown> {
  if (body.length < 4 || !body.subarray(0, 4).equals(MAGIC)) throw unsupported();
  let unknown: Record<string, unknown>;
  try {
    unknown = decodeMessage(body.subarray(4), {
      1: ["typeMeta", { 1: ["apiVersion", "string"], 2: ["kind", "string"] }],
      2: ["raw", "bytes"],
    });
  } catch (err) {
    throw statusError(
      400,
      "BadRequest",
      `error decoding protobuf body: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const tm = (unknown.typeMeta ?? {}) as { apiVersion?: string; kind?: string };
  const schema = KINDS[`${tm.apiVersion ?? ""}/${tm.kind ?? ""}`];
  if (!schema) throw unsupported();
  try {
    const obj = decodeMessage(Buffer.from(typeof unknown.raw === "string" ? unknown.raw : "", "base64"), schema);
    return { apiVersion: tm.apiVersion, kind: tm.kind, ...obj, metadata: obj.metadata ?? {} };
  } catch (err) {
    throw statusError(
      400,
      "BadRequest",
      `error decoding protobuf ${tm.kind ?? ""}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

function unsupported(): ApiError {
  return statusError(
    415,
    "UnsupportedMediaType",
    "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
  );
}
