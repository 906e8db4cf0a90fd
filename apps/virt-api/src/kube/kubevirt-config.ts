/**
 * The KubeVirt CR's `spec.configuration` (feature gates, VM rollout strategy) as virt-api's admission reads it:
 * the active CR in virt-api's namespace, listed as virt-api itself (RBAC: `list kubevirts` there). Read per
 * admission request, so a gate turned on applies to the next request, as KubeVirt's informer-fed config does.
 * When the list fails, the last configuration read is used; with none read yet, the error reaches the webhook
 * (a 500 the API server reports), never a guess that would refuse or admit gated features wrongly.
 */
import { activeKubeVirt, type KubeVirt, type KubeVirtConfiguration } from "@kvt/api";
import { KUBEVIRT_V1, type KubeList, type RestTransport, resourcePath } from "@kvt/kube";

/** Where admission gets the cluster's configuration. */
export interface KubeVirtConfigSource {
  /** The active CR's spec.configuration (undefined: no CR or none set, KubeVirt's defaults). */
  configuration(): Promise<KubeVirtConfiguration | undefined>;
}

/** {@link KubeVirtConfigSource} over the API server. */
export class RestKubeVirtConfigSource implements KubeVirtConfigSource {
  readonly #transport: RestTransport;
  readonly #namespace: string;
  #last: { value: KubeVirtConfiguration | undefined } | undefined;

  constructor(transport: RestTransport, namespace: string) {
    this.#transport = transport;
    this.#namespace = namespace;
  }

  async configuration(): Promise<KubeVirtConfiguration | undefined> {
    const path = resourcePath(KUBEVIRT_V1.kubevirts, this.#namespace);
    try {
      const list = await this.#transport.request<Partial<KubeList<KubeVirt>> | undefined>({ method: "GET", path });
      const value = activeKubeVirt(list?.items ?? [])?.spec.configuration;
      this.#last = { value };
      return value;
    } catch (err) {
      if (this.#last) return this.#last.value;
      throw err;
    }
  }
}
