/**
 * Input limits and checks as kube-apiserver's, against a real started API server: request body size, object size
 * per kind, annotation size, nesting depth, Content-Type per verb and resourceVersion parsing. Every refusal is a
 * Status with kube-apiserver's code and message, and nothing refused is stored.
 */
import { request } from "node:https";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type ApiServerHandle, startApiServer } from "./apiserver.ts";
import { call, eventually } from "./extensions/testdata/fixtures.ts";
import { WIDGET_CRD } from "./testdata/crd-fixture.ts";

let api: ApiServerHandle;
const CMS = "/api/v1/namespaces/default/configmaps";
const SECRETS = "/api/v1/namespaces/default/secrets";
const WIDGETS = "/apis/example.com/v1/namespaces/default/widgets";
const LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
const MiB = 1024 * 1024;

interface Raw {
  code: number;
  status: { code?: number; reason?: string; message?: string; details?: { causes?: { reason: string }[] } };
  text: string;
  ms: number;
  headers: Record<string, string | string[] | undefined>;
}

/** One request with a raw body and the headers given (no Content-Type unless given). */
function raw(method: string, path: string, body?: string | Buffer, headers: Record<string, string> = {}): Promise<Raw> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, api.url),
      { method, ca: api.caCert, headers: { authorization: `Bearer ${api.token}`, ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let status: Raw["status"] = {};
          try {
            status = JSON.parse(text) as Raw["status"];
          } catch {
            // not JSON
          }
          resolve({ code: res.statusCode ?? 0, status, text, ms: Date.now() - started, headers: res.headers });
        });
      },
    );
    // The server may answer (413) and close before the whole body is sent.
    req.on("error", (err: NodeJS.ErrnoException) => (err.code === "EPIPE" ? undefined : reject(err)));
    req.end(body);
  });
}

const json = { "content-type": "application/json" };
const cm = (name: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name },
  ...extra,
});
const deepArray = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;
const deepObject = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;

async function absent(path: string): Promise<void> {
  expect((await call(api, "GET", path)).code).toBe(404);
}

beforeAll(async () => {
  api = await startApiServer({ inMemory: true });
  expect(
    (await call(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", parse(WIDGET_CRD))).code,
  ).toBe(201);
  await eventually("widgets served", async () => ((await call(api, "GET", WIDGETS)).code === 200 ? true : undefined));
});

afterAll(async () => {
  await api.stop();
});

describe("request body size", () => {
  it("answers 413 RequestEntityTooLarge over 3 MiB, declared or streamed, and stores nothing", async () => {
    const big = JSON.stringify(cm("huge", { data: { a: "x".repeat(3 * MiB) } }));
    const r = await raw("POST", CMS, big, json);
    expect(r.code).toBe(413);
    expect(r.status).toMatchObject({
      kind: "Status",
      code: 413,
      reason: "RequestEntityTooLarge",
      message: "Request entity too large: limit is 3145728",
    });
    await absent(`${CMS}/huge`);
  });
});

describe("object size limits", () => {
  const cases: { name: string; path: string; body: unknown; code: number; message?: string }[] = [
    {
      name: "a ConfigMap with 1 MiB of data is stored",
      path: CMS,
      body: cm("cm-1mib", { data: { a: "x".repeat(MiB - 1), b: "y" } }),
      code: 201,
    },
    {
      name: "a ConfigMap over 1 MiB (data + binaryData) is 422",
      path: CMS,
      body: cm("cm-big", { data: { a: "x".repeat(MiB - 10) }, binaryData: { b: Buffer.alloc(11).toString("base64") } }),
      code: 422,
      message: 'ConfigMap "cm-big" is invalid: []: Too long: must have at most 1048576 bytes',
    },
    {
      name: "the 2.9 MB ConfigMap of the issue is 422",
      path: CMS,
      body: cm("cm-2m9", { data: { a: "x".repeat(2_900_000) } }),
      code: 422,
      message: 'ConfigMap "cm-2m9" is invalid: []: Too long: must have at most 1048576 bytes',
    },
    {
      name: "a Secret over 1 MiB (data + stringData) is 422 on data",
      path: SECRETS,
      body: {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "s-big" },
        data: { a: Buffer.alloc(MiB).toString("base64") },
        stringData: { b: "1" },
      },
      code: 422,
      message: 'Secret "s-big" is invalid: data: Too long: must have at most 1048576 bytes',
    },
    {
      name: "annotations of exactly 256 KiB are stored",
      path: CMS,
      body: cm("ann-ok", { metadata: { name: "ann-ok", annotations: { a: "x".repeat(256 * 1024 - 1) } } }),
      code: 201,
    },
    {
      name: "annotations over 256 KiB (600 kB, as in the issue) are 422",
      path: CMS,
      body: cm("ann-big", { metadata: { name: "ann-big", annotations: { a: "x".repeat(600_000) } } }),
      code: 422,
      message: 'ConfigMap "ann-big" is invalid: metadata.annotations: Too long: must have at most 262144 bytes',
    },
    {
      name: "a custom resource over etcd's 1.5 MiB request limit is 413",
      path: WIDGETS,
      body: {
        apiVersion: "example.com/v1",
        kind: "Widget",
        metadata: { name: "w-big", annotations: { a: "x".repeat(200_000) } },
        spec: { tags: Array.from({ length: 20 }, () => "t".repeat(80_000)) },
      },
      code: 413,
      message: "Request entity too large: the object is",
    },
  ];
  it.each(cases)("$name", async ({ path, body, code, message }) => {
    const r = await call(api, "POST", path, body);
    expect(r.code).toBe(code);
    const name = (body as { metadata: { name: string } }).metadata.name;
    if (code >= 400) {
      expect(String(r.body.message)).toContain(message ?? "");
      if (code === 422)
        expect(r.body).toMatchObject({ reason: "Invalid", details: { causes: [{ reason: "FieldValueTooLong" }] } });
      await absent(`${path}/${name}`);
    } else expect((await call(api, "GET", `${path}/${name}`)).code).toBe(200);
  });

  it("refuses an update that grows annotations past the limit, keeping the stored object", async () => {
    await call(api, "POST", CMS, cm("grow"));
    const r = await call(
      api,
      "PATCH",
      `${CMS}/grow`,
      { metadata: { annotations: { a: "x".repeat(300_000) } } },
      "application/merge-patch+json",
    );
    expect(r.code).toBe(422);
    const got = await call(api, "GET", `${CMS}/grow`);
    expect((got.body.metadata as { annotations?: unknown }).annotations).toBeUndefined();
  });
});

describe("nesting depth", () => {
  const cases: { name: string; method: string; path: string; body: string; contentType: string }[] = [
    {
      name: "a 10^5-deep array in a create",
      method: "POST",
      path: CMS,
      body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep1"},"x":${deepArray(100_000)}}`,
      contentType: "application/json",
    },
    {
      name: "a 10^5-deep object in a create",
      method: "POST",
      path: CMS,
      body: `{"metadata":{"name":"deep2"},"x":${deepObject(100_000)}}`,
      contentType: "application/json",
    },
    {
      name: "a 10^5-deep value in a custom resource's unknown field",
      method: "POST",
      path: WIDGETS,
      body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"deep3"},"spec":{"x":${deepObject(100_000)}}}`,
      contentType: "application/json",
    },
    {
      name: "a 10^5-deep value in a merge patch",
      method: "PATCH",
      path: `${CMS}/target`,
      body: `{"data":null,"x":${deepArray(100_000)}}`,
      contentType: "application/merge-patch+json",
    },
    {
      name: "a 10^5-deep value in a JSON patch",
      method: "PATCH",
      path: `${CMS}/target`,
      body: `[{"op":"add","path":"/x","value":${deepArray(100_000)}}]`,
      contentType: "application/json-patch+json",
    },
    {
      name: "a 10^5-deep YAML flow value in an apply patch",
      method: "PATCH",
      path: `${CMS}/target?fieldManager=t`,
      body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"target"},"x":${deepArray(100_000)}}`,
      contentType: "application/apply-patch+yaml",
    },
    {
      name: "a value one level over the limit",
      method: "POST",
      path: CMS,
      body: `{"metadata":{"name":"deep4"},"x":${deepArray(1000)}}`,
      contentType: "application/json",
    },
  ];
  beforeAll(async () => {
    expect((await call(api, "POST", CMS, cm("target"))).code).toBe(201);
  });
  it.each(cases)("$name is 400, never a 500, and is not stored", async ({ method, path, body, contentType }) => {
    const r = await raw(method, path, body, { "content-type": contentType });
    expect(r.code).toBe(400);
    expect(r.status).toMatchObject({
      reason: "BadRequest",
      message: "error decoding request body: exceeded max depth of 1000",
    });
    for (const n of ["deep1", "deep2", "deep4"]) await absent(`${CMS}/${n}`);
    await absent(`${WIDGETS}/deep3`);
    const target = await call(api, "GET", `${CMS}/target`);
    expect(target.body.x).toBeUndefined();
  });
  it("accepts a body exactly at the limit without a 5xx", async () => {
    const body = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"at-limit"},"spec":{"x":${deepArray(997)}}}`;
    const r = await raw("POST", WIDGETS, body, json);
    expect(r.code).toBeLessThan(500);
    expect((await call(api, "GET", "/readyz")).code).toBe(200);
  });
});

describe("Content-Type", () => {
  const builtin =
    "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf";
  const custom =
    "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml";
  const patches =
    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml";
  const crPatches =
    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";
  const refused = ["text/plain", "application/xml", "application/x-www-form-urlencoded", "text/plain; charset=utf-8"];
  const cases = refused.flatMap((ct) => [
    { verb: "create", method: "POST", path: CMS, ct, message: builtin, name: "ct-create" },
    { verb: "update", method: "PUT", path: `${CMS}/ct-target`, ct, message: builtin, name: "ct-target" },
    { verb: "patch", method: "PATCH", path: `${CMS}/ct-target`, ct, message: patches, name: "ct-target" },
    { verb: "create a custom resource", method: "POST", path: WIDGETS, ct, message: custom, name: "ct-widget" },
    {
      verb: "patch a custom resource",
      method: "PATCH",
      path: `${WIDGETS}/ct-wtarget`,
      ct,
      message: crPatches,
      name: "ct-wtarget",
    },
  ]);
  beforeAll(async () => {
    expect((await call(api, "POST", CMS, cm("ct-target", { data: { v: "1" } }))).code).toBe(201);
    const w = { apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "ct-wtarget" }, spec: { size: 1 } };
    expect((await call(api, "POST", WIDGETS, w)).code).toBe(201);
  });
  it.each(cases)("$verb sent as $ct is 415 and changes nothing", async ({ method, path, ct, message, name }) => {
    const body = JSON.stringify({ metadata: { name }, data: { v: "changed" }, spec: { size: 9 } });
    const r = await raw(method, path, body, { "content-type": ct });
    expect(r.code).toBe(415);
    expect(r.status).toMatchObject({ kind: "Status", code: 415, reason: "UnsupportedMediaType", message });
    expect((await call(api, "GET", `${CMS}/ct-create`)).code).toBe(404);
    expect((await call(api, "GET", `${WIDGETS}/ct-widget`)).code).toBe(404);
    expect(((await call(api, "GET", `${CMS}/ct-target`)).body.data as { v: string }).v).toBe("1");
    expect(((await call(api, "GET", `${WIDGETS}/ct-wtarget`)).body.spec as { size: number }).size).toBe(1);
  });
  it("refuses a strategic merge patch on a custom resource (415) and protobuf for a custom resource", async () => {
    const smp = await raw("PATCH", `${WIDGETS}/ct-wtarget`, "{}", {
      "content-type": "application/strategic-merge-patch+json",
    });
    expect(smp.status).toMatchObject({ code: 415, message: crPatches });
    const pb = await raw("POST", WIDGETS, Buffer.from([0x6b, 0x38, 0x73, 0x00]), {
      "content-type": "application/vnd.kubernetes.protobuf",
    });
    expect(pb.status).toMatchObject({ code: 415, message: custom });
  });
  it.each([
    { type: "application/json-patch+json", body: '[{"op":"replace","path":"/data/v","value":"j"}]', want: "j" },
    { type: "application/merge-patch+json", body: '{"data":{"v":"m"}}', want: "m" },
    { type: "application/strategic-merge-patch+json", body: '{"data":{"v":"s"}}', want: "s" },
    {
      type: "application/apply-patch+yaml",
      body: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ct-target}\ndata: {v: a}\n",
      want: "a",
    },
  ])("keeps serving $type patches", async ({ type, body, want }) => {
    // force is an apply option: kube refuses it on any other patch type (below).
    const force = type === "application/apply-patch+yaml" ? "&force=true" : "";
    const r = await raw("PATCH", `${CMS}/ct-target?fieldManager=t${force}`, body, { "content-type": type });
    expect(r.code).toBe(200);
    expect(((await call(api, "GET", `${CMS}/ct-target`)).body.data as { v: string }).v).toBe(want);
  });
  it("refuses force on a non-apply patch and an apply without fieldManager, as kube's PatchOptions validation", async () => {
    const merge = await raw("PATCH", `${CMS}/ct-target?force=true`, '{"data":{"v":"x"}}', {
      "content-type": "application/merge-patch+json",
    });
    expect(merge.code).toBe(422);
    expect(merge.status).toMatchObject({
      reason: "Invalid",
      message: 'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch',
    });
    const apply = await raw("PATCH", `${CMS}/ct-target`, "apiVersion: v1\nkind: ConfigMap\n", {
      "content-type": "application/apply-patch+yaml",
    });
    expect(apply.code).toBe(422);
    expect(apply.status).toMatchObject({
      message: 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
      details: { group: "meta.k8s.io", kind: "PatchOptions", causes: [{ field: "fieldManager" }] },
    });
  });
  it("treats a create without Content-Type as JSON, and accepts YAML", async () => {
    expect((await raw("POST", CMS, JSON.stringify(cm("ct-none")))).code).toBe(201);
    const yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ct-yaml}\n";
    expect((await raw("POST", CMS, yaml, { "content-type": "application/yaml" })).code).toBe(201);
  });
});

describe("resourceVersion", () => {
  const garbage = [
    { rv: "abc", message: 'invalid resource version: strconv.ParseUint: parsing "abc": invalid syntax' },
    { rv: "-1", message: 'invalid resource version: strconv.ParseUint: parsing "-1": invalid syntax' },
    { rv: "1.5", message: 'invalid resource version: strconv.ParseUint: parsing "1.5": invalid syntax' },
    {
      rv: "99999999999999999999999",
      message: 'invalid resource version: strconv.ParseUint: parsing "99999999999999999999999": value out of range',
    },
  ];
  const reads = (rv: string) => [
    { verb: "get", path: `${CMS}/target?resourceVersion=${encodeURIComponent(rv)}` },
    { verb: "list", path: `${CMS}?resourceVersion=${encodeURIComponent(rv)}` },
    { verb: "watch", path: `${CMS}?watch=true&resourceVersion=${encodeURIComponent(rv)}` },
  ];
  it.each(garbage.flatMap((g) => reads(g.rv).map((r) => ({ ...r, ...g }))))(
    "$verb with resourceVersion=$rv is 400",
    async ({ path, message }) => {
      const r = await raw("GET", path);
      expect(r.code).toBe(400);
      expect(r.status).toMatchObject({ kind: "Status", code: 400, reason: "BadRequest", message });
    },
  );
  it.each(["get", "list"])(
    "%s at a future resourceVersion waits, then answers kube-apiserver's 504 Too large resource version",
    async (verb) => {
      const current = Number(
        ((await call(api, "GET", CMS)).body.metadata as { resourceVersion: string }).resourceVersion,
      );
      const future = current + 1000;
      const path = verb === "get" ? `${CMS}/target?resourceVersion=${future}` : `${CMS}?resourceVersion=${future}`;
      const r = await raw("GET", path);
      expect(r.code).toBe(504);
      expect(r.headers["retry-after"]).toBe("1");
      expect(r.status).toMatchObject({
        code: 504,
        reason: "Timeout",
        details: {
          causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
          retryAfterSeconds: 1,
        },
      });
      expect(r.status.message).toMatch(new RegExp(`^Timeout: Too large resource version: ${future}, current: \\d+$`));
      expect(r.ms).toBeGreaterThanOrEqual(2900);
    },
  );
  it("serves a list at a resourceVersion reached while it waits", async () => {
    const current = Number(
      ((await call(api, "GET", CMS)).body.metadata as { resourceVersion: string }).resourceVersion,
    );
    const pending = raw("GET", `${CMS}?resourceVersion=${current + 1}`);
    await new Promise((r) => setTimeout(r, 200));
    await call(api, "POST", CMS, cm("rv-later"));
    expect((await pending).code).toBe(200);
  });
  it("keeps serving 0, empty and current resourceVersions", async () => {
    for (const rv of ["0", "", "1"]) expect((await raw("GET", `${CMS}?resourceVersion=${rv}`)).code).toBe(200);
  });
});

describe("JSON types the Go decoder refuses (found by the API fuzz lane: each was a 500)", () => {
  const cannot = (kind: string, rest: string) =>
    `${kind} in version "v1" cannot be handled as a ${kind}: json: cannot unmarshal ${rest}`;
  it.each([
    [
      "/api/v1/namespaces/default/pods",
      { metadata: { name: "p" }, spec: 65536 },
      cannot("Pod", "number into Go struct field Pod.spec of type v1.PodSpec"),
    ],
    [
      "/api/v1/namespaces/default/pods",
      { metadata: { name: "p" }, spec: {}, status: "x" },
      cannot("Pod", "string into Go struct field Pod.status of type v1.PodStatus"),
    ],
    [
      CMS,
      { metadata: { name: 12 } },
      cannot("ConfigMap", "number into Go struct field ObjectMeta.metadata.name of type string"),
    ],
    [
      CMS,
      { metadata: { name: "c", finalizers: false } },
      cannot("ConfigMap", "bool into Go struct field ObjectMeta.metadata.finalizers of type []string"),
    ],
    [
      CMS,
      { metadata: { name: "c", labels: { a: 1 } } },
      cannot("ConfigMap", "number into Go struct field ObjectMeta.metadata.labels of type string"),
    ],
    [
      CMS,
      { metadata: { name: "c" }, data: { a: [] } },
      cannot("ConfigMap", "array into Go struct field ConfigMap.data of type string"),
    ],
    // MicroTimes are RFC3339Micro (found by the scale bench: kube-apiserver refused virt-controller's Lease).
    [
      LEASES,
      { metadata: { name: "l" }, spec: { holderIdentity: "a", renewTime: "2026-11-26T16:21:13.485Z" } },
      'Lease in version "v1" cannot be handled as a Lease: parsing time "2026-11-26T16:21:13.485Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse ".485Z" as ".000000"',
    ],
    [
      LEASES,
      { metadata: { name: "l" }, spec: { acquireTime: "2026-11-26T16:21:13Z" } },
      'Lease in version "v1" cannot be handled as a Lease: parsing time "2026-11-26T16:21:13Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000"',
    ],
    [
      LEASES,
      { metadata: { name: "l" }, spec: { renewTime: "2026-11-26T16:21:13.123456789Z" } },
      'Lease in version "v1" cannot be handled as a Lease: parsing time "2026-11-26T16:21:13.123456789Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "789Z" as "Z07:00"',
    ],
    [
      "/apis/events.k8s.io/v1/namespaces/default/events",
      { metadata: { name: "e" }, eventTime: "2026-11-26 16:21:13.123456Z" },
      'Event in version "v1" cannot be handled as a Event: parsing time "2026-11-26 16:21:13.123456Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse " 16:21:13.123456Z" as "T"',
    ],
    [
      WIDGETS,
      { metadata: { name: "w", ownerReferences: [1] } },
      'Widget in version "v1" cannot be handled as a Widget: json: cannot unmarshal number into Go struct field ObjectMeta.metadata.ownerReferences of type v1.OwnerReference',
    ],
  ])("POST %s %j is 400", async (path, body, message) => {
    const r = await raw("POST", path, JSON.stringify(body), json);
    expect(r.code).toBe(400);
    expect(r.status).toMatchObject({ reason: "BadRequest", message });
  });
  it("stores a Lease whose MicroTimes have six fractional digits, with or without an offset", async () => {
    const spec = { renewTime: "2026-11-26T16:21:13.485000Z", acquireTime: "2026-11-26T16:21:13.123456+01:00" };
    const r = await raw("POST", LEASES, JSON.stringify({ metadata: { name: "micro" }, spec }), json);
    expect(r.code).toBe(201);
  });
  it("a merge patch that makes a pod's spec a string is 400 too", async () => {
    expect(
      (
        await call(api, "POST", "/api/v1/namespaces/default/pods", {
          metadata: { name: "typed" },
          spec: { containers: [{ name: "c", image: "i" }] },
        })
      ).code,
    ).toBe(201);
    const r = await raw("PATCH", "/api/v1/namespaces/default/pods/typed", '{"spec":"x"}', {
      "content-type": "application/merge-patch+json",
    });
    expect(r.code).toBe(400);
  });
});

describe("nulls in a custom resource, as kube-apiserver prunes them", () => {
  it("drops a null non-nullable field, defaults one with a default, and stores neither null", async () => {
    const r = await raw(
      "POST",
      WIDGETS,
      JSON.stringify({
        apiVersion: "example.com/v1",
        kind: "Widget",
        metadata: { name: "nulls" },
        spec: { size: null, color: null, tags: null },
      }),
      json,
    );
    expect(r.code).toBe(201);
    const got = await call(api, "GET", `${WIDGETS}/nulls`);
    expect(got.body.spec).toEqual({ color: "blue" });
  });
});
