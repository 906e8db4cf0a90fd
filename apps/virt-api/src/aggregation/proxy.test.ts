import { describe, expect, it } from "vitest";
import { forwardedHeaders } from "./proxy.ts";

describe("forwardedHeaders", () => {
  it("drops the caller's credentials and spoofed identity headers, then sets X-Remote-* from the authenticated user", () => {
    const out = forwardedHeaders(
      {
        authorization: "Bearer secret",
        "x-remote-user": "system:admin",
        "x-remote-group": "system:masters",
        "impersonate-user": "root",
        "content-type": "application/json",
        "content-length": "2",
        connection: "keep-alive",
        traceparent: "00-abc-def-01",
      },
      { username: "alice", groups: ["devs", "system:authenticated"], extra: { "scopes.example.com/a b": ["x"] } },
    );
    expect(out).toEqual({
      "content-type": "application/json",
      "content-length": "2",
      traceparent: "00-abc-def-01",
      "x-remote-user": "alice",
      "x-remote-group": ["devs", "system:authenticated"],
      "x-remote-extra-scopes.example.com%2Fa%20b": ["x"],
    });
  });
});
