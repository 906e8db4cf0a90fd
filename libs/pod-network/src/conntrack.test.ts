/** The `conntrack -D` arguments of a flow filter (pure), their checks, and reading the tool's count. */
import { describe, expect, it } from "vitest";
import { ConntrackError, conntrackDeleteArgs, deletedCount } from "./conntrack.ts";

describe("conntrackDeleteArgs", () => {
  it("deletes every flow whose replies come from an address (a migrated VMI's old pod address)", () => {
    expect(conntrackDeleteArgs({ replySource: "10.70.1.5" })).toEqual(["-D", "--reply-src", "10.70.1.5"]);
  });

  it("narrows to a Service port before DNAT", () => {
    expect(
      conntrackDeleteArgs({ protocol: "udp", origDst: "10.134.0.20", origDstPort: 53, replySource: "10.70.1.5" }),
    ).toEqual(["-D", "-p", "udp", "--orig-dst", "10.134.0.20", "--orig-port-dst", "53", "--reply-src", "10.70.1.5"]);
  });

  it("refuses what is not an IPv4 address or a port, and a port without a protocol", () => {
    expect(() => conntrackDeleteArgs({ replySource: "10.70.1.5 --flush" })).toThrow(ConntrackError);
    expect(() => conntrackDeleteArgs({ replySource: "" })).toThrow(/reply source "" is not an IPv4 address/);
    expect(() => conntrackDeleteArgs({ replySource: "fd00::5" })).toThrow(ConntrackError);
    expect(() => conntrackDeleteArgs({ replySource: "10.70.1.5", origDst: "-F" })).toThrow(/original destination/);
    expect(() => conntrackDeleteArgs({ replySource: "10.70.1.5", protocol: "tcp", origDstPort: 0 })).toThrow(
      /port 0 is not in 1..65535/,
    );
    expect(() => conntrackDeleteArgs({ replySource: "10.70.1.5", origDstPort: 80 })).toThrow(/needs a protocol/);
  });
});

describe("deletedCount", () => {
  it("reads the count conntrack prints, exit 1 being nothing matched", () => {
    expect(deletedCount(0, "conntrack v1.4.7 (conntrack-tools): 3 flow entries have been deleted.\n")).toBe(3);
    expect(deletedCount(1, "conntrack v1.4.7 (conntrack-tools): 0 flow entries have been deleted.\n")).toBe(0);
  });

  it("is undefined when the tool failed", () => {
    expect(deletedCount(1, "conntrack v1.4.7 (conntrack-tools): Operation failed: Operation not permitted\n")).toBe(
      undefined,
    );
    expect(deletedCount(2, "conntrack v1.4.7 (conntrack-tools): 0 flow entries have been deleted.\n")).toBe(undefined);
    expect(deletedCount(null, "")).toBe(undefined);
  });
});
