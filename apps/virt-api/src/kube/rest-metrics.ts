/**
 * virt-api's API-server client metrics under client-go's (KubeVirt's) names:
 * `kubevirt_rest_client_requests_total{code,method,host,resource,verb}` and
 * `kubevirt_rest_client_request_latency_seconds{verb,url}` (url: the path template, never object names).
 */
import { describePath, pathTemplate } from "@kvt/kube";
import { Counter, Histogram, type Registry } from "@kvt/observability";

/** Records one finished API request. */
export type RestRequestRecorder = (
  request: { method: string; path: string; query?: Readonly<Record<string, unknown>> },
  code: string,
  seconds: number,
) => void;

/** Registers the client metrics on `registry` for requests to `host`; returns the recorder the transport calls. */
export function restClientMetrics(registry: Registry, host: string): RestRequestRecorder {
  const requests = new Counter({
    name: "kubevirt_rest_client_requests_total",
    help: "Number of HTTP requests to the API server, partitioned by status code, method, host, resource and verb.",
    labelNames: ["code", "method", "host", "resource", "verb"],
    registers: [registry],
  });
  const latency = new Histogram({
    name: "kubevirt_rest_client_request_latency_seconds",
    help: "Request latency to the API server in seconds, broken down by verb and URL template.",
    labelNames: ["verb", "url"],
    buckets: [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192],
    registers: [registry],
  });
  return (request, code, seconds) => {
    const described = describePath(request.path, request.method, request.query);
    requests.inc({ code, method: request.method, host, ...described });
    latency.observe({ verb: described.verb, url: pathTemplate(request.path) }, seconds);
  };
}
