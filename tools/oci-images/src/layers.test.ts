import { basename } from "node:path";
import { PLUMBING_PROGRAMS } from "@kvt/pod-network";
import { expect, it } from "vitest";
import { NET_TOOLS } from "./layers.ts";
import { IMAGES } from "./release-images.ts";

it("virt-handler's image carries every program the pod-network plumbing runs, nsenter and conntrack", () => {
  const tools = NET_TOOLS.map((t) => basename(t));
  expect(tools).toEqual(expect.arrayContaining([...PLUMBING_PROGRAMS, "nsenter", "conntrack"]));
  expect(IMAGES.filter((i) => i.netTools).map((i) => i.tag)).toEqual(["virt-handler"]);
});
