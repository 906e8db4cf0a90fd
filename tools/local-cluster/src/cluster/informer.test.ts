import { KubeConfig, Watch } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { WATCH_TIMEOUT_FIELD, watchWithoutIdleTimeout } from "./informer.ts";

describe("watchWithoutIdleTimeout()", () => {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: "c", server: "https://127.0.0.1:1" }],
    users: [{ name: "u" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });

  it("sets the field client-node's Watch keeps its inactivity timeout in (a renamed field fails here)", () => {
    expect((new Watch(kubeConfig) as unknown as Record<string, unknown>)[WATCH_TIMEOUT_FIELD]).toBe(30_000);
    expect((watchWithoutIdleTimeout(kubeConfig) as unknown as Record<string, unknown>)[WATCH_TIMEOUT_FIELD]).toBe(
      2 ** 31 - 1,
    );
  });
});
