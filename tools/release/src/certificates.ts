/**
 * The certificates a release needs, as the Kubernetes objects its pods mount, under KubeVirt's names, made by the
 * one certificate module (@kvt/certs). `npm run certs -w @kvt/release [-- --namespace NS]` prints them as YAML for
 * `kubectl apply -f -`; rerun it before they expire (leaves one year, the CA ten) and restart the pods.
 *
 *   Secret    kubevirt-ca                         the KubeVirt CA (tls.crt, tls.key)
 *   ConfigMap kubevirt-ca                         its certificate (ca-bundle): what the pods trust
 *   Secret    kubevirt-virt-api-certs             virt-api's serving certificate (virt-api.NS.svc)
 *   Secret    kubevirt-virt-handler-server-certs  virt-handler's serving certificate, CN kubevirt.io:system:node:virt-handler
 *   Secret    kubevirt-virt-handler-certs         virt-api's client certificate for the handlers,
 *                                                 CN kubevirt.io:system:client:virt-handler (the only one they accept)
 *   webhook configurations and APIServices        deploy/'s, with caBundle set to the KubeVirt CA
 *
 * The front-proxy CA (ConfigMap kubevirt-requestheader-ca) is the cluster's: deploy/README.md shows the copy.
 */
import { type CertificateAndKey, generateCa, issueCertificate } from "@kvt/certs";
import { virtApiManifests } from "@kvt/virt-api/lib";
import { commonLabels, type KubeObject, NAMESPACE } from "./objects.ts";

/** KubeVirt's Secret and ConfigMap names (pkg/virt-operator/resource/generate/components/secrets.go). */
export const CERT_OBJECT_NAMES = {
  ca: "kubevirt-ca",
  virtApi: "kubevirt-virt-api-certs",
  handlerServer: "kubevirt-virt-handler-server-certs",
  handlerClient: "kubevirt-virt-handler-certs",
} as const;

/** The subject CNs KubeVirt gives the handler's certificates (virt-api and virt-handler check them). */
export const HANDLER_NAMES = {
  server: "kubevirt.io:system:node:virt-handler",
  client: "kubevirt.io:system:client:virt-handler",
} as const;

function tlsSecret(name: string, namespace: string, pair: CertificateAndKey, version: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name, namespace, labels: commonLabels(undefined, version) },
    type: "kubernetes.io/tls",
    stringData: { "tls.crt": pair.certPem, "tls.key": pair.keyPem },
  };
}

/** Generates a fresh KubeVirt CA and every certificate object of a release in `namespace`. */
export async function certificateObjects(namespace = NAMESPACE, version = "0.1.0"): Promise<KubeObject[]> {
  const ca = await generateCa("kubevirt-ca");
  const service = `virt-api.${namespace}.svc`;
  const virtApi = await issueCertificate(ca, {
    commonName: service,
    dnsNames: [service, `${service}.cluster.local`, `virt-api.${namespace}`, "virt-api"],
  });
  const handlerServer = await issueCertificate(ca, { commonName: HANDLER_NAMES.server });
  const handlerClient = await issueCertificate(ca, { commonName: HANDLER_NAMES.client, usage: "client" });
  const webhooks = virtApiManifests({ namespace, caPem: ca.certPem }).map((o) => {
    const object = o as KubeObject;
    object.metadata.labels = { ...commonLabels("virt-api", version), ...object.metadata.labels };
    return object;
  });
  return [
    tlsSecret(CERT_OBJECT_NAMES.ca, namespace, ca, version),
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: CERT_OBJECT_NAMES.ca, namespace, labels: commonLabels(undefined, version) },
      data: { "ca-bundle": ca.certPem },
    },
    tlsSecret(CERT_OBJECT_NAMES.virtApi, namespace, virtApi, version),
    tlsSecret(CERT_OBJECT_NAMES.handlerServer, namespace, handlerServer, version),
    tlsSecret(CERT_OBJECT_NAMES.handlerClient, namespace, handlerClient, version),
    ...webhooks,
  ];
}
