/** @kvt/kube: Kubernetes client plumbing: typed clients, informers, workqueue, expectations, leader election, events, reconcile runner. */
export {};
