import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RestRequest } from "@kvt/kube";
import type { OtlpTraceRequest } from "@kvt/observability";
import { afterEach, describe, expect, it } from "vitest";
import type { VirtClient } from "./client.ts";
import { tracedRequest } from "./trace-context.ts";

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A client that records what it was asked to send. */
function recordingClient(): VirtClient & { sent: RestRequest[] } {
  const sent: RestRequest[] = [];
  return {
    sent,
    namespace: "default",
    request: async (req) => {
      sent.push(req);
      return {};
    },
    websocket: () => Promise.reject(new Error("not used")),
  };
}

const req: RestRequest = {
  method: "PUT",
  path: "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/vm1/migrate",
};

describe("tracedRequest()", () => {
  it("sends the request unchanged when virtctl's tracing is not configured", async () => {
    const client = recordingClient();
    await tracedRequest(client, req, "migrate VirtualMachine", {}, {});
    await tracedRequest(
      client,
      req,
      "migrate VirtualMachine",
      {},
      { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c", OTEL_SDK_DISABLED: "true" },
    );
    expect(client.sent).toEqual([req, req]);
  });

  it("starts the trace: a CLIENT span whose traceparent the request carries", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-virtctl-trace-"));
    const file = join(dir, "traces.jsonl");
    const client = recordingClient();
    await tracedRequest(
      client,
      req,
      "migrate VirtualMachine",
      { "kubevirt.vm.name": "vm1" },
      { KUBEVIRT_TRACES_FILE: file },
    );
    const request = JSON.parse(readFileSync(file, "utf8").trim().split("\n")[0]) as OtlpTraceRequest;
    const resource = request.resourceSpans[0];
    expect(resource.resource.attributes).toContainEqual({ key: "service.name", value: { stringValue: "virtctl" } });
    const span = resource.scopeSpans[0].spans[0];
    expect(span.name).toBe("migrate VirtualMachine");
    expect(span.parentSpanId).toBeUndefined();
    expect(client.sent).toEqual([{ ...req, headers: { traceparent: `00-${span.traceId}-${span.spanId}-01` } }]);
  });
});
