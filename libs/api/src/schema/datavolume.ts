/**
 * The DataVolume template a VirtualMachine carries in `spec.dataVolumeTemplates` (CDI's cdi.kubevirt.io/v1beta1
 * DataVolumeSpec, as KubeVirt's VirtualMachine CRD embeds it): where the disk's data comes from and the claim or
 * storage it lands on.
 */
import { arr, bool, obj, str } from "./builder.ts";
import {
  pvcSpecSchema,
  typedLocalObjectReferenceSchema,
  typedObjectReferenceSchema,
  volumeResourceRequirementsSchema,
} from "./k8s-core.ts";
import { labelSelectorSchema, objectMetaSchema } from "./meta.ts";

const withCerts = { url: str(), secretRef: str(), certConfigMap: str() };

/** DataVolumeSource: exactly one source of the disk's content. */
export const dataVolumeSourceSchema = obj({
  http: obj(
    { ...withCerts, extraHeaders: arr(str()), secretExtraHeaders: arr(str()) },
    { required: ["url"], description: "Import from an HTTP(S) URL." },
  ),
  s3: obj(withCerts, { required: ["url"] }),
  gcs: obj({ url: str(), secretRef: str() }, { required: ["url"] }),
  registry: obj({
    ...withCerts,
    pullMethod: str({ description: "pod or node." }),
    imageStream: str(),
    platform: obj({ architecture: str() }),
  }),
  pvc: obj({ namespace: str(), name: str() }, { required: ["namespace", "name"], description: "Clone a claim." }),
  snapshot: obj({ namespace: str(), name: str() }, { required: ["namespace", "name"] }),
  upload: obj({}),
  blank: obj({}),
  imageio: obj({ ...withCerts, diskId: str(), insecureSkipVerify: bool() }, { required: ["url", "diskId"] }),
  vddk: obj({
    url: str(),
    uuid: str(),
    backingFile: str(),
    thumbprint: str(),
    secretRef: str(),
    initImageURL: str(),
    extraArgs: str(),
  }),
});

/** CDI StorageSpec: a PVC spec whose size and access modes CDI may infer from the storage profile. */
export const storageSpecSchema = obj({
  accessModes: arr(str()),
  selector: labelSelectorSchema,
  resources: volumeResourceRequirementsSchema,
  volumeName: str(),
  storageClassName: str(),
  volumeMode: str(),
  dataSource: typedLocalObjectReferenceSchema,
  dataSourceRef: typedObjectReferenceSchema,
});

/** CDI DataVolumeSpec. */
export const dataVolumeSpecSchema = obj({
  source: dataVolumeSourceSchema,
  sourceRef: obj(
    { kind: str({ description: "DataSource." }), namespace: str(), name: str() },
    { required: ["kind", "name"] },
  ),
  pvc: pvcSpecSchema,
  storage: storageSpecSchema,
  priorityClassName: str(),
  contentType: str({ description: "kubevirt (a disk image, the default) or archive." }),
  checkpoints: arr(obj({ previous: str(), current: str() }, { required: ["previous", "current"] })),
  finalCheckpoint: bool(),
  preallocation: bool(),
});

/** One entry of a VM's `spec.dataVolumeTemplates`. */
export const dataVolumeTemplateSchema = obj(
  {
    apiVersion: str(),
    kind: str(),
    metadata: objectMetaSchema,
    spec: dataVolumeSpecSchema,
    status: obj({}, { nullable: true }),
  },
  { required: ["spec"] },
);
