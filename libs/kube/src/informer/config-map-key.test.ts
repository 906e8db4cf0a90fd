import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { kubeConfigFor } from "../client/kube-config.ts";
import { RestClient } from "../client/rest-client.ts";
import { startTestServer, type TestServer } from "../client/test-server.ts";
import { type ConfigMapKeyWatch, watchConfigMapKey } from "./config-map-key.ts";

const cm = (rv: string, bundle?: string) => ({
  kind: "ConfigMap",
  metadata: { name: "kubevirt-ca", namespace: "kubevirt", resourceVersion: rv, uid: "u1" },
  data: bundle === undefined ? {} : { "ca-bundle": bundle },
});

async function until(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("watchConfigMapKey()", () => {
  let server: TestServer;
  let watch: ConfigMapKeyWatch;
  const seen: (string | undefined)[] = [];

  beforeEach(async () => {
    server = await startTestServer();
    seen.length = 0;
  });

  afterEach(async () => {
    watch?.stop();
    await server.close();
  });

  const start = (): ConfigMapKeyWatch =>
    watchConfigMapKey({
      transport: new RestClient(kubeConfigFor(server.url, "tok")),
      namespace: "kubevirt",
      name: "kubevirt-ca",
      key: "ca-bundle",
      logger: pino({ level: "silent" }),
      onChange: (v) => seen.push(v),
    });

  it("lists and watches only that ConfigMap, by a metadata.name field selector (what resourceNames can grant)", async () => {
    server.objects.set("kubevirt/kubevirt-ca", cm("1", "CA1"));
    watch = start();
    expect(await watch.firstValue()).toBe("CA1");
    const urls = server.requests.map((r) => decodeURIComponent(r.url));
    expect(urls[0]).toBe("/api/v1/namespaces/kubevirt/configmaps?fieldSelector=metadata.name=kubevirt-ca");
    await until(() => server.openWatches() === 1);
    expect(decodeURIComponent(server.requests.at(-1)?.url ?? "")).toContain("fieldSelector=metadata.name=kubevirt-ca");
  });

  it("tells each new value once, and undefined when the key or the object goes", async () => {
    watch = start();
    const subscribed: string[] = [];
    watch.subscribe((v) => subscribed.push(v));
    const first = watch.firstValue();
    await until(() => server.openWatches() === 1);
    expect(watch.current()).toBeUndefined();
    server.push("ADDED", cm("2", "CA1"));
    expect(await first).toBe("CA1");
    server.push("MODIFIED", cm("3", "CA1"));
    server.push("MODIFIED", cm("4", "CA2\nCA1"));
    await until(() => seen.length === 2);
    server.push("MODIFIED", cm("5"));
    server.push("DELETED", cm("6"));
    server.push("ADDED", cm("7", "CA3"));
    await until(() => seen.length === 4);
    expect(seen).toEqual(["CA1", "CA2\nCA1", undefined, "CA3"]);
    expect(subscribed).toEqual(["CA1", "CA2\nCA1", "CA3"]);
    expect(watch.current()).toBe("CA3");
  });
});
