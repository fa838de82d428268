#!/usr/bin/env bash
# Standalone HBase (one JVM: master + region server + ZooKeeper) and its Thrift1 server (a
# second JVM), both in the foreground of this container. If either exits, the other is
# stopped and the container exits with that status, so Docker's restart policy and health
# status see the failure. SIGTERM (docker stop) stops both.
set -uo pipefail

# JDK 17 closes the JDK internals that HBase's netty and Hadoop libraries reach into.
export HBASE_OPTS="${HBASE_OPTS:-} \
  --add-opens=java.base/java.lang=ALL-UNNAMED \
  --add-opens=java.base/java.lang.reflect=ALL-UNNAMED \
  --add-opens=java.base/java.nio=ALL-UNNAMED \
  --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
  --add-opens=java.base/java.util=ALL-UNNAMED \
  --add-opens=java.base/java.util.concurrent=ALL-UNNAMED \
  --add-opens=java.base/jdk.internal.ref=ALL-UNNAMED \
  --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED \
  -Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true"

mkdir -p /data/hbase /data/zookeeper /data/tmp

hbase master start &
master=$!
hbase thrift start -p 9090 --infoport 9095 &
thrift=$!

stop() {
  kill -TERM "$master" "$thrift" 2>/dev/null
}
trap stop TERM INT

wait -n "$master" "$thrift"
status=$?
stop
wait
exit "$status"
