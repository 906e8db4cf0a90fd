/** @kvt/local-cluster: The local cluster: an embedded Kubernetes-compatible API server (node:sqlite), scheduler, process-kubelet and supervisor. */
export {};
