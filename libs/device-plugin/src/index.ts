/** @kvt/device-plugin: the kubelet device plugin API v1beta1 over gRPC on unix sockets (see protocol.ts). */

/** The path of the API's .proto file (images that bundle this package carry it). */
export { PROTO_FILE } from "./api.ts";
/** The clients: the kubelet's connection to a plugin, a plugin's registration. */
export {
  DEFAULT_TIMEOUT_MS,
  DevicePluginClient,
  type DeviceWatch,
  PRE_START_CONTAINER_TIMEOUT_MS,
  register,
} from "./client.ts";
/** A failed call, with its gRPC status code. */
export { DevicePluginError } from "./errors.ts";
/** The API's constants and message types. */
export {
  type AllocateRequest,
  type AllocateResponse,
  API_VERSION,
  type ContainerAllocateRequest,
  type ContainerAllocateResponse,
  type ContainerPreferredAllocationRequest,
  DEFAULT_DEVICE_PLUGINS_DIR,
  type Device,
  type DevicePluginOptions,
  type DeviceSpec,
  type Empty,
  HEALTHY,
  KUBELET_CHECKPOINT,
  KUBELET_SOCKET,
  type ListAndWatchResponse,
  type Mount,
  type NumaNode,
  type PreferredAllocationRequest,
  type PreferredAllocationResponse,
  type PreStartContainerRequest,
  type PreStartContainerResponse,
  type RegisterRequest,
  SUPPORTED_VERSIONS,
  UNHEALTHY,
} from "./protocol.ts";
/** The servers: a plugin's DevicePlugin service, the kubelet's Registration service. */
export {
  type DevicePluginService,
  type RegisterHandler,
  serveDevicePlugin,
  serveRegistration,
  type UnixGrpcServer,
} from "./server.ts";
