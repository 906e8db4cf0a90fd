#!/usr/bin/env node
/**
 * `npm run certs -w @kvt/release [-- --namespace NS]`: prints a release's certificate objects (certificates.ts) as
 * YAML on stdout, for `kubectl apply -f -`. Each run makes a new CA: apply the whole output at once.
 */
import { main } from "@kvt/runtime";
import { stringify } from "yaml";
import { certificateObjects } from "./certificates.ts";
import { VERSION } from "./manifests.ts";
import { NAMESPACE } from "./objects.ts";

await main({
  name: "kvt-release-certs",
  version: VERSION,
  summary: "prints the KubeVirt CA, virt-api's and virt-handler's certificates and the caBundles as YAML",
  usage: "[--namespace NS]",
  flags: { namespace: { type: "string" } },
  details: ["  --namespace NS   the install namespace (default kubevirt)"],
  async run({ values }) {
    const objects = await certificateObjects(values.namespace ?? NAMESPACE, VERSION);
    process.stdout.write(objects.map((o) => stringify(o)).join("---\n"));
    return 0;
  },
});
