/** @kvt/api: The kubevirt.io/v1 API: types, OpenAPI schemas, CRDs, defaults, validation, quantities and shared semantics. Pure, no I/O. */
export {};
