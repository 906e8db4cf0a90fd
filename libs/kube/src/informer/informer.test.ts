import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { kubeConfigFor } from "../client/kube-config.ts";
import { resourceClient } from "../client/resource-client.ts";
import { RestClient } from "../client/rest-client.ts";
import { startTestServer, type TestServer } from "../client/test-server.ts";
import type { KubeObject } from "../types.ts";
import { Informer } from "./informer.ts";
import { labelIndex } from "./store.ts";

const pods = { group: "", version: "v1", plural: "pods", kind: "Pod", namespaced: true };
const pod = (name: string, rv: string, node = "n1"): KubeObject & { spec: { nodeName: string } } => ({
  kind: "Pod",
  metadata: { name, namespace: "d", resourceVersion: rv, uid: `uid-${name}`, labels: { app: name } },
  spec: { nodeName: node },
});

async function eventually(check: () => void, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      check();
      return;
    } catch (error) {
      if (Date.now() > until) throw error;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

describe("Informer", () => {
  let server: TestServer;
  let informer: Informer<ReturnType<typeof pod>>;
  const log: string[] = [];

  beforeEach(async () => {
    server = await startTestServer();
    server.objects.set("d/a", pod("a", "1"));
    const client = resourceClient<ReturnType<typeof pod>>(new RestClient(kubeConfigFor(server.url, "tok")), pods);
    informer = new Informer({
      client,
      logger: pino({ level: "silent" }),
      indexers: { node: (p) => [p.spec.nodeName], app: labelIndex("app") },
      retryBaseMs: 5,
    });
    log.length = 0;
    informer.addHandlers({
      onAdd: (o) => log.push(`add ${o.metadata?.name}`),
      onUpdate: (o, n) =>
        log.push(`update ${n.metadata?.name} ${o.metadata?.resourceVersion}->${n.metadata?.resourceVersion}`),
      onDelete: (o) => log.push(`delete ${o.metadata?.name}`),
    });
  });

  afterEach(async () => {
    informer.stop();
    await server.close();
  });

  it("lists, then watches from the list's resourceVersion, applying events to the store and indexes", async () => {
    server.listResourceVersion = "7";
    informer.start();
    await informer.waitForSync();
    expect(log).toEqual(["add a"]);
    await eventually(() => expect(server.openWatches()).toBe(1));
    const watchUrl = new URL(server.requests.at(-1)!.url, "http://x");
    expect(watchUrl.searchParams.get("resourceVersion")).toBe("7");
    expect(server.requests[0].authorization).toBe("Bearer tok");
    server.push("ADDED", pod("b", "8", "n2"));
    server.push("MODIFIED", pod("a", "9", "n2"));
    server.push("DELETED", pod("b", "10", "n2"));
    await eventually(() => expect(log).toEqual(["add a", "add b", "update a 1->9", "delete b"]));
    expect(informer.store.byIndex("node", "n2").map((p) => p.metadata?.name)).toEqual(["a"]);
    expect(informer.store.byIndex("node", "n1")).toEqual([]);
    expect(informer.store.byIndex("app", "a")).toHaveLength(1);
    expect(informer.resourceVersion).toBe("10");
  });

  it("resumes the watch from the last resourceVersion after the server cuts it", async () => {
    informer.start();
    await eventually(() => expect(server.openWatches()).toBe(1));
    server.push("ADDED", pod("b", "5"));
    await eventually(() => expect(log).toContain("add b"));
    server.cutWatches();
    await eventually(() => expect(server.openWatches()).toBe(1));
    const watchUrl = new URL(server.requests.at(-1)!.url, "http://x");
    expect(watchUrl.searchParams.get("resourceVersion")).toBe("5");
    expect(server.requests.filter((r) => !r.url.includes("watch=true"))).toHaveLength(1);
  });

  it("relists on 410 Gone and reports deletions missed while the watch was down", async () => {
    informer.start();
    await eventually(() => expect(server.openWatches()).toBe(1));
    server.objects.clear();
    server.objects.set("d/c", pod("c", "20"));
    server.listResourceVersion = "20";
    server.push("ERROR", { kind: "Status", code: 410, reason: "Expired" });
    await eventually(() => expect(log).toEqual(["add a", "add c", "delete a"]));
    await eventually(() => expect(server.openWatches()).toBe(1));
    expect(new URL(server.requests.at(-1)!.url, "http://x").searchParams.get("resourceVersion")).toBe("20");
  });

  it("relists when the watch request itself is answered 410", async () => {
    server.failNextWatch = 410;
    informer.start();
    await eventually(() => expect(server.requests.filter((r) => !r.url.includes("watch=true")).length).toBe(2));
    await eventually(() => expect(server.openWatches()).toBe(1));
  });
});

describe("Informer stopped while its watch is opening", () => {
  it("ends the watch the server answers after the stop (nothing else would)", async () => {
    let answer: ((h: { stop(): void }) => void) | undefined;
    let stopped = 0;
    const client = {
      type: pods,
      list: () => Promise.resolve({ metadata: { resourceVersion: "3" }, items: [] }),
      watch: () =>
        new Promise<{ stop(): void }>((resolve) => {
          answer = resolve;
        }),
    };
    const informer = new Informer({ client, logger: pino({ level: "silent" }) });
    informer.start();
    await informer.waitForSync();
    await eventually(() => expect(answer).toBeDefined());
    informer.stop();
    answer!({ stop: () => stopped++ });
    await eventually(() => expect(stopped).toBe(1));
  });
});
