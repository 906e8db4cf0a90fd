import { describe, expect, it } from "vitest";
import {
  cpuSecondsFromStat,
  failedRequests,
  parseScaleArgs,
  requestsPerVmi,
  statusBytes,
  totalRequests,
} from "./density-figures.ts";

const METRICS = `# HELP kubevirt_rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE kubevirt_rest_client_requests_total counter
kubevirt_rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST",resource="pods",verb="CREATE"} 200
kubevirt_rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST",resource="virtualmachineinstances",verb="CREATE"} 200
kubevirt_rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PUT",resource="virtualmachineinstances",verb="UPDATE"} 380
kubevirt_rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PUT",resource="virtualmachineinstances",verb="UPDATE"} 20
kubevirt_rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET",resource="virtualmachineinstances",verb="LIST"} 3
kubevirt_rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET",resource="pods",verb="WATCH"} 7
kubevirt_rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PUT",resource="leases",verb="UPDATE"} 1
kubevirt_rest_client_requests_total{code="429",host="127.0.0.1:6443",method="PATCH",resource="virtualmachines/status",verb="PATCH"} 2e+0
kubevirt_rest_client_requests_total_other{code="200",verb="CREATE",resource="x"} 999
`;

describe("requestsPerVmi", () => {
  it("sums every code of a verb and resource, per VMI, without lists and watches, sorted", () => {
    expect(requestsPerVmi(METRICS, 200)).toEqual({
      "CREATE pods": 1,
      "CREATE virtualmachineinstances": 1,
      "PATCH virtualmachines/status": 0.01,
      "UPDATE leases": 0.01,
      "UPDATE virtualmachineinstances": 2,
    });
    // Under 0.005 per VMI is noise (one lease renewal over 1,000 VMIs).
    expect(requestsPerVmi(METRICS, 1000)["UPDATE leases"]).toBeUndefined();
    expect(requestsPerVmi(METRICS, 1000)["CREATE pods"]).toBe(0.2);
  });

  it("is empty for an empty scrape", () => {
    expect(requestsPerVmi("", 10)).toEqual({});
  });
});

describe("totalRequests and failedRequests", () => {
  it("count every series, and the 4xx/5xx answers by verb, resource and code", () => {
    expect(totalRequests(METRICS)).toBe(200 + 200 + 380 + 20 + 3 + 7 + 1 + 2);
    expect(failedRequests(METRICS)).toEqual({
      "UPDATE virtualmachineinstances 409": 20,
      "PATCH virtualmachines/status 429": 2,
    });
  });
});

describe("cpuSecondsFromStat and statusBytes", () => {
  it("reads utime + stime past a command name with spaces and parentheses", () => {
    const stat = "4242 (node (virt) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 566 0 0 20 0 11 0 5000 1 2";
    expect(cpuSecondsFromStat(stat)).toBe(18);
    expect(() => cpuSecondsFromStat("garbage")).toThrow(/not a \/proc/);
  });

  it("reads VmRSS and VmHWM in bytes", () => {
    const status = "Name:\tnode\nVmHWM:\t  171958 kB\nVmRSS:\t  120000 kB\n";
    expect(statusBytes(status, "VmHWM")).toBe(171958 * 1024);
    expect(statusBytes(status, "VmRSS")).toBe(120000 * 1024);
    expect(statusBytes("Name:\tx\n", "VmHWM")).toBe(0);
  });
});

describe("parseScaleArgs", () => {
  it("defaults to 10,000 VMs on 100 nodes on both servers, kube-apiserver last", () => {
    expect(parseScaleArgs([])).toEqual({ vms: 10_000, nodes: 100, servers: ["embedded", "kube-apiserver"] });
    expect(parseScaleArgs(["--servers", "kube-apiserver,embedded"]).servers).toEqual(["embedded", "kube-apiserver"]);
  });

  it("takes --vms, --nodes and one server", () => {
    expect(parseScaleArgs(["--vms", "200", "--nodes=10", "--servers", "embedded"])).toEqual({
      vms: 200,
      nodes: 10,
      servers: ["embedded"],
    });
  });

  it("refuses what is not a positive integer, an unknown server or flag", () => {
    for (const bad of ["0", "-3", "1.5", "1e4", "ten", ""]) {
      expect(() => parseScaleArgs([`--vms=${bad}`])).toThrow(/--vms must be a positive integer/);
    }
    expect(() => parseScaleArgs(["--nodes", "0"])).toThrow(/--nodes must be a positive integer/);
    expect(() => parseScaleArgs(["--servers", "etcd"])).toThrow(/--servers takes embedded and\/or kube-apiserver/);
    expect(() => parseScaleArgs(["--servers", ","])).toThrow(/--servers takes/);
    expect(() => parseScaleArgs(["--bogus"])).toThrow(/bogus/);
  });
});
