/**
 * Starts the in-process controllers a control plane needs to keep the API's promises (GC, namespaces, CRDs, the
 * disruption controller, the node lifecycle's unschedulable taint, ClusterRole aggregation, the EndpointSlice
 * and Endpoints controllers, and, when the server has a CA, the root CA publisher).
 */
import type { Logger } from "pino";
import type { ResourceService } from "../rest/service.ts";
import { ClusterRoleAggregation } from "./clusterrole-aggregation.ts";
import { CrdCleanupController } from "./crd-cleanup.ts";
import { DisruptionController } from "./disruption.ts";
import { EndpointsController } from "./endpoints.ts";
import { EndpointSliceController } from "./endpointslice.ts";
import { GarbageCollector } from "./gc.ts";
import { NamespaceController } from "./namespaces.ts";
import { NodeUnschedulableTaints } from "./node-unschedulable.ts";
import { RootCaPublisher } from "./root-ca-publisher.ts";

/** Running controllers. */
export interface Controllers {
  stop(): void;
}

/** Starts the controllers, fed by the store's committed events. */
export function startControllers(svc: ResourceService, logger: Logger, caCert?: string): Controllers {
  const gc = new GarbageCollector(svc, logger);
  const ns = new NamespaceController(svc, logger);
  const crd = new CrdCleanupController(svc, logger);
  const rootCa = caCert ? new RootCaPublisher(svc, caCert, logger) : undefined;
  const disruption = new DisruptionController(svc, logger);
  const nodes = new NodeUnschedulableTaints(svc, logger);
  const aggregation = new ClusterRoleAggregation(svc, logger);
  const endpointSlices = new EndpointSliceController(svc, logger);
  const endpoints = new EndpointsController(svc, logger);
  const unsubscribe = svc.store.subscribe((ev) => {
    gc.onEvent(ev);
    ns.onEvent(ev);
    crd.onEvent(ev);
    rootCa?.onEvent(ev);
    disruption.onEvent(ev);
    nodes.onEvent(ev);
    aggregation.onEvent(ev);
    endpointSlices.onEvent(ev);
    endpoints.onEvent(ev);
  });
  return {
    stop: () => {
      unsubscribe();
      gc.stop();
      ns.stop();
      crd.stop();
      rootCa?.stop();
      disruption.stop();
      nodes.stop();
      aggregation.stop();
      endpointSlices.stop();
      endpoints.stop();
    },
  };
}
