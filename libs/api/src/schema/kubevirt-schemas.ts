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
 *     spec.configuration.network                               virt-api: the pod interface's default binding and
 *                                                               whether bridge may bind to the pod network
 *     spec.configuration.commonInstancetypesDeployment.enabled virt-controller: deploy common-instancetypes (default)
 *     spec.certificateRotateStrategy.selfSigned                virt-controller: durations of the KubeVirt CA and
 *                                                               of the components' certificates (certificates/)
 * ```
 * Only the fields this platform acts on are declared; the other KubeVirtConfiguration and KubeVirtSpec fields are
 * kept as written (`x-kubernetes-preserve-unknown-fields`), so KubeVirt's own CR manifests apply unchanged.
 */
import { KUBEVIRT_PHASES } from "../constants.ts";
import { arr, bool, map, obj, str, strEnum } from "./builder.ts";
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

/** InterfaceBindingPlugin: a network binding plugin the cluster declares (`migration`: its VMIs may migrate). */
export const interfaceBindingPluginSchema = obj(
  {
    sidecarImage: str({
      description: "SidecarImage references a container image that runs in the virt-launcher pod.",
    }),
    networkAttachmentDefinition: str({
      description: "NetworkAttachmentDefinition references to a NetworkAttachmentDefinition CR object.",
    }),
    domainAttachmentType: str({
      description:
        'DomainAttachmentType is a standard domain network attachment method kubevirt supports ("tap", "managedTap").',
    }),
    downwardAPI: str({
      description: "DownwardAPI specifies what kind of data should be exposed to the binding plugin sidecar.",
    }),
    migration: obj(
      { method: str({ description: "Method defines a pre-defined migration methodology" }) },
      { description: "Migration means the VM using the plugin can be safely migrated" },
    ),
  },
  { preserveUnknownFields: true },
);

/** NetworkConfiguration: the pod interface's default binding, bridge on the pod network, binding plugins. */
export const networkConfigurationSchema = obj(
  {
    defaultNetworkInterface: str({
      description:
        'The binding of the pod interface a VMI without interfaces gets: "bridge" (the default) or "masquerade".',
    }),
    permitBridgeInterfaceOnPodNetwork: bool({
      description: "Whether an interface may bind to the pod network with bridge. Defaults to true.",
    }),
    permitSlirpInterface: bool({
      description:
        "DeprecatedPermitSlirpInterface is an alias for the deprecated PermitSlirpInterface.\nDeprecated: Removed in v1.3.",
    }),
    binding: map(interfaceBindingPluginSchema),
  },
  { description: "NetworkConfiguration holds network options" },
);

/** KubeVirtConfiguration: the cluster-wide settings the components read. */
export const kubevirtConfigurationSchema = obj(
  {
    developerConfiguration: developerConfigurationSchema,
    migrations: migrationConfigurationSchema,
    network: networkConfigurationSchema,
    evictionStrategy: str({
      description:
        "EvictionStrategy defines at the cluster level if the VirtualMachineInstance should be\nmigrated instead of shut-off in case of a node drain.",
    }),
    commonInstancetypesDeployment: obj(
      {
        enabled: bool({
          description: "Enabled controls the deployment of common-instancetypes resources, defaults to True.",
        }),
      },
      {
        description: "CommonInstancetypesDeployment controls the deployment of common-instancetypes resources",
      },
    ),
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
