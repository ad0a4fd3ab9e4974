#!/usr/bin/env bash
# Sourced by scripts/local-cluster: a real Kueue controller (sigs.k8s.io/kueue, built by
# scripts/build-local-cluster into $cache/kueue-<ver>) run as a process against the local API server,
# with the CRDs, RBAC and webhooks of its own module config. Kueue serves its webhooks (Job defaulting
# and validation, its own kinds, CRD conversion v1beta1 <-> v1beta2) on 127.0.0.1; the API server
# calls them by URL and trusts them through a CA made with the cluster's PKI.
# Needs from the caller: dir, cache, repo, KUEUE_VERSION, kctl, usage_error, die, note, and, from the
# other parts (sourced after this one, called only after they are): start, port, wait_for, free_ports,
# write_kubeconfig, components, watched, and issue() (defined by pki).
# shellcheck disable=SC2154 # the variables above are set by scripts/local-cluster
set -euo pipefail # as in scripts/local-cluster (a no-op there)

kueue_ns=kueue-system
kueue_user=kueue-controller
# The names Kueue's own defaults give (apis/config/v1beta2/defaults.go); its cert rotator checks the
# serving certificate against the service DNS name and keeps it when valid.
kueue_service=kueue-webhook-service
kueue_secret=kueue-webhook-server-cert

kueue_home() { echo "$cache/kueue-$KUEUE_VERSION"; }
kueue_render() { python3 "$repo/cluster/kueue/render_manifests.py" "$@"; }
kueue_url() { echo "https://127.0.0.1:$(port KUEUE_WEBHOOK_PORT)"; }

kueue_wanted() { [ "${KUBECTL_TAO_KUEUE:-1}" = 1 ]; }

# For a cluster that exists, what its `up` recorded (status, down and an `up` that finds it running act
# on what runs, as for the other settings); else what a new `up` is asked for.
kueue_on() {
  if [ -f "$dir/provider" ]; then
    [ -f "$dir/kueue/enabled" ]
  else
    kueue_wanted
  fi
}

kueue_check_setting() {
  case "${KUBECTL_TAO_KUEUE:-1}" in
    0|1) ;;
    *) usage_error "KUBECTL_TAO_KUEUE must be 0 or 1, got '${KUBECTL_TAO_KUEUE}'" ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# files: certificates, kubeconfig, configuration

# The webhook CA is Kueue's own (its rotator keeps CA and key in a Secret, as in any Kueue
# install), never the cluster CA. The rotator reads the CA key as PKCS#1 and checks the CA
# for the DNS name kueue-ca; the serving certificate carries the service name it checks and
# 127.0.0.1, the address the API server dials.
kueue_pki() {
  local p=$dir/pki
  openssl genrsa -traditional -out "$p/kueue-ca.key" 2048 2>/dev/null
  openssl req -x509 -new -sha256 -days 3650 -key "$p/kueue-ca.key" -subj "/O=kueue/CN=kueue-ca" \
    -out "$p/kueue-ca.crt" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign" \
    -addext "subjectAltName=DNS:kueue-ca" 2>/dev/null
  openssl req -new -newkey rsa:2048 -nodes -sha256 -subj "/CN=$kueue_service.$kueue_ns.svc" \
    -keyout "$p/kueue-webhook.key" -out "$p/kueue-webhook.csr" 2>/dev/null
  openssl x509 -req -sha256 -days 3650 -in "$p/kueue-webhook.csr" -CA "$p/kueue-ca.crt" \
    -CAkey "$p/kueue-ca.key" -CAcreateserial -out "$p/kueue-webhook.crt" -extfile <(printf '%s\n' \
    "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" "subjectAltName=DNS:$kueue_service.$kueue_ns.svc,IP:127.0.0.1") 2>/dev/null
  rm -f "$p/kueue-webhook.csr"
  # The client certificate Kueue talks to the API server with: RBAC from its module, nothing more.
  issue "$kueue_user" "/CN=$kueue_user" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  chmod 600 "$p"/*.key
  # Where a pod would have the Secret mounted: the webhook server reads its certificate here.
  mkdir -p "$dir/kueue/certs"
  cp "$p/kueue-webhook.crt" "$dir/kueue/certs/tls.crt"
  cp "$p/kueue-webhook.key" "$dir/kueue/certs/tls.key"
  chmod 600 "$dir/kueue/certs/tls.key"
}

kueue_write_config() {
  cat >"$dir/kueue/config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: $kueue_ns
health:
  healthProbeBindAddress: 127.0.0.1:$(port KUEUE_HEALTH_PORT)
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: $(port KUEUE_WEBHOOK_PORT)
  certDir: $dir/kueue/certs
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: true
  webhookServiceName: $kueue_service
  webhookSecretName: $kueue_secret
clientConnection:
  qps: 50
  burst: 100
integrations:
  frameworks:
  - batch/job
featureGates:
  # Its API server listens on every interface at a fixed port and is reached through an APIService.
  VisibilityOnDemand: false
EOF
}

# ---------------------------------------------------------------------------------------------
# install and run

# One server-side apply of the module's manifests adapted by cluster/kueue/render_manifests.py: the namespace,
# the certificate Secret, the CRDs (with their conversion webhook), RBAC and the webhook configurations.
# The webhooks fail closed: creating a Job fails until kueue serves, which `up` waits for before it returns.
kueue_install() {
  local cfg p=$dir/pki
  cfg=$(kueue_home)/config
  kctl create --dry-run=client -o json -f "$cfg/crd/bases" -f "$cfg/webhook/manifests.yaml" \
    -f "$cfg/rbac/role.yaml" -f "$cfg/rbac/manager_secrets_role.yaml" |
    kueue_render bundle --url "$(kueue_url)" --ca-cert "$p/kueue-ca.crt" --ca-key "$p/kueue-ca.key" \
      --cert "$p/kueue-webhook.crt" --key "$p/kueue-webhook.key" --kustomization "$cfg/crd/kustomization.yaml" \
      --user "$kueue_user" --namespace "$kueue_ns" --secret "$kueue_secret" |
    kctl apply --server-side --force-conflicts --field-manager=local-cluster -f - >/dev/null
  kctl wait --for condition=Established --timeout=60s crd -l app.kubernetes.io/name=kueue >/dev/null
}

kueue_launch() {
  start kueue "$(kueue_home)/bin/kueue" --config "$dir/kueue/config.yaml" \
    --kubeconfig "$dir/kueue.kubeconfig" --zap-log-level=info
}

kueue_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$(port KUEUE_HEALTH_PORT)/readyz" >/dev/null 2>&1; }

# A server-side dry run through the API server: a v1beta1 LocalQueue goes through the conversion
# webhook and the LocalQueue webhooks, a queued Job through the Job webhooks.
kueue_webhooks_ok() {
  kctl create --dry-run=server -o name -f - >/dev/null 2>&1 <<'EOF'
apiVersion: v1
kind: List
items:
- apiVersion: kueue.x-k8s.io/v1beta1
  kind: LocalQueue
  metadata: {name: local-cluster-probe, namespace: default}
  spec: {clusterQueue: local-cluster-probe}
- apiVersion: batch/v1
  kind: Job
  metadata:
    name: local-cluster-probe
    namespace: default
    labels: {kueue.x-k8s.io/queue-name: local-cluster-probe}
  spec:
    suspend: true
    template:
      spec:
        restartPolicy: Never
        containers: [{name: probe, image: probe}]
EOF
}

kueue_wait_healthy() {
  if [ -n "${kueue_bg:-}" ]; then
    local bg=$kueue_bg
    kueue_bg=
    wait "$bg" || die "kueue could not be installed: $(tail -n 3 "$dir/logs/kueue-install.log" | tr '\n' ' ')"
  fi
  wait_for 90 "kueue /readyz (its certificates injected, its webhook server listening)" kueue_ready
  wait_for 30 "the API server to reach kueue's webhooks" kueue_webhooks_ok
}

# up, once the API server is ready: certificates, manifests and the process in the background, beside the
# start of the other components and nodes (kueue_wait_healthy waits for it).
kueue_up() {
  kueue_wanted || return 0
  local ports
  [ -x "$(kueue_home)/bin/kueue" ] || die "kueue ${KUEUE_VERSION} is not built; run scripts/build-local-cluster (or set KUBECTL_TAO_KUEUE=0)"
  case " ${components[*]} " in *" kueue "*) ;; *) components+=(kueue) watched+=(kueue) ;; esac
  mkdir -p "$dir/kueue"
  touch "$dir/kueue/enabled"
  mapfile -t ports < <(free_ports 2)
  printf '%s\n' "KUEUE_WEBHOOK_PORT=${ports[0]}" "KUEUE_HEALTH_PORT=${ports[1]}" >>"$dir/ports.env"
  (
    kueue_pki
    write_kubeconfig "$dir/kueue.kubeconfig" "$kueue_user"
    kueue_write_config
    kueue_install
    kueue_launch
  ) >"$dir/logs/kueue-install.log" 2>&1 &
  kueue_bg=$!
}

kueue_abort_install() { # a failed up: the background install must not outlive it
  [ -n "${kueue_bg:-}" ] || return 0
  kill "$kueue_bg" 2>/dev/null || true
  wait "$kueue_bg" 2>/dev/null || true
  kueue_bg=
}

kueue_components() { if kueue_on; then echo kueue; fi; }

kueue_note() {
  kueue_on || return 0
  note "Kueue ${KUEUE_VERSION} (batch/job integration; webhooks on $(kueue_url)); none with KUBECTL_TAO_KUEUE=0"
}
