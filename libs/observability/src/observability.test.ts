import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { Counter, createLogger, createMetricsRegistry, exposition, forObject } from "./index.ts";

describe("createLogger()", () => {
  it("writes JSON lines with component, level label and object identity", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const log = forObject(createLogger({ component: "virt-test", destination: sink }), {
      kind: "VirtualMachineInstance",
      metadata: { namespace: "default", name: "vm-cirros", uid: "u1" },
    });
    log.info({ phase: "Running" }, "phase changed");
    await new Promise((r) => setImmediate(r));
    const line = JSON.parse(lines[0]);
    expect(line).toMatchObject({
      level: "info",
      component: "virt-test",
      kind: "VirtualMachineInstance",
      namespace: "default",
      name: "vm-cirros",
      uid: "u1",
      phase: "Running",
      msg: "phase changed",
    });
  });
});

describe("createMetricsRegistry()", () => {
  it("exposes registered metrics and process metrics in text format", async () => {
    const registry = createMetricsRegistry();
    const c = new Counter({
      name: "kubevirt_test_things_total",
      help: "Things counted by the test.",
      registers: [registry],
    });
    c.inc(3);
    const { body, contentType } = await exposition(registry);
    expect(contentType).toContain("text/plain");
    expect(body).toContain("kubevirt_test_things_total 3");
    expect(body).toContain("process_cpu_user_seconds_total");
    expect(body).toContain("nodejs_eventloop_lag_p99_seconds");
  });
});
