import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cidrsOverlap, planPodNetwork } from "./cluster-network.ts";
import { type CniConfList, CniError, CniRuntime, cniArgs, pluginConfig, pluginError } from "./cni.ts";
import { ipsOf, podNetworkConfList } from "./pod-network.ts";

let bin: string;
const calls = (): { env: Record<string, string>; stdin: Record<string, unknown> }[] =>
  readFileSync(join(bin, "calls"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { env: Record<string, string>; stdin: Record<string, unknown> });

/** A fake plugin: records its env and stdin, then answers as `mode` says. */
function fakePlugin(name: string, mode: "ok" | "spec-error" | "garbage" | "hang"): void {
  const answer = {
    ok: `process.stdout.write(JSON.stringify({cniVersion:"1.0.0",ips:[{address:"10.9.0."+(c.prevResult?3:2)+"/16"}],interfaces:[{name:"${name}"}]}))`,
    "spec-error": `process.stdout.write(JSON.stringify({cniVersion:"1.0.0",code:11,msg:"try again",details:"busy"}));process.exitCode=1`,
    garbage: `process.stderr.write("panic: boom\\n");process.exitCode=2`,
    hang: "setInterval(()=>{},1000)",
  }[mode];
  const script = `#!${process.execPath}
let s="";process.stdin.on("data",(d)=>s+=d).on("end",()=>{const c=JSON.parse(s);
const env=Object.fromEntries(Object.entries(process.env).filter(([k])=>k.startsWith("CNI_")));
require("node:fs").appendFileSync(${JSON.stringify(join(bin, "calls"))},JSON.stringify({env,stdin:c})+"\\n");
if(env.CNI_COMMAND!=="ADD"&&"${mode}"==="ok")return;${answer}});`;
  writeFileSync(join(bin, name), script);
  chmodSync(join(bin, name), 0o755);
}

const list = (...types: string[]): CniConfList => ({
  cniVersion: "1.0.0",
  name: "net",
  plugins: types.map((type) => ({ type, capabilities: { portMappings: true } })),
});
const at = { containerId: "uid-1", netns: "/run/netns/x", ifName: "eth0" };

describe("CniRuntime (the CNI protocol against fake plugins)", () => {
  beforeAll(() => {
    bin = mkdtempSync(join(tmpdir(), "kvt-cni-"));
    fakePlugin("one", "ok");
    fakePlugin("two", "ok");
    fakePlugin("failing", "spec-error");
    fakePlugin("crashing", "garbage");
    fakePlugin("hanging", "hang");
  });
  afterAll(() => rmSync(bin, { recursive: true, force: true }));

  it("ADD runs the list in order with the CNI_* env, chaining prevResult; DEL runs it in reverse", async () => {
    rmSync(join(bin, "calls"), { force: true });
    const cni = new CniRuntime([bin]);
    const result = await cni.add(list("one", "two"), at, { portMappings: [{ hostPort: 80 }] });
    expect(ipsOf(result)).toEqual(["10.9.0.3"]);
    await cni.del(list("one", "two"), at, result);
    const c = calls();
    expect(c.map((x) => [x.env.CNI_COMMAND, x.stdin.type])).toEqual([
      ["ADD", "one"],
      ["ADD", "two"],
      ["DEL", "two"],
      ["DEL", "one"],
    ]);
    expect(c[0].env).toEqual({
      CNI_COMMAND: "ADD",
      CNI_CONTAINERID: "uid-1",
      CNI_NETNS: "/run/netns/x",
      CNI_IFNAME: "eth0",
      CNI_PATH: bin,
    });
    expect(c[0].stdin).toEqual({
      type: "one",
      cniVersion: "1.0.0",
      name: "net",
      runtimeConfig: { portMappings: [{ hostPort: 80 }] },
    });
    expect((c[1].stdin.prevResult as { ips: unknown[] }).ips).toEqual([{ address: "10.9.0.2/16" }]);
  });

  it.each([
    ["failing", 11, /try again: busy/],
    ["crashing", 999, /exit 2: panic: boom/],
    ["missing", 999, /cannot run/],
  ])("a plugin %s rejects with a CniError (code %i)", async (type, code, message) => {
    const err = await new CniRuntime([bin]).add(list(type), at).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CniError);
    expect((err as CniError).code).toBe(code);
    expect((err as CniError).message).toMatch(message);
  });

  it("a hanging plugin is killed after the timeout", async () => {
    const err = await new CniRuntime([bin], 300).add(list("hanging"), at).catch((e: unknown) => e);
    expect((err as CniError).message).toMatch(/killed after 300 ms/);
  });

  it("DEL tries every plugin and reports the first failure", async () => {
    rmSync(join(bin, "calls"), { force: true });
    const err = await new CniRuntime([bin]).del(list("one", "failing"), at, undefined).catch((e: unknown) => e);
    expect((err as CniError).plugin).toBe("failing");
    expect(calls().map((x) => x.stdin.type)).toEqual(["failing", "one"]);
  });

  it("passes CNI_ARGS as a Kubernetes runtime does", async () => {
    rmSync(join(bin, "calls"), { force: true });
    await new CniRuntime([bin]).add(list("one"), { ...at, args: { K8S_POD_NAMESPACE: "default", K8S_POD_NAME: "p" } });
    expect(calls()[0].env.CNI_ARGS).toBe("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p");
    expect(() => cniArgs({ A: "x;y" })).toThrow(TypeError);
  });

  it("refuses a plugin type that is not a file name", async () => {
    await expect(new CniRuntime([bin]).add(list("../sh"), at)).rejects.toThrow(TypeError);
  });
});

describe("CNI config and the pod network plan (pure)", () => {
  it("passes runtime config only for declared capabilities", () => {
    const l: CniConfList = { cniVersion: "1.0.0", name: "n", plugins: [{ type: "bridge" }] };
    expect(pluginConfig(l, l.plugins[0], { portMappings: [] }, undefined)).toEqual({
      type: "bridge",
      cniVersion: "1.0.0",
      name: "n",
    });
  });

  it("reads the spec's error object, else stderr", () => {
    expect(pluginError("p", "ADD", '{"code":7,"msg":"bad"}', "", "exit 1").message).toContain("(code 7): bad");
    expect(pluginError("p", "DEL", "", "oops", "exit 1").message).toContain("exit 1: oops");
  });

  it("picks a free /16 with a /24 per node, a service /16, and no route off the cluster", () => {
    const plan = planPodNetwork("/data/x", ["node01", "node02"], []);
    const taken = planPodNetwork("/data/x", ["node01", "node02"], [plan.clusterCidr]);
    expect(taken.clusterCidr).not.toBe(plan.clusterCidr);
    const servicesTaken = planPodNetwork("/data/x", ["node01", "node02"], [plan.serviceCidr ?? ""]);
    expect(servicesTaken.serviceCidr).not.toBe(plan.serviceCidr);
    expect(cidrsOverlap(plan.serviceCidr ?? "", plan.clusterCidr)).toBe(false);
    expect(plan.bridge).toMatch(/^kvt-[0-9a-f]{6}$/);
    expect(plan.bridge.length).toBeLessThanOrEqual(15);
    const base = plan.clusterCidr.split(".").slice(0, 2).join(".");
    expect(plan.nodeCidrs).toEqual({ node01: `${base}.1.0/24`, node02: `${base}.2.0/24` });
    expect(plan.gateway).toBe(`${base}.0.1`);
    const conf = podNetworkConfList(plan, plan.nodeCidrs.node02);
    const bridge = conf.plugins[0] as unknown as { isGateway: boolean; ipMasq: boolean; ipam: { routes: unknown[] } };
    // The only route a pod gets besides its /16: the service range, through the bridge's address.
    expect([bridge.isGateway, bridge.ipMasq, bridge.ipam.routes]).toEqual([
      false,
      false,
      [{ dst: plan.serviceCidr, gw: plan.gateway }],
    ]);
    expect(conf.plugins.map((p) => p.type)).toEqual(["bridge", "portmap"]);
  });

  it("cidrsOverlap", () => {
    expect(cidrsOverlap("10.64.0.0/16", "10.64.3.0/24")).toBe(true);
    expect(cidrsOverlap("10.0.0.0/8", "10.64.0.0/16")).toBe(true);
    expect(cidrsOverlap("10.65.0.0/16", "10.64.0.0/16")).toBe(false);
    expect(() => cidrsOverlap("x", "10.0.0.0/8")).toThrow(TypeError);
  });
});
