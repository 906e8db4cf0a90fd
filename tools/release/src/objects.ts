/** Shared shapes and names of the release objects. */

/** A Kubernetes object as the generator builds it (plain JSON). */
export type KubeObject = { apiVersion: string; kind: string; metadata: Metadata } & Record<string, unknown>;

/** The metadata the generator sets. */
export interface Metadata {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** The components that run in the cluster under their own ServiceAccount. */
export type Component = "virt-api" | "virt-controller" | "virt-handler";

/** Every component, in the order the manifests list them. */
export const COMPONENTS: readonly Component[] = ["virt-api", "virt-controller", "virt-handler"];

/** The install namespace (KubeVirt's); kustomize's `namespace:` moves every namespaced object. */
export const NAMESPACE = "kubevirt";

/** The image repository of each component and of the launcher: `kubevirt-ts/<component>`. */
export function imageName(component: Component | "virt-launcher"): string {
  return `kubevirt-ts/${component}`;
}

/** The labels every object of a component carries. `kubevirt.io` is KubeVirt's app label (pod selectors use it). */
export function commonLabels(component: Component | undefined, version: string): Record<string, string> {
  return {
    "app.kubernetes.io/part-of": "kubevirt-ts",
    "app.kubernetes.io/version": version,
    ...(component ? { "app.kubernetes.io/component": component, "kubevirt.io": component } : {}),
  };
}
