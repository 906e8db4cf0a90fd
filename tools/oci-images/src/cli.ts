/**
 * `npm run images -- <command>`: the release's OCI images.
 *
 *   build                        build every image into .data/oci-images/layout (unchanged ones are skipped)
 *   push --registry HOST:PORT    build, then copy every image to the registry (skopeo; plain HTTP for 127.0.0.1)
 */
import { parseArgs } from "node:util";
import { buildImages, defaultWorkDir } from "./build-images.ts";
import { pushImages } from "./push-images.ts";
import { formatSizes } from "./size-report.ts";

const USAGE = `usage: npm run images -- <build|push> [options]

Builds the release's OCI images without a Docker daemon (Debian packages via mmdebstrap, umoci; Node 24 and the
apps' bundles from this checkout): kubevirt-ts/virt-api, virt-controller, virt-handler, virt-launcher (with QEMU
for TCG) and the containerDisk local/demo-linux, into an OCI layout under .data/oci-images/layout.

commands:
  build                         build every image (images whose inputs did not change are kept)
  push --registry HOST:PORT     build, then push every image with skopeo (plain HTTP for 127.0.0.1/localhost)

options:
  --registry HOST:PORT          registry to push to (push)
  --insecure                    plain HTTP / no TLS verification for any registry (push)
  --cert-dir DIR                the registry's CA (*.crt) and a client certificate (*.cert, *.key) (push)
  --refresh-debian              unpack the Debian packages again (new security fixes)
  --work-dir DIR                working folder (default .data/oci-images, or $KVT_OCI_IMAGES_DIR)
  -h, --help                    this text`;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    registry: { type: "string" },
    insecure: { type: "boolean" },
    "cert-dir": { type: "string" },
    "refresh-debian": { type: "boolean", default: false },
    "work-dir": { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});
const command = positionals[0];
if (values.help || !command || !["build", "push"].includes(command) || positionals.length > 1) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(values.help ? 0 : 2);
}
if (command === "push" && !values.registry) {
  process.stderr.write("images push: --registry HOST:PORT is required\n");
  process.exit(2);
}

const started = performance.now();
const elapsed = (): string => `${((performance.now() - started) / 1000).toFixed(1)}s`.padStart(6);
const log = (line: string): void => void process.stdout.write(`[images ${elapsed()}] ${line}\n`);
try {
  const workDir = values["work-dir"] ?? defaultWorkDir();
  const { layout, images } = await buildImages({ workDir, refreshDebian: values["refresh-debian"], log });
  log(`built in ${((performance.now() - started) / 1000).toFixed(1)} s, layout ${layout.dir}`);
  process.stdout.write(`${formatSizes(images)}\n`);
  if (command === "push" && values.registry) {
    const pushed = await pushImages(layout, images, {
      registry: values.registry,
      insecure: values.insecure,
      certDir: values["cert-dir"],
      workDir,
      log,
    });
    log(`pushed ${pushed.length} images in ${((performance.now() - started) / 1000).toFixed(1)} s total`);
  }
} catch (err) {
  process.stderr.write(`[images] ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
}
