/** @kvt/vmm: The typed TypeScript layer over the native VMM addon: Vm, vCPUs, guest memory, dirty log, migration stream. The only importer of @kvt/native. */
export {};
