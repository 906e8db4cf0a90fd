/**
 * A request that starts a trace: when virtctl's tracing is configured by the standard `OTEL_*` variables (or
 * `KUBEVIRT_TRACES_FILE`), the request runs as a CLIENT span (e.g. `migrate VirtualMachine`) and carries its W3C
 * `traceparent` header, so virt-api's subresource span, and through the VMIM's annotation the whole migration, become
 * its children. Otherwise nothing is loaded (not even @kvt/observability) and the request goes out as before.
 */
import type { RestRequest } from "@kvt/kube";
import type { VirtClient } from "./client.ts";

/** Sends `req` through `client`, inside a span named `spanName` when tracing is configured in `env`. */
export async function tracedRequest(
  client: VirtClient,
  req: RestRequest,
  spanName: string,
  attributes: Record<string, string>,
  env: Record<string, string | undefined> = process.env,
): Promise<unknown> {
  // The cheap test first: most runs have none of these and pay nothing.
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT && !env.KUBEVIRT_TRACES_FILE) {
    return client.request(req);
  }
  const { clientSpan, setupTracing, traceExportTargets } = await import("@kvt/observability");
  const targets = traceExportTargets(env);
  if (!targets.endpoint && !targets.file) return client.request(req);
  const tracing = setupTracing({ serviceName: "virtctl", env });
  try {
    return await clientSpan(spanName, attributes, (traceparent) =>
      client.request(traceparent ? { ...req, headers: { ...req.headers, traceparent } } : req),
    );
  } finally {
    await tracing.shutdown(); // flushes the span before virtctl exits
  }
}
