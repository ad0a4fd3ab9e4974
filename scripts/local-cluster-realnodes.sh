#!/usr/bin/env bash
# Sourced by scripts/local-cluster: the real nodes of the local cluster. Each node is a kubelet
# and its own containerd + runc, sharing one private mount namespace (per-node /run, /var/lib,
# /var/log), on one CNI bridge that has no uplink; one CoreDNS serves cluster.local to them.
# Needs from the caller: dir, cache, repo, k8s_bin, K8S_VERSION, COREDNS_VERSION, kctl, start,
# ours, pid_of, alive, terminate, wait_for, die, note, port, pki issue helpers.
# shellcheck disable=SC2154 # the variables above are set by scripts/local-cluster

real_bridge=ktbr0
real_gw=10.88.0.1
real_subnet=10.88.0.0/16
real_taint_key=kubectl-tao.io/real-node
real_label=kubectl-tao.io/real-node=true
real_fake_gpu_label=kubectl-tao.io/fake-gpu=true
real_images_tag= # scripts/build-node-images --tag: busybox version and recipe hash (real_up)
real_pause_image=
images_dir=
real_cgroup_controllers=(cpu cpuacct cpuset memory devices freezer blkio pids systemd)
real_cni_dir=${KUBECTL_TAO_CNI_DIR:-/usr/lib/cni}

# shellcheck source-path=SCRIPTDIR source=local-cluster-s3.sh
. "$repo/scripts/local-cluster-s3.sh"
# shellcheck source-path=SCRIPTDIR source=local-cluster-apirelay.sh
. "$repo/scripts/local-cluster-apirelay.sh"

real_node_name() { echo "real-node-$1"; }
real_dir() { echo "$dir/real/$1"; }
node_bin_dir() { echo "$cache/k8s-node-$K8S_VERSION/bin"; }
fakegpu_bin() { echo "$cache/fakegpu-$K8S_VERSION-$(fakegpu_hash)/bin/fakegpu"; }
coredns_bin() { echo "$cache/coredns-$COREDNS_VERSION/bin/coredns"; }

real_nodes_recorded() { # names of the real nodes this cluster started (from the data dir)
  [ -d "$dir/real" ] || return 0
  local d
  for d in "$dir"/real/real-node-*; do [ -d "$d" ] && basename "$d"; done
  return 0
}

# ---------------------------------------------------------------------------------------------
# checks before anything starts: one line and exit 1 for each missing piece

real_socket_path() { # the longest unix socket path of the real nodes: the last node's device-plugin sockets
  echo "$(real_dir "$(real_node_name $(( real_nodes - 1 )))")/varlib/kubelet/device-plugins/kubelet.sock"
}

real_preflight() {
  local sock
  sock=$(real_socket_path)
  [ "${#sock}" -le 107 ] ||
    usage_error "KUBECTL_TAO_CLUSTER_DIR is too long for the real nodes' unix sockets: $sock is ${#sock} bytes, at most 107 fit; use a shorter directory"
  [ "$(id -u)" = 0 ] || die "real nodes need root (network namespaces, cgroups, mounts); run as root or set KUBECTL_TAO_REAL_NODES=0"
  local tool
  for tool in containerd containerd-shim-runc-v2 runc ctr unshare nsenter ip; do
    command -v "$tool" >/dev/null 2>&1 ||
      die "real nodes need '$tool'; install it with: scripts/install-cluster-deps (or set KUBECTL_TAO_REAL_NODES=0)"
  done
  [ -x "$real_cni_dir/bridge" ] && [ -x "$real_cni_dir/host-local" ] && [ -x "$real_cni_dir/loopback" ] ||
    die "real nodes need the CNI plugins in $real_cni_dir; install them with: scripts/install-cluster-deps"
  [ "$prebuilt" = 1 ] || "$repo/scripts/build-node-images" --check || "$repo/scripts/fetch-image-busybox" >/dev/null ||
    die "real nodes build their images from Debian trixie's busybox-static; fetching it failed (above); retry with: scripts/fetch-image-busybox"
  [ -d /sys/fs/cgroup/memory ] || [ -f /sys/fs/cgroup/cgroup.controllers ] ||
    die "real nodes need cgroups mounted under /sys/fs/cgroup"
  if ip link show "$real_bridge" >/dev/null 2>&1; then
    die "the bridge $real_bridge already exists: another local cluster with real nodes runs (stop it with its own 'local-cluster down'), or delete it: ip link delete $real_bridge"
  fi
  local routes
  routes=$(ip -4 route show to match "$real_gw" | grep -v '^default' || true)
  if [ -n "$routes" ]; then
    die "addresses in $real_subnet are already routed on this machine (${routes%%$'\n'*}); real nodes need that subnet"
  fi
  [ "$prebuilt" = 0 ] || return 0 # no cluster DNS, no S3 store, no API server relay
  if ! python3 -c 'import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 53))' 2>/dev/null; then
    die "UDP port 53 is in use on this machine (needed by the cluster DNS on $real_gw:53); stop what listens there or set KUBECTL_TAO_REAL_NODES=0"
  fi
  s3_preflight
  api_relay_preflight
}

# ---------------------------------------------------------------------------------------------
# real GPUs (KUBECTL_TAO_GPUS=host): the device plugin's passthrough mode (cluster/fakegpu)

real_gpu_dev_root=${KUBECTL_TAO_GPU_DEV_ROOT:-/dev}
real_gpu_lines=() # minor<TAB>UUID<TAB>name<TAB>MiB, one a GPU (real_gpu_discover)

real_gpu_preflight() { # before anything is built or started: the device nodes the driver makes
  local d=$real_gpu_dev_root n
  [ -c "$d/nvidiactl" ] ||
    die "KUBECTL_TAO_GPUS=host needs an NVIDIA GPU: no $d/nvidiactl (no NVIDIA driver loaded on this machine); unset KUBECTL_TAO_GPUS for fake GPUs"
  for n in "$d"/nvidia[0-9]*; do
    [[ ${n##*/} =~ ^nvidia[0-9]+$ ]] && [ -c "$n" ] && return 0
  done
  die "KUBECTL_TAO_GPUS=host needs an NVIDIA GPU: $d/nvidiactl exists but no $d/nvidia<N> device node does"
}

real_gpu_discover() { # after the build: the GPUs, their UUIDs, names and memory, as the plugin sees them
  local out
  out=$("$(fakegpu_bin)" --mode passthrough --list 2>&1) ||
    die "KUBECTL_TAO_GPUS=host: ${out#fakegpu: }"
  mapfile -t real_gpu_lines <<<"$out"
  [ "${#real_gpu_lines[@]}" -ge "$real_nodes" ] ||
    usage_error "KUBECTL_TAO_REAL_NODES=$real_nodes but this machine has ${#real_gpu_lines[@]} NVIDIA GPU(s); each real node needs one"
}

real_gpu_assign() { # after the data directory exists: GPU j goes to real node j % real_nodes
  local j d
  for (( j = 0; j < ${#real_gpu_lines[@]}; j++ )); do
    d=$(real_dir "$(real_node_name $(( j % real_nodes )))")
    mkdir -p "$d"
    printf '%s\n' "${real_gpu_lines[$j]}" >>"$d/gpus.tsv"
  done
}

real_node_gpus() { # NODE -> how many nvidia.com/gpu it advertises
  if [ "$gpus_mode" = host ]; then
    wc -l <"$(real_dir "$1")/gpus.tsv" 2>/dev/null || echo 0
  else
    echo "$real_gpus"
  fi
}

gfd_value() { # a label value as GPU Feature Discovery writes it: spaces (and anything odd) become '-'
  local v=${1// /-}
  v=${v//[^A-Za-z0-9_.-]/-}
  echo "${v:0:63}"
}

real_gpu_labels() { # NODE -> the GPU Feature Discovery labels of its GPUs (comma-separated)
  local f name mem
  f=$(real_dir "$1")/gpus.tsv
  IFS=$'\t' read -r _ _ name mem <"$f"
  printf 'nvidia.com/gpu.present=true,nvidia.com/gpu.count=%s,nvidia.com/gpu.product=%s' \
    "$(wc -l <"$f")" "$(gfd_value "$name")"
  [ "${mem:-0}" = 0 ] || printf ',nvidia.com/gpu.memory=%s' "$mem"
}

real_gpu_minors() { # NODE -> its GPUs' device minors, comma-separated
  cut -f1 "$(real_dir "$1")/gpus.tsv" | paste -sd, -
}

real_gpu_summary() { # one line a node: how many real GPUs, which
  local n f
  for n in $(real_nodes_recorded); do
    f=$(real_dir "$n")/gpus.tsv
    [ -f "$f" ] || continue
    printf '%s: %s real GPU(s): %s\n' "$n" "$(wc -l <"$f")" \
      "$(awk -F'\t' '{ printf "%s%s (%s, /dev/nvidia%s%s)", (NR > 1 ? ", " : ""), $3, $2, $1, ($4 > 0 ? ", " $4 " MiB" : "") }' "$f")"
  done
}

# ---------------------------------------------------------------------------------------------
# files

real_certs() { # NODE: the kubelet's client and serving certificates, signed by the cluster CA
  local n=$1 p=$dir/pki # p: where issue() writes
  issue "kubelet-$n" "/O=system:nodes/CN=system:node:$n" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  issue "kubelet-serving-$n" "/O=system:nodes/CN=system:node:$n" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$real_gw,DNS:$n"
  chmod 600 "$p"/*.key
}

real_write_node() { # INDEX NODE PORT
  local i=$1 n=$2 kport=$3 d
  d=$(real_dir "$n")
  mkdir -p "$d"/{run,varlib,varlog,containerd/root,containerd/state,containerd/opt,runc,net.d,certs.d}
  real_certs "$n"
  write_kubeconfig "$d/kubelet.kubeconfig" "kubelet-$n"
  # An empty resolv.conf: pods get only the cluster DNS and its search list, nothing of the host's.
  : >"$d/resolv.conf"

  # Any pull fails at once: registries resolve to a closed local port, and the proxy settings
  # containerd gets (real_containerd) catch every other host.
  local reg
  for reg in _default docker.io registry.k8s.io nvcr.io kubectl-tao.local; do
    mkdir -p "$d/certs.d/$reg"
    cat >"$d/certs.d/$reg/hosts.toml" <<EOF
server = "http://127.0.0.1:9"
[host."http://127.0.0.1:9"]
  capabilities = ["pull", "resolve"]
EOF
  done

  cat >"$d/net.d/10-kubectl-tao.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "kubectl-tao",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$real_bridge",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$real_subnet", "rangeStart": "10.88.$(( i + 1 )).2", "rangeEnd": "10.88.$(( i + 1 )).254"}]],
        "routes": $(api_relay_routes)
      }
    }
  ]
}
EOF

  cat >"$d/containerd.toml" <<EOF
version = 2
root = "$d/containerd/root"
state = "$d/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$d/containerd.sock"

[ttrpc]
  address = "$d/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$d/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$real_pause_image"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  tolerate_missing_hugetlb_controller = true
  disable_hugetlb_controller = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$d/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$real_cni_dir"
    conf_dir = "$d/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$d/certs.d"
EOF

  cat >"$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /kubectl-tao-$n
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
containerRuntimeEndpoint: unix://$d/containerd.sock
address: $real_gw
port: $kport
healthzPort: 0
readOnlyPort: 0
tlsCertFile: $dir/pki/kubelet-serving-$n.crt
tlsPrivateKeyFile: $dir/pki/kubelet-serving-$n.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
resolvConf: $d/resolv.conf
clusterDNS: [$real_gw]
clusterDomain: cluster.local
failSwapOn: false
makeIPTablesUtilChains: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 30
serializeImagePulls: false
EOF
  # With simulated nodes next to them, only pods that ask land on real nodes; a host-GPU cluster's
  # real nodes are where every job goes.
  [ "$gpus_mode" = host ] || cat >>"$d/kubelet.yaml" <<EOF
registerWithTaints:
- {key: $real_taint_key, value: "true", effect: NoSchedule}
EOF
}

real_write_coredns() {
  local d=$dir/real p=$dir/pki # p: where issue() writes
  issue coredns "/CN=kubectl-tao:coredns" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  chmod 600 "$dir/pki"/*.key
  write_kubeconfig "$d/coredns.kubeconfig" coredns
  # cluster.local from the API server; every other name is NXDOMAIN (no forwarder).
  cat >"$d/Corefile" <<EOF
cluster.local:53 {
    bind $real_gw
    errors
    kubernetes cluster.local {
        kubeconfig $d/coredns.kubeconfig kubectl-tao-local
        pods insecure
        ttl 5
    }
}
.:53 {
    bind $real_gw
    errors
    template ANY ANY {
        rcode NXDOMAIN
    }
}
EOF
}

real_rbac() { # what CoreDNS may read
  kctl apply -f - >/dev/null <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "kubectl-tao:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubectl-tao:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "kubectl-tao:coredns"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "kubectl-tao:coredns"}
EOF
}

# ---------------------------------------------------------------------------------------------
# host resources: bridge and cgroups (created by up, removed by down)

real_bridge_up() {
  ip link add "$real_bridge" type bridge
  echo "$real_bridge" >"$dir/real/bridge"
  ip addr add "$real_gw/16" dev "$real_bridge"
  ip link set "$real_bridge" up
}

real_cgroup_paths() { # NODE -> every cgroup v1 directory of the node's cgroupRoot (cgroup v2: the one)
  local c
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo "/sys/fs/cgroup/kubectl-tao-$1"
    return 0
  fi
  for c in "${real_cgroup_controllers[@]}"; do
    [ -d "/sys/fs/cgroup/$c" ] && echo "/sys/fs/cgroup/$c/kubectl-tao-$1"
  done
  return 0
}

real_cgroups_create() { # NODE
  local path ctl
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    # cgroup v2: the kubelet wants cpu, cpuset, memory, hugetlb and pids in its cgroup root, i.e. delegated by
    # the root cgroup (systemd hosts do that already; a bare host may not). What is enabled here is recorded
    # and given back by down (real_cgroups_undelegate).
    for ctl in cpu cpuset memory hugetlb pids io; do
      if grep -qw "$ctl" /sys/fs/cgroup/cgroup.controllers && ! grep -qw "$ctl" /sys/fs/cgroup/cgroup.subtree_control; then
        if echo "+$ctl" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
          echo "$ctl" >>"$dir/real/cgroup-v2-delegated"
        fi
      fi
    done
  fi
  while read -r path; do
    mkdir -p "$path"
    case "$path" in
      /sys/fs/cgroup/cpuset/*)
        cat /sys/fs/cgroup/cpuset/cpuset.cpus >"$path/cpuset.cpus"
        cat /sys/fs/cgroup/cpuset/cpuset.mems >"$path/cpuset.mems" ;;
    esac
  done < <(real_cgroup_paths "$1")
}

real_cgroup_pids() { # NODE -> every pid inside the node's cgroup tree (containers, pause)
  local root=/sys/fs/cgroup/pids/kubectl-tao-$1
  [ -d "$root" ] || root=/sys/fs/cgroup/memory/kubectl-tao-$1
  [ -d "$root" ] || root=/sys/fs/cgroup/kubectl-tao-$1 # cgroup v2
  [ -d "$root" ] || return 0
  find "$root" -name cgroup.procs -exec cat {} + 2>/dev/null || true
}

real_cgroups_undelegate() { # the cgroup v2 controllers up enabled in the root cgroup, once every node is gone
  local ctl
  [ -f "$dir/real/cgroup-v2-delegated" ] || return 0
  while read -r ctl; do
    echo "-$ctl" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null ||
      echo "local-cluster: could not give back the cgroup v2 controller $ctl (another cgroup uses it)" >&2
  done <"$dir/real/cgroup-v2-delegated"
  rm -f "$dir/real/cgroup-v2-delegated"
}

real_cgroups_remove() { # NODE: deepest first; a cgroup with a process left in it stays (and is reported)
  local path
  # Every hierarchy, the cgroup v2 one of a hybrid setup included (the kubelet creates its tree there too).
  for path in /sys/fs/cgroup/*/"kubectl-tao-$1" /sys/fs/cgroup/"kubectl-tao-$1"; do
    [ -d "$path" ] || continue
    find "$path" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ ! -d "$path" ] || echo "local-cluster: could not remove cgroup $path" >&2
  done
}

# ---------------------------------------------------------------------------------------------
# processes of a node

real_launch_node() { # NODE INDEX
  local n=$1 d nb
  d=$(real_dir "$n")
  nb=$(node_bin_dir)
  # containerd creates the node's private mount namespace; the kubelet joins it (real_launch_kubelet).
  # The proxy variables make any image pull fail at once instead of leaving the machine.
  # shellcheck disable=SC2016 # the inner script gets the node directory as $1
  HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY='' \
    start "$n-containerd" unshare --mount --propagation private -- /bin/sh -c '
      set -e
      mount --bind "$1/run" /run
      mount --bind "$1/varlib" /var/lib
      mount --bind "$1/varlog" /var/log
      exec containerd --config "$1/containerd.toml" --log-level warn' sh "$d"
  wait_for 30 "containerd of $n" test -S "$d/containerd.sock"
  local labels=$real_label,$real_fake_gpu_label plugin=(--count "$real_gpus" --id-prefix "FAKE-GPU-$n")
  if [ "$gpus_mode" = host ]; then
    labels=$real_label,$(real_gpu_labels "$n")
    plugin=(--mode passthrough --minors "$(real_gpu_minors "$n")")
  fi
  start "$n-kubelet" nsenter --target "$(pid_of "$n-containerd")" --mount -- \
    "$nb/kubelet" --config "$d/kubelet.yaml" --kubeconfig "$d/kubelet.kubeconfig" \
    --hostname-override "$n" --node-ip "$real_gw" \
    --node-labels "$labels" --v=1
  start "$n-fakegpu" "$(fakegpu_bin)" --dir "$d/varlib/kubelet/device-plugins" "${plugin[@]}"
}

# Imported after up returns (real_import_late): name in images.env, archive.
real_late_images=("S3_TOOLS_IMAGE s3-tools" "TORCH_IMAGE torch")

real_import_images() { # NODE: the small locally built images, into the node's containerd
  local n=$1 d img late
  d=$(real_dir "$n")
  for img in "$images_dir"/*.tar; do
    for late in "${real_late_images[@]}"; do
      [ "$img" != "$images_dir/${late#* }.tar" ] || continue 2
    done
    ctr --address "$d/containerd.sock" --namespace k8s.io images import "$img" >/dev/null ||
      die "could not import $img into the containerd of $n; log: $dir/logs/$n-containerd.log"
  done
}

# The big images (s3-tools about 200 MB, torch about 350 MB; 10-25 s a node) are imported after up returns,
# so that a warm up stays well under a minute; each one's name is added to images.env once every node has it.
real_import_late() {
  local socks=() i late imports=()
  for (( i = 0; i < real_nodes; i++ )); do socks+=("$(real_dir "$(real_node_name "$i")")/containerd.sock"); done
  for late in "${real_late_images[@]}"; do
    [ ! -f "$images_dir/${late#* }.tar" ] ||
      imports+=("${late% *}=kubectl-tao.local/${late#* }:$real_images_tag" "$images_dir/${late#* }.tar")
  done
  [ "${#imports[@]}" -gt 0 ] || return 0
  # shellcheck disable=SC2016 # the inner script gets its values as arguments
  start image-import /bin/bash -c '
    set -euo pipefail
    env_file=$1 nsocks=$2
    shift 2
    socks=("${@:1:$nsocks}")
    shift "$nsocks"
    while [ "$#" -gt 0 ]; do
      for sock in "${socks[@]}"; do ctr --address "$sock" --namespace k8s.io images import "$2" >/dev/null & done
      wait
      echo "$1" >>"$env_file"
      shift 2
    done' image-import "$dir/real/images.env" "${#socks[@]}" "${socks[@]}" "${imports[@]}"
}

real_components() { # the components of every recorded real node, plus coredns
  local n
  for n in $(real_nodes_recorded); do echo "$n-fakegpu $n-kubelet $n-containerd"; done
  [ -f "$dir/pids/coredns.pid" ] && echo coredns
  [ -f "$dir/pids/s3.pid" ] && echo s3
  [ -f "$dir/pids/api-relay.pid" ] && echo api-relay
  return 0
}

real_mntns_pids() { # NODE -> the pids in the node's mount namespace (containerd, kubelet, shims)
  local pid ns p
  pid=$(pid_of "$1-containerd") || return 0
  ns=$(readlink "/proc/$pid/ns/mnt" 2>/dev/null) || return 0
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns" ] && echo "${p#/proc/}"
  done
  return 0
}

real_stop_node() { # NODE: kubelet, then the containers, then shims and containerd
  local n=$1 pids pid
  terminate 10 "$n-fakegpu" "$n-kubelet"
  for _ in 1 2 3; do
    mapfile -t pids < <(real_cgroup_pids "$n")
    [ "${#pids[@]}" -gt 0 ] || break
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    sleep 0.2
  done
  mapfile -t pids < <(real_mntns_pids "$n")
  for pid in "${pids[@]}"; do
    [ "$pid" = "$(pid_of "$n-containerd")" ] || kill -KILL "$pid" 2>/dev/null || true
  done
  terminate 10 "$n-containerd"
  real_cgroups_remove "$n"
}

real_stop_all() { # everything of the real nodes, then the bridge (veths go with their netns)
  [ -d "$dir/real" ] || return 0
  local n
  local pid
  # The import's ctr processes share its process group (start uses setsid): stop them all.
  if pid=$(pid_of image-import) && ours "$pid"; then kill -TERM -- "-$pid" 2>/dev/null || true; fi
  terminate 3 image-import
  for n in $(real_nodes_recorded); do real_stop_node "$n"; done
  real_cgroups_undelegate
  terminate 5 coredns
  s3_stop
  api_relay_stop
  if [ -f "$dir/real/bridge" ] && ip link show "$real_bridge" >/dev/null 2>&1; then
    local i
    for (( i = 0; i < 50; i++ )); do
      [ -z "$(ip -o link show master "$real_bridge" 2>/dev/null)" ] && break
      sleep 0.1
    done
    ip link delete "$real_bridge" 2>/dev/null || echo "local-cluster: could not delete bridge $real_bridge" >&2
  fi
}

# ---------------------------------------------------------------------------------------------
# up / status

real_nodes_ready() { # every real node Ready with the nvidia.com/gpu its plugin advertises
  local out n
  out=$(kctl get nodes -l "$real_label" -o 'jsonpath={range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{" "}{.status.allocatable.nvidia\.com/gpu}{"\n"}{end}' 2>/dev/null) || return 1
  for n in $(real_nodes_recorded); do
    grep -qx "$n True $(real_node_gpus "$n")" <<<"$out" || return 1
  done
}

real_up() { # after the API server is up: bridge, DNS, nodes; does not wait for Ready
  local i n ports
  mkdir -p "$dir/real"
  [ "$gpus_mode" = fake ] || real_gpu_assign
  if [ "$prebuilt" = 1 ]; then
    real_images_tag=$(cat "$cache/node-images.tag") # written by the GPU bundle
  else
    real_images_tag=$("$repo/scripts/build-node-images" --tag)
  fi
  real_pause_image=kubectl-tao.local/pause:$real_images_tag
  images_dir=$cache/node-images-$real_images_tag
  printf '%s\n' "BUSYBOX_IMAGE=kubectl-tao.local/busybox:$real_images_tag" \
    "GLIBC_IMAGE=kubectl-tao.local/glibc:$real_images_tag" "PAUSE_IMAGE=$real_pause_image" >"$dir/real/images.env"
  real_bridge_up
  if [ "$prebuilt" = 0 ]; then
    real_write_coredns
    real_rbac
    start coredns "$(coredns_bin)" -conf "$dir/real/Corefile"
    s3_up
    api_relay_up # before the nodes: their CNI config routes the ClusterIP to it
  fi
  mapfile -t ports < <(free_ports "$real_nodes")
  for (( i = 0; i < real_nodes; i++ )); do
    n=$(real_node_name "$i")
    real_write_node "$i" "$n" "${ports[$i]}"
    real_cgroups_create "$n"
    real_launch_node "$n" "$i"
  done
  for (( i = 0; i < real_nodes; i++ )); do
    real_import_images "$(real_node_name "$i")"
  done
}

real_wait_ready() {
  local what="$real_gpus fake nvidia.com/gpu each"
  [ "$gpus_mode" = fake ] || what="their real GPUs as nvidia.com/gpu"
  wait_for 90 "real nodes Ready with $what" real_nodes_ready
  real_import_late
}

real_status() { # prints the rows; returns 1 if anything of a real node is not running
  local n c pid ok=0 state
  for n in $(real_nodes_recorded); do
    for c in containerd kubelet fakegpu; do
      pid=$(pid_of "$n-$c" || true)
      if [ -n "$pid" ] && ours "$pid"; then state="running (pid $pid)"; else state="stopped"; ok=1; fi
      printf '  %-24s %s\n' "$n $c" "$state"
    done
  done
  if [ -f "$dir/pids/coredns.pid" ]; then
    pid=$(pid_of coredns || true)
    if [ -n "$pid" ] && ours "$pid"; then state="running (pid $pid) on $real_gw:53"; else state="stopped"; ok=1; fi
    printf '  %-24s %s\n' "coredns" "$state"
  fi
  if [ -f "$dir/real/bridge" ]; then
    if [ "$gpus_mode" = host ]; then
      echo "  real nodes: real containers on bridge $real_bridge ($real_subnet, no uplink); their nvidia.com/gpu are this machine's real GPUs:"
      real_gpu_summary | sed 's/^/    /'
    else
      echo "  real nodes: real containers on bridge $real_bridge ($real_subnet, no uplink); their nvidia.com/gpu are fake: no GPU exists"
    fi
    if grep -q '^TORCH_IMAGE=' "$dir/real/images.env" 2>/dev/null; then
      echo "  torch image: imported ($(sed -n 's/^TORCH_IMAGE=//p' "$dir/real/images.env"))"
    elif alive image-import; then
      echo "  torch image: importing into the real nodes"
    fi
    if grep -q '^S3_TOOLS_IMAGE=' "$dir/real/images.env" 2>/dev/null; then
      echo "  s3-tools image: imported ($(sed -n 's/^S3_TOOLS_IMAGE=//p' "$dir/real/images.env"))"
    elif alive image-import; then
      echo "  s3-tools image: importing into the real nodes"
    fi
  fi
  s3_status || ok=1
  api_relay_status || ok=1
  return "$ok"
}
