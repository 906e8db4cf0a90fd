/**
 * `/openapi/v2`: the Swagger 2.0 view of the same documents `/openapi/v3` serves, as JSON or (what kubectl asks for)
 * gnostic protobuf.
 *
 * kubectl needs it for any object whose group-version the v3 index does not list: an unserved kind, a known group
 * with an unknown version, or a `kind: List`. Its fieldValidation check then finds no server-side support and falls
 * back to client-side validation, which loads the v2 document; without one, kubectl stops at "error validating data:
 * the server could not find the requested resource" instead of reaching the RESTMapper's "resource mapping not found
 * ... ensure CRDs are installed first", which is what a real cluster answers. The document is derived from the v3
 * one as kube-apiserver derives a CRD's v2 schema from its structural schema:
 *
 *   $ref #/components/schemas/X   ->  #/definitions/X
 *   nullable: true                ->  no type (null passes kubectl's validation)
 *   x-kubernetes-preserve-unknown-fields: true  ->  no properties (unknown fields pass)
 *   x-kubernetes-int-or-string    ->  no type
 *   anyOf / oneOf / not           ->  dropped (no Swagger 2.0 form)
 *   array without items           ->  items {} (kube-openapi refuses an array schema without exactly one item)
 *   v3 parameters / responses     ->  v2 query/path parameters, a body parameter, `schema` responses
 *
 * PATCH operations list the JSON patch, merge patch and apply patch types but not strategic merge: the schemas carry
 * no patch merge keys, so kubectl keeps building strategic merge patches for built-in kinds from its compiled-in
 * types (as it did without this document), and uses a merge patch for custom resources.
 */
import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Json } from "../types.ts";
import type { OpenApiDoc, OpenApiV3 } from "./openapi.ts";
import { encodeSwaggerDocument } from "./openapi-v2-proto.ts";

type Obj = Record<string, Json>;

/** The media types kubectl's discovery client asks `/openapi/v2` for (new and legacy spelling). */
export const OPENAPI_V2_PROTOBUF = [
  "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
  "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
] as const;

const PATCH_DEFINITION = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];
const PRODUCES = ["application/json", "application/yaml"];

const isObj = (v: Json | undefined): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function mapValues(o: Obj, f: (v: Obj) => Json): Obj {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, isObj(v) ? f(v) : v]));
}

/** One v3 schema as Swagger 2.0 (see the table above); values such as defaults and enums are copied as they are. */
export function toV2Schema(s: Obj): Obj {
  const out: Obj = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === "nullable" || k === "anyOf" || k === "oneOf" || k === "not") continue;
    if (k === "$ref" && typeof v === "string") out[k] = v.replace("#/components/schemas/", "#/definitions/");
    else if (k === "properties" && isObj(v)) out[k] = mapValues(v, toV2Schema);
    else if ((k === "items" || k === "additionalProperties") && isObj(v)) out[k] = toV2Schema(v);
    else if (k === "allOf" && Array.isArray(v)) out[k] = v.map((x) => (isObj(x) ? toV2Schema(x) : x));
    else out[k] = v;
  }
  if (s.nullable === true || s["x-kubernetes-int-or-string"] === true) delete out.type;
  if (s["x-kubernetes-preserve-unknown-fields"] === true) delete out.properties;
  if (out.type === "array" && !isObj(out.items)) out.items = {};
  return out;
}

function toV2Parameter(p: Obj): Obj {
  const schema = isObj(p.schema) ? p.schema : {};
  const out: Obj = { name: p.name ?? "", in: p.in ?? "query", type: schema.type ?? "string" };
  if (p.description !== undefined) out.description = p.description;
  if (p.required === true || p.in === "path") out.required = true;
  if (schema.uniqueItems === true) out.uniqueItems = true;
  return out;
}

function toV2Responses(responses: Obj): Obj {
  return mapValues(responses, (r) => {
    const content = isObj(r.content) ? r.content : {};
    const json = isObj(content["application/json"]) ? content["application/json"] : {};
    return {
      description: r.description ?? "",
      ...(isObj(json.schema) ? { schema: toV2Schema(json.schema) } : {}),
    };
  });
}

function toV2Operation(verb: string, op: Obj, pathParams: readonly string[]): Obj {
  const params = Array.isArray(op.parameters) ? op.parameters.filter(isObj).map(toV2Parameter) : [];
  const responses = isObj(op.responses) ? toV2Responses(op.responses) : {};
  const ok = isObj(responses["200"]) ? responses["200"].schema : undefined;
  const out: Obj = { produces: PRODUCES };
  if (verb === "patch") out.consumes = PATCH_TYPES;
  else if (verb === "post" || verb === "put") out.consumes = ["*/*"];
  const body =
    verb === "patch"
      ? { $ref: `#/definitions/${PATCH_DEFINITION}` }
      : (verb === "post" || verb === "put") && ok !== undefined
        ? ok
        : undefined;
  out.parameters = [
    ...(body ? [{ name: "body", in: "body", required: true, schema: body }] : []),
    ...pathParams.map((name) => ({ name, in: "path", required: true, type: "string", uniqueItems: true })),
    ...params,
  ];
  out.responses = responses;
  for (const [k, v] of Object.entries(op)) if (k.startsWith("x-")) out[k] = v;
  return out;
}

function toV2PathItem(path: string, item: Obj): Obj {
  const pathParams = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] ?? "");
  return Object.fromEntries(
    Object.entries(item)
      .filter((e): e is [string, Obj] => isObj(e[1]))
      .map(([verb, op]) => [verb, toV2Operation(verb, op, pathParams)]),
  );
}

/** The Swagger 2.0 document for every v3 document (`api/v1`, `apis/<g>/<v>`). */
export function swaggerFromV3(docs: Iterable<OpenApiDoc>): Obj {
  const definitions: Obj = {
    [PATCH_DEFINITION]: {
      type: "object",
      description: "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.",
    },
  };
  const paths: Obj = {};
  for (const doc of docs) {
    const v3 = JSON.parse(doc.body) as Obj;
    const components = isObj(v3.components) ? v3.components : {};
    const schemas = isObj(components.schemas) ? components.schemas : {};
    for (const [name, s] of Object.entries(schemas)) if (isObj(s)) definitions[name] = toV2Schema(s);
    for (const [p, item] of Object.entries(isObj(v3.paths) ? v3.paths : {}))
      if (isObj(item)) paths[p] = toV2PathItem(p, item);
  }
  return { swagger: "2.0", info: { title: "Kubernetes", version: "v1.32.0" }, paths, definitions };
}

/** One rendering of the document, with the ETag kube-apiserver gives it. */
export interface OpenApiV2Body {
  readonly body: Buffer;
  readonly etag: string;
}

/** `/openapi/v2`, rebuilt whenever the v3 documents are. */
export class OpenApiV2 {
  readonly #v3: OpenApiV3;
  #source: ReadonlyMap<string, OpenApiDoc> | undefined;
  #json: OpenApiV2Body | undefined;
  #proto: OpenApiV2Body | undefined;

  constructor(v3: OpenApiV3) {
    this.#v3 = v3;
  }

  #refresh(): void {
    const docs = this.#v3.documents();
    if (docs === this.#source) return;
    const swagger = swaggerFromV3(docs.values());
    const json = Buffer.from(JSON.stringify(swagger));
    const proto = encodeSwaggerDocument(swagger);
    const etag = (b: Buffer): string => `"${createHash("sha512").update(b).digest("hex").slice(0, 128).toUpperCase()}"`;
    this.#json = { body: json, etag: etag(json) };
    this.#proto = { body: proto, etag: etag(proto) };
    this.#source = docs;
  }

  /** The document as JSON. */
  json(): OpenApiV2Body {
    this.#refresh();
    return this.#json as OpenApiV2Body;
  }

  /** The document as gnostic protobuf. */
  proto(): OpenApiV2Body {
    this.#refresh();
    return this.#proto as OpenApiV2Body;
  }
}

/**
 * Answers `GET /openapi/v2`: protobuf when the Accept header names one of {@link OPENAPI_V2_PROTOBUF}, else JSON;
 * 304 when If-None-Match carries the current ETag.
 */
export function sendOpenApiV2(req: IncomingMessage, res: ServerResponse, v2: OpenApiV2): void {
  const accept = req.headers.accept ?? "";
  const protobuf = OPENAPI_V2_PROTOBUF.find((t) => accept.includes(t));
  const { body, etag } = protobuf ? v2.proto() : v2.json();
  const headers = {
    // kube-openapi answers either spelling with the one that parses as a media type ('@' is not a token character).
    "Content-Type": protobuf ? "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" : "application/json",
    ETag: etag,
    Vary: "Accept",
    "Cache-Control": "no-cache, private",
  };
  if (req.headers["if-none-match"] === etag) {
    res.writeHead(304, headers);
    res.end();
    return;
  }
  res.writeHead(200, { ...headers, "Content-Length": String(body.length) });
  res.end(body);
}
