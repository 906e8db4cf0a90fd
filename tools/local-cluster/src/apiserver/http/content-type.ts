/**
 * Which request Content-Types each verb accepts, as kube-apiserver negotiates them (k8s.io/apiserver
 * endpoints/handlers/negotiation): create/update/delete bodies are decoded by the resource's serializers (JSON,
 * YAML and, for built-in kinds only, protobuf; an absent Content-Type means JSON), patches by their patch type.
 * Anything else is 415 UnsupportedMediaType before the body is read: JSON sent as text/plain, application/xml or
 * form-encoded is refused, never stored.
 */
import { unsupportedMediaType } from "../errors.ts";
import type { ResourceDef } from "../resources/types.ts";
import { acceptedPatchTypes } from "../rest/service.ts";
import { mediaType } from "./io.ts";

const JSON_TYPE = "application/json";
const YAML_TYPE = "application/yaml";
const PROTOBUF_TYPE = "application/vnd.kubernetes.protobuf";

/** The media types a create/update/delete body of `def` may have (custom resources have no protobuf). */
export function acceptedBodyTypes(def: Pick<ResourceDef, "custom">): string[] {
  return def.custom ? [JSON_TYPE, YAML_TYPE] : [JSON_TYPE, YAML_TYPE, PROTOBUF_TYPE];
}

/**
 * The media type to decode the body of `method` with, or 415 with kube-apiserver's message. `contentType` is the
 * raw header.
 */
export function negotiateBodyType(
  def: Pick<ResourceDef, "custom">,
  method: string,
  contentType: string | undefined,
): string {
  const media = mediaType(contentType);
  if (method === "PATCH") {
    const accepted = acceptedPatchTypes(def);
    if (!accepted.includes(media)) throw unsupportedMediaType(accepted);
    return media;
  }
  if (media === "") return JSON_TYPE;
  const accepted = acceptedBodyTypes(def);
  if (!accepted.includes(media)) throw unsupportedMediaType(accepted);
  return media;
}
