/**
 * The demo VM of the network e2e tests: the demo image (QEMU here) behind KubeVirt's masquerade binding (or bridge),
 * whose user data takes a DHCP lease on eth0 (busybox udhcpc; its script prints the lease) and serves HTTP on 8080
 * ("kvt-http-up" on the console once it listens): `/` greets, `/addr.txt` is the guest's own view of eth0 (`ip -o
 * link` and `ip -o addr`).
 */
/** User data: DHCP on eth0 with busybox udhcpc (its script prints the lease), then an HTTP server on 8080. */
export const HTTP_GUEST_USER_DATA = `#!/bin/sh
cat >/tmp/lease.sh <<'EOS'
#!/bin/sh
[ "$1" = bound ] || exit 0
ip addr add "$ip/$mask" dev "$interface"
[ -n "$router" ] && ip route add default via "$router"
echo "kvt-dhcp: bound $ip/$mask router $router dns $dns"
EOS
chmod +x /tmp/lease.sh
ip link set eth0 up
udhcpc -i eth0 -s /tmp/lease.sh -q -n -t 30 -T 1
mkdir -p /www && echo "hello from $(hostname)" >/www/index.html
{ ip -o link show dev eth0; ip -o addr show dev eth0; } >/www/addr.txt
httpd -p 8080 -h /www && echo kvt-http-up
`;

/**
 * The HTTP guest VM `name`, its pod interface bound with `binding` (default masquerade); `extraUserData` (shell) runs
 * after the HTTP server is up.
 */
export function httpGuestVm(
  name: string,
  binding: "masquerade" | "bridge" = "masquerade",
  extraUserData = "",
): Record<string, unknown> {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachine",
    metadata: { name },
    spec: {
      running: true,
      template: {
        spec: {
          domain: {
            devices: {
              disks: [
                { name: "containerdisk", disk: { bus: "virtio" } },
                { name: "cloudinitdisk", disk: { bus: "virtio" } },
              ],
              interfaces: [{ name: "default", [binding]: {} }],
            },
            resources: { requests: { memory: "64M" } },
          },
          networks: [{ name: "default", pod: {} }],
          terminationGracePeriodSeconds: 0,
          volumes: [
            { name: "containerdisk", containerDisk: { image: "local/demo-linux:latest" } },
            { name: "cloudinitdisk", cloudInitNoCloud: { userData: HTTP_GUEST_USER_DATA + extraUserData } },
          ],
        },
      },
    },
  };
}
