/**
 * virt-api as a library, for the local cluster and tests that run it in process: the app, its HTTPS server,
 * certificate generation and the wiring manifests.
 */

/** CA and certificate generation (PEM), re-exported from the one certificate module @kvt/certs. */
export { type CertificateAndKey, type CertificateRequest, generateCa, issueCertificate } from "@kvt/certs";
/** What an API server does for the subresources.kubevirt.io APIService: proxy to virt-api with X-Remote-* identity. */
export {
  AggregationProxy,
  type AggregationProxyOptions,
  forwardedHeaders,
  type ProxyUser,
} from "./aggregation/proxy.ts";
/** virt-handler's console subprotocol, the handler client and the ways to find a node's handler. */
export {
  CONSOLE_SUBPROTOCOL,
  type HandlerClient,
  HttpHandlerClient,
  PodHandlerLocator,
  TemplateHandlerLocator,
} from "./handler/handler-client.ts";
/** Typed KubeVirt operations through the API server, as one user. */
export { type ClusterClient, RestClusterClient } from "./kube/cluster-client.ts";
/** MutatingWebhookConfiguration, ValidatingWebhookConfiguration and APIService objects. */
export {
  apiServices,
  mutatingWebhookConfiguration,
  URL_ANNOTATION,
  type VirtApiEndpoint,
  validatingWebhookConfiguration,
  virtApiManifests,
} from "./manifests/manifests.ts";
/** The HTTP application and its dependencies. */
export { VirtApiApp, type VirtApiDeps } from "./server/app.ts";
/** Who virt-api acts for: the caller (impersonated in its writes), or its own service account. */
export { serviceAccountUser, type UserInfo, VIRT_API_SERVICE_ACCOUNT } from "./server/identity.ts";
/** virt-api's metrics. */
export { virtApiMetrics } from "./server/metrics.ts";
/** HTTPS serving. */
export { type RunningServer, startVirtApiServer, type VirtApiServerOptions } from "./server/server.ts";
/** The subresources.kubevirt.io group and the subresources virt-api serves (its discovery, and the user roles). */
export { SUBRESOURCE_GROUP, SUBRESOURCE_NAMES } from "./subresources/discovery.ts";
/** The webhooks by path. */
export { webhookRoutes } from "./webhooks/admitters.ts";
/** Instancetype and preference lookups through the API server (the instancetype webhooks, expand-spec). */
export { RestInstancetypeReader } from "./webhooks/instancetype-admitters.ts";
