/**
 * The KubeVirt components of the local cluster run as host processes, not pods, so no kubelet mounts their Secret
 * and ConfigMap volumes. This does that kubelet's job for them: it watches the objects the release's pods mount
 * (deploy/: virt-api's and virt-handler's certificate Secrets, the kubevirt-ca ConfigMap) and writes each into a
 * directory laid out as a kubelet's secret or configMap volume (kubelet/config-volumes.ts writeAtomically: the keys
 * as files behind a `..data` symlink swapped at once), updated whenever the object changes:
 *
 *   <data-dir>/volumes/secret/kubevirt-virt-api-certs/{tls.crt,tls.key}              virt-api --tls-cert/--tls-key
 *   <data-dir>/volumes/secret/kubevirt-virt-handler-certs/{tls.crt,tls.key}          virt-api --handler-client-*
 *   <data-dir>/volumes/secret/kubevirt-virt-handler-server-certs/{tls.crt,tls.key}   virt-handler --tls-cert/--tls-key
 *   <data-dir>/volumes/configmap/kubevirt-ca/ca-bundle                               --handler-ca, --client-ca
 *
 * virt-controller's certificate manager makes and renews the objects; the components reload the files without a
 * restart, exactly as in a cluster. Secret files are 0600 (readable by this user only), ConfigMap files 0644.
 */
import { join } from "node:path";
import { CERTIFICATES } from "@kvt/api";
import { CORE_V1, Informer, type KubeObject, type RestTransport, resourceClient } from "@kvt/kube";
import type { Logger } from "pino";
import { writeAtomically } from "../kubelet/config-volumes.ts";

/** A Secret or ConfigMap as far as its volume shows it. */
interface ConfigObject extends KubeObject {
  /** Base64 for a Secret, text for a ConfigMap. */
  data?: Record<string, string>;
}

/** One object the components read as files. */
export interface ComponentVolume {
  readonly kind: "secret" | "configmap";
  readonly name: string;
}

/** The objects deploy/'s virt-api and virt-handler pods mount. */
export const COMPONENT_VOLUMES: readonly ComponentVolume[] = [
  { kind: "secret", name: CERTIFICATES.virtApi },
  { kind: "secret", name: CERTIFICATES.handlerClient },
  { kind: "secret", name: CERTIFICATES.handlerServer },
  { kind: "configmap", name: CERTIFICATES.caConfigMap },
];

/** The directory the volume of `kind`/`name` is written to. */
export function componentVolumeDir(dataDir: string, kind: ComponentVolume["kind"], name: string): string {
  return join(dataDir, "volumes", kind, name);
}

/** The files the components are started with. */
export interface ComponentTlsFiles {
  /** virt-api's serving certificate and key (Secret kubevirt-virt-api-certs). */
  readonly virtApi: { readonly cert: string; readonly key: string };
  /** virt-handler's serving certificate and key (Secret kubevirt-virt-handler-server-certs). */
  readonly handlerServer: { readonly cert: string; readonly key: string };
  /** virt-api's client certificate for the handlers (Secret kubevirt-virt-handler-certs). */
  readonly handlerClient: { readonly cert: string; readonly key: string };
  /** The CA bundle every component trusts (ConfigMap kubevirt-ca, key ca-bundle). */
  readonly caBundle: string;
}

/** Where {@link ComponentVolumes} writes the components' TLS files under `dataDir`. */
export function componentTlsFiles(dataDir: string): ComponentTlsFiles {
  const pair = (name: string): { cert: string; key: string } => {
    const dir = componentVolumeDir(dataDir, "secret", name);
    return { cert: join(dir, "tls.crt"), key: join(dir, "tls.key") };
  };
  return {
    virtApi: pair(CERTIFICATES.virtApi),
    handlerServer: pair(CERTIFICATES.handlerServer),
    handlerClient: pair(CERTIFICATES.handlerClient),
    caBundle: join(componentVolumeDir(dataDir, "configmap", CERTIFICATES.caConfigMap), CERTIFICATES.caBundleKey),
  };
}

/** What {@link ComponentVolumes} needs. */
export interface ComponentVolumesOptions {
  /** A client that may read Secrets and ConfigMaps in `namespace` (the cluster's admin: it stands for the kubelet). */
  readonly transport: RestTransport;
  readonly namespace: string;
  readonly dataDir: string;
  readonly logger: Logger;
  readonly volumes?: readonly ComponentVolume[];
}

/** Writes the components' Secret and ConfigMap volumes and keeps them current until {@link stop}. */
export class ComponentVolumes {
  readonly #o: ComponentVolumesOptions;
  readonly #informers: Informer<ConfigObject>[] = [];
  readonly #written = new Map<string, string>();

  constructor(options: ComponentVolumesOptions) {
    this.#o = options;
  }

  /** Starts watching; every object already there is written once the first lists arrive. */
  start(): void {
    const volumes = this.#o.volumes ?? COMPONENT_VOLUMES;
    for (const kind of ["secret", "configmap"] as const) {
      const names = new Set(volumes.filter((v) => v.kind === kind).map((v) => v.name));
      if (names.size === 0) continue;
      const informer = new Informer<ConfigObject>({
        client: resourceClient(this.#o.transport, kind === "secret" ? CORE_V1.secrets : CORE_V1.configMaps),
        logger: this.#o.logger,
        namespace: this.#o.namespace,
      });
      const write = (obj: ConfigObject): void => {
        if (names.has(obj.metadata?.name ?? "")) this.#write(kind, obj);
      };
      informer.addHandlers({ onAdd: write, onUpdate: (_old, obj) => write(obj) });
      informer.start();
      this.#informers.push(informer);
    }
  }

  /** Whether every volume has been written at least once. */
  isReady(): boolean {
    return (this.#o.volumes ?? COMPONENT_VOLUMES).every((v) => this.#written.has(`${v.kind}/${v.name}`));
  }

  stop(): void {
    for (const i of this.#informers) i.stop();
  }

  #write(kind: ComponentVolume["kind"], obj: ConfigObject): void {
    const name = obj.metadata?.name ?? "";
    const data = obj.data ?? {};
    const fingerprint = JSON.stringify(data);
    if (this.#written.get(`${kind}/${name}`) === fingerprint) return;
    const files = new Map(
      Object.entries(data).map(([key, value]) => [
        key,
        kind === "secret"
          ? { data: Buffer.from(value, "base64"), mode: 0o600 }
          : { data: Buffer.from(value, "utf8"), mode: 0o644 },
      ]),
    );
    try {
      writeAtomically(componentVolumeDir(this.#o.dataDir, kind, name), files);
    } catch (error) {
      // A key that is no file name (a hand-edited object): leave the last good payload in place.
      this.#o.logger.warn({ err: error, kind, name }, "cannot write the component volume");
      return;
    }
    this.#written.set(`${kind}/${name}`, fingerprint);
    this.#o.logger.info({ kind, name, keys: [...files.keys()] }, "component volume written");
  }
}
