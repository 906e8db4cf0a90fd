/**
 * Kubernetes `Status` errors as virt-api answers them (apimachinery `errors.New*`), and {@link ApiError}, the
 * exception that carries one. Messages follow apimachinery exactly, e.g. a conflict on a VM reads
 * `Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm-cirros": VM is already running`.
 */

/** One cause inside a Status (field-precise for validation errors). */
export interface StatusCause {
  readonly reason?: string;
  readonly message?: string;
  readonly field?: string;
}

/** The `v1 Status` object every non-2xx answer carries. */
export interface Status {
  readonly kind: "Status";
  readonly apiVersion: "v1";
  readonly metadata: Record<string, never>;
  readonly status: "Failure" | "Success";
  readonly message: string;
  readonly reason: string;
  readonly details?: {
    readonly name?: string;
    readonly group?: string;
    readonly kind?: string;
    readonly uid?: string;
    readonly causes?: readonly StatusCause[];
  };
  readonly code: number;
}

/** A group-qualified resource, as `v1.Resource("virtualmachine")` gives it. */
export interface GroupResource {
  readonly group: string;
  readonly resource: string;
}

/** `kubevirt.io` + resource, e.g. `kubevirtResource("virtualmachine")`. */
export function kubevirtResource(resource: string): GroupResource {
  return { group: "kubevirt.io", resource };
}

function qualified(gr: GroupResource): string {
  return gr.group ? `${gr.resource}.${gr.group}` : gr.resource;
}

function failure(code: number, reason: string, message: string, details?: Status["details"]): Status {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  };
}

/** 409 Conflict: `Operation cannot be fulfilled on <gr> "<name>": <why>`. */
export function conflict(gr: GroupResource, name: string, why: string): Status {
  return failure(409, "Conflict", `Operation cannot be fulfilled on ${qualified(gr)} "${name}": ${why}`, {
    name,
    group: gr.group,
    kind: gr.resource,
  });
}

/** 404 NotFound: `<gr> "<name>" not found`. */
export function notFound(gr: GroupResource, name: string): Status {
  return failure(404, "NotFound", `${qualified(gr)} "${name}" not found`, { name, group: gr.group, kind: gr.resource });
}

/** 400 BadRequest with the message as given. */
export function badRequest(message: string): Status {
  return failure(400, "BadRequest", message);
}

/** 403 Forbidden: `<gr> "<name>" is forbidden: <why>`. */
export function forbidden(gr: GroupResource, name: string, why: string): Status {
  return failure(403, "Forbidden", `${qualified(gr)} "${name}" is forbidden: ${why}`, {
    name,
    group: gr.group,
    kind: gr.resource,
  });
}

/** 500 InternalError: `Internal error occurred: <why>`. */
export function internalError(why: string): Status {
  return failure(500, "InternalError", `Internal error occurred: ${why}`, { causes: [{ message: why }] });
}

/** 405 MethodNotAllowed. */
export function methodNotAllowed(method: string, path: string): Status {
  return failure(
    405,
    "MethodNotAllowed",
    `the server does not allow this method on the requested resource: ${method} ${path}`,
  );
}

/** 404 for a path no route serves. */
export function pathNotFound(path: string): Status {
  return failure(404, "NotFound", `the server could not find the requested resource: ${path}`);
}

/** 422 Invalid with field-precise causes: `<Kind>.<group> "<name>" is invalid: [<field>: <message>, ...]`. */
export function invalid(kind: string, group: string, name: string, causes: readonly StatusCause[]): Status {
  const list = causes.map((c) => (c.field ? `${c.field}: ${c.message ?? ""}` : (c.message ?? ""))).join(", ");
  return failure(422, "Invalid", `${kind}.${group} "${name}" is invalid: [${list}]`, { name, group, kind, causes });
}

/** 401 Unauthorized (the caller's identity could not be established). */
export function unauthorized(message: string): Status {
  return failure(401, "Unauthorized", message);
}

/** An error that carries a Status; handlers throw it and the server writes it verbatim. */
export class ApiError extends Error {
  /** The Status to answer with. */
  readonly status: Status;
  constructor(status: Status) {
    super(status.message);
    this.name = "ApiError";
    this.status = status;
  }
  /** The HTTP code. */
  get code(): number {
    return this.status.code;
  }
}

/** True when `value` looks like a Kubernetes Status object. */
export function isStatus(value: unknown): value is Status {
  return (
    typeof value === "object" && value !== null && (value as { kind?: unknown }).kind === "Status" && "code" in value
  );
}
