/** A recorder that keeps events in memory as `"<type> <reason> <message>"` strings (client-go `FakeRecorder`). */
import type { EventSink, KubeObject } from "@kvt/kube";

/** In-memory {@link EventSink}. */
export class FakeRecorder implements EventSink {
  /** Recorded events, in order: `"Normal SuccessfulCreate Created virtual machine pod virt-launcher-x"`. */
  readonly events: string[] = [];
  /** The objects the events were about, parallel to {@link events}. */
  readonly objects: KubeObject[] = [];

  event(obj: KubeObject, type: "Normal" | "Warning", reason: string, message: string): void {
    this.events.push(`${type} ${reason} ${message}`);
    this.objects.push(obj);
  }

  /** The reasons only, in order. */
  reasons(): string[] {
    return this.events.map((e) => e.split(" ")[1]);
  }
}
