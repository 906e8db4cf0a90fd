/**
 * The KubeVirt custom resource (kubevirt.io/v1 KubeVirt): the cluster's configuration object. KubeVirt reads
 * `spec.configuration` (KubeVirtConfiguration) from the one KubeVirt CR in its install namespace; its components
 * act on it as it changes.
 *
 * ```
 *   KubeVirt kubevirt/kubevirt
 *     spec.configuration.developerConfiguration.useEmulation   virt-controller: no devices.kubevirt.io/kvm request
 *                                                               virt-launcher: QEMU TCG where KVM cannot run the guest
 *     spec.configuration.developerConfiguration.featureGates   (admission, where a gate exists)
 *     spec.configuration.migrations                            virt-controller: the cluster migration configuration
 *     spec.certificateRotateStrategy.selfSigned                virt-controller: durations of the KubeVirt CA and
 *                                                               of the components' certificates (certificates/)
 * ```
 * Only the fields this platform acts on are declared; the other KubeVirtConfiguration and KubeVirtSpec fields are
 * kept as written (`x-kubernetes-preserve-unknown-fields`), so KubeVirt's own CR manifests apply unchanged.
 */
import { KUBEVIRT_PHASES } from "../constants.ts";
import { arr, bool, obj, str, strEnum } from "./builder.ts";
import { conditionSchema, objectMetaSchema } from "./meta.ts";
import { migrationConfigurationSchema } from "./migration-schemas.ts";

/** DeveloperConfiguration: feature gates and the emulation fallback. */
export const developerConfigurationSchema = obj(
  {
    featureGates: arr(str(), { description: "FeatureGates is the list of experimental features to enable." }),
    disabledFeatureGates: arr(str(), {
      description: "Beta feature gates to turn off (beta gates are on unless listed here).",
    }),
    useEmulation: bool({
      description:
        "UseEmulation can be set to true to allow fallback to software emulation\nin case hardware-assisted emulation is not available. Defaults to false",
    }),
  },
  { preserveUnknownFields: true, description: "DeveloperConfiguration holds developer options" },
);

/** KubeVirtConfiguration: the cluster-wide settings the components read. */
export const kubevirtConfigurationSchema = obj(
  {
    developerConfiguration: developerConfigurationSchema,
    migrations: migrationConfigurationSchema,
    evictionStrategy: str({
      description:
        "EvictionStrategy defines at the cluster level if the VirtualMachineInstance should be\nmigrated instead of shut-off in case of a node drain.",
    }),
    vmRolloutStrategy: strEnum(["Stage", "LiveUpdate"] as const, {
      description: "How VM template changes reach a running VMI: LiveUpdate (the default) or Stage (on restart).",
    }),
  },
  { preserveUnknownFields: true, description: "holds kubevirt configurations.\nsame as the virt-configMap" },
);

/** CertConfig: the lifetime of a certificate and how long before its end it is renewed (Go durations). */
function certConfigSchema(description: string) {
  return obj(
    {
      duration: str({ description: "The requested 'duration' (i.e. lifetime) of the Certificate." }),
      renewBefore: str({
        description:
          'The amount of time before the currently issued certificate\'s "notAfter"\ntime that we will begin to attempt to renew the certificate.',
      }),
    },
    { description },
  );
}

/** KubeVirtSelfSignConfiguration: the self-signed KubeVirt CA and the certificates it signs. */
export const selfSignConfigurationSchema = obj({
  caRotateInterval: str({ description: "Deprecated. Use CA.Duration instead" }),
  certRotateInterval: str({ description: "Deprecated. Use Server.Duration instead" }),
  caOverlapInterval: str({ description: "Deprecated. Use CA.Duration and CA.RenewBefore instead" }),
  ca: certConfigSchema("CA configuration\nCA certs are kept in the CA bundle as long as they are valid"),
  server: certConfigSchema("Server configuration\nCerts are rotated and discarded"),
});

/** KubeVirt spec. */
export const kubevirtSpecSchema = obj(
  {
    certificateRotateStrategy: obj({ selfSigned: selfSignConfigurationSchema }),
    configuration: kubevirtConfigurationSchema,
    imagePullPolicy: str(),
    imageRegistry: str(),
    imageTag: str(),
  },
  { preserveUnknownFields: true },
);

/** KubeVirt status. */
export const kubevirtStatusSchema = obj(
  {
    phase: strEnum(KUBEVIRT_PHASES, {
      description: "KubeVirtPhase is a label for the phase of a KubeVirt deployment at the current time.",
    }),
    conditions: arr(conditionSchema),
    observedKubeVirtVersion: str(),
    observedKubeVirtRegistry: str(),
    targetKubeVirtVersion: str(),
    targetKubeVirtRegistry: str(),
    defaultArchitecture: str(),
  },
  { preserveUnknownFields: true },
);

/** KubeVirt (namespaced; one per cluster, in KubeVirt's install namespace). */
export const kubevirtSchema = obj(
  {
    apiVersion: str(),
    kind: str(),
    metadata: objectMetaSchema,
    spec: kubevirtSpecSchema,
    status: kubevirtStatusSchema,
  },
  { required: ["spec"], description: "KubeVirt represents the object deploying all KubeVirt resources" },
);
