import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import type { UserInfo } from "../http/server.ts";
import { ANONYMOUS_USER, authenticateRequest } from "./authenticate.ts";

const admin: UserInfo = { username: "kubernetes-admin", groups: ["system:masters", "system:authenticated"] };
const tokens = new Map([["s3cret-token", admin]]);

/** A request with those headers, over TLS with `peer` as the client's certificate ({} when it sent none). */
const request = (headers: Record<string, string>, peer?: object): IncomingMessage =>
  ({
    headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])),
    socket: peer === undefined ? {} : { getPeerCertificate: () => peer },
  }) as unknown as IncomingMessage;

describe("authenticateRequest() (kube-apiserver's --anonymous-auth=true)", () => {
  it("takes a known bearer token's user", () => {
    expect(authenticateRequest(tokens, request({ Authorization: "Bearer s3cret-token" }))).toBe(admin);
  });

  it.each([
    ["an unknown token", { Authorization: "Bearer nope" }, undefined],
    ["a token of another length", { Authorization: "Bearer s3cret-token-2" }, undefined],
    ["another scheme", { Authorization: "Basic Zm9vOmJhcg==" }, undefined],
    ["a client certificate it cannot verify", {}, { subject: { CN: "stranger" } }],
  ])("refuses %s (401): credentials that do not authenticate are never anonymous", (_what, headers, peer) => {
    expect(authenticateRequest(tokens, request(headers, peer))).toBeUndefined();
  });

  it.each([
    ["over plain HTTP", undefined],
    ["over TLS without a client certificate", {}],
  ])("makes a request without credentials system:anonymous %s", (_what, peer) => {
    expect(authenticateRequest(tokens, request({}, peer))).toEqual({
      username: "system:anonymous",
      groups: ["system:unauthenticated"],
    });
    expect(ANONYMOUS_USER.groups).not.toContain("system:authenticated");
  });
});
