/**
 * Kubernetes core/v1 building blocks that the kubevirt.io/v1 types embed beyond metadata and scheduling (see
 * meta.ts): probe actions, pod DNS configuration, topology spread constraints, the PersistentVolumeClaim spec and
 * typed object references, the downward API. Field names follow k8s.io/api core/v1.
 */
import { arr, int, intOrString, map, obj, quantity, str } from "./builder.ts";
import { labelSelectorSchema } from "./meta.ts";

/** core/v1 ExecAction. */
export const execActionSchema = obj({ command: arr(str(), { description: "Command line to run in the guest." }) });

/** core/v1 HTTPGetAction. */
export const httpGetActionSchema = obj(
  {
    path: str(),
    port: intOrString({ description: "Port number or name." }),
    host: str(),
    scheme: str({ description: "HTTP or HTTPS; defaults to HTTP." }),
    httpHeaders: arr(obj({ name: str(), value: str() }, { required: ["name", "value"] })),
  },
  { required: ["port"] },
);

/** core/v1 TCPSocketAction. */
export const tcpSocketActionSchema = obj({ port: intOrString(), host: str() }, { required: ["port"] });

/** core/v1 PodDNSConfig (used when dnsPolicy is None, merged otherwise). */
export const podDnsConfigSchema = obj(
  {
    nameservers: arr(str(), { description: "DNS server addresses (at most 3)." }),
    searches: arr(str(), { description: "DNS search domains." }),
    options: arr(obj({ name: str(), value: str() })),
  },
  { description: "DNS parameters of the VMI's pod, merged with those generated from dnsPolicy." },
);

/** core/v1 TopologySpreadConstraint. */
export const topologySpreadConstraintSchema = obj(
  {
    maxSkew: int(),
    topologyKey: str(),
    whenUnsatisfiable: str({ description: "DoNotSchedule or ScheduleAnyway." }),
    labelSelector: labelSelectorSchema,
    minDomains: int(),
    nodeAffinityPolicy: str(),
    nodeTaintsPolicy: str(),
    matchLabelKeys: arr(str(), { listType: "atomic" }),
  },
  { required: ["maxSkew", "topologyKey", "whenUnsatisfiable"] },
);

/** core/v1 TypedLocalObjectReference. */
export const typedLocalObjectReferenceSchema = obj(
  { apiGroup: str(), kind: str(), name: str() },
  { required: ["kind", "name"] },
);

/** core/v1 TypedObjectReference. */
export const typedObjectReferenceSchema = obj(
  { apiGroup: str(), kind: str(), name: str(), namespace: str() },
  { required: ["kind", "name"] },
);

/** core/v1 VolumeResourceRequirements. */
export const volumeResourceRequirementsSchema = obj({ limits: map(quantity()), requests: map(quantity()) });

/** core/v1 PersistentVolumeClaimSpec. */
export const pvcSpecSchema = obj({
  accessModes: arr(str()),
  selector: labelSelectorSchema,
  resources: volumeResourceRequirementsSchema,
  volumeName: str(),
  storageClassName: str(),
  volumeMode: str({ description: "Filesystem or Block." }),
  dataSource: typedLocalObjectReferenceSchema,
  dataSourceRef: typedObjectReferenceSchema,
  volumeAttributesClassName: str(),
});

/** core/v1 DownwardAPIVolumeFile. */
export const downwardApiVolumeFileSchema = obj(
  {
    path: str(),
    fieldRef: obj({ apiVersion: str(), fieldPath: str() }, { required: ["fieldPath"] }),
    resourceFieldRef: obj({ containerName: str(), resource: str(), divisor: quantity() }, { required: ["resource"] }),
    mode: int(),
  },
  { required: ["path"] },
);
