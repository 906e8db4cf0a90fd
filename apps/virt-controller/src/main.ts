#!/usr/bin/env node
/**
 * virt-controller: composition root. Cluster controllers for VirtualMachines, VirtualMachineInstances and
 * migrations, leader-elected on the Lease `virt-controller` (15 s / 10 s / 2 s): only the leader runs informers and
 * controllers; losing the lease exits the process (KubeVirt: "leaderelection lost") so a fresh start campaigns again.
 * The process itself lives in `controller-process.ts`, imported only when it runs, so `--help` stays fast.
 */
import { main } from "@kvt/runtime";
import pkg from "../package.json" with { type: "json" };

await main({
  name: "virt-controller",
  version: pkg.version,
  summary: "Cluster controllers for VirtualMachines, VirtualMachineInstances and migrations (leader-elected).",
  usage: "[--kubeconfig FILE] [--metrics-port N] [--namespace NS] [--launcher-image IMAGE] [--log-level LEVEL]",
  flags: {
    kubeconfig: { type: "string" },
    "metrics-port": { type: "string" },
    "metrics-host": { type: "string" },
    namespace: { type: "string" },
    "launcher-image": { type: "string" },
    "log-level": { type: "string" },
  },
  details: [
    "  --kubeconfig FILE   API server credentials (default $KUBECONFIG, ~/.kube/config, or in-cluster)",
    "  --metrics-port N    serve /metrics, /healthz and /leader on 127.0.0.1:N (default 8182; 0 = any)",
    "  --metrics-host H    ... at H instead (the release: the pod IP). Plain HTTP on purpose: read-only, no guest data",
    "  --namespace NS      namespace of the leader-election Lease (default $POD_NAMESPACE or kubevirt)",
    "  --launcher-image I  the image of the launcher pods' containers (default kubevirt/virt-launcher, which the",
    "                      local cluster's process-kubelet runs from the checkout; the release passes its own)",
  ],
  async run({ values }, signal) {
    const metricsPort = Number(values["metrics-port"] ?? 8182);
    if (!Number.isInteger(metricsPort) || metricsPort < 0 || metricsPort > 65535) {
      process.stderr.write(`virt-controller: invalid --metrics-port ${values["metrics-port"] ?? ""}\n`);
      return 2;
    }
    const { runController } = await import("./controller-process.ts");
    return runController(
      {
        kubeconfig: values.kubeconfig,
        metricsPort,
        ...(values["metrics-host"] ? { metricsHost: values["metrics-host"] } : {}),
        namespace: values.namespace ?? process.env.POD_NAMESPACE ?? "kubevirt",
        ...(values["launcher-image"] ? { launcherImage: values["launcher-image"] } : {}),
        logLevel: values["log-level"] ?? "info",
        version: pkg.version,
      },
      signal,
    );
  },
});
