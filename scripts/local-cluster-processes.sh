#!/usr/bin/env bash
# Sourced by scripts/local-cluster: the control plane's processes: start, stop and watch them (the same flags, ports
# and data on every start). Needs from the caller: dir, cache, repo, k8s_bin, etcd_bin, feature_gates, runtime_config, components, watched,
# die, note, kctl, and the health and pki parts (functions are looked up when called).
# Sourced into a shell that runs with set -euo pipefail (scripts/local-cluster).
# shellcheck disable=SC2154 # the variables above are set by scripts/local-cluster

# ---------------------------------------------------------------------------------------------
# processes

pid_of() { # COMPONENT -> pid, if recorded
  local f=$dir/pids/$1.pid
  [ -f "$f" ] && cat "$f"
}

# True if PID is alive and was started by us for this data directory (guards against pid reuse).
ours() { # PID
  local pid=$1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  local cmdline # read whole: a long command line must not fail tr with SIGPIPE once grep -q has its match
  cmdline=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  grep -qF -- "$dir/" <<<"$cmdline"
}

alive() { # COMPONENT
  local pid
  pid=$(pid_of "$1") || return 1
  ours "$pid"
}

start() { # COMPONENT BINARY ARGS...
  local name=$1
  shift
  # setsid: the component survives the Ctrl-C of whoever ran `up`; `down` stops it by pid.
  # Only stdin, stdout and stderr reach it: an inherited descriptor would stay open for the component's whole
  # life, and a lock on it held: the up/down lock (fd 9), or one of whoever ran `up` (`flock FILE local-cluster
  # up` runs it with the lock's descriptor open).
  (
    for fd in /proc/self/fd/*; do
      fd=${fd##*/}
      [ "$fd" -le 2 ] || eval "exec $fd>&-" 2>/dev/null || true
    done
    exec setsid "$@" >>"$dir/logs/$name.log" 2>&1 </dev/null
  ) &
  local pid=$! tries=0
  echo "$pid" >"$dir/pids/$name.pid"
  # Until the child has exec'd, its /proc cmdline is this script's, and `ours` (so `alive`) would report a
  # component that is still starting as exited. Wait for the exec (or the exit), at most 2 s.
  while ! exec_done "$pid" && [ "$tries" -lt 200 ]; do
    tries=$((tries + 1))
    sleep 0.01
  done
}

exec_done() { # PID: it runs its own program now (ours), or it has already exited (no cmdline)
  local cmdline
  cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") || return 0
  [ -z "$cmdline" ] || ours "$1"
}

terminate() { # GRACE_S COMPONENT... : TERM the ones that are ours, KILL what is left after GRACE_S
  local grace=$1 c pid pids=() left
  shift
  for c in "$@"; do
    pid=$(pid_of "$c") || continue
    if ours "$pid"; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  [ "${#pids[@]}" -gt 0 ] || return 0
  local deadline=$(( $(now_ns) + grace * 1000000000 ))
  while :; do
    left=()
    for pid in "${pids[@]}"; do ours "$pid" && left+=("$pid"); done
    [ "${#left[@]}" -gt 0 ] || return 0
    [ "$(now_ns)" -lt "$deadline" ] || break
    sleep 0.1
  done
  for pid in "${left[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${left[@]}"; do
    while ours "$pid"; do sleep 0.05; done
  done
}

stop_all() { # real nodes and clients first, then the API server, then etcd (it hangs without etcd)
  [ -d "$dir/pids" ] || return 0
  kueue_abort_install
  real_stop_all
  terminate 10 kueue kwok kube-scheduler kube-controller-manager
  terminate 10 kube-apiserver
  terminate 10 etcd
}

rss_mib() { # sum of VmRSS of the running components, MiB
  local c pid kb total=0
  # shellcheck disable=SC2046 # one word per component
  for c in "${components[@]}" $(real_components); do
    pid=$(pid_of "$c") || continue
    ours "$pid" || continue
    kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    total=$(( total + ${kb:-0} ))
  done
  echo $(( total / 1024 ))
}

# ---------------------------------------------------------------------------------------------
# components: the same flags, ports and data on every start (up, start-component)

kwok_version() {
  if [ -f "$cache/kwok-$KWOK_VERSION/.complete" ]; then echo "$KWOK_VERSION"; else echo "$KWOK_FALLBACK_VERSION"; fi
}

launch() { # COMPONENT: start it (returns at once; wait_healthy waits for it)
  local p=$dir/pki etcd_url peer_url
  etcd_url="http://127.0.0.1:$(port ETCD_PORT)"
  peer_url="http://127.0.0.1:$(port ETCD_PEER_PORT)"
  case "$1" in
    etcd)
      start etcd "$etcd_bin/etcd" --name local --data-dir "$dir/etcd" \
        --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
        --listen-peer-urls "$peer_url" --initial-advertise-peer-urls "$peer_url" \
        --initial-cluster "local=$peer_url" --initial-cluster-state new \
        --unsafe-no-fsync --log-level warn ;;
    kube-apiserver)
      start kube-apiserver "$k8s_bin/kube-apiserver" \
        --etcd-servers "$etcd_url" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$(port APISERVER_PORT)" \
        --cert-dir "$dir/pki" --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
        --client-ca-file "$p/ca.crt" \
        --endpoint-reconciler-type none \
        --service-cluster-ip-range 10.96.0.0/16 \
        --authorization-mode Node,RBAC \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
        --kubelet-client-certificate "$p/apiserver-kubelet-client.crt" \
        --kubelet-client-key "$p/apiserver-kubelet-client.key" \
        --kubelet-certificate-authority "$p/ca.crt" \
        --kubelet-preferred-address-types InternalIP \
        --allow-privileged=true --profiling=false "${feature_gates[@]}" "${runtime_config[@]}" ;;
    kube-controller-manager)
      start kube-controller-manager "$k8s_bin/kube-controller-manager" \
        --kubeconfig "$dir/kube-controller-manager.kubeconfig" \
        --bind-address 127.0.0.1 --secure-port "$(port CONTROLLER_MANAGER_PORT)" --cert-dir "$dir/pki/kcm" \
        --leader-elect=false \
        --service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" \
        --use-service-account-credentials=true \
        --cluster-signing-cert-file "$p/ca.crt" --cluster-signing-key-file "$p/ca.key" \
        --service-cluster-ip-range 10.96.0.0/16 --profiling=false "${feature_gates[@]}" ;;
    kube-scheduler)
      start kube-scheduler "$k8s_bin/kube-scheduler" \
        --kubeconfig "$dir/kube-scheduler.kubeconfig" \
        --bind-address 127.0.0.1 --secure-port "$(port SCHEDULER_PORT)" --cert-dir "$dir/pki/scheduler" \
        --leader-elect=false --profiling=false "${feature_gates[@]}" ;;
    kwok)
      KWOK_WORKDIR=$dir/kwok start kwok "$cache/kwok-$(kwok_version)/bin/kwok" \
        --kubeconfig "$dir/kwok.kubeconfig" --config "$dir/kwok/kwok.yaml" \
        --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
        --node-ip 127.0.0.1 --node-name localhost \
        --node-port "$(port KWOK_PORT)" --server-address "127.0.0.1:$(port KWOK_PORT)" \
        --tls-cert-file "$p/kwok.crt" --tls-private-key-file "$p/kwok.key" \
        --cidr 10.244.0.1/16 --node-lease-duration-seconds 40 ;;
    kueue) kueue_launch ;;
  esac
}

wait_healthy() { # COMPONENT
  case "$1" in
    etcd) wait_for 60 "etcd /health" etcd_ok ;;
    kube-apiserver) wait_for 60 "kube-apiserver /readyz" api_ready ;;
    kube-controller-manager) wait_for 60 "kube-controller-manager /healthz" insecure_ok "https://127.0.0.1:$(port CONTROLLER_MANAGER_PORT)/healthz" ;;
    kube-scheduler) wait_for 60 "kube-scheduler /readyz" insecure_ok "https://127.0.0.1:$(port SCHEDULER_PORT)/readyz" ;;
    kwok) wait_for 60 "kwok /healthz" insecure_ok "https://127.0.0.1:$(port KWOK_PORT)/healthz" ;;
    kueue) kueue_wait_healthy ;;
  esac
}

local_component() { # stop-component|start-component COMPONENT
  [ -f "$dir/ports.env" ] && [ -d "$dir/pids" ] || die "no local cluster in $dir; run: scripts/local-cluster up"
  if [ "$1" = stop-component ]; then
    terminate 3 "$2"
    note "stopped $2 (data kept in $dir)"
  elif alive "$2"; then
    note "$2 already runs (pid $(pid_of "$2"))"
  else
    # shellcheck disable=SC2034 # read by wait_for (local-cluster-health.sh)
    watched=("$2")
    launch "$2"
    wait_healthy "$2"
    note "started $2 (pid $(pid_of "$2"))"
  fi
}
