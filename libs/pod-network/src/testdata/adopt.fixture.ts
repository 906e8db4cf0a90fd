/**
 * A launcher that does not plumb: runs adoptPodNetwork() for the plan in argv[2] (JSON) and the handover file in
 * argv[3], in this process's network namespace and as whichever user runs it, prints "adopted <tap> <mac> <port>"
 * once its DHCP server listens, and stops.
 */
import { createLogger } from "@kvt/observability";
import { adoptPodNetwork, type PodNetworkPlan } from "../pod-network.ts";

const wired = await adoptPodNetwork(
  JSON.parse(process.argv[2] ?? "{}") as PodNetworkPlan,
  process.argv[3] ?? "",
  createLogger({ component: "t", level: "silent" }),
);
process.stdout.write(`adopted ${wired.tap} ${wired.mac} ${wired.dhcp?.address.port}\n`);
await wired.close();
