/**
 * The kubelet device plugin API v1beta1 (proto/api.proto): its constants and its messages as they look in
 * TypeScript. Field names are the proto's in protobufjs's camelCase (`resource_name` -> `resourceName`,
 * `devices_ids` -> `devicesIds`; `ID` and `deviceIDs` stay as written), which is how @grpc/proto-loader hands them
 * over; every field is present on a decoded message (proto3 defaults: "", 0, false, [], {}).
 *
 *   plugin                                   kubelet (<dir>/kubelet.sock)
 *     serve DevicePlugin on <dir>/<endpoint>
 *     Register{version, endpoint, resourceName} ---->  dials <dir>/<endpoint>
 *                                   <---- ListAndWatch(Empty)  (stream: the whole device list on every change)
 *                                   <---- Allocate{containerRequests[{devicesIds}]}  (at pod admission)
 *     {containerResponses[{envs, mounts, devices, annotations, cdiDevices}]} ---->
 *                                   <---- PreStartContainer (only when options.preStartRequired)
 *   a restarted kubelet removes every socket in <dir>: a plugin that sees its socket gone registers again.
 */

/** The API version this package speaks (RegisterRequest.version). */
export const API_VERSION = "v1beta1";
/** The versions a kubelet built from this package accepts. */
export const SUPPORTED_VERSIONS: readonly string[] = [API_VERSION];
/** Where a real node's kubelet keeps device plugin sockets. */
export const DEFAULT_DEVICE_PLUGINS_DIR = "/var/lib/kubelet/device-plugins";
/** The kubelet's registration socket, inside the device plugins dir. */
export const KUBELET_SOCKET = "kubelet.sock";
/** The kubelet's allocation checkpoint, inside the device plugins dir (kept across kubelet restarts). */
export const KUBELET_CHECKPOINT = "kubelet_internal_checkpoint";
/** Device.health of a usable device. */
export const HEALTHY = "Healthy";
/** Device.health of a device that cannot be allocated. */
export const UNHEALTHY = "Unhealthy";

/** DevicePluginOptions. */
export interface DevicePluginOptions {
  preStartRequired?: boolean;
  getPreferredAllocationAvailable?: boolean;
}

/** RegisterRequest: `endpoint` is a file name in the kubelet's device plugins dir. */
export interface RegisterRequest {
  version: string;
  endpoint: string;
  resourceName: string;
  options?: DevicePluginOptions | null;
}

/** Empty. */
export type Empty = Record<string, never>;

/** NUMANode. */
export interface NumaNode {
  ID: number;
}

/** Device: `health` is {@link HEALTHY} or {@link UNHEALTHY}. */
export interface Device {
  ID: string;
  health: string;
  topology?: { nodes: NumaNode[] } | null;
}

/** ListAndWatchResponse: the plugin's whole device list. */
export interface ListAndWatchResponse {
  devices: Device[];
}

/** ContainerPreferredAllocationRequest. */
export interface ContainerPreferredAllocationRequest {
  availableDeviceIDs: string[];
  mustIncludeDeviceIDs: string[];
  allocationSize: number;
}

/** PreferredAllocationRequest. */
export interface PreferredAllocationRequest {
  containerRequests: ContainerPreferredAllocationRequest[];
}

/** PreferredAllocationResponse. */
export interface PreferredAllocationResponse {
  containerResponses: { deviceIDs: string[] }[];
}

/** ContainerAllocateRequest. */
export interface ContainerAllocateRequest {
  devicesIds: string[];
}

/** AllocateRequest: one entry per container. */
export interface AllocateRequest {
  containerRequests: ContainerAllocateRequest[];
}

/** Mount: a host path made visible in the container. */
export interface Mount {
  containerPath: string;
  hostPath: string;
  readOnly: boolean;
}

/** DeviceSpec: a device node made accessible in the container; permissions from "r", "w", "m". */
export interface DeviceSpec {
  containerPath: string;
  hostPath: string;
  permissions: string;
}

/** ContainerAllocateResponse. */
export interface ContainerAllocateResponse {
  envs?: Record<string, string>;
  mounts?: Mount[];
  devices?: DeviceSpec[];
  annotations?: Record<string, string>;
  cdiDevices?: { name: string }[];
}

/** AllocateResponse: one entry per container request, in order. */
export interface AllocateResponse {
  containerResponses: ContainerAllocateResponse[];
}

/** PreStartContainerRequest. */
export interface PreStartContainerRequest {
  devicesIds: string[];
}

/** PreStartContainerResponse. */
export type PreStartContainerResponse = Record<string, never>;
