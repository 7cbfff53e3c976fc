// Package kubernetes holds no code: this folder is the Kubernetes manifests
// of Bothy, a kustomize base with overlays and optional components (see
// README.md here). The package's test renders every overlay through the
// tool module in check/, which validates each object offline against the
// API types of Kubernetes 1.27 and of the newest release and runs promtool
// on the alerts, and then checks what the manifests promise (probes,
// security context, the direct LISTEN URL, the migration Job named by
// release, the disruption budget, the NetworkPolicy around the metrics
// port) against Bothy's configuration registry and the image that `make
// image` builds (internal/devtools/ociimage).
package kubernetes
