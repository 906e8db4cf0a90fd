/**
 * `npm start`: the local cluster with the demo VM. Until the local cluster exists (issue 9) this explains what is
 * missing and exits non-zero, so nobody mistakes it for a running cluster.
 */
process.stderr.write(
  [
    "npm start will bring up the local cluster (API server, scheduler, nodes, KubeVirt components) with the demo VM.",
    "It is not built yet: see the open issues (`issues list`), issue 9 in particular.",
    "",
  ].join("\n"),
);
process.exit(1);
