import { describe, expect, it } from "vitest";
import { RestClusterClient } from "./cluster-client.ts";
import type { RestRequest, RestTransport } from "./rest.ts";

/** A transport that records each request and answers 404. */
function recording(): { transport: RestTransport; paths: string[] } {
  const paths: string[] = [];
  return {
    paths,
    transport: {
      send: (req: RestRequest) => {
        paths.push(req.path);
        return Promise.resolve({ status: 404, body: {} });
      },
    },
  };
}

describe("RestClusterClient paths", () => {
  it.each([
    ["vm\u0000 1", "vm%00%201"],
    ["a/b", "a%2Fb"],
    ["..", "%2E%2E"],
    ["🙂", "%F0%9F%99%82"],
    ["vm\ud800", "vm%EF%BF%BD"], // a lone surrogate (fuzz seed 7: a URIError, answered 500)
  ])("escapes the name %j as one segment (fuzz lane: an unescaped one was a 500)", async (name, segment) => {
    const { transport, paths } = recording();
    await new RestClusterClient(transport).getVmi("ns 1", name);
    expect(paths).toEqual([`/apis/kubevirt.io/v1/namespaces/ns%201/virtualmachineinstances/${segment}`]);
  });
});
