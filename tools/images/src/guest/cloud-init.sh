#!/bin/sh
# kvt-cloud-init: runs the NoCloud user data of the seed mounted at /run/cidata, the way cloud-init does:
# a "#!" script is executed; "#cloud-config" is translated (write_files, bootcmd, runcmd, hostname,
# ssh_authorized_keys) to a script. First the meta-data's "public-keys" (KubeVirt's accessCredentials with the
# noCloud propagation method) become root's authorized keys, as cloud-init gives them to the default user.
seed=/run/cidata
ud="$seed/user-data"
if [ -f "$seed/meta-data" ]; then
  keys=$(awk -f /usr/share/kvt/public-keys.awk "$seed/meta-data")
  if [ -n "$keys" ]; then
    mkdir -p /root/.ssh && chmod 700 /root/.ssh
    printf '%s\n' "$keys" >>/root/.ssh/authorized_keys
    chmod 600 /root/.ssh/authorized_keys
  fi
fi
[ -s "$ud" ] || exit 0
first=$(head -n 1 "$ud")
case "$first" in
  '#!'*)
    cp "$ud" /run/kvt/user-script
    chmod 755 /run/kvt/user-script
    /run/kvt/user-script
    echo "kvt-cloud-init: user script exited with $?" >/run/kvt/user-data.status
    ;;
  '#cloud-config'*)
    awk -f /usr/share/kvt/cloud-config.awk "$ud" >/run/kvt/cloud-config.sh &&
      sh /run/kvt/cloud-config.sh
    echo "kvt-cloud-init: cloud-config exited with $?" >/run/kvt/user-data.status
    ;;
  *)
    echo "kvt-cloud-init: unsupported user-data format (first line: $first)"
    ;;
esac
