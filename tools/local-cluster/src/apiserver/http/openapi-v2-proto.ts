/**
 * A Swagger 2.0 document in the protobuf form kubectl asks `/openapi/v2` for
 * (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`): the `openapi_v2.Document` message of
 * github.com/google/gnostic-models (OpenAPIv2.proto), which client-go unmarshals and kube-openapi reads.
 *
 * Only the parts this server publishes are encoded; the field numbers are the proto file's:
 *
 *   Document   1 swagger  2 info{1 title, 2 version}  8 paths{2 NamedPathItem{1 name, 2 PathItem}}
 *              9 definitions{1 NamedSchema{1 name, 2 Schema}}
 *   PathItem   2 get  3 put  4 post  5 delete  8 patch  (Operation)
 *   Operation  6 produces  7 consumes  8 ParametersItem{1 Parameter{1 BodyParameter | 2 NonBodyParameter}}
 *              9 responses{1 NamedResponseValue{1 code, 2 ResponseValue{1 Response{1 description, 2 SchemaItem{1 Schema}}}}}
 *              13 vendor extensions
 *   NonBodyParameter  3 QueryParameterSubSchema{1 required 2 in 3 description 4 name 6 type 20 uniqueItems}
 *                     4 PathParameterSubSchema{1 required 2 in 3 description 4 name 5 type 19 uniqueItems}
 *   BodyParameter     1 description 2 name 3 in 4 required 5 schema
 *   Schema     1 $ref 2 format 3 title 4 description 5 default 6 multipleOf 7 maximum 8 exclusiveMaximum 9 minimum
 *              10 exclusiveMinimum 11 maxLength 12 minLength 13 pattern 14 maxItems 15 minItems 16 uniqueItems
 *              17 maxProperties 18 minProperties 19 required 20 enum 21 additionalProperties{1 Schema | 2 bool}
 *              22 type{1 values} 23 items{1 Schema} 24 allOf 25 properties{1 NamedSchema} 27 readOnly 30 example
 *              31 vendor extensions
 *   NamedAny   1 name  2 Any{2 yaml}   (a value travels as YAML text; JSON text is YAML)
 *
 * Wire format: each field is a varint key (number << 3 | wire type) then a varint (0), 8 little-endian bytes (1) or
 * a varint length and the bytes (2).
 */
import type { Json } from "../types.ts";

type Obj = Record<string, Json>;

/** The bytes of one message: its fields in order. */
class Message {
  readonly #parts: Buffer[] = [];

  #key(field: number, wireType: number): void {
    this.#parts.push(varint(BigInt((field << 3) | wireType)));
  }

  /** A length-delimited field (string, bytes, nested message). */
  bytes(field: number, value: Buffer): this {
    this.#key(field, 2);
    this.#parts.push(varint(BigInt(value.length)), value);
    return this;
  }

  string(field: number, value: Json | undefined): this {
    return typeof value === "string" ? this.bytes(field, Buffer.from(value, "utf8")) : this;
  }

  strings(field: number, values: Json | undefined): this {
    if (Array.isArray(values)) for (const v of values) this.string(field, v);
    return this;
  }

  bool(field: number, value: Json | undefined): this {
    return value === true ? this.oneofBool(field, true) : this; // proto3 leaves false out
  }

  /** A bool member of a oneof: written even when false, since being set is what selects it. */
  oneofBool(field: number, value: boolean): this {
    this.#key(field, 0);
    this.#parts.push(Buffer.from([value ? 1 : 0]));
    return this;
  }

  int64(field: number, value: Json | undefined): this {
    if (typeof value !== "number" || !Number.isInteger(value)) return this;
    this.#key(field, 0);
    this.#parts.push(varint(BigInt.asUintN(64, BigInt(value))));
    return this;
  }

  double(field: number, value: Json | undefined): this {
    if (typeof value !== "number") return this;
    this.#key(field, 1);
    const b = Buffer.alloc(8);
    b.writeDoubleLE(value);
    this.#parts.push(b);
    return this;
  }

  message(field: number, value: Message | undefined): this {
    return value ? this.bytes(field, value.toBuffer()) : this;
  }

  messages(field: number, values: readonly Message[]): this {
    for (const v of values) this.message(field, v);
    return this;
  }

  toBuffer(): Buffer {
    return Buffer.concat(this.#parts);
  }
}

function varint(n: bigint): Buffer {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return Buffer.from(out);
}

const isObj = (v: Json | undefined): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** `Any{yaml}`: gnostic keeps non-schema values as YAML text, and JSON text is valid YAML. */
const any = (value: Json): Message => new Message().string(2, JSON.stringify(value));

/** The `x-...` keys of `o` as NamedAny messages. */
function vendorExtensions(o: Obj): Message[] {
  return Object.entries(o)
    .filter(([k]) => k.startsWith("x-"))
    .map(([k, v]) => new Message().string(1, k).message(2, any(v)));
}

function named(name: string, value: Message): Message {
  return new Message().string(1, name).message(2, value);
}

/** A Swagger 2.0 schema object as `openapi_v2.Schema`. */
export function encodeSchema(s: Obj): Message {
  const m = new Message().string(1, s.$ref).string(2, s.format).string(3, s.title).string(4, s.description);
  if (s.default !== undefined) m.message(5, any(s.default));
  m.double(6, s.multipleOf).double(7, s.maximum).bool(8, s.exclusiveMaximum);
  m.double(9, s.minimum).bool(10, s.exclusiveMinimum);
  m.int64(11, s.maxLength).int64(12, s.minLength).string(13, s.pattern);
  m.int64(14, s.maxItems).int64(15, s.minItems).bool(16, s.uniqueItems);
  m.int64(17, s.maxProperties).int64(18, s.minProperties).strings(19, s.required);
  if (Array.isArray(s.enum)) m.messages(20, s.enum.map(any));
  if (isObj(s.additionalProperties)) m.message(21, new Message().message(1, encodeSchema(s.additionalProperties)));
  else if (typeof s.additionalProperties === "boolean")
    m.message(21, new Message().oneofBool(2, s.additionalProperties));
  if (typeof s.type === "string") m.message(22, new Message().string(1, s.type));
  if (isObj(s.items)) m.message(23, new Message().message(1, encodeSchema(s.items)));
  if (Array.isArray(s.allOf)) m.messages(24, s.allOf.filter(isObj).map(encodeSchema));
  if (isObj(s.properties))
    m.message(
      25,
      new Message().messages(
        1,
        Object.entries(s.properties)
          .filter((e): e is [string, Obj] => isObj(e[1]))
          .map(([k, v]) => named(k, encodeSchema(v))),
      ),
    );
  m.bool(27, s.readOnly);
  if (s.example !== undefined) m.message(30, any(s.example));
  return m.messages(31, vendorExtensions(s));
}

function encodeParameter(p: Obj): Message {
  if (p.in === "body") {
    const body = new Message().string(1, p.description).string(2, p.name).string(3, p.in).bool(4, p.required);
    if (isObj(p.schema)) body.message(5, encodeSchema(p.schema));
    return new Message().message(1, new Message().message(1, body));
  }
  const path = p.in === "path";
  const sub = new Message()
    .bool(1, p.required)
    .string(2, p.in)
    .string(3, p.description)
    .string(4, p.name)
    .string(path ? 5 : 6, p.type)
    .bool(path ? 19 : 20, p.uniqueItems);
  return new Message().message(1, new Message().message(2, new Message().message(path ? 4 : 3, sub)));
}

function encodeOperation(op: Obj): Message {
  const m = new Message().strings(6, op.produces).strings(7, op.consumes);
  if (Array.isArray(op.parameters)) m.messages(8, op.parameters.filter(isObj).map(encodeParameter));
  if (isObj(op.responses)) {
    const codes = Object.entries(op.responses)
      .filter((e): e is [string, Obj] => isObj(e[1]))
      .map(([code, r]) => {
        const response = new Message().string(1, r.description);
        if (isObj(r.schema)) response.message(2, new Message().message(1, encodeSchema(r.schema)));
        return named(code, new Message().message(1, response));
      });
    m.message(9, new Message().messages(1, codes));
  }
  return m.messages(13, vendorExtensions(op));
}

const PATH_ITEM_FIELDS = { get: 2, put: 3, post: 4, delete: 5, patch: 8 } as const;

function encodePathItem(item: Obj): Message {
  const m = new Message();
  for (const [verb, field] of Object.entries(PATH_ITEM_FIELDS)) {
    const op = item[verb];
    if (isObj(op)) m.message(field, encodeOperation(op));
  }
  return m;
}

/** A Swagger 2.0 document (`swagger`, `info`, `paths`, `definitions`) as the bytes of `openapi_v2.Document`. */
export function encodeSwaggerDocument(doc: Obj): Buffer {
  const info = isObj(doc.info) ? doc.info : {};
  const paths = isObj(doc.paths) ? doc.paths : {};
  const definitions = isObj(doc.definitions) ? doc.definitions : {};
  return new Message()
    .string(1, doc.swagger)
    .message(2, new Message().string(1, info.title).string(2, info.version))
    .message(
      8,
      new Message().messages(
        2,
        Object.entries(paths)
          .filter((e): e is [string, Obj] => isObj(e[1]))
          .map(([p, item]) => named(p, encodePathItem(item))),
      ),
    )
    .message(
      9,
      new Message().messages(
        1,
        Object.entries(definitions)
          .filter((e): e is [string, Obj] => isObj(e[1]))
          .map(([name, s]) => named(name, encodeSchema(s))),
      ),
    )
    .toBuffer();
}
