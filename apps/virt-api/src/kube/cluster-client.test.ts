import { ApiError, type RestRequest, type RestTransport } from "@kvt/kube";
import { describe, expect, it } from "vitest";
import { RestClusterClient } from "./cluster-client.ts";

/** A transport that records each request and answers 404. */
function recording(): { transport: RestTransport; requests: RestRequest[] } {
  const requests: RestRequest[] = [];
  return {
    requests,
    transport: {
      request: (req: RestRequest) => {
        requests.push(req);
        return Promise.reject(new ApiError("not found", 404));
      },
      watch: () => Promise.reject(new Error("no watches here")),
    },
  };
}

describe("RestClusterClient", () => {
  it.each([
    ["vm\u0000 1", "vm%00%201"],
    ["a/b", "a%2Fb"],
    ["..", "%2E%2E"],
    ["🙂", "%F0%9F%99%82"],
    ["vm\ud800", "vm%EF%BF%BD"], // a lone surrogate (fuzz seed 7: a URIError, answered 500)
  ])("escapes the name %j as one segment (fuzz lane: an unescaped one was a 500)", async (name, segment) => {
    const { transport, requests } = recording();
    expect(await new RestClusterClient(transport).getVmi("ns 1", name)).toBeUndefined();
    expect(requests.map((r) => r.path)).toEqual([
      `/apis/kubevirt.io/v1/namespaces/ns%201/virtualmachineinstances/${segment}`,
    ]);
  });

  it("acts as its user in every request, and as virt-api without one", async () => {
    const { transport, requests } = recording();
    const bob = { username: "bob", groups: ["dev"], extra: {} };
    await new RestClusterClient(transport, bob).patchVm("ns", "vm", [], true).catch(() => {});
    await new RestClusterClient(transport).getVm("ns", "vm");
    expect(requests).toMatchObject([
      { method: "PATCH", query: { dryRun: "All" }, contentType: "application/json-patch+json", impersonate: bob },
      { method: "GET" },
    ]);
    expect(requests[1]).not.toHaveProperty("impersonate");
  });
});
