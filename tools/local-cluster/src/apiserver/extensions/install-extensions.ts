/**
 * The mechanisms a real API server uses to reach other servers, installed on the embedded one:
 *
 *   admission chain  <- dynamic admission webhooks (stored Mutating/ValidatingWebhookConfigurations)
 *   aggregated       <- API aggregation (stored APIServices), discovery included
 *   server 'upgrade' <- WebSocket relay to aggregated APIs (bearer token checked)
 *   subresources     <- core/pods/log through the node's kubelet
 */
import type { Server } from "node:http";
import type { Logger } from "pino";
import type { AdmissionChain } from "../admission/types.ts";
import type { Authorizer } from "../auth/rbac.ts";
import type { SubresourceHandler } from "../http/resource-handler.ts";
import type { AggregatedApi, UserInfo } from "../http/server.ts";
import type { ResourceService } from "../rest/service.ts";
import { ApiServiceAggregator, type ProxyClientCert } from "./aggregation.ts";
import { type KubeletClientTls, podLogsHandler } from "./pod-logs.ts";
import { upgradeHandler } from "./upgrade.ts";
import { WebhookAdmission } from "./webhook-admission.ts";

/** What the extensions hook into. */
export interface ExtensionTargets {
  readonly server: Server;
  readonly service: ResourceService;
  readonly admission: AdmissionChain;
  readonly subresources: Map<string, SubresourceHandler>;
  readonly aggregated: AggregatedApi[];
  readonly tokens: ReadonlyMap<string, UserInfo>;
  /** Decides upgraded requests as the server decides the others. */
  readonly authorizer: Authorizer;
  readonly logger: Logger;
  /** The front-proxy client certificate for aggregated APIs (kube-apiserver `--proxy-client-cert-file`). */
  readonly proxyClient?: ProxyClientCert;
  /** The client certificate for kubelets' log ports (kube-apiserver `--kubelet-client-certificate`). */
  readonly kubeletClient?: KubeletClientTls;
}

/** Installed extensions; `stop()` detaches the watchers and waits for their writes (call before closing the store). */
export interface Extensions {
  readonly aggregator: ApiServiceAggregator;
  stop(): Promise<void>;
}

/** Installs webhooks, aggregation, the upgrade relay and pods/log on a server being composed. */
export function installExtensions(t: ExtensionTargets): Extensions {
  new WebhookAdmission(t.service, t.logger.child({ subsystem: "admission-webhooks" })).install(t.admission);
  const aggregator = new ApiServiceAggregator(
    t.service,
    t.aggregated,
    t.logger.child({ subsystem: "aggregator" }),
    t.proxyClient,
  );
  aggregator.start();
  const upgrades = upgradeHandler(t.tokens, t.aggregated, t.logger, t.authorizer);
  t.server.on("upgrade", upgrades.listener);
  if (!t.subresources.has("core/pods/log")) t.subresources.set("core/pods/log", podLogsHandler(t.kubeletClient));
  return {
    aggregator,
    stop: async () => {
      upgrades.closeAll();
      await aggregator.stop();
    },
  };
}
