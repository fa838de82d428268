#!/usr/bin/env bash
# Healthy when the master is active with a live region server and the Thrift1 server both
# answers its info page and accepts connections on 9090.
set -euo pipefail
jmx="$(curl -fsS --max-time 5 'http://127.0.0.1:16010/jmx?qry=Hadoop:service=HBase,name=Master,sub=Server')"
grep -Eq '"tag.isActiveMaster" *: *"true"' <<<"$jmx" || { echo "master not active"; exit 1; }
grep -Eq '"numRegionServers" *: *[1-9]' <<<"$jmx" || { echo "no live region server"; exit 1; }
curl -fsS --max-time 5 -o /dev/null http://127.0.0.1:9095/ || { echo "thrift info page down"; exit 1; }
(exec 3<>/dev/tcp/127.0.0.1/9090) || { echo "thrift port 9090 closed"; exit 1; }
echo "healthy"
