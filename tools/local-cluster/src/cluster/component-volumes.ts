/**
 * The KubeVirt components of the local cluster run as host processes, not pods, so no kubelet mounts their Secret
 * volumes. This does that kubelet's job for them: it watches the Secrets the release's pods mount (deploy/:
 * virt-api's and virt-handler's certificates) and writes each into a directory laid out as a kubelet's secret
 * volume (kubelet/config-volumes.ts writeAtomically: the keys as files behind a `..data` symlink swapped at once),
 * updated whenever the Secret changes:
 *
 *   <data-dir>/volumes/secret/kubevirt-virt-api-certs/{tls.crt,tls.key}              virt-api --tls-cert/--tls-key
 *   <data-dir>/volumes/secret/kubevirt-virt-handler-certs/{tls.crt,tls.key}          virt-api --handler-client-*
 *   <data-dir>/volumes/secret/kubevirt-virt-handler-server-certs/{tls.crt,tls.key}   virt-handler --tls-cert/--tls-key
 *
 * virt-controller's certificate manager makes and renews them; the components reload the files without a restart,
 * exactly as in a cluster. The CA bundle (ConfigMap kubevirt-ca) is no volume: the components watch it through the
 * API, as KubeVirt's do. The files are 0600 (readable by this user only).
 */
import { join } from "node:path";
import { CERTIFICATES } from "@kvt/api";
import { CORE_V1, Informer, type KubeObject, type RestTransport, resourceClient } from "@kvt/kube";
import type { Logger } from "pino";
import { writeAtomically } from "../kubelet/config-volumes.ts";

/** A Secret, as far as its volume shows it. */
interface Secret extends KubeObject {
  /** Base64 values. */
  data?: Record<string, string>;
}

/** The Secrets deploy/'s virt-api and virt-handler pods mount. */
export const COMPONENT_SECRETS: readonly string[] = [
  CERTIFICATES.virtApi,
  CERTIFICATES.handlerClient,
  CERTIFICATES.handlerServer,
];

/** The directory Secret `name`'s volume is written to. */
export function componentVolumeDir(dataDir: string, name: string): string {
  return join(dataDir, "volumes", "secret", name);
}

/** The files the components are started with. */
export interface ComponentTlsFiles {
  /** virt-api's serving certificate and key (Secret kubevirt-virt-api-certs). */
  readonly virtApi: { readonly cert: string; readonly key: string };
  /** virt-handler's serving certificate and key (Secret kubevirt-virt-handler-server-certs). */
  readonly handlerServer: { readonly cert: string; readonly key: string };
  /** virt-api's client certificate for the handlers (Secret kubevirt-virt-handler-certs). */
  readonly handlerClient: { readonly cert: string; readonly key: string };
}

/** Where {@link ComponentVolumes} writes the components' TLS files under `dataDir`. */
export function componentTlsFiles(dataDir: string): ComponentTlsFiles {
  const pair = (name: string): { cert: string; key: string } => {
    const dir = componentVolumeDir(dataDir, name);
    return { cert: join(dir, "tls.crt"), key: join(dir, "tls.key") };
  };
  return {
    virtApi: pair(CERTIFICATES.virtApi),
    handlerServer: pair(CERTIFICATES.handlerServer),
    handlerClient: pair(CERTIFICATES.handlerClient),
  };
}

/** What {@link ComponentVolumes} needs. */
export interface ComponentVolumesOptions {
  /** A client that may read Secrets in `namespace` (the cluster's admin: it stands for the kubelet). */
  readonly transport: RestTransport;
  readonly namespace: string;
  readonly dataDir: string;
  readonly logger: Logger;
}

/** Writes the components' Secret volumes and keeps them current until {@link stop}. */
export class ComponentVolumes {
  readonly #o: ComponentVolumesOptions;
  readonly #informer: Informer<Secret>;
  readonly #written = new Map<string, string>();

  constructor(options: ComponentVolumesOptions) {
    this.#o = options;
    this.#informer = new Informer<Secret>({
      client: resourceClient(options.transport, CORE_V1.secrets),
      logger: options.logger,
      namespace: options.namespace,
    });
    const write = (secret: Secret): void => {
      if (COMPONENT_SECRETS.includes(secret.metadata?.name ?? "")) this.#write(secret);
    };
    this.#informer.addHandlers({ onAdd: write, onUpdate: (_old, secret) => write(secret) });
  }

  /** Starts watching; every Secret already there is written once the first list arrives. */
  start(): void {
    this.#informer.start();
  }

  /** Whether every Secret has been written at least once. */
  isReady(): boolean {
    return COMPONENT_SECRETS.every((name) => this.#written.has(name));
  }

  stop(): void {
    this.#informer.stop();
  }

  #write(secret: Secret): void {
    const name = secret.metadata?.name ?? "";
    const data = secret.data ?? {};
    const fingerprint = JSON.stringify(data);
    if (this.#written.get(name) === fingerprint) return;
    const files = new Map(
      Object.entries(data).map(([key, value]) => [key, { data: Buffer.from(value, "base64"), mode: 0o600 }]),
    );
    try {
      writeAtomically(componentVolumeDir(this.#o.dataDir, name), files);
    } catch (error) {
      // A key that is no file name (a hand-edited object): leave the last good payload in place.
      this.#o.logger.warn({ err: error, secret: name }, "cannot write the component volume");
      return;
    }
    this.#written.set(name, fingerprint);
    this.#o.logger.info({ secret: name, keys: [...files.keys()] }, "component volume written");
  }
}
