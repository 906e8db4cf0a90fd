/**
 * Structured JSON logs (pino). The logger is created once by an app's composition root and injected; libraries
 * never create their own from the environment. Child loggers carry an object's identity (KubeVirt `log.Object`).
 */
import { type DestinationStream, type Logger, pino } from "pino";
import { stdoutLogDestination } from "./log-destination.ts";

export type { Logger } from "pino";

/** Options for {@link createLogger}. */
export interface LoggerOptions {
  /** Component name, logged as `component` on every line (e.g. `virt-handler`). */
  readonly component: string;
  /** Minimum level; default `info`. */
  readonly level?: "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
  /**
   * Where lines go; default the process's stdout destination, which drops and counts lines it cannot write (a full
   * disk, a closed pipe) instead of throwing. Tests pass a stream to capture lines.
   */
  readonly destination?: DestinationStream;
}

/** Creates the app's root logger: JSON lines, ISO timestamps, errors under `err`. */
export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level ?? "info",
      base: { component: options.component },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    options.destination ?? stdoutLogDestination(),
  );
}

/** The identity of a Kubernetes object, as it appears in log lines. */
export interface ObjectIdentity {
  readonly kind: string;
  readonly metadata?: { readonly namespace?: string; readonly name?: string; readonly uid?: string };
}

/** A child logger that names `obj` on every line: `{kind, namespace, name, uid}`. */
export function forObject(logger: Logger, obj: ObjectIdentity): Logger {
  return logger.child({
    kind: obj.kind,
    namespace: obj.metadata?.namespace,
    name: obj.metadata?.name,
    uid: obj.metadata?.uid,
  });
}
