import { describe, expect, it } from "vitest";
import { dhcpExtraOf, leaseDns, parseResolvConf } from "./guest-lease.ts";

const POD_RESOLV =
  "search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n";

describe("leaseDns() (KubeVirt's startDHCP and dns package)", () => {
  it("takes the pod's name servers and search list; option 15 is the longest search domain", () => {
    expect(leaseDns(POD_RESOLV, undefined)).toEqual({
      dns: ["10.96.0.10"],
      searchDomains: ["default.svc.cluster.local", "svc.cluster.local", "cluster.local"],
      domainName: "default.svc.cluster.local",
    });
  });

  it("puts the VMI's subdomain under the longest service domain first, unless it is there already", () => {
    expect(leaseDns(POD_RESOLV, "sub").searchDomains[0]).toBe("sub.default.svc.cluster.local");
    expect(leaseDns(POD_RESOLV, "sub").domainName).toBe("sub.default.svc.cluster.local");
    const already = "search sub.default.svc.cluster.local cluster.local\n";
    expect(leaseDns(already, "sub").searchDomains).toEqual(["sub.default.svc.cluster.local", "cluster.local"]);
    expect(leaseDns("search example.org\n", "sub").searchDomains).toEqual(["example.org"]);
  });

  it("gives an empty lease part to a pod without resolv.conf", () => {
    expect(leaseDns(undefined, "sub")).toEqual({ dns: [], searchDomains: [] });
    expect(parseResolvConf("nameserver fe80::1\nnameserver 10.0.0.1\n").dns).toEqual(["10.0.0.1"]);
  });
});

describe("dhcpExtraOf()", () => {
  it("copies the set dhcpOptions and nothing else", () => {
    expect(dhcpExtraOf({})).toBeUndefined();
    expect(dhcpExtraOf({ dhcpOptions: { bootFileName: "f", privateOptions: [{ option: 240, value: "v" }] } })).toEqual({
      bootFileName: "f",
      privateOptions: [{ option: 240, value: "v" }],
    });
  });
});
