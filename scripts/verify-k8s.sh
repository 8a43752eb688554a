#!/usr/bin/env bash
# Validates deploy/kubernetes/ with kubeconform -strict, offline:
# - core and apps kinds against schemas generated from Kubernetes' own OpenAPI document
#   (k8s.io/kubernetes@$K8S_VERSION api/openapi-spec/swagger.json, fetched through the Go
#   module proxy) by deploy/kubernetes/schemagen into a cache directory;
# - the CRDs (PodMonitor, InferencePool, HTTPRoute) against deploy/kubernetes/schemas/.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-v1.32.0}
KUBECONFORM_VERSION=${KUBECONFORM_VERSION:-v0.7.0}
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}
mkdir -p "$cache/bin"
if [ ! -x "$cache/bin/kubeconform" ]; then
  echo "verify-k8s: installing kubeconform $KUBECONFORM_VERSION"
  GOBIN="$cache/bin" go install "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
fi
schemas="$cache/k8s-schemas-$K8S_VERSION"
if [ ! -f "$schemas/deployment-apps-v1.json" ]; then
  echo "verify-k8s: generating schemas from k8s.io/kubernetes@$K8S_VERSION"
  dir=$(cd "$root" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  (cd "$root" && go run ./deploy/kubernetes/schemagen -swagger "$dir/api/openapi-spec/swagger.json" -out "$schemas.tmp" \
     Deployment.apps/v1 Service.v1 ConfigMap.v1 PersistentVolumeClaim.v1)
  rm -rf "$schemas"; mv "$schemas.tmp" "$schemas"
fi
"$cache/bin/kubeconform" -strict -summary -ignore-filename-pattern 'kustomization\.yaml' \
  -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
  -schema-location "$root/deploy/kubernetes/schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
  "$root/deploy/kubernetes/base" "$root/deploy/kubernetes/gateway"
