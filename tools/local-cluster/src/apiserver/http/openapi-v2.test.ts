import { describe, expect, it } from "vitest";
import type { Json } from "../types.ts";
import type { OpenApiDoc } from "./openapi.ts";
import { swaggerFromV3, toV2Schema } from "./openapi-v2.ts";
import { encodeSwaggerDocument } from "./openapi-v2-proto.ts";

/** A protobuf message's fields: number -> values (varints as bigint, fixed64 as Buffer, length-delimited as Buffer). */
type Fields = Map<number, (bigint | Buffer)[]>;

function decode(buf: Buffer): Fields {
  const fields: Fields = new Map();
  let at = 0;
  const varint = (): bigint => {
    let v = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const b = buf[at++];
      if (b === undefined) throw new Error("truncated varint");
      v |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return v;
    }
  };
  while (at < buf.length) {
    const key = Number(varint());
    const [field, wire] = [key >> 3, key & 7];
    let value: bigint | Buffer;
    if (wire === 0) value = varint();
    else if (wire === 1) {
      value = buf.subarray(at, at + 8);
      at += 8;
    } else if (wire === 2) {
      const n = Number(varint());
      value = buf.subarray(at, at + n);
      at += n;
    } else throw new Error(`wire type ${wire}`);
    fields.set(field, [...(fields.get(field) ?? []), value]);
  }
  return fields;
}

const bytes = (f: Fields, n: number): Buffer[] => (f.get(n) ?? []).filter((v): v is Buffer => Buffer.isBuffer(v));
const str = (f: Fields, n: number): string | undefined => bytes(f, n)[0]?.toString("utf8");
const msg = (f: Fields, n: number): Fields => decode(bytes(f, n)[0] ?? Buffer.alloc(0));
const NONE: Fields = new Map();
/** The NamedX entries (1 name, 2 value) of a repeated field, by name. */
const namedEntries = (f: Fields, n: number): Map<string, Fields> =>
  new Map(
    bytes(f, n)
      .map((b) => decode(b))
      .map((e) => [str(e, 1) ?? "", msg(e, 2)]),
  );

describe("toV2Schema(): a v3 schema as kube-apiserver publishes it in Swagger 2.0", () => {
  it.each<[string, Json, Json]>([
    ["rewrites $ref", { $ref: "#/components/schemas/a.B" }, { $ref: "#/definitions/a.B" }],
    ["drops the type of a nullable field", { type: "string", nullable: true }, {}],
    [
      "drops the properties under preserve-unknown-fields",
      { type: "object", "x-kubernetes-preserve-unknown-fields": true, properties: { a: { type: "string" } } },
      { type: "object", "x-kubernetes-preserve-unknown-fields": true },
    ],
    [
      "drops anyOf and the type of int-or-string",
      { "x-kubernetes-int-or-string": true, anyOf: [{ type: "integer" }, { type: "string" }] },
      { "x-kubernetes-int-or-string": true },
    ],
    ["gives an array without items an open item", { type: "array" }, { type: "array", items: {} }],
    [
      "recurses into properties, items, additionalProperties and allOf but not defaults",
      {
        properties: { a: { type: "array", items: { nullable: true, type: "string" } } },
        additionalProperties: { oneOf: [], type: "string" },
        allOf: [{ $ref: "#/components/schemas/X" }],
        default: { nullable: true },
      },
      {
        properties: { a: { type: "array", items: {} } },
        additionalProperties: { type: "string" },
        allOf: [{ $ref: "#/definitions/X" }],
        default: { nullable: true },
      },
    ],
  ])("%s", (_, v3, v2) => {
    expect(toV2Schema(v3 as Record<string, Json>)).toEqual(v2);
  });
});

describe("encodeSwaggerDocument(): gnostic openapi_v2.Document", () => {
  const v3: OpenApiDoc = {
    hash: "H",
    body: JSON.stringify({
      openapi: "3.0.0",
      paths: {
        "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}": {
          patch: {
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": { group: "example.com", version: "v1", kind: "Widget" },
            parameters: [{ name: "fieldValidation", in: "query", schema: { type: "string", uniqueItems: true } }],
            responses: {
              "200": {
                description: "OK",
                content: { "application/json": { schema: { $ref: "#/components/schemas/com.example.v1.Widget" } } },
              },
            },
          },
        },
      },
      components: {
        schemas: {
          "com.example.v1.Widget": {
            type: "object",
            required: ["spec"],
            additionalProperties: false,
            properties: { spec: { type: "object", properties: { size: { type: "integer", minimum: 0 } } } },
            "x-kubernetes-group-version-kind": [{ group: "example.com", kind: "Widget", version: "v1" }],
          },
        },
      },
    }),
  };
  const doc = decode(encodeSwaggerDocument(swaggerFromV3([v3])));

  it("carries swagger 2.0 and the definitions with their GVK extension as YAML text", () => {
    expect(str(doc, 1)).toBe("2.0");
    const widget = namedEntries(msg(doc, 9), 1).get("com.example.v1.Widget");
    if (!widget) throw new Error("no Widget definition");
    expect(str(msg(widget, 22), 1)).toBe("object"); // type
    expect(str(widget, 19)).toBe("spec"); // required
    expect(msg(widget, 21).get(2)).toEqual([0n]); // additionalProperties: false is set, not left out
    const size = namedEntries(msg(namedEntries(msg(widget, 25), 1).get("spec") ?? NONE, 25), 1).get("size");
    expect(str(msg(size ?? NONE, 22), 1)).toBe("integer");
    expect(bytes(size ?? NONE, 9)[0]?.readDoubleLE()).toBe(0); // minimum
    const ext = namedEntries(widget, 31).get("x-kubernetes-group-version-kind");
    expect(JSON.parse(str(ext ?? NONE, 2) ?? "")).toEqual([{ group: "example.com", kind: "Widget", version: "v1" }]);
  });

  it("carries the PATCH operation with its GVK, the fieldValidation query parameter and no strategic merge", () => {
    const paths = namedEntries(msg(doc, 8), 2);
    const item = paths.get("/apis/example.com/v1/namespaces/{namespace}/widgets/{name}");
    if (!item) throw new Error("no widget path");
    const patch = msg(item, 8);
    expect(bytes(patch, 7).map((b) => b.toString())).toEqual([
      "application/json-patch+json",
      "application/merge-patch+json",
      "application/apply-patch+yaml",
    ]);
    const params = bytes(patch, 8).map((b) => decode(b));
    const query = params
      .map((p) => msg(msg(p, 1), 2)) // ParametersItem.parameter -> Parameter.non_body_parameter
      .map((nb) => msg(nb, 3)) // -> query_parameter_sub_schema
      .find((q) => str(q, 4) === "fieldValidation");
    expect(query && str(query, 2)).toBe("query");
    const pathParams = params.map((p) => msg(msg(msg(p, 1), 2), 4)).map((pp) => str(pp, 4));
    expect(pathParams).toEqual(expect.arrayContaining(["namespace", "name"]));
    const ext = namedEntries(patch, 13).get("x-kubernetes-group-version-kind");
    expect(JSON.parse(str(ext ?? NONE, 2) ?? "")).toEqual({ group: "example.com", version: "v1", kind: "Widget" });
  });
});
