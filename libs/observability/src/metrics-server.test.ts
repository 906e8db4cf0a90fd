import { afterEach, describe, expect, it } from "vitest";
import { Counter, createMetricsRegistry } from "./metrics.ts";
import { type MetricsServer, startMetricsServer } from "./metrics-server.ts";

let server: MetricsServer | undefined;
afterEach(async () => server?.close());

describe("startMetricsServer()", () => {
  it("serves /metrics, /healthz and /readyz from the callback", async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    new Counter({ name: "kubevirt_test_requests_total", help: "Requests.", registers: [registry] }).inc(2);
    let ready = false;
    server = await startMetricsServer({ registry, port: 0, ready: () => ready });
    const base = `http://127.0.0.1:${server.port}`;
    expect(await (await fetch(`${base}/metrics`)).text()).toContain("kubevirt_test_requests_total 2");
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    // Read-only: no route takes a write, so the endpoint needs no credentials.
    expect((await fetch(`${base}/metrics`, { method: "POST", body: "x" })).status).toBe(405);
    expect((await fetch(`${base}/readyz`)).status).toBe(503);
    ready = true;
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    expect((await fetch(`${base}/nope`)).status).toBe(404);
  });

  it("refreshes before each scrape and serves a component's own routes", async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    const counter = new Counter({ name: "kubevirt_test_scrapes_total", help: "Scrapes.", registers: [registry] });
    let leading = false;
    server = await startMetricsServer({
      registry,
      port: 0,
      beforeScrape: () => counter.inc(),
      routes: {
        "/leader": () => (leading ? { status: 200, body: "leader\n" } : { status: 503, body: "not leader\n" }),
      },
    });
    const base = `http://127.0.0.1:${server.port}`;
    expect(await (await fetch(`${base}/metrics`)).text()).toContain("kubevirt_test_scrapes_total 1");
    expect(await (await fetch(`${base}/metrics`)).text()).toContain("kubevirt_test_scrapes_total 2");
    expect((await fetch(`${base}/leader`)).status).toBe(503);
    leading = true;
    const leader = await fetch(`${base}/leader`);
    expect([leader.status, await leader.text()]).toEqual([200, "leader\n"]);
  });
});
