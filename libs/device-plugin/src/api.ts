/**
 * Loads proto/api.proto once with @grpc/proto-loader and hands out its two services. The .proto is read from beside
 * this package (its `import.meta.url`), which a bundled app keeps pointing at the package's folder: an image that
 * bundles this package carries `libs/device-plugin/proto/api.proto` at the same relative place.
 */
import { fileURLToPath } from "node:url";
import type { MethodDefinition, ServiceDefinition } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";

/** The path of the API's .proto file. */
export const PROTO_FILE: string = fileURLToPath(new URL("../proto/api.proto", import.meta.url));

/** The two services of the API. */
export interface DevicePluginServices {
  /** `v1beta1.Registration`, served by the kubelet. */
  readonly registration: ServiceDefinition;
  /** `v1beta1.DevicePlugin`, served by each plugin. */
  readonly devicePlugin: ServiceDefinition;
}

let loaded: DevicePluginServices | undefined;

/** The services, loaded on first use (proto3 defaults filled in, int64 as number, field names camelCased). */
export function services(): DevicePluginServices {
  if (!loaded) {
    const definition = loadSync(PROTO_FILE, {
      keepCase: false,
      longs: Number,
      enums: String,
      defaults: true,
      arrays: true,
      objects: true,
    });
    loaded = {
      registration: definition["v1beta1.Registration"] as ServiceDefinition,
      devicePlugin: definition["v1beta1.DevicePlugin"] as ServiceDefinition,
    };
  }
  return loaded;
}

/** One method of a service, typed by its request and response. */
export function method<Req, Res>(service: ServiceDefinition, name: string): MethodDefinition<Req, Res> {
  const m = service[name] as MethodDefinition<Req, Res> | undefined;
  if (!m) throw new Error(`device plugin API has no method ${name}`);
  return m;
}
