#!/bin/sh
# kvt-cloud-init: runs the NoCloud user data of the seed mounted at /run/cidata, the way cloud-init does:
# a "#!" script is executed; "#cloud-config" is translated (write_files, bootcmd, runcmd, hostname) to a script.
seed=/run/cidata
ud="$seed/user-data"
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
