/** @kvt/release: the release manifests of deploy/, generated from the code. */
import { fileURLToPath } from "node:url";

/** Absolute path of deploy/ (ends without a slash). */
export const DEPLOY_DIR: string = fileURLToPath(new URL("../../../deploy", import.meta.url));

/** Every release object and the files of deploy/ they go to. */
export {
  allObjects,
  coreFiles,
  customResourceFiles,
  type Manifest,
  type ManifestFile,
  monitoringFiles,
  VERSION,
} from "./manifests.ts";
/** The ServiceMonitor, PrometheusRule and dashboard ConfigMaps. */
export { KUBEVIRT_ALERTS, KUBEVIRT_RUNBOOKS } from "./monitoring.ts";
/** The names shared by the objects. */
export { COMPONENTS, type Component, imageName, type KubeObject, NAMESPACE } from "./objects.ts";
/** Each component's RBAC rules with the code path that needs each, as objects, and the users' roles. */
export { type ComponentRules, RULES, type Rule, rbacObjects } from "./rbac.ts";
/** deploy/'s files as text. */
export { GENERATE_COMMAND, renderDeploy } from "./render.ts";
/** The users' roles KubeVirt ships. */
export { userRoles } from "./user-roles.ts";
/** Ports and priority class of the workloads. */
export { PORTS, PRIORITY_CLASS } from "./workloads.ts";
