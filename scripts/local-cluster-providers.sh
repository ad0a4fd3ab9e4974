#!/usr/bin/env bash
# Sourced by scripts/local-cluster: up, down and status of the local provider and of kind
# Needs from the caller: every other part of scripts/local-cluster.
# Sourced into a shell that runs with set -euo pipefail (scripts/local-cluster).
# shellcheck disable=SC2154 # the variables above are set by scripts/local-cluster

# ---------------------------------------------------------------------------------------------
# commands (local provider)

local_up() {
  local t0
  t0=$(now_ns)
  if local_status >/dev/null 2>&1; then
    [ -z "$recorded_version" ] || [ "$recorded_version" = "$K8S_VERSION" ] ||
      usage_error "already up with Kubernetes $recorded_version in $dir, not $K8S_VERSION; run \`scripts/local-cluster down\` first"
    [ ! -f "$dir/feature-gates" ] || [ "$(cat "$dir/feature-gates")" = "$gates" ] ||
      usage_error "already up with feature gates '$(cat "$dir/feature-gates")' in $dir, not '$gates' (KUBECTL_TAO_FEATURE_GATES); run \`scripts/local-cluster down\` first"
    note "already up; kubeconfig: $kubeconfig"
    return 0
  fi
  if [ -d "$dir" ]; then
    note "removing the remains of an earlier cluster in $dir"
    stop_all
    rm -rf "$dir"
  fi
  [ "$gpus_mode" = fake ] || real_gpu_preflight
  [ "$real_nodes" = 0 ] || real_preflight
  if [ "$prebuilt" = 0 ] && ! "$repo/scripts/build-local-cluster" --check; then
    "$repo/scripts/build-local-cluster"
  fi
  [ "$gpus_mode" = fake ] || real_gpu_discover
  if [ "$real_nodes" != 0 ] && [ "$prebuilt" = 0 ]; then
    "$repo/scripts/build-node-images" --check || "$repo/scripts/build-node-images"
  fi
  check_gate_names "$k8s_bin/kube-apiserver" || exit 2
  t0=$(now_ns)
  # If anything below fails (or is interrupted), stop what was started; keep the logs for a look.
  trap 'stop_all; echo "local-cluster: up failed; logs kept in $dir/logs (the next up or down removes them)" >&2' EXIT

  mkdir -p "$dir/pids" "$dir/logs" "$dir/kwok" "$dir/etcd"
  chmod 700 "$dir"
  echo local >"$dir/provider"
  echo "$K8S_VERSION" >"$dir/k8s-version"
  echo "$gates" >"$dir/feature-gates"
  echo "$gpus_mode" >"$dir/gpus-mode"
  local ports
  mapfile -t ports < <(free_ports 6)
  cat >"$dir/ports.env" <<EOF
ETCD_PORT=${ports[0]}
ETCD_PEER_PORT=${ports[1]}
APISERVER_PORT=${ports[2]}
CONTROLLER_MANAGER_PORT=${ports[3]}
SCHEDULER_PORT=${ports[4]}
KWOK_PORT=${ports[5]}
EOF
  pki
  write_kubeconfig "$kubeconfig" admin
  write_kubeconfig "$dir/kube-controller-manager.kubeconfig" kube-controller-manager
  write_kubeconfig "$dir/kube-scheduler.kubeconfig" kube-scheduler
  write_kubeconfig "$dir/kwok.kubeconfig" kwok-controller
  cp "$repo/cluster/kwok/container.log" "$dir/kwok/container.log"
  render_kwok_config >"$dir/kwok/kwok.yaml"
  launch etcd
  launch kube-apiserver
  wait_healthy kube-apiserver
  kueue_up
  launch kube-controller-manager
  launch kube-scheduler
  [ -z "$simulator" ] || launch kwok
  if [ "$(( gpu_nodes + cpu_nodes ))" -gt 0 ]; then render_nodes | kctl apply -f - >/dev/null; fi
  [ "$real_nodes" = 0 ] || real_up

  wait_healthy kube-controller-manager
  wait_healthy kube-scheduler
  [ -z "$simulator" ] || wait_healthy kwok
  wait_for 60 "nodes Ready and untainted" nodes_ready
  wait_for 60 "the default ServiceAccount" default_sa
  [ "$real_nodes" = 0 ] || real_wait_ready
  ! kueue_on || wait_healthy kueue

  trap - EXIT
  note "up in $(since "$t0")s; $(( gpu_nodes )) GPU node(s) x ${gpus_per_node} nvidia.com/gpu, ${cpu_nodes} CPU node(s); RSS $(rss_mib) MiB"
  if [ "$real_nodes" != 0 ] && [ "$gpus_mode" = host ]; then
    note "${real_nodes} real node(s) real-node-<i> run real containers with this machine's real GPUs:"
    real_gpu_summary | sed 's/^/local-cluster:   /'
  elif [ "$real_nodes" != 0 ]; then
    note "${real_nodes} real node(s) real-node-<i> (taint ${real_taint_key}=true:NoSchedule) run real containers; each advertises ${real_gpus} fake nvidia.com/gpu: no GPU exists"
  fi
  note "Kubernetes ${K8S_VERSION}, etcd ${ETCD_VERSION}$([ -z "$simulator" ] || echo ", kwok $(kwok_version)"); API https://127.0.0.1:$(port APISERVER_PORT)"
  kueue_note
  note "kubeconfig: $kubeconfig   (eval \"\$($repo/scripts/local-cluster env)\")"
}

# `down` removes the data directory only when `up` made it: never a directory KUBECTL_TAO_CLUSTER_DIR points
# at by mistake.
check_data_dir() {
  [ -f "$dir/provider" ] || [ -d "$dir/pids" ] ||
    die "$dir does not look like a local-cluster data directory; not removing it"
}

local_down() {
  if [ ! -e "$dir" ]; then
    note "not running (no $dir)"
    return 0
  fi
  check_data_dir
  stop_all
  rm -rf "$dir"
  note "down; removed $dir"
}

# ---------------------------------------------------------------------------------------------
# kind provider (needs Docker)

KIND=${KIND:-kind}
DOCKER=${DOCKER:-docker}
kind_name=kubectl-tao

kind_preflight() {
  command -v "$KIND" >/dev/null 2>&1 ||
    die "the kind provider needs 'kind' on PATH (https://kind.sigs.k8s.io); without Docker use the default provider: scripts/local-cluster up"
  if ! command -v "$DOCKER" >/dev/null 2>&1 || ! "$DOCKER" info >/dev/null 2>&1; then
    die "the kind provider needs a working Docker ('docker info' failed: docker not available); without Docker use the default provider: scripts/local-cluster up"
  fi
}

kind_up() {
  kind_preflight
  local t0
  t0=$(now_ns)
  local clusters
  clusters=$("$KIND" get clusters 2>/dev/null) || clusters=""
  if grep -qx "$kind_name" <<<"$clusters" && [ -f "$kubeconfig" ]; then
    note "already up (kind cluster $kind_name); kubeconfig: $kubeconfig"
    return 0
  fi
  mkdir -p "$dir"
  echo kind >"$dir/provider"
  "$KIND" create cluster --name "$kind_name" --kubeconfig "$kubeconfig" --wait 180s
  local gpus=${NUM_GPUS:-0}
  if [ "$gpus" != 0 ]; then
    # Real GPUs only reach kind nodes through the NVIDIA container toolkit and device plugin.
    kctl label nodes --all --overwrite nvidia.com/gpu.present=true "nvidia.com/gpu.count=$gpus" >/dev/null
  fi
  kctl label nodes --all --overwrite kubectl-tao.io/provider=kind >/dev/null
  note "up in $(since "$t0")s (kind cluster $kind_name); kubeconfig: $kubeconfig"
  if [ "$gpus" = 0 ]; then
    note "kind nodes have no nvidia.com/gpu: run jobs with 0 GPUs (lifecycle only), or use a GPU host with the NVIDIA device plugin"
  fi
}

kind_down() {
  if [ -e "$dir" ]; then
    check_data_dir
  fi
  if command -v "$KIND" >/dev/null 2>&1; then
    "$KIND" delete cluster --name "$kind_name" --kubeconfig "$kubeconfig" || true
  fi
  rm -rf "$dir"
  note "down; removed kind cluster $kind_name and $dir"
}

kind_status() {
  kind_preflight
  local clusters
  clusters=$("$KIND" get clusters 2>/dev/null) || clusters=""
  grep -qx "$kind_name" <<<"$clusters" || { echo "kind cluster $kind_name: not found"; return 1; }
  echo "provider: kind  cluster: $kind_name  data: $dir"
  if kctl get --raw /readyz >/dev/null 2>&1; then echo "  api /readyz ok"; else echo "  api /readyz not ready"; return 1; fi
}
