/**
 * JSON patch `test` against a missing path, through a real API server: kube-apiserver (evanphx/json-patch) treats a
 * missing last key as equal to `null`, which is what optimistic "nothing there yet" checks rely on (the API lib's
 * stateChangeRequests / running plans emit exactly that).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { call } from "./testdata/fixtures.ts";

const CMS = "/api/v1/namespaces/default/configmaps";
const JSON_PATCH = "application/json-patch+json";
let api: ApiServerHandle;

beforeAll(async () => {
  api = await startApiServer({ inMemory: true, tls: true });
  expect((await call(api, "POST", CMS, { metadata: { name: "cm" }, data: { a: "1" } })).code).toBe(201);
}, 30_000);

afterAll(async () => {
  await api?.stop();
});

describe("JSON patch test op on a missing path", () => {
  it("matches value null and lets the rest of the patch apply", async () => {
    const r = await call(
      api,
      "PATCH",
      `${CMS}/cm`,
      [
        { op: "test", path: "/metadata/labels", value: null },
        { op: "test", path: "/data/b", value: null },
        { op: "add", path: "/data/b", value: "2" },
      ],
      JSON_PATCH,
    );
    expect(r.code).toBe(200);
    expect(r.body.data).toEqual({ a: "1", b: "2" });
  });

  it.each([
    ["a missing path tested against a value", [{ op: "test", path: "/data/zz", value: "x" }]],
    ["a present value tested against null", [{ op: "test", path: "/data/a", value: null }]],
    ["a missing parent", [{ op: "test", path: "/nothing/here", value: null }]],
  ])("fails with 422 for %s", async (_what, patch) => {
    const r = await call(api, "PATCH", `${CMS}/cm`, patch, JSON_PATCH);
    expect(r.code).toBe(422);
    expect(r.body.reason).toBe("Invalid");
  });
});
