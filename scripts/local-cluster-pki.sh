#!/usr/bin/env bash
# Sourced by scripts/local-cluster: certificates, kubeconfigs, ports and the KWOK node manifests
# Needs from the caller: dir, repo, k8s_bin, gpu_nodes, gpus_per_node, cpu_nodes, run_seconds, die, note.
# Sourced into a shell that runs with set -euo pipefail (scripts/local-cluster).
# shellcheck disable=SC2154 # the variables above are set by scripts/local-cluster

# ---------------------------------------------------------------------------------------------
# certificates and kubeconfigs

pki() {
  local p=$dir/pki
  mkdir -p "$p"
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=kubectl-tao-local-ca" \
    -keyout "$p/ca.key" -out "$p/ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  issue() { # NAME SUBJECT EXTENSIONS
    openssl req -new -newkey rsa:2048 -nodes -sha256 -subj "$2" -keyout "$p/$1.key" -out "$p/$1.csr" 2>/dev/null
    openssl x509 -req -sha256 -days 3650 -in "$p/$1.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" \
      -CAcreateserial -out "$p/$1.crt" -extfile <(printf '%s\n' "$3") 2>/dev/null
    rm -f "$p/$1.csr"
  }
  local client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  local server="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth"
  issue apiserver "/CN=kube-apiserver" "$server
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  issue kwok "/CN=kwok-node-server" "$server
subjectAltName=IP:127.0.0.1,DNS:localhost"
  issue admin "/O=system:masters/CN=kubectl-tao-admin" "$client"
  issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
  issue kube-controller-manager "/CN=system:kube-controller-manager" "$client"
  issue kube-scheduler "/CN=system:kube-scheduler" "$client"
  issue kwok-controller "/O=system:masters/CN=kwok-controller" "$client"
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$p/sa.key" 2>/dev/null
  openssl pkey -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  chmod 600 "$p"/*.key
}

write_kubeconfig() { # FILE CERT_NAME
  local p=$dir/pki
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kubectl-tao-local
  cluster:
    server: https://127.0.0.1:$(port APISERVER_PORT)
    certificate-authority-data: $(base64 -w0 <"$p/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 <"$p/$2.crt")
    client-key-data: $(base64 -w0 <"$p/$2.key")
contexts:
- name: kubectl-tao-local
  context:
    cluster: kubectl-tao-local
    user: $2
current-context: kubectl-tao-local
EOF
  chmod 600 "$1"
}

free_ports() { # N -> N distinct free TCP ports on 127.0.0.1, one per line
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print("\n".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
EOF
}

render_nodes() {
  local i
  for (( i = 0; i < gpu_nodes; i++ )); do
    sed -e "s/@@NAME@@/gpu-node-$i/g" -e "s/@@GPUS@@/$gpus_per_node/g" "$repo/cluster/kwok/gpu-node.yaml.tmpl"
    echo "---"
  done
  for (( i = 0; i < cpu_nodes; i++ )); do
    sed -e "s/@@NAME@@/cpu-node-$i/g" "$repo/cluster/kwok/cpu-node.yaml.tmpl"
    echo "---"
  done
}

render_kwok_config() {
  local ms
  ms=$(awk -v s="$run_seconds" 'BEGIN { printf "%d", s * 1000 }')
  sed -e "s/durationMilliseconds: [0-9]* # default-run/durationMilliseconds: $ms # default-run/" \
    "$repo/cluster/kwok/stages.yaml"
  echo "---"
  sed -e "s|@@LOGS_FILE@@|$dir/kwok/container.log|" "$repo/cluster/kwok/logs.yaml.tmpl"
}
