import { describe, expect, it } from "vitest";
import {
  compareGoVersions,
  kubernetesLdflags,
  parseUpstreamGoMod,
  renderContainerdGoMod,
  renderEtcdGoMod,
  renderKubernetesGoMod,
  renderKwokGoMod,
  renderLocalPathGoMod,
  renderToolsGo,
} from "./go-module.ts";
import { KUBERNETES_BINARIES, stagingVersion } from "./versions.ts";

// The shape of k8s.io/kubernetes' go.mod: a go line, godebug, requires at v0.0.0 and staging replaces (block and
// single-line forms), plus a replace that is not a staging one and must be left out.
const UPSTREAM = `// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
	github.com/blang/semver/v4 v4.0.0
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/apimachinery => ./staging/src/k8s.io/apimachinery // comment
	k8s.io/client-go v0.0.0 => ./staging/src/k8s.io/client-go
	example.com/fork => example.com/other v1.2.3
)

replace k8s.io/kubelet => ./staging/src/k8s.io/kubelet
`;

describe("parseUpstreamGoMod", () => {
  it("reads the go line, godebug and every staging replace", () => {
    expect(parseUpstreamGoMod(UPSTREAM)).toEqual({
      go: "1.26.0",
      godebug: ["default=go1.26"],
      stagingModules: ["k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go", "k8s.io/kubelet"],
    });
  });

  it("reads a godebug block", () => {
    const r = parseUpstreamGoMod("module m\n\ngo 1.25\n\ngodebug (\n\tdefault=go1.25\n\twinsymlink=0\n)\n");
    expect(r.godebug).toEqual(["default=go1.25", "winsymlink=0"]);
    expect(r.go).toBe("1.25");
  });

  it("refuses a go.mod without a go line", () => {
    expect(() => parseUpstreamGoMod("module m\n")).toThrow(/no go directive/);
  });
});

describe("renderKubernetesGoMod", () => {
  it("requires the release and replaces each staging module with its v0 tag", () => {
    const text = renderKubernetesGoMod("v1.37.2", parseUpstreamGoMod(UPSTREAM));
    expect(text).toContain("\ngo 1.26.0\n");
    expect(text).toContain("\ngodebug default=go1.26\n");
    expect(text).toContain("\nrequire k8s.io/kubernetes v1.37.2\n");
    expect(text).toContain("\tk8s.io/api => k8s.io/api v0.37.2\n");
    expect(text).toContain("\tk8s.io/kubelet => k8s.io/kubelet v0.37.2\n");
    expect(text).not.toContain("example.com");
    expect(text.match(/=>/g)).toHaveLength(4);
  });

  it("refuses a version that is not a release", () => {
    expect(() => stagingVersion("v1.37.0-rc.1")).toThrow(/not a Kubernetes release/);
    expect(() => renderKubernetesGoMod("1.37.2", parseUpstreamGoMod(UPSTREAM))).toThrow(/want v1.X.Y/);
  });
});

describe("renderEtcdGoMod, renderContainerdGoMod, renderKwokGoMod and renderToolsGo", () => {
  it("pins both etcd modules at one version", () => {
    const text = renderEtcdGoMod("v3.7.3", "1.26.0");
    expect(text).toContain("\tgo.etcd.io/etcd/server/v3 v3.7.3\n");
    expect(text).toContain("\tgo.etcd.io/etcd/etcdctl/v3 v3.7.3\n");
  });

  it("pins containerd's v2 module", () => {
    const text = renderContainerdGoMod("v2.4.2", "1.26.6");
    expect(text).toContain("\ngo 1.26.6\n");
    expect(text).toContain("\nrequire github.com/containerd/containerd/v2 v2.4.2\n");
  });

  it("pins kwok in a module of its own", () => {
    const text = renderKwokGoMod("v0.8.0", "1.26.0");
    expect(text).toContain("\nmodule kvt.local/kwok-build\n");
    expect(text).toContain("\ngo 1.26.0\n");
    expect(text).toContain("\nrequire sigs.k8s.io/kwok v0.8.0\n");
  });

  it("pins local-path-provisioner in a module of its own", () => {
    const text = renderLocalPathGoMod("v0.0.30", "1.23.0");
    expect(text).toContain("\nmodule kvt.local/local-path-build\n");
    expect(text).toContain("\ngo 1.23.0\n");
    expect(text).toContain("\nrequire github.com/rancher/local-path-provisioner v0.0.30\n");
  });

  it("imports every binary's main package behind the tools tag", () => {
    const text = renderToolsGo(KUBERNETES_BINARIES);
    expect(text.startsWith("//go:build tools\n")).toBe(true);
    for (const b of KUBERNETES_BINARIES) expect(text).toContain(`\t_ "${b.pkg}"\n`);
  });
});

describe("kubernetesLdflags", () => {
  it("stamps the release version into component-base and client-go, stripped", () => {
    const flags = kubernetesLdflags("v1.37.2");
    expect(flags.startsWith("-s -w ")).toBe(true);
    expect(flags).toContain("-X k8s.io/component-base/version.gitVersion=v1.37.2");
    expect(flags).toContain("-X k8s.io/component-base/version.gitMinor=37");
    expect(flags).toContain("-X k8s.io/client-go/pkg/version.gitMajor=1");
  });
});

describe("compareGoVersions", () => {
  it.each([
    ["go1.26.8", "1.26.0", 1],
    ["go1.26.0", "1.26", 0],
    ["go1.25.9", "1.26.0", -1],
    ["go1.27rc1", "1.26.10", 1],
  ])("%s vs %s", (a, b, sign) => {
    expect(Math.sign(compareGoVersions(a, b))).toBe(sign);
  });
});
